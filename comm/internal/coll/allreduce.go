package coll

import "context"

// AllreduceRingUnitBytes scales the switch from Rabenseifner to a ring for
// a commutative Allreduce when the size p is not a power of two: the ring is
// used from (p − 2 − log₂p')·AllreduceRingUnitBytes (p' the largest power of
// two ≤ p) and ReduceLongBytes up. Rabenseifner then pays the fold-in (the
// whole vector twice more on the critical path) where the ring pays p − 2 −
// log₂p' more rounds; the unit is about one latency-bandwidth product of TCP
// on one host (10 µs × 3 GB/s).
const AllreduceRingUnitBytes = 32 << 10

// AllreduceFlatBytes and AllreduceFlatRanks bound the flat allreduce (every
// rank sends its vector to every other and reduces all p itself): up to
// AllreduceFlatBytes per vector on up to AllreduceFlatRanks ranks. It takes
// one round where recursive doubling takes log₂p, and a round costs a
// wake-up of a parked receiver, tens of µs on a busy host, where a short
// vector's send costs about one. Measured on 2 busy cores it took the 8 B
// Allreduce on 4 ranks from about 100 µs to 76; on 8 ranks its 7 sends per
// rank, arriving one by one at a parked receiver, made it slower than
// doubling's 3 rounds.
const (
	AllreduceFlatBytes = 1 << 10
	AllreduceFlatRanks = 4
)

type allreduceAlg int

const (
	allreduceDoubling allreduceAlg = iota
	allreduceRabenseifner
	allreduceRing
	allreduceFlat
)

// pickAllreduce chooses the algorithm for n elements of bytes bytes on p
// ranks; flat is only chosen for an eager Transport (its sends all go
// before its receives).
func pickAllreduce(n, bytes, p int, commutative, eager bool) allreduceAlg {
	if eager && p > 2 && p <= AllreduceFlatRanks && bytes <= AllreduceFlatBytes {
		return allreduceFlat
	}
	if pickReduce(n, bytes, p) != reduceRabenseifner {
		return allreduceDoubling
	}
	pof2 := pof2Floor(p)
	if commutative && pof2 != p && n >= p && bytes >= (p-2-log2Ceil(pof2))*AllreduceRingUnitBytes {
		return allreduceRing
	}
	return allreduceRabenseifner
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
	return c.done(allreduce(c, recv, send, op, pickAllreduce(len(recv), len(recv)*SizeOf[T](), c.size, op.commutative, c.eager)))
}

// allreduce reduces into buf the input src, or buf's own contents when src
// is nil (in place).
func allreduce[T Elem](c *call, buf, src []T, op Op[T], alg allreduceAlg) error {
	if alg == allreduceRabenseifner && c.size > 1 {
		return rabenseifnerAllreduce(c, buf, src, op) // reads src itself (halving)
	}
	if src != nil {
		copy(buf, src)
	}
	if c.size == 1 {
		return nil
	}
	switch {
	case alg == allreduceRing && op.commutative:
		return ringAllreduce(c, buf, op)
	case alg == allreduceFlat && c.eager:
		return flatAllreduce(c, buf, op)
	}
	return doublingAllreduce(c, buf, op)
}

// flatAllreduce (eager Transports only): every rank sends its whole
// vector to each other rank, then receives theirs and combines the p
// vectors in rank order itself: one round, p − 1 messages of n elements
// sent per rank. Every rank computes the same expression in the same
// order, so they agree bit for bit, for any operator.
func flatAllreduce[T Elem](c *call, buf []T, op Op[T]) error {
	p, r, n := c.size, c.rank, len(buf)
	for i := 1; i < p; i++ {
		if err := c.send((r+i)%p, phaseMain, AsBytes(buf)); err != nil {
			return err
		}
	}
	all := callScratch[T](c, p*n) // rank k's vector at k·n
	copy(all[r*n:], buf)
	for i := 1; i < p; i++ {
		from := (r - i + p) % p
		slot := all[from*n : (from+1)*n]
		in, err := recvElems(c, from, phaseMain, slot)
		if err != nil {
			return err
		}
		copy(slot, in) // a no-op when received into slot
	}
	copy(buf, all[:n])
	for k := 1; k < p; k++ {
		op.left(buf, all[k*n:(k+1)*n])
	}
	return nil
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
		scratch := callScratch[T](c, len(buf))
		for mask := 1; mask < pof2; mask <<= 1 {
			nr := newrank ^ mask
			partner := rankOfNew(nr, rem)
			in, err := sendrecvElems(c, partner, buf, partner, phaseMain, scratch)
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
func rabenseifnerAllreduce[T Elem](c *call, buf, src []T, op Op[T]) error {
	h, err := halving(c, buf, src, op, true)
	if err != nil {
		return err
	}
	if h.newrank >= 0 {
		// Each step sends the blocks it kept and receives those it gave
		// away; the later steps receive only outside what it kept, so
		// what it sends may stay lent to the transport until the call
		// returns.
		for i := len(h.steps) - 1; i >= 0; i-- {
			s := h.steps[i]
			if err := c.sendrecvIntoLent(s.partner, AsBytes(span(h, buf, s.keep)), s.partner, phaseAllgather,
				AsBytes(span(h, buf, s.give))); err != nil {
				return err
			}
		}
	}
	return unfold(c, buf, h.rem)
}

// ringAllreduce (commutative operators only): the vector is cut into p
// blocks; a ring reduce-scatter (in step s every rank sends its partial of
// block rank−s to rank+1 and adds the partial of block rank−s−1 from
// rank−1) leaves block rank+1 fully reduced on every rank, and a ring
// allgather spreads the blocks: 2(p−1) rounds, 2n·(p−1)/p elements sent per
// rank, for any p without a fold-in.
func ringAllreduce[T Elem](c *call, buf []T, op Op[T]) error {
	p, r, n := c.size, c.rank, len(buf)
	displs := make([]int, p+1)
	for i := range displs {
		displs[i] = i*(n/p) + min(i, n%p)
	}
	blk := func(i int) []T { return buf[displs[i]:displs[i+1]] }
	right, left := (r+1)%p, (r-1+p)%p
	scratch := callScratch[T](c, displs[1]) // the largest block
	for s := 0; s < p-1; s++ {
		sb, rb := (r-s+p)%p, (r-s-1+p)%p
		mine := blk(rb)
		in, err := sendrecvElems(c, right, blk(sb), left, phaseMain, scratch[:len(mine)])
		if err != nil {
			return err
		}
		op.left(mine, in)
	}
	// Rank r holds block r+1: number the ring by block, block i on rank i−1.
	size := SizeOf[T]()
	bd := make([]int, p+1)
	for i := range bd {
		bd[i] = displs[i] * size
	}
	return ringAllgather(c, AsBytes(buf), bd, (r+1)%p, func(i int) int { return (i - 1 + p) % p }, phaseAllgather)
}
