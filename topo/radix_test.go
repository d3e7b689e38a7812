package topo

import (
	"errors"
	"fmt"
	"testing"
)

// naiveRadix builds the a-ary tree of Varma et al. §3.2 the slow, obvious
// way: positions are handed out in breadth-first order, each parent taking up
// to a children before the next parent gets any. It shares no arithmetic with
// Radix.
type naiveRadix struct {
	parent   []int
	children [][]int
	depth    []int
	subtree  []int
	height   int
	levels   [][]int
}

func buildNaiveRadix(n, a int) naiveRadix {
	t := naiveRadix{parent: make([]int, n), children: make([][]int, n), depth: make([]int, n), subtree: make([]int, n)}
	if n == 0 {
		return t
	}
	t.parent[0] = None
	next := 1
	for p := 0; p < n && next < n; p++ {
		for c := 0; c < a && next < n; c++ {
			t.parent[next] = p
			t.children[p] = append(t.children[p], next)
			t.depth[next] = t.depth[p] + 1
			next++
		}
	}
	for i := n - 1; i >= 0; i-- {
		t.subtree[i]++
		if p := t.parent[i]; p != None {
			t.subtree[p] += t.subtree[i]
		}
	}
	for i := 0; i < n; i++ {
		if t.depth[i] >= len(t.levels) {
			t.levels = append(t.levels, nil)
		}
		t.levels[t.depth[i]] = append(t.levels[t.depth[i]], i)
	}
	t.height = len(t.levels)
	return t
}

// TestRadixAgainstNaive checks every query of Radix against the breadth-first
// construction of Varma et al. §3.2 for every n in 0..2000 and a in
// {2, 4, 8, 16}.
func TestRadixAgainstNaive(t *testing.T) {
	var buf []int
	for _, a := range []int{2, 4, 8, 16} {
		for n := 0; n <= 2000; n++ {
			tree, err := NewRadix(n, a)
			if err != nil {
				t.Fatalf("NewRadix(%d, %d): %v", n, a, err)
			}
			ref := buildNaiveRadix(n, a)
			where := func(i int) string { return fmt.Sprintf("n=%d a=%d i=%d", n, a, i) }
			if got := tree.Height(); got != ref.height {
				t.Fatalf("n=%d a=%d: Height = %d, want %d", n, a, got, ref.height)
			}
			for d := -1; d <= ref.height; d++ {
				lo, hi := tree.Level(d)
				var want []int
				if d >= 0 && d < ref.height {
					want = ref.levels[d]
				}
				if hi-lo != len(want) || (len(want) > 0 && (lo != want[0] || hi-1 != want[len(want)-1])) {
					t.Fatalf("n=%d a=%d: Level(%d) = [%d,%d), want %v", n, a, d, lo, hi, want)
				}
			}
			for i := 0; i < n; i++ {
				if got := tree.Parent(i); got != ref.parent[i] {
					t.Fatalf("%s: Parent = %d, want %d", where(i), got, ref.parent[i])
				}
				buf = tree.AppendChildren(buf[:0], i)
				if !equalInts(buf, ref.children[i]) {
					t.Fatalf("%s: AppendChildren = %v, want %v", where(i), buf, ref.children[i])
				}
				lo, hi := tree.Children(i)
				if hi-lo != len(ref.children[i]) || tree.NumChildren(i) != len(ref.children[i]) {
					t.Fatalf("%s: Children = [%d,%d), want %v", where(i), lo, hi, ref.children[i])
				}
				wantFirst := None
				if len(ref.children[i]) > 0 {
					wantFirst = ref.children[i][0]
				}
				if got := tree.FirstChild(i); got != wantFirst {
					t.Fatalf("%s: FirstChild = %d, want %d", where(i), got, wantFirst)
				}
				if got := tree.IsLeaf(i); got != (len(ref.children[i]) == 0) {
					t.Fatalf("%s: IsLeaf = %v, want %v", where(i), got, !got)
				}
				if got := tree.Depth(i); got != ref.depth[i] {
					t.Fatalf("%s: Depth = %d, want %d", where(i), got, ref.depth[i])
				}
				if got := tree.SubtreeSize(i); got != ref.subtree[i] {
					t.Fatalf("%s: SubtreeSize = %d, want %d", where(i), got, ref.subtree[i])
				}
			}
			// Ancestors: walk the naive parent chain of a few positions.
			for _, i := range []int{n - 1, n / 2, n / 3, 1} {
				if i <= 0 || i >= n {
					continue
				}
				for p, d := i, ref.depth[i]; p != None; p, d = ref.parent[p], d-1 {
					if got := tree.Ancestor(i, d); got != p {
						t.Fatalf("%s: Ancestor(%d) = %d, want %d", where(i), d, got, p)
					}
					if !tree.IsAncestor(p, i) {
						t.Fatalf("%s: IsAncestor(%d) = false", where(i), p)
					}
				}
				if tree.Ancestor(i, ref.depth[i]+1) != None || tree.Ancestor(i, -1) != None {
					t.Fatalf("%s: Ancestor beyond the path is not None", where(i))
				}
				if s := ref.parent[i] + 1; s < i && ref.depth[s] == ref.depth[i] && tree.IsAncestor(s, i) {
					t.Fatalf("%s: a same-level position %d claims to be an ancestor", where(i), s)
				}
			}
		}
	}
}

// TestRadixPaperExamples checks the tree heights that the membership paper
// reads off its measurements (Varma et al. §7.1–7.2). For a = 4 "the tree
// height increases by one (above 5 and 21 nodes)" (§7.2, Figure 8); for
// a = 2 the height grows at powers of two, which is why the paper plots
// 2^k-1 nodes (§7.2, footnote 2). (§7.1 says loosely that the a = 4 height
// "changes only for powers of four"; the exact thresholds are 1, 5, 21, 85,
// i.e. (4^k-1)/3, as §7.2 states.)
func TestRadixPaperExamples(t *testing.T) {
	cases := []struct{ n, a, height int }{
		{1, 4, 1}, {2, 4, 2}, {5, 4, 2}, {6, 4, 3}, {21, 4, 3}, {22, 4, 4}, {85, 4, 4}, {86, 4, 5},
		{1, 2, 1}, {3, 2, 2}, {4, 2, 3}, {7, 2, 3}, {8, 2, 4}, {1023, 2, 10}, {1024, 2, 11},
		{47, 2, 6}, {47, 4, 4}, // the 47 usable XTORC nodes (§5)
		{0, 2, 0},
	}
	for _, c := range cases {
		tree, err := NewRadix(c.n, c.a)
		if err != nil {
			t.Fatal(err)
		}
		if got := tree.Height(); got != c.height {
			t.Errorf("n=%d a=%d: Height = %d, want %d", c.n, c.a, got, c.height)
		}
	}
	// §3.1: with four children the routing digit of a child is two bits;
	// the children of position 1 are 5..8 and position 5's parent is 1.
	tree, _ := NewRadix(21, 4)
	if lo, hi := tree.Children(1); lo != 5 || hi != 9 {
		t.Errorf("Children(1) = [%d,%d), want [5,9)", lo, hi)
	}
	if p := tree.Parent(8); p != 1 {
		t.Errorf("Parent(8) = %d, want 1", p)
	}
	if s := tree.SubtreeSize(1); s != 5 {
		t.Errorf("SubtreeSize(1) = %d, want 5", s)
	}
}

func TestRadixBadInput(t *testing.T) {
	for _, a := range []int{-2, 0, 1, 3, 6, 12, MaxFanout * 2} {
		if _, err := NewRadix(10, a); !errors.Is(err, ErrFanout) {
			t.Errorf("NewRadix(10, %d): err = %v, want ErrFanout", a, err)
		}
	}
	for _, n := range []int{-1, MaxNodes + 1} {
		if _, err := NewRadix(n, 2); !errors.Is(err, ErrSize) {
			t.Errorf("NewRadix(%d, 2): err = %v, want ErrSize", n, err)
		}
	}
	tree, err := NewRadix(10, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-5, -1, 10, 11, MaxNodes} {
		lo, hi := tree.Children(i)
		if tree.Parent(i) != None || tree.FirstChild(i) != None || lo != hi || tree.IsLeaf(i) ||
			tree.Depth(i) != None || tree.SubtreeSize(i) != 0 || tree.Ancestor(i, 0) != None ||
			tree.IsAncestor(i, 3) || tree.IsAncestor(0, i) || len(tree.AppendChildren(nil, i)) != 0 {
			t.Errorf("position %d out of range got a non-None answer", i)
		}
	}
	var zero Radix
	if zero.Height() != 0 || zero.Parent(0) != None || zero.FirstChild(0) != None || zero.SubtreeSize(0) != 0 || zero.Fanout() != 0 {
		t.Errorf("the zero Radix is not an empty tree")
	}
}

// TestRadixLarge spot-checks the constant-time formulas near MaxNodes, where
// a naive tree cannot be built: the parent/child relation and the subtree
// sizes must stay consistent.
func TestRadixLarge(t *testing.T) {
	for _, a := range []int{2, 4, 16, MaxFanout} {
		tree, err := NewRadix(MaxNodes, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 1, 2, 1000, MaxNodes / a, MaxNodes/a - 1, MaxNodes / 2, MaxNodes - 1} {
			lo, hi := tree.Children(i)
			sum := 1
			for c := lo; c < hi; c++ {
				if tree.Parent(c) != i || tree.Depth(c) != tree.Depth(i)+1 {
					t.Fatalf("a=%d: child %d of %d: Parent=%d Depth=%d", a, c, i, tree.Parent(c), tree.Depth(c))
				}
				sum += tree.SubtreeSize(c)
			}
			if got := tree.SubtreeSize(i); got != sum {
				t.Fatalf("a=%d: SubtreeSize(%d) = %d, children sum to %d", a, i, got, sum)
			}
		}
		if got := tree.SubtreeSize(0); got != MaxNodes {
			t.Fatalf("a=%d: SubtreeSize(root) = %d, want %d", a, got, MaxNodes)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
