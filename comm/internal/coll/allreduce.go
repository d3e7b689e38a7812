package coll

import "context"

type allreduceAlg int

const (
	allreduceDoubling allreduceAlg = iota
	allreduceRabenseifner
)

func pickAllreduce(n, bytes, p int) allreduceAlg {
	if pickReduce(n, bytes, p) == reduceRabenseifner {
		return allreduceRabenseifner
	}
	return allreduceDoubling
}

// Allreduce is Reduce with the result on every rank: recv = send₀ ⊕ … ⊕
// send_{p−1}, len(recv) = len(send) on every rank. send is never modified;
// send and recv may be the same slice.
func Allreduce[T Elem](ctx context.Context, t Transport, send, recv []T, op Op[T]) error {
	c := begin(ctx, t, "allreduce")
	if !op.Valid() {
		return c.errorf(ErrOp, "zero Op")
	}
	if len(recv) != len(send) {
		return c.errorf(ErrCount, "len(recv) = %d, want len(send) = %d", len(recv), len(send))
	}
	copy(recv, send)
	return c.done(allreduce(c, recv, op, pickAllreduce(len(recv), len(recv)*SizeOf[T](), c.size)))
}

// allreduce reduces buf in place.
func allreduce[T Elem](c *call, buf []T, op Op[T], alg allreduceAlg) error {
	if c.size == 1 {
		return nil
	}
	if alg == allreduceRabenseifner {
		return rabenseifnerAllreduce(c, buf, op)
	}
	return doublingAllreduce(c, buf, op)
}

// doublingAllreduce: after fold, in step k newranks v and v xor 2^k swap
// their whole partial results and combine them, lower group on the left:
// log₂ pof2 rounds (+2 when p is not a power of two), n elements per message.
func doublingAllreduce[T Elem](c *call, buf []T, op Op[T]) error {
	newrank, pof2, rem, err := fold(c, buf, op)
	if err != nil {
		return err
	}
	if newrank >= 0 {
		for mask := 1; mask < pof2; mask <<= 1 {
			nr := newrank ^ mask
			partner := rankOfNew(nr, rem)
			in, err := sendrecvElems(c, partner, buf, partner, phaseMain, len(buf))
			if err != nil {
				return err
			}
			if newrank < nr {
				op.left(buf, in)
			} else {
				op.right(in, buf)
			}
		}
	}
	return unfold(c, buf, rem)
}

// rabenseifnerAllreduce: reduce-scatter by recursive halving, then an
// allgather by recursive doubling that replays the halving steps backwards:
// 2·log₂ pof2 rounds (+2), each rank sends about 2n·(pof2−1)/pof2 elements.
func rabenseifnerAllreduce[T Elem](c *call, buf []T, op Op[T]) error {
	h, err := halving(c, buf, op)
	if err != nil {
		return err
	}
	if h.newrank >= 0 {
		for i := len(h.steps) - 1; i >= 0; i-- {
			s := h.steps[i]
			if err := c.sendrecvInto(s.partner, AsBytes(span(h, buf, s.keep)), s.partner, phaseAllgather,
				AsBytes(span(h, buf, s.give))); err != nil {
				return err
			}
		}
	}
	return unfold(c, buf, h.rem)
}
