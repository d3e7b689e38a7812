package topo

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBinomialTree checks the binomial tree for every n up to 1024 (every
// root up to n = 64, then five roots including a seeded random one): it
// spans all ranks, Parent and AppendChildren agree, depths, height ⌊log2 n⌋
// and subtree sizes match a walk of the tree, and a round-by-round broadcast
// (in round t every rank holding the message sends to its child at distance
// 2^(⌈log2 n⌉-t)) reaches every rank, from its parent, in ReceiveRound, within
// ⌈log2 n⌉ rounds.
func TestBinomialTree(t *testing.T) {
	seed := uint64(1024)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var kids []int
	for n := 1; n <= 1024; n++ {
		roots := []int{0, n - 1, n / 2, 1 % n, rng.IntN(n)}
		if n <= 64 {
			roots = roots[:0]
			for r := 0; r < n; r++ {
				roots = append(roots, r)
			}
		}
		L := CeilLog2(n)
		for _, root := range roots {
			b, err := NewBinomial(n, root)
			if err != nil {
				t.Fatal(err)
			}
			if b.Rounds() != L {
				t.Fatalf("n=%d: Rounds = %d, want %d", n, b.Rounds(), L)
			}
			// Walk the tree from the root through the children lists.
			depth := make([]int, n)
			size := make([]int, n)
			order := []int{root}
			seen := make([]bool, n)
			seen[root] = true
			for i := 0; i < len(order); i++ {
				p := order[i]
				kids = b.AppendChildren(kids[:0], p)
				if len(kids) != b.NumChildren(p) {
					t.Fatalf("n=%d root=%d: NumChildren(%d) = %d, children %v", n, root, p, b.NumChildren(p), kids)
				}
				prevDist := n
				for _, c := range kids {
					if c < 0 || c >= n || seen[c] {
						t.Fatalf("n=%d root=%d: child %d of %d is out of range or seen twice", n, root, c, p)
					}
					if b.Parent(c) != p {
						t.Fatalf("n=%d root=%d: Parent(%d) = %d, but it is a child of %d", n, root, c, b.Parent(c), p)
					}
					dist := mod(c-p, n)
					if dist >= prevDist {
						t.Fatalf("n=%d root=%d: children of %d not farthest first: %v", n, root, p, kids)
					}
					prevDist = dist
					seen[c] = true
					depth[c] = depth[p] + 1
					order = append(order, c)
				}
			}
			if len(order) != n {
				t.Fatalf("n=%d root=%d: the tree spans %d ranks", n, root, len(order))
			}
			for i := n - 1; i >= 0; i-- {
				v := order[i]
				size[v]++
				if p := b.Parent(v); p != None {
					size[p] += size[v]
				}
			}
			height := 0
			for v := 0; v < n; v++ {
				if b.Depth(v) != depth[v] || b.SubtreeSize(v) != size[v] {
					t.Fatalf("n=%d root=%d rank %d: Depth %d SubtreeSize %d, want %d %d", n, root, v, b.Depth(v), b.SubtreeSize(v), depth[v], size[v])
				}
				height = max(height, depth[v])
			}
			if height != b.Height() || (n > 0 && 1<<height > n) || 1<<(height+1) <= n {
				t.Fatalf("n=%d root=%d: height %d, Height() %d, want ⌊log2 n⌋", n, root, height, b.Height())
			}
			if b.Parent(root) != None || b.ReceiveRound(root) != 0 || b.SubtreeSize(root) != n || b.Relative(root) != 0 {
				t.Fatalf("n=%d root=%d: the root is not a root", n, root)
			}
			// Round-by-round broadcast.
			recv := make([]int, n)
			for i := range recv {
				recv[i] = -1
			}
			recv[root] = 0
			for r := 1; r <= L; r++ {
				step := 1 << (L - r)
				for v := 0; v < n; v++ {
					if recv[v] < 0 || recv[v] == r {
						continue
					}
					kids = b.AppendChildren(kids[:0], v)
					for _, c := range kids {
						if mod(c-v, n) == step {
							if recv[c] >= 0 {
								t.Fatalf("n=%d root=%d: rank %d receives twice", n, root, c)
							}
							recv[c] = r
						}
					}
				}
			}
			for v := 0; v < n; v++ {
				if recv[v] < 0 || recv[v] != b.ReceiveRound(v) {
					t.Fatalf("n=%d root=%d: rank %d received in round %d, ReceiveRound says %d", n, root, v, recv[v], b.ReceiveRound(v))
				}
			}
		}
	}
}

// TestBinomialExamples pins a few trees by hand.
func TestBinomialExamples(t *testing.T) {
	b, _ := NewBinomial(8, 0)
	if got := b.AppendChildren(nil, 0); !slices.Equal(got, []int{4, 2, 1}) {
		t.Errorf("n=8: children of 0 = %v, want [4 2 1]", got)
	}
	if got := b.AppendChildren(nil, 4); !slices.Equal(got, []int{6, 5}) {
		t.Errorf("n=8: children of 4 = %v, want [6 5]", got)
	}
	if b.Parent(7) != 6 || b.Parent(6) != 4 || b.Depth(7) != 3 || b.ReceiveRound(7) != 3 || b.ReceiveRound(4) != 1 {
		t.Errorf("n=8: rank 7 path wrong")
	}
	// n = 6 rooted at 4: relative ranks shift by 4 mod 6.
	b, _ = NewBinomial(6, 4)
	if got := b.AppendChildren(nil, 4); !slices.Equal(got, []int{2, 0, 5}) {
		t.Errorf("n=6 root=4: children of the root = %v, want [2 0 5]", got) // rel 4, 2, 1
	}
	if got := b.AppendChildren(nil, 2); !slices.Equal(got, []int{3}) { // rel 4 → rel 5 = rank 3
		t.Errorf("n=6 root=4: children of 2 = %v, want [3]", got)
	}
	if b.SubtreeSize(2) != 2 || b.Height() != 2 || b.Rounds() != 3 {
		t.Errorf("n=6: SubtreeSize(2)=%d Height=%d Rounds=%d", b.SubtreeSize(2), b.Height(), b.Rounds())
	}
	b, _ = NewBinomial(1, 0)
	if b.Rounds() != 0 || b.Height() != 0 || len(b.AppendChildren(nil, 0)) != 0 {
		t.Errorf("n=1: not a lone root")
	}
}

func TestBinomialBadInput(t *testing.T) {
	for _, c := range []struct {
		n, root int
		want    error
	}{{0, 0, ErrSize}, {-1, 0, ErrSize}, {MaxNodes + 1, 0, ErrSize}, {4, 4, ErrIndex}, {4, -1, ErrIndex}} {
		if _, err := NewBinomial(c.n, c.root); !errors.Is(err, c.want) {
			t.Errorf("NewBinomial(%d, %d): err = %v, want %v", c.n, c.root, err, c.want)
		}
	}
	b, _ := NewBinomial(5, 2)
	for _, r := range []int{-1, 5, 99} {
		if b.Parent(r) != None || b.Depth(r) != None || b.ReceiveRound(r) != None || b.SubtreeSize(r) != 0 ||
			b.NumChildren(r) != 0 || len(b.AppendChildren(nil, r)) != 0 || b.Relative(r) != None {
			t.Errorf("rank %d out of range got an answer", r)
		}
	}
	if _, err := AppendBinomialNeighbors(nil, 0, 0); !errors.Is(err, ErrSize) {
		t.Errorf("AppendBinomialNeighbors n=0: %v", err)
	}
	if _, err := AppendBinomialNeighbors(nil, 4, 4); !errors.Is(err, ErrIndex) {
		t.Errorf("AppendBinomialNeighbors v=n: %v", err)
	}
	if _, err := BinomialGraph(0); !errors.Is(err, ErrSize) {
		t.Errorf("BinomialGraph(0): %v", err)
	}
}

// TestBinomialGraph checks the binomial graph for every n up to 1024:
// neighbours equal the naive set {v ± 2^k mod n} minus v (on nodes 0, 1,
// n/2, n-1), the graph is circulant (every list is node 0's shifted), the
// degree is at most 2⌈log2 n⌉, the eccentricity of node 0 is therefore
// the diameter, and it is connected with diameter at most ⌈log2 n⌉.
func TestBinomialGraph(t *testing.T) {
	worst := 0.0
	for n := 1; n <= 1024; n++ {
		adj, err := BinomialGraph(n)
		if err != nil {
			t.Fatal(err)
		}
		L := CeilLog2(n)
		for _, v := range []int{0, 1 % n, n / 2, n - 1} { // the naive set on a few nodes
			if want := naiveBinomialNeighbors(n, v); !slices.Equal(adj[v], want) {
				t.Fatalf("n=%d: neighbours of %d = %v, want %v", n, v, adj[v], want)
			}
		}
		if msg := checkCirculant(adj, L); msg != "" {
			t.Fatalf("n=%d: %s", n, msg)
		}
		ecc, ok := adjacency(adj).eccentricity([]int{0}, L)
		if !ok {
			t.Fatalf("n=%d: node 0 reaches everyone in more than ⌈log2 n⌉ = %d steps (or not at all)", n, L)
		}
		if n >= 16 {
			worst = max(worst, float64(ecc)/float64(L))
		}
	}
	t.Logf("binomial graphs n ≤ 1024: largest diameter/⌈log2 n⌉ for n ≥ 16 = %.2f", worst)
}

// naiveBinomialNeighbors lists {v ± 2^k mod n : 2^k < n} minus v with a set.
func naiveBinomialNeighbors(n, v int) []int {
	set := map[int]bool{}
	for k := 0; 1<<k < n; k++ {
		set[(v+1<<k)%n] = true
		set[((v-1<<k)%n+n)%n] = true
	}
	delete(set, v)
	out := make([]int, 0, len(set))
	for w := range set {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// checkCirculant returns what keeps adj from being a circulant graph of
// degree at most 2·l with sorted, duplicate-free lists, or "": every node's
// neighbours, shifted back by the node, must be node 0's.
//
//go:norace
func checkCirculant(adj [][]int, l int) string {
	n := len(adj)
	isOffset := make([]bool, n)
	for _, w := range adj[0] {
		isOffset[w] = true
	}
	for v, ws := range adj {
		if len(ws) != len(adj[0]) || len(ws) > 2*l {
			return fmt.Sprintf("node %d has degree %d, node 0 %d, bound 2⌈log2 n⌉ = %d", v, len(ws), len(adj[0]), 2*l)
		}
		for i, w := range ws {
			if w < 0 || w >= n || (i > 0 && ws[i-1] >= w) || !isOffset[mod(w-v, n)] {
				return fmt.Sprintf("neighbours of %d %v are not node 0's %v shifted (sorted, unique)", v, ws, adj[0])
			}
		}
	}
	return ""
}
