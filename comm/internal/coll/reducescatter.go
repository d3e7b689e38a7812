package coll

import "context"

// ReduceScatterLongBytes: at or above this total, a commutative ReduceScatter
// uses pairwise exchange; below it (or for a non-commutative op) it is an
// Allreduce of the whole vector of which each rank keeps its block.
const ReduceScatterLongBytes = 64 << 10

type reduceScatterAlg int

const (
	reduceScatterAllreduce reduceScatterAlg = iota
	reduceScatterPairwise
)

func pickReduceScatter(bytes int, commutative bool) reduceScatterAlg {
	if commutative && bytes >= ReduceScatterLongBytes {
		return reduceScatterPairwise
	}
	return reduceScatterAllreduce
}

// ReduceScatter reduces every rank's send (len = sum of counts) with op, in
// rank order, and leaves block i (counts[i] elements, packed in rank order)
// of the result in rank i's recv (len(recv) = counts[Rank]). Every rank
// passes the same counts. send is never modified.
func ReduceScatter[T Elem](ctx context.Context, t Transport, send, recv []T, counts []int, op Op[T]) error {
	c := begin(ctx, t, "reducescatter")
	return c.done(reduceScatterChecked(c, send, recv, counts, op))
}

// ReduceScatterBlock is ReduceScatter with every count equal to len(recv):
// len(send) = Size·len(recv).
func ReduceScatterBlock[T Elem](ctx context.Context, t Transport, send, recv []T, op Op[T]) error {
	c := begin(ctx, t, "reducescatterblock")
	if len(send) != c.size*len(recv) {
		return c.errorf(ErrCount, "len(send) = %d, want %d ranks × len(recv) = %d", len(send), c.size, len(recv))
	}
	counts := make([]int, c.size)
	for i := range counts {
		counts[i] = len(recv)
	}
	return c.done(reduceScatterChecked(c, send, recv, counts, op))
}

func reduceScatterChecked[T Elem](c *call, send, recv []T, counts []int, op Op[T]) error {
	if !op.Valid() {
		return c.errorf(ErrOp, "zero Op")
	}
	displs, err := c.checkCounts("counts", counts)
	if err != nil {
		return err
	}
	if len(send) != displs[c.size] || len(recv) != counts[c.rank] {
		return c.errorf(ErrCount, "len(send) = %d, len(recv) = %d, want sum of counts %d and counts[%d] = %d",
			len(send), len(recv), displs[c.size], c.rank, counts[c.rank])
	}
	return reduceScatter(c, send, recv, displs, op, pickReduceScatter(len(send)*SizeOf[T](), op.commutative))
}

func reduceScatter[T Elem](c *call, send, recv []T, displs []int, op Op[T], alg reduceScatterAlg) error {
	p, r := c.size, c.rank
	if alg == reduceScatterPairwise && op.commutative {
		// Pairwise exchange: in step s every rank sends rank + s its block
		// and combines the block rank − s sends it: p − 1 rounds, each rank
		// sends n·(p−1)/p elements (the minimum).
		copy(recv, send[displs[r]:displs[r+1]])
		scratch := make([]T, len(recv))
		for s := 1; s < p; s++ {
			to, from := (r+s)%p, (r-s+p)%p
			in, err := sendrecvElems(c, to, send[displs[to]:displs[to+1]], from, phaseMain, scratch)
			if err != nil {
				return err
			}
			op.left(recv, in)
		}
		return nil
	}
	buf := make([]T, len(send))
	if err := allreduce(c, buf, send, op, pickAllreduce(len(buf), len(buf)*SizeOf[T](), p, op.commutative, c.eager)); err != nil {
		return err
	}
	copy(recv, buf[displs[r]:displs[r+1]])
	return nil
}
