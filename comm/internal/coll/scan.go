package coll

import "context"

// Scan computes inclusive prefix reductions: rank i's recv = send₀ ⊕ … ⊕
// sendᵢ. Every send has the same length and len(recv) = len(send).
func Scan[T Elem](ctx context.Context, t Transport, send, recv []T, op Op[T]) error {
	c := begin(ctx, t, "scan")
	return c.done(scanChecked(c, send, recv, op, true))
}

// Exscan computes exclusive prefix reductions: rank i > 0's recv = send₀ ⊕ …
// ⊕ sendᵢ₋₁. Rank 0's recv is left unchanged (MPI leaves it undefined).
func Exscan[T Elem](ctx context.Context, t Transport, send, recv []T, op Op[T]) error {
	c := begin(ctx, t, "exscan")
	return c.done(scanChecked(c, send, recv, op, false))
}

// scanChecked is recursive doubling: partial holds the reduction over this
// rank's aligned group of 2^k ranks; in step k ranks v and v xor 2^k swap
// partials, and a partial from below is prepended to the result (⌈log₂ p⌉
// rounds, n elements per message). A partner ≥ p is skipped; the partials
// left incomplete by that are never sent to a rank that needs them.
func scanChecked[T Elem](c *call, send, recv []T, op Op[T], inclusive bool) error {
	if !op.Valid() {
		return c.errorf(ErrOp, "zero Op")
	}
	if len(recv) != len(send) {
		return c.errorf(ErrCount, "len(recv) = %d, want len(send) = %d", len(recv), len(send))
	}
	n, r := len(send), c.rank
	partial := make([]T, n)
	copy(partial, send)
	have := inclusive // whether recv holds a value yet
	scratch := make([]T, n)
	if inclusive {
		copy(recv, send)
	}
	for mask := 1; mask < c.size; mask <<= 1 {
		dst := r ^ mask
		if dst >= c.size {
			continue
		}
		in, err := sendrecvElems(c, dst, partial, dst, phaseMain, scratch)
		if err != nil {
			return err
		}
		if dst > r {
			op.left(partial, in)
			continue
		}
		// in is the reduction of a group entirely below this rank.
		switch {
		case !have:
			copy(recv, in)
			have = true
		case op.commutative:
			op.fn(recv, in)
		default:
			tmp := make([]T, n)
			copy(tmp, in)
			op.right(tmp, recv)
		}
		op.right(in, partial)
	}
	return nil
}
