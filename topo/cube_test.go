package topo

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// TestCubePaperExamples checks the two examples of Friedman et al. §3.3:
// I_3^7, where the missing node 7 has G_7 = {3, 5, 6} and the edge 5–6 is
// added, and I_4^14 of Figure 6, whose whole edge list is worked out here by
// hand: the 25 hypercube edges of H_4 between nodes 0..13, plus 10–12 (G_14 =
// {6, 10, 12}, 6 dropped) and 11–13 (G_15 = {7, 11, 13}, 7 dropped).
func TestCubePaperExamples(t *testing.T) {
	c7, _ := NewCube(7)
	if got := c7.Compensating(); !slices.Equal(got, [][2]int{{5, 6}}) {
		t.Errorf("I_3^7 compensating edges = %v, want [[5 6]]", got)
	}
	if got := c7.Neighbors(5); !slices.Equal(got, []int{1, 4, 6}) {
		t.Errorf("I_3^7 Neighbors(5) = %v, want [1 4 6]", got)
	}
	if got := c7.Neighbors(3); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("I_3^7 Neighbors(3) = %v, want [1 2] (3 is dropped from G_7)", got)
	}

	figure6 := [][2]int{
		{0, 1}, {0, 2}, {0, 4}, {0, 8}, {1, 3}, {1, 5}, {1, 9}, {2, 3}, {2, 6}, {2, 10},
		{3, 7}, {3, 11}, {4, 5}, {4, 6}, {4, 12}, {5, 7}, {5, 13}, {6, 7}, {8, 9}, {8, 10},
		{8, 12}, {9, 11}, {9, 13}, {10, 11}, {12, 13},
		{10, 12}, {11, 13}, // compensating
	}
	c14, _ := NewCube(14)
	if c14.Dim() != 4 {
		t.Fatalf("I_4^14: Dim = %d", c14.Dim())
	}
	if got := c14.Compensating(); !slices.Equal(got, [][2]int{{10, 12}, {11, 13}}) {
		t.Errorf("I_4^14 compensating edges = %v, want [[10 12] [11 13]]", got)
	}
	got := edgeList(c14.Graph())
	want := slices.Clone(figure6)
	slices.SortFunc(want, cmpEdge)
	if !slices.Equal(got, want) {
		t.Errorf("I_4^14 edges:\n got %v\nwant %v", got, want)
	}
	// Degrees: 6 and 7 lose a neighbour (14, 15) and gain none: m-1 = 3.
	for v := 0; v < 14; v++ {
		want := 4
		if v == 6 || v == 7 {
			want = 3
		}
		if d := c14.Degree(v); d != want {
			t.Errorf("I_4^14 Degree(%d) = %d, want %d", v, d, want)
		}
	}
	// The three complete subcubes of §3.3: H_3 = 0xxx, H_2 = 10xx, H_1 =
	// 110x; a hypercube edge between H_i and H_k (k > i) flips bit k.
	sub := func(v int) int { // the dimension of v's subcube
		switch {
		case v < 8:
			return 3
		case v < 12:
			return 2
		}
		return 1
	}
	for _, e := range figure6[:25] {
		p, q := e[0], e[1]
		if sub(p) != sub(q) && p^q != 1<<max(sub(p), sub(q)) {
			t.Errorf("I_4^14 edge %v joins H_%d and H_%d but does not flip bit %d", e, sub(p), sub(q), max(sub(p), sub(q)))
		}
	}
}

func cmpEdge(a, b [2]int) int {
	if a[0] != b[0] {
		return a[0] - b[0]
	}
	return a[1] - b[1]
}

func edgeList(adj [][]int) [][2]int {
	var out [][2]int
	for v, l := range adj {
		for _, w := range l {
			if v < w {
				out = append(out, [2]int{v, w})
			}
		}
	}
	slices.SortFunc(out, cmpEdge)
	return out
}

// naiveCube builds I_m^n straight from the text of §3.3 with no shortcuts:
// hypercube edges by comparing every pair of present nodes, G_z by scanning
// every present node for Hamming distance 1, then sort, drop the first if
// odd, split in halves and pair.
func naiveCube(n int) [][]int {
	m := 0
	for 1<<m < n {
		m++
	}
	adj := make([][]int, n)
	add := func(p, q int) {
		if !slices.Contains(adj[p], q) {
			adj[p] = append(adj[p], q)
			adj[q] = append(adj[q], p)
		}
	}
	for p := 0; p < n; p++ {
		for q := p + 1; q < n; q++ {
			if HammingDistance(p, q) == 1 {
				add(p, q)
			}
		}
	}
	for z := n; z < 1<<m; z++ {
		var g []int
		for w := 0; w < n; w++ {
			if HammingDistance(z, w) == 1 {
				g = append(g, w)
			}
		}
		if len(g) < 2 {
			continue
		}
		slices.Sort(g)
		if len(g)%2 == 1 {
			g = g[1:]
		}
		h := len(g) / 2
		for i := 0; i < h; i++ {
			add(g[i], g[i+h])
		}
	}
	for _, l := range adj {
		slices.Sort(l)
	}
	return adj
}

// TestCubeAgainstNaive compares Neighbors and Graph with the construction
// read off the text of §3.3, for every n up to 400.
func TestCubeAgainstNaive(t *testing.T) {
	var buf []int
	for n := 1; n <= 400; n++ {
		c, err := NewCube(n)
		if err != nil {
			t.Fatal(err)
		}
		ref := naiveCube(n)
		g := c.Graph()
		for v := 0; v < n; v++ {
			buf = c.AppendNeighbors(buf[:0], v)
			if !slices.Equal(buf, ref[v]) || !slices.Equal(g[v], ref[v]) {
				t.Fatalf("n=%d v=%d: Neighbors %v, Graph %v, want %v", n, v, buf, g[v], ref[v])
			}
		}
	}
}

// longTests reports whether the exhaustive sweeps were asked for.
func longTests() bool { return os.Getenv("COHORT_LONG") == "1" }

// TestCubeProperties checks the claims of §3.3 for every n from 1 to 4096:
// the graph is symmetric, without self loops or duplicate edges, Graph and
// Neighbors agree, every degree is m or m-1 (n = 1: the lone node has degree
// 0 = m; n = 2: degree 1 = m), it is connected and its diameter is at most
// m.
//
// Diameter. Two facts are checked for every n: every hypercube edge between
// present nodes is in the graph, and (by the lemma in the Cube doc) those
// edges alone join any u, v by a path of length Hamming(u, v) ≤ m. The BFS
// then measures eccentricities directly: from every node for n ≤ 1024 and for
// n within 8 of 2048 and 4096, and from a 64-node sample (node 0, the ends
// of compensating edges, the nodes of degree m-1, seeded random nodes) for
// the other n. COHORT_LONG=1 runs the BFS from every node for every n (about
// a minute).
func TestCubeProperties(t *testing.T) {
	seed := uint64(2002)
	t.Logf("seed %d (COHORT_LONG=%v)", seed, longTests())
	rng := rand.New(rand.NewPCG(seed, 0x1cabe))
	var buf []int
	reach, next := make([]uint64, 4096), make([]uint64, 4096)
	diamBelowM := 0
	for n := 1; n <= 4096; n++ {
		c, _ := NewCube(n)
		m := c.Dim()
		adj := c.Graph()
		if msg := checkCubeAdj(adj, m); msg != "" {
			t.Fatalf("n=%d m=%d: %s", n, m, msg)
		}
		for v := 0; v < n; v++ {
			if n <= 1024 || v%61 == 0 || v == n-1 {
				if buf = c.AppendNeighbors(buf[:0], v); !slices.Equal(buf, adj[v]) {
					t.Fatalf("n=%d: Neighbors(%d) = %v, Graph has %v", n, v, buf, adj[v])
				}
			}
		}
		g := adjacency(adj)
		var sources []int
		exhaustive := longTests() || n <= 1024 || near(n, 2048, 8) || near(n, 4096, 8)
		if exhaustive {
			sources = make([]int, n)
			for i := range sources {
				sources[i] = i
			}
		} else {
			sources = cubeSample(c, adj, rng)
		}
		diam := 0
		for i := 0; i < len(sources); i += 64 {
			ecc, ok := g.eccentricityBuf(sources[i:min(i+64, len(sources))], m, reach[:n], next[:n])
			if !ok {
				t.Fatalf("n=%d m=%d: some node is farther than m from one of %v (disconnected or diameter > m)", n, m, sources[i:min(i+64, len(sources))])
			}
			diam = max(diam, ecc)
		}
		if exhaustive && diam < m {
			diamBelowM++
		}
	}
	t.Logf("exhaustive BFS: diameter < m for %d values of n", diamBelowM)
}

// checkCubeAdj returns what is wrong with the adjacency lists of I_m^n, or
// "". It checks: neighbours sorted, unique, in range and not the node
// itself; degree m or m-1; every edge at Hamming distance 1 or 2; every
// hypercube edge between present nodes present; and symmetry. For the
// hypercube edges symmetry follows from their presence at both ends (the
// count of Hamming-1 neighbours of v equals the number of present v XOR 2^k,
// and they are distinct valid ones, so they are exactly those); the
// distance-2 (compensating) edges are looked up at the other end.
//
//go:norace
func checkCubeAdj(adj [][]int, m int) string {
	n := len(adj)
	for v, l := range adj {
		if len(l) < m-1 || len(l) > m {
			return fmt.Sprintf("node %d has degree %d %v", v, len(l), l)
		}
		cube := 0
		for i, w := range l {
			if w == v || w < 0 || w >= n || (i > 0 && l[i-1] >= w) {
				return fmt.Sprintf("node %d: neighbours %v not sorted, unique, in range and without itself", v, l)
			}
			switch HammingDistance(v, w) {
			case 1:
				cube++
			case 2:
				if !slices.Contains(adj[w], v) {
					return fmt.Sprintf("edge %d–%d is not symmetric", v, w)
				}
			default:
				return fmt.Sprintf("edge %d–%d at Hamming distance %d", v, w, HammingDistance(v, w))
			}
		}
		want := 0
		for k := 0; k < m; k++ {
			if v^1<<k < n {
				want++
			}
		}
		if cube != want {
			return fmt.Sprintf("node %d has %d hypercube neighbours, want %d: %v", v, cube, want, l)
		}
	}
	return ""
}

func near(n, p, d int) bool { return n >= p-d && n <= p+d }

// cubeSample picks up to 64 BFS sources for a large cube: node 0, the last
// node, nodes of degree m-1, ends of compensating edges, then random nodes.
func cubeSample(c Cube, adj [][]int, rng *rand.Rand) []int {
	n, m := c.Len(), c.Dim()
	seen := map[int]bool{}
	var out []int
	add := func(v int) {
		if len(out) < 64 && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	add(0)
	add(n - 1)
	for v := n - 1; v >= 0 && len(out) < 24; v-- {
		if len(adj[v]) == m-1 {
			add(v)
		}
	}
	comp := c.Compensating()
	for i := 0; i < len(comp) && len(out) < 40; i += 1 + len(comp)/16 {
		add(comp[i][0])
		add(comp[i][1])
	}
	for len(out) < 64 {
		add(rng.IntN(n))
	}
	return out
}

// adjacency is a graph as sorted neighbour lists, for the bit-parallel BFS.
type adjacency [][]int

// eccentricity runs a bit-parallel breadth-first search from up to 64
// sources at once (bit j of reach[v] says that v is reached from
// sources[j]) and returns the largest distance from a source to any node,
// or ok = false if some node is not reached within limit steps.
func (g adjacency) eccentricity(sources []int, limit int) (ecc int, ok bool) {
	n := len(g)
	return g.eccentricityBuf(sources, limit, make([]uint64, n), make([]uint64, n))
}

// eccentricityBuf is eccentricity with caller-provided scratch of length n.
func (g adjacency) eccentricityBuf(sources []int, limit int, reach, next []uint64) (ecc int, ok bool) {
	clear(reach)
	full := uint64(1)<<len(sources) - 1
	if len(sources) == 64 {
		full = ^uint64(0)
	}
	for j, s := range sources {
		reach[s] |= 1 << j
	}
	for step := 0; ; step++ {
		if allReached(reach, full) {
			return step, true
		}
		if step == limit {
			return step, false
		}
		g.expand(next, reach)
		reach, next = next, reach
	}
}

// expand sets next[v] to reach[v] or'ed with reach of every neighbour.
//
//go:norace
func (g adjacency) expand(next, reach []uint64) {
	for v := range next {
		r := reach[v]
		for _, w := range g[v] {
			r |= reach[w]
		}
		next[v] = r
	}
}

//go:norace
func allReached(reach []uint64, full uint64) bool {
	for _, r := range reach {
		if r != full {
			return false
		}
	}
	return true
}

// TestCubeBFSCatchesDamage makes sure the diameter check can fail: removing
// the compensating edge 5–6 from I_3^7 leaves the diameter at 3 = m, but
// removing a hypercube edge of a degree-2 node of I_2^3 disconnects it.
func TestCubeBFSCatchesDamage(t *testing.T) {
	c, _ := NewCube(3)
	adj := c.Graph() // 0–1, 0–2, 1–2 (compensating for missing 3)
	if ecc, ok := adjacency(adj).eccentricity([]int{0, 1, 2}, 2); !ok || ecc != 1 {
		t.Fatalf("I_2^3: eccentricity %d, %v; want 1, true", ecc, ok)
	}
	broken := [][]int{{1}, {0}, {}}
	if _, ok := adjacency(broken).eccentricity([]int{0, 1, 2}, 2); ok {
		t.Fatalf("a disconnected graph passed the BFS check")
	}
	path := [][]int{{1}, {0, 2}, {1, 3}, {2}} // diameter 3 > m = 2
	if _, ok := adjacency(path).eccentricity([]int{0}, 2); ok {
		t.Fatalf("a path of length 3 passed a diameter ≤ 2 check")
	}
}

func TestCubeSmallAndBadInput(t *testing.T) {
	c1, err := NewCube(1)
	if err != nil || c1.Dim() != 0 || len(c1.Neighbors(0)) != 0 || len(c1.Graph()[0]) != 0 {
		t.Errorf("I_0^1: %v dim %d neighbours %v", err, c1.Dim(), c1.Neighbors(0))
	}
	c2, _ := NewCube(2)
	if got := c2.Neighbors(1); c2.Dim() != 1 || !slices.Equal(got, []int{0}) {
		t.Errorf("I_1^2: Neighbors(1) = %v", got)
	}
	for _, n := range []int{0, -1, MaxNodes + 1} {
		if _, err := NewCube(n); !errors.Is(err, ErrSize) {
			t.Errorf("NewCube(%d): err = %v", n, err)
		}
		if _, err := CubeNeighbors(n, 0); !errors.Is(err, ErrSize) {
			t.Errorf("CubeNeighbors(%d, 0): err = %v", n, err)
		}
	}
	for _, v := range []int{-1, 7, 100} {
		if _, err := CubeNeighbors(7, v); !errors.Is(err, ErrIndex) {
			t.Errorf("CubeNeighbors(7, %d): err = %v", v, err)
		}
		c7, _ := NewCube(7)
		if c7.Neighbors(v) != nil || c7.Degree(v) != 0 || len(c7.AppendNeighbors(nil, v)) != 0 {
			t.Errorf("I_3^7: out-of-range node %d has neighbours", v)
		}
	}
	// Large n: Neighbors stays within degree bounds without building a graph.
	for _, n := range []int{MaxNodes, MaxNodes - 1, MaxNodes/2 + 3} {
		c, _ := NewCube(n)
		for _, v := range []int{0, 1, 1 << 28, n - 1, n - 2, n/2 + 12345} {
			if d := c.Degree(v); d < c.Dim()-1 || d > c.Dim() {
				t.Errorf("n=%d: Degree(%d) = %d, m = %d", n, v, d, c.Dim())
			}
		}
	}
}

// TestZeroNeighbors checks the node set of the stability paper's fault
// experiment (§4.2.5): node 0's neighbours are 1, 2, 4, …, 2^(m-1).
func TestZeroNeighbors(t *testing.T) {
	for n := 1; n <= 4096; n++ {
		got, err := ZeroNeighbors(n)
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for k := 0; 1<<k < n; k++ {
			want = append(want, 1<<k)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: ZeroNeighbors = %v, want %v", n, got, want)
		}
	}
	if got, _ := ZeroNeighbors(1900); len(got) != 11 || got[10] != 1024 {
		t.Errorf("n=1900 (the paper's largest run): %v", got)
	}
	if _, err := ZeroNeighbors(0); !errors.Is(err, ErrSize) {
		t.Errorf("ZeroNeighbors(0): err = %v", err)
	}
}

func TestHammingDistance(t *testing.T) {
	for _, c := range []struct{ u, v, d int }{{0, 0, 0}, {5, 6, 2}, {7, 8, 4}, {0, 1 << 30, 1}} {
		if got := HammingDistance(c.u, c.v); got != c.d {
			t.Errorf("HammingDistance(%d, %d) = %d, want %d", c.u, c.v, got, c.d)
		}
	}
}
