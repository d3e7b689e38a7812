package topo

import (
	"fmt"
	"math/bits"
)

// MaxFanout is the largest radix-tree fan-out accepted by [NewRadix].
const MaxFanout = 1 << 16

// Radix is the a-ary radix tree of the membership service (Varma et al.,
// ICS'06, §3.1–3.2) over n positions. The members of a view, in view order
// (initial members by id, joiners appended), occupy positions 0..n-1 of an
// a-ary heap:
//
//   - position 0 is the root (the first member, the one with the lowest id);
//   - the children of position i are a·i+1 … a·i+a (those below n);
//   - the parent of position i > 0 is (i-1)/a;
//   - level d holds positions (a^d-1)/(a-1) … (a^(d+1)-1)/(a-1) - 1, every
//     level but the last is full, and a joiner becomes a new leaf at the
//     bottom (position n).
//
// The fan-out a is a power of two, as the paper requires, so every query is a
// constant number of shifts and adds. A Radix is a small value: rebuild it for
// every view (it holds only n and log2 a). The zero Radix is an empty tree.
//
// Queries take a position; a position outside [0, n) is answered with [None],
// an empty range, false or 0 as documented on each method, never a panic.
type Radix struct {
	n     int
	shift uint // log2 of the fan-out
}

// NewRadix returns the radix tree over n positions with the given fan-out. n
// may be 0 (an empty tree); fanout must be a power of two between 2 and
// [MaxFanout].
func NewRadix(n, fanout int) (Radix, error) {
	if n < 0 || n > MaxNodes {
		return Radix{}, fmt.Errorf("%w: n = %d, want 0 ≤ n ≤ %d", ErrSize, n, MaxNodes)
	}
	if fanout < 2 || fanout > MaxFanout || fanout&(fanout-1) != 0 {
		return Radix{}, fmt.Errorf("%w: got %d", ErrFanout, fanout)
	}
	return Radix{n: n, shift: uint(bits.TrailingZeros(uint(fanout)))}, nil
}

// Len returns the number of positions n.
func (t Radix) Len() int { return t.n }

// Fanout returns a, the maximum number of children of a position.
func (t Radix) Fanout() int {
	if t.shift == 0 {
		return 0 // the zero Radix
	}
	return 1 << t.shift
}

// Contains reports whether i is a position of the tree (0 ≤ i < n).
func (t Radix) Contains(i int) bool { return i >= 0 && i < t.n }

// Parent returns the parent position of i: (i-1)/a. It returns [None] for the
// root and for positions out of range.
func (t Radix) Parent(i int) int {
	if i <= 0 || i >= t.n {
		return None
	}
	return (i - 1) >> t.shift
}

// FirstChild returns a·i+1, the first child of i, or [None] if i is a leaf or
// out of range.
func (t Radix) FirstChild(i int) int {
	if !t.Contains(i) || t.shift == 0 {
		return None
	}
	c := uint64(i)<<t.shift + 1
	if c >= uint64(t.n) {
		return None
	}
	return int(c)
}

// Children returns the children of i as the half-open range [lo, hi) of
// positions, in order. The range is empty (lo == hi) for a leaf and for a
// position out of range.
func (t Radix) Children(i int) (lo, hi int) {
	first := t.FirstChild(i)
	if first == None {
		return 0, 0
	}
	last := uint64(first) + uint64(1)<<t.shift // one past the a-th child
	if last > uint64(t.n) {
		last = uint64(t.n)
	}
	return first, int(last)
}

// AppendChildren appends the children of i, in increasing position order, to
// dst and returns the extended slice. It appends nothing for a leaf or a
// position out of range. With a dst of capacity a it does not allocate.
func (t Radix) AppendChildren(dst []int, i int) []int {
	lo, hi := t.Children(i)
	for c := lo; c < hi; c++ {
		dst = append(dst, c)
	}
	return dst
}

// NumChildren returns how many children i has (0 for a leaf or a position out
// of range).
func (t Radix) NumChildren(i int) int {
	lo, hi := t.Children(i)
	return hi - lo
}

// IsLeaf reports whether i is a position without children. Positions out of
// range are not leaves.
func (t Radix) IsLeaf(i int) bool { return t.Contains(i) && t.FirstChild(i) == None }

// Depth returns the level of position i: 0 for the root, Depth(Parent(i))+1
// otherwise, or [None] for a position out of range. It is ⌊log_a(i·(a-1)+1)⌋,
// computed with one bit-length and one shift.
func (t Radix) Depth(i int) int {
	if !t.Contains(i) {
		return None
	}
	return t.depth(uint64(i))
}

func (t Radix) depth(i uint64) int {
	x := i*(uint64(1)<<t.shift-1) + 1
	return (bits.Len64(x) - 1) / int(t.shift)
}

// Height returns the number of levels of the tree: 0 for an empty tree, 1 for
// a lone root, Depth(n-1)+1 otherwise. This is the H of the membership
// paper's performance model (§4, Eq. 1–2), where H-1 levels separate parents
// from children.
func (t Radix) Height() int {
	if t.n == 0 {
		return 0
	}
	return t.depth(uint64(t.n-1)) + 1
}

// levelStart returns (a^d-1)/(a-1), the first position of level d.
func (t Radix) levelStart(d int) uint64 {
	return (uint64(1)<<(t.shift*uint(d)) - 1) / (uint64(1)<<t.shift - 1)
}

// Level returns the positions at depth d as the half-open range [lo, hi).
// The range is empty for d < 0 or d ≥ Height().
func (t Radix) Level(d int) (lo, hi int) {
	if d < 0 || d >= t.Height() {
		return 0, 0
	}
	start := t.levelStart(d)
	end := start + uint64(1)<<(t.shift*uint(d))
	if end > uint64(t.n) {
		end = uint64(t.n)
	}
	return int(start), int(end)
}

// SubtreeSize returns the number of positions in the subtree rooted at i,
// i itself included, or 0 for a position out of range. SubtreeSize(0) is n.
//
// It is constant-time: every level of the subtree above the tree's last level
// is full, and on the last level the subtree's positions form one contiguous
// range that is clipped at n.
func (t Radix) SubtreeSize(i int) int {
	if !t.Contains(i) {
		return 0
	}
	k := t.Height() - 1 - t.depth(uint64(i)) // levels below i, down to the last
	full := t.levelStart(k)                  // 1 + a + … + a^(k-1): the full levels
	width := uint64(1) << (t.shift * uint(k))
	first := uint64(i)<<(t.shift*uint(k)) + full // first descendant on the last level
	var last uint64
	if first < uint64(t.n) {
		last = min(uint64(t.n)-first, width)
	}
	return int(full + last)
}

// Ancestor returns the ancestor of i at depth d (i itself when d is i's
// depth), or [None] if i is out of range or d is not between 0 and Depth(i).
// It is constant-time: positions keep their order within a level, so the
// ancestor's offset in its level is i's offset shifted right by
// log2(a)·(Depth(i)-d) bits.
func (t Radix) Ancestor(i, d int) int {
	if !t.Contains(i) {
		return None
	}
	di := t.depth(uint64(i))
	if d < 0 || d > di {
		return None
	}
	offset := uint64(i) - t.levelStart(di)
	return int(t.levelStart(d) + offset>>(t.shift*uint(di-d)))
}

// IsAncestor reports whether position p is i or an ancestor of i, that is,
// whether i lies in the subtree rooted at p. It is false if either is out of
// range.
func (t Radix) IsAncestor(p, i int) bool {
	if !t.Contains(p) {
		return false
	}
	return t.Ancestor(i, t.depth(uint64(p))) == p
}
