// Package queens counts the solutions of the N-Queens problem by bitmask
// backtracking and cuts the search tree into work units that can be handed
// to other processes.
//
// A work unit is a [Prefix]: the columns of the queens already placed in rows
// 0, 1, …, len-1. The search tree is rooted at the empty prefix; the children
// of a prefix are the safe placements in its next row. Mirror symmetry halves
// the work: the root's children are only the columns of the left half of row
// 0 (and the middle column when n is odd), and [CountPrefix] weights every
// solution below a left-half first column by 2 (its mirror image is never
// visited). So for every prefix p of the tree
//
//	CountPrefix(n, p) = Σ CountPrefix(n, c) over c in Children(n, p)
//
// and CountPrefix(n, nil) = Count(n) is the number of solutions. A parallel
// program splits any prefix into its children, hands some children to other
// processes and adds up the weighted counts: each leaf of the tree is counted
// exactly once whatever the split.
//
// Typical use:
//
//	units, _ := queens.Prefixes(14, 3) // all valid prefixes of 3 queens
//	var total uint64
//	for _, u := range units {
//		c, _ := queens.CountPrefix(14, u)
//		total += c
//	}
//	// total == queens.Known[14] == 365596
package queens

import (
	"errors"
	"fmt"
	"math/bits"
)

// MaxN is the largest board size accepted: the board rows are uint32 masks and
// the counts of n ≤ 27 fit in a uint64.
const MaxN = 27

// Known holds the published numbers of solutions (OEIS A000170), indexed by n.
var Known = [...]uint64{
	0: 1, 1: 1, 2: 0, 3: 0, 4: 2, 5: 10, 6: 4, 7: 40, 8: 92, 9: 352, 10: 724,
	11: 2680, 12: 14200, 13: 73712, 14: 365596, 15: 2279184, 16: 14772512,
	17: 95815104, 18: 666090624, 19: 4968057848, 20: 39029188884,
}

// KnownCount returns the published number of solutions for n, and whether it
// is in the table.
func KnownCount(n int) (uint64, bool) {
	if n < 0 || n >= len(Known) {
		return 0, false
	}
	return Known[n], true
}

// Errors returned for bad input.
var (
	ErrBoardSize = errors.New("queens: board size out of range")
	ErrPrefix    = errors.New("queens: invalid prefix")
)

// Prefix is a work unit: Prefix[r] is the column (0 ≤ c < n) of the queen in
// row r. The empty prefix is the whole problem.
type Prefix []uint8

// String formats the prefix as its column list, e.g. "[0 2 4]".
func (p Prefix) String() string { return fmt.Sprint([]uint8(p)) }

// Clone returns a copy of p that does not share its array.
func (p Prefix) Clone() Prefix { return append(Prefix(nil), p...) }

// board is the state after placing a prefix: occupied columns and the two
// diagonal shadows on the next row.
type board struct {
	n          int
	row        int
	cols, l, r uint32
}

func (b board) full() uint32 { return uint32(1)<<b.n - 1 }

func (b board) free() uint32 { return b.full() &^ (b.cols | b.l | b.r) }

func (b board) place(col int) board {
	bit := uint32(1) << col
	return board{n: b.n, row: b.row + 1, cols: b.cols | bit, l: (b.l | bit) << 1 & b.full(), r: (b.r | bit) >> 1}
}

func checkN(n int) error {
	if n < 1 || n > MaxN {
		return fmt.Errorf("%w: n = %d, want 1 ≤ n ≤ %d", ErrBoardSize, n, MaxN)
	}
	return nil
}

// firstRowLimit is the number of row-0 columns in the tree: the left half,
// plus the middle column when n is odd.
func firstRowLimit(n int) int { return (n + 1) / 2 }

// setup validates p and returns the board after placing it.
func setup(n int, p Prefix) (board, error) {
	if err := checkN(n); err != nil {
		return board{}, err
	}
	if len(p) > n {
		return board{}, fmt.Errorf("%w: %d queens on a %d board", ErrPrefix, len(p), n)
	}
	b := board{n: n}
	for r, c := range p {
		if int(c) >= n {
			return board{}, fmt.Errorf("%w: row %d column %d outside a %d board", ErrPrefix, r, c, n)
		}
		if r == 0 && int(c) >= firstRowLimit(n) {
			return board{}, fmt.Errorf("%w: first column %d is in the mirrored half (< %d expected)", ErrPrefix, c, firstRowLimit(n))
		}
		if b.free()&(1<<c) == 0 {
			return board{}, fmt.Errorf("%w: queen at row %d column %d is attacked", ErrPrefix, r, c)
		}
		b = b.place(int(c))
	}
	return b, nil
}

// Weight is the symmetry weight of the solutions below a non-empty prefix of
// the tree: 2 when its first queen is in the left half (the mirror solutions
// are not visited), 1 for the middle column of an odd board.
func weight(n int, p Prefix) uint64 {
	if len(p) == 0 {
		return 1
	}
	if n%2 == 1 && int(p[0]) == n/2 {
		return 1
	}
	return 2
}

// Children returns the children of p in the search tree, in increasing column
// order: the safe placements of a queen in row len(p). The children of the
// empty prefix are the columns 0 … ⌈n/2⌉-1 of row 0. A complete prefix (n
// queens) has no children.
func Children(n int, p Prefix) ([]Prefix, error) {
	b, err := setup(n, p)
	if err != nil {
		return nil, err
	}
	free := b.free()
	if len(p) == 0 {
		free &= uint32(1)<<firstRowLimit(n) - 1
	}
	out := make([]Prefix, 0, bits.OnesCount32(free))
	for free != 0 {
		c := bits.TrailingZeros32(free)
		free &= free - 1
		child := make(Prefix, len(p)+1)
		copy(child, p)
		child[len(p)] = uint8(c)
		out = append(out, child)
	}
	return out, nil
}

// Prefixes returns every prefix of the tree with exactly depth queens (fewer
// if the tree is shallower there), in lexicographic order; their counts add
// up to Count(n).
func Prefixes(n, depth int) ([]Prefix, error) {
	if err := checkN(n); err != nil {
		return nil, err
	}
	if depth < 0 || depth > n {
		return nil, fmt.Errorf("%w: depth %d on a %d board", ErrPrefix, depth, n)
	}
	level := []Prefix{{}}
	for d := 0; d < depth; d++ {
		var next []Prefix
		for _, p := range level {
			cs, err := Children(n, p)
			if err != nil {
				return nil, err
			}
			next = append(next, cs...)
		}
		level = next
	}
	return level, nil
}

// CountPrefix returns the number of solutions of the n-queens problem that
// extend p, weighted by symmetry (see the package doc). It runs on the
// calling goroutine and allocates nothing.
func CountPrefix(n int, p Prefix) (uint64, error) {
	b, err := setup(n, p)
	if err != nil {
		return 0, err
	}
	if len(p) == 0 {
		// The root: weight the first row by hand so that the mirrored half
		// is skipped.
		var total uint64
		for c := 0; c < firstRowLimit(n); c++ {
			total += weight(n, Prefix{uint8(c)}) * countBoard(b.place(c))
		}
		return total, nil
	}
	return weight(n, p) * countBoard(b), nil
}

// Count returns the number of solutions of the n-queens problem.
func Count(n int) (uint64, error) { return CountPrefix(n, nil) }

// countBoard counts the completions of b by iterative depth-first search over
// bitmasks. The stack arrays have 32 entries and are indexed modulo 32 so that
// the compiler drops the bounds checks; a child on the last row is counted
// with a population count instead of being pushed.
func countBoard(b board) uint64 {
	left := b.n - b.row
	full := b.full()
	free := full &^ (b.cols | b.l | b.r)
	switch left {
	case 0:
		return 1
	case 1:
		return uint64(bits.OnesCount32(free))
	}
	var cols, ls, rs, avail [32]uint32
	cols[0], ls[0], rs[0], avail[0] = b.cols, b.l, b.r, free
	last := left - 2 // the depth whose children are on the last row
	var count uint64
	d := 0
	for d >= 0 {
		i := d & 31
		a := avail[i]
		if a == 0 {
			d--
			continue
		}
		bit := a & -a
		avail[i] = a ^ bit
		c, l, r := cols[i]|bit, (ls[i]|bit)<<1, (rs[i]|bit)>>1
		f := full &^ (c | l | r)
		if d == last {
			count += uint64(bits.OnesCount32(f))
			continue
		}
		if f == 0 {
			continue
		}
		d++
		j := d & 31
		cols[j], ls[j], rs[j], avail[j] = c, l, r, f
	}
	return count
}

// AppendBinary appends the wire form of p (one byte of length, then one byte
// per column) to dst.
func (p Prefix) AppendBinary(dst []byte) []byte {
	dst = append(dst, byte(len(p)))
	return append(dst, p...)
}

// DecodePrefix reads a prefix written by AppendBinary from the start of src
// and returns it with the rest of src. It checks the framing only; use
// Children or CountPrefix to validate it against a board.
func DecodePrefix(src []byte) (Prefix, []byte, error) {
	if len(src) == 0 {
		return nil, nil, fmt.Errorf("%w: empty encoding", ErrPrefix)
	}
	l := int(src[0])
	if l > MaxN || len(src) < 1+l {
		return nil, nil, fmt.Errorf("%w: length %d with %d bytes left", ErrPrefix, l, len(src)-1)
	}
	return Prefix(src[1 : 1+l]).Clone(), src[1+l:], nil
}
