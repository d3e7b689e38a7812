package topo

import (
	"fmt"
	"math/bits"
	"slices"
)

// Binomial is the binomial tree over ranks 0..n-1 rooted at any rank, for
// any n (not only powers of two), as MPI implementations use it for
// broadcast, reduce, gather and scatter.
//
// Ranks are first renumbered relative to the root: rel = (rank - root) mod n,
// so the root is rel 0. The parent of rel v > 0 is v with its lowest set bit
// cleared; the children of v are v + 2^k for every 2^k below the lowest set
// bit of v (every 2^k < n for the root), those below n. The subtree of v is
// the range v … v+lowbit(v)-1 (clipped at n), so a gather or scatter moves
// contiguous blocks.
//
// Send order and rounds: a node sends to its children farthest first
// (largest 2^k first). In the synchronous round model where every informed
// node sends one message per round, the child v+2^k receives in round
// ⌈log2 n⌉-k, so a broadcast takes [Binomial.Rounds] = ⌈log2 n⌉ rounds. The
// tree's height (edges on the longest root-to-leaf path, the popcount of the
// largest relative rank) is ⌊log2 n⌋, one less when n is not a power of two.
//
// A Binomial is a small value; queries on ranks outside [0, n) answer [None],
// nothing or 0.
type Binomial struct {
	n, root int
}

// NewBinomial returns the binomial tree over n ranks rooted at root,
// 1 ≤ n ≤ [MaxNodes], 0 ≤ root < n.
func NewBinomial(n, root int) (Binomial, error) {
	if n < 1 || n > MaxNodes {
		return Binomial{}, fmt.Errorf("%w: n = %d, want 1 ≤ n ≤ %d", ErrSize, n, MaxNodes)
	}
	if root < 0 || root >= n {
		return Binomial{}, fmt.Errorf("%w: root %d of %d", ErrIndex, root, n)
	}
	return Binomial{n: n, root: root}, nil
}

// Len returns the number of ranks n.
func (b Binomial) Len() int { return b.n }

// Root returns the root rank.
func (b Binomial) Root() int { return b.root }

// rel returns rank's number relative to the root, or None if out of range.
func (b Binomial) rel(rank int) int {
	if rank < 0 || rank >= b.n {
		return None
	}
	return mod(rank-b.root, b.n)
}

// abs turns a relative number back into a rank.
func (b Binomial) abs(v int) int { return mod(v+b.root, b.n) }

// Relative returns rank's position relative to the root, (rank-root) mod n,
// or [None] if rank is out of range.
func (b Binomial) Relative(rank int) int { return b.rel(rank) }

// Parent returns the rank that rank receives from: the relative rank with its
// lowest set bit cleared. It is [None] for the root and for ranks out of
// range.
func (b Binomial) Parent(rank int) int {
	v := b.rel(rank)
	if v <= 0 {
		return None
	}
	return b.abs(v & (v - 1))
}

// span returns the largest power of two that v may add to reach a child
// (exclusive): lowbit(v) for v > 0, and the first power of two ≥ n for the
// root.
func (b Binomial) span(v int) int {
	if v == 0 {
		return 1 << ceilLog2(b.n)
	}
	return v & -v
}

// AppendChildren appends the children of rank to dst in send order (farthest
// subtree first: rel+2^k for decreasing k) and returns the extended slice.
func (b Binomial) AppendChildren(dst []int, rank int) []int {
	v := b.rel(rank)
	if v == None {
		return dst
	}
	for step := b.span(v) >> 1; step > 0; step >>= 1 {
		if v+step < b.n {
			dst = append(dst, b.abs(v+step))
		}
	}
	return dst
}

// NumChildren returns how many children rank has.
func (b Binomial) NumChildren(rank int) int {
	v := b.rel(rank)
	if v == None {
		return 0
	}
	c := 0
	for step := b.span(v) >> 1; step > 0; step >>= 1 {
		if v+step < b.n {
			c++
		}
	}
	return c
}

// SubtreeSize returns the number of ranks in rank's subtree, itself included:
// min(lowbit(rel), n-rel), and n for the root; 0 if rank is out of range. The
// subtree holds the relative ranks rel … rel+SubtreeSize-1.
func (b Binomial) SubtreeSize(rank int) int {
	v := b.rel(rank)
	switch v {
	case None:
		return 0
	case 0:
		return b.n
	}
	return min(v&-v, b.n-v)
}

// Depth returns the number of edges from the root to rank, the popcount of
// its relative rank, or [None] if rank is out of range.
func (b Binomial) Depth(rank int) int {
	v := b.rel(rank)
	if v == None {
		return None
	}
	return bits.OnesCount(uint(v))
}

// Height returns the largest depth: ⌊log2 n⌋ (0 for n = 1).
func (b Binomial) Height() int { return bits.Len(uint(b.n)) - 1 }

// Rounds returns the number of rounds of a broadcast down the tree when
// every informed rank sends one message per round: ⌈log2 n⌉.
func (b Binomial) Rounds() int { return ceilLog2(b.n) }

// ReceiveRound returns the round, 1 … Rounds(), in which rank receives a
// broadcast from the root (0 for the root itself; [None] out of range): the
// child rel+2^k is sent to in round ⌈log2 n⌉-k.
func (b Binomial) ReceiveRound(rank int) int {
	v := b.rel(rank)
	switch v {
	case None:
		return None
	case 0:
		return 0
	}
	return ceilLog2(b.n) - bits.TrailingZeros(uint(v))
}

// AppendBinomialNeighbors appends the neighbours of node v in the binomial
// graph over n nodes to dst, sorted and without duplicates, and returns the
// extended slice: every (v ± 2^k) mod n for 2^k < n, except v itself. Each
// node has at most 2⌈log2 n⌉ neighbours; the graph is circulant and its
// diameter is at most ⌈log2 n⌉ (the +2^k edges alone reach any node in as
// many steps as its distance has set bits).
func AppendBinomialNeighbors(dst []int, n, v int) ([]int, error) {
	if n < 1 || n > MaxNodes {
		return dst, fmt.Errorf("%w: n = %d, want 1 ≤ n ≤ %d", ErrSize, n, MaxNodes)
	}
	if v < 0 || v >= n {
		return dst, fmt.Errorf("%w: node %d of %d", ErrIndex, v, n)
	}
	var buf [64]int
	return appendShifted(dst, binomialOffsets(&buf, n), v, n), nil
}

// binomialOffsets writes the distinct offsets ±2^k mod n (2^k < n) into buf
// in increasing order: the powers of two 1, 2, 4, … merged with n-2^k for
// decreasing k.
func binomialOffsets(buf *[64]int, n int) []int {
	out := buf[:0]
	top := ceilLog2(n) - 1 // the largest k with 2^k < n
	up, down := 0, top     // next 2^up; next n-2^down
	for up <= top || down >= 0 {
		var x int
		switch {
		case down < 0 || (up <= top && 1<<up <= n-1<<down):
			x = 1 << up
			up++
		default:
			x = n - 1<<down
			down--
		}
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// appendShifted appends (v+o) mod n for the sorted offsets o, in increasing
// order: first the ones that wrap past n, then the others.
func appendShifted(dst, offsets []int, v, n int) []int {
	split, _ := slices.BinarySearch(offsets, n-v) // offsets[split:] wrap
	for _, o := range offsets[split:] {
		dst = append(dst, v+o-n)
	}
	for _, o := range offsets[:split] {
		dst = append(dst, v+o)
	}
	return dst
}

// BinomialGraph returns the adjacency lists of the binomial graph over n
// nodes: BinomialGraph(n)[v] is AppendBinomialNeighbors(nil, n, v). The
// lists share one backing array; the caller owns the result.
func BinomialGraph(n int) ([][]int, error) {
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("%w: n = %d, want 1 ≤ n ≤ %d", ErrSize, n, MaxNodes)
	}
	var buf [64]int
	offsets := binomialOffsets(&buf, n)
	d := len(offsets)
	backing := make([]int, n*d)
	adj := make([][]int, n)
	for v := range adj {
		adj[v] = appendShifted(backing[v*d:v*d:(v+1)*d], offsets, v, n)
	}
	return adj, nil
}
