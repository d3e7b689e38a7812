package topo

import (
	"fmt"
	"math/bits"
	"slices"
)

// Cube is the incomplete hypercube I_m^n of Friedman, Manor and Guo,
// "Scalable Stability Detection Using Logical Hypercube", §3.3, over nodes
// 0..n-1 with dimension m = ⌈log2 n⌉. Its edges are
//
//   - the hypercube edges of H_m between present nodes: v and v XOR 2^k for
//     every bit k < m with both ends below n;
//   - one compensating edge per missing node z (n ≤ z < 2^m) whose set G_z
//     of present hypercube neighbours has two or more members: G_z sorted by
//     label (node labels are m-bit strings, so lexicographic order is
//     numeric order); if |G_z| is odd its first (smallest) node is dropped;
//     the i-th node of the first half is joined to the i-th node of the
//     second half. Such a pair is at Hamming distance 2 and was connected in
//     H_m through z. Two missing nodes can propose the same pair; the edge
//     is then present once.
//
// The paper's examples: I_3^7 misses node 7, G_7 = {3, 5, 6}, 3 is dropped
// and the edge 5–6 is added; I_4^14 (its Figure 6) misses 14 and 15, adding
// 10–12 (from G_14 = {6, 10, 12}) and 11–13 (from G_15 = {7, 11, 13}).
//
// Every node has degree m or m-1 (paper §3.3; checked for every n up to 4096
// by the tests), and the diameter is at most m: the plain hypercube edges
// among 0..n-1 already join any two present nodes u, v by a path of length
// Hamming(u, v) (clear the bits of u not in v from the top, then set the bits
// of v not in u; every intermediate label is at most max(u, v)), and extra
// edges only shorten paths.
//
// Small cubes: n = 1 is a single node with m = 0 and no edges; n = 2 is H_1,
// one edge.
//
// A Cube is a small value holding n and m; neighbour lists are computed on
// demand in O(m²) time and no shared state, or all at once by [Cube.Graph].
type Cube struct {
	n, m int
}

// NewCube returns the incomplete hypercube over n nodes, 1 ≤ n ≤ [MaxNodes].
func NewCube(n int) (Cube, error) {
	if n < 1 || n > MaxNodes {
		return Cube{}, fmt.Errorf("%w: n = %d, want 1 ≤ n ≤ %d", ErrSize, n, MaxNodes)
	}
	return Cube{n: n, m: ceilLog2(n)}, nil
}

// Len returns the number of nodes n.
func (c Cube) Len() int { return c.n }

// Dim returns the dimension m = ⌈log2 n⌉.
func (c Cube) Dim() int { return c.m }

// Complete reports whether n is a power of two, so that I_m^n is H_m and has
// no compensating edges.
func (c Cube) Complete() bool { return c.n&(c.n-1) == 0 }

// AppendNeighbors appends the neighbours of node v, sorted in increasing
// order and without duplicates, to dst and returns the extended slice. It
// appends nothing if v is not in [0, n). With a dst of capacity m it does not
// allocate.
func (c Cube) AppendNeighbors(dst []int, v int) []int {
	if v < 0 || v >= c.n {
		return dst
	}
	start := len(dst)
	for k := 0; k < c.m; k++ {
		w := v ^ 1<<k
		if w < c.n {
			dst = append(dst, w)
		} else if p := c.partner(w, v); p != None {
			dst = append(dst, p)
		}
	}
	added := dst[start:]
	slices.Sort(added)
	return dst[:start+len(slices.Compact(added))]
}

// Neighbors returns the sorted neighbours of v in a new slice (nil if v is
// out of range).
func (c Cube) Neighbors(v int) []int {
	if v < 0 || v >= c.n {
		return nil
	}
	return c.AppendNeighbors(make([]int, 0, c.m), v)
}

// Degree returns the number of neighbours of v (0 if v is out of range).
func (c Cube) Degree(v int) int {
	var buf [64]int
	return len(c.AppendNeighbors(buf[:0], v))
}

// group writes G_z, the present hypercube neighbours of the missing node z,
// into buf in increasing order and returns it. A neighbour of z = 2^m-1 or
// less that is below n is z with one of its set bits cleared (setting a bit
// would make it larger than z ≥ n); clearing higher bits first gives
// increasing labels.
func (c Cube) group(buf *[64]int, z int) []int {
	g := buf[:0]
	for k := c.m - 1; k >= 0; k-- {
		if z&(1<<k) != 0 && z^1<<k < c.n {
			g = append(g, z^1<<k)
		}
	}
	return g
}

// partner returns the node that the compensating edge of the missing node z
// joins to v (v ∈ G_z), or None if the pairing leaves v without one.
func (c Cube) partner(z, v int) int {
	var buf [64]int
	g := c.group(&buf, z)
	if len(g)%2 == 1 {
		g = g[1:]
	}
	half := len(g) / 2
	for i, w := range g {
		if w == v {
			if i < half {
				return g[i+half]
			}
			return g[i-half]
		}
	}
	return None
}

// Compensating returns the compensating edges of the cube (§3.3), each as a
// pair {p, q} with p < q, sorted, without duplicates. It is empty for a
// complete hypercube.
func (c Cube) Compensating() [][2]int {
	var edges [][2]int
	var buf [64]int
	for z := c.n; z < 1<<c.m; z++ {
		g := c.group(&buf, z)
		if len(g)%2 == 1 {
			g = g[1:]
		}
		half := len(g) / 2
		for i := 0; i < half; i++ {
			edges = append(edges, [2]int{g[i], g[i+half]})
		}
	}
	slices.SortFunc(edges, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	return slices.Compact(edges)
}

// Graph returns the adjacency lists of the whole cube: Graph()[v] is the
// sorted neighbour list of v, equal to Neighbors(v). It is built in O(n·m)
// from the missing nodes' side rather than by n calls to Neighbors. The lists
// share one backing array; the caller owns the result.
func (c Cube) Graph() [][]int {
	adj := make([][]int, c.n)
	backing := make([]int, c.n*c.m)
	for v := range adj {
		l := backing[v*c.m : v*c.m : (v+1)*c.m]
		// Hypercube neighbours in increasing order: v with one of its set
		// bits cleared, highest bit first, then v with one clear bit set,
		// lowest bit first.
		for k := c.m - 1; k >= 0; k-- {
			if v&(1<<k) != 0 {
				l = append(l, v^1<<k)
			}
		}
		for k := 0; k < c.m; k++ {
			if w := v | 1<<k; w != v && w < c.n {
				l = append(l, w)
			}
		}
		adj[v] = l
	}
	var buf [64]int
	for z := c.n; z < 1<<c.m; z++ {
		g := c.group(&buf, z)
		if len(g)%2 == 1 {
			g = g[1:]
		}
		half := len(g) / 2
		for i := 0; i < half; i++ {
			p, q := g[i], g[i+half]
			adj[p] = insertSorted(adj[p], q)
			adj[q] = insertSorted(adj[q], p)
		}
	}
	return adj
}

// insertSorted inserts x into the sorted list l unless it is already there.
func insertSorted(l []int, x int) []int {
	i, found := slices.BinarySearch(l, x)
	if found {
		return l
	}
	return slices.Insert(l, i, x)
}

// CubeNeighbors returns the sorted neighbours of node v in I_m^n, the
// incomplete hypercube over n nodes (see [Cube]).
func CubeNeighbors(n, v int) ([]int, error) {
	c, err := NewCube(n)
	if err != nil {
		return nil, err
	}
	if v < 0 || v >= n {
		return nil, fmt.Errorf("%w: node %d of %d", ErrIndex, v, n)
	}
	return c.Neighbors(v), nil
}

// ZeroNeighbors returns the hypercube neighbours of node 0 in I_m^n, sorted:
// the nodes 2^k for k < m. Node 0 always has all m of them (2^(m-1) < n), and
// never a compensating edge. The stability paper's fault experiments (§4.2.5)
// crash up to five nodes "chosen randomly among node 0's neighbors", a worst
// case because they all surround the same node.
func ZeroNeighbors(n int) ([]int, error) {
	return CubeNeighbors(n, 0)
}

// HammingDistance returns the number of bits in which u and v differ.
func HammingDistance(u, v int) int { return bits.OnesCount64(uint64(u ^ v)) }
