package coll

import (
	"context"
	"slices"
)

// ReduceLongBytes: at or above it (and with at least as many elements as the
// largest power of two ≤ Size) Reduce and Allreduce use Rabenseifner's
// reduce-scatter algorithms; below it, a binomial tree (Reduce) or recursive
// doubling (Allreduce). With a per-message latency L, bandwidth B and
// reduction speed R, recursive doubling costs log₂p·(L + n/B + n/R) and
// Rabenseifner 2·log₂p·L + 2n/B + n/R (roughly): the switch is where
// log₂p·L ≈ n·((log₂p−2)/B + (log₂p−1)/R). For TCP on one host (L ≈ 10 µs,
// B ≈ R ≈ 2 GB/s) that is 16–32 KiB for 4–32 ranks; the in-memory benchmark
// (BenchmarkAllreduce) crosses between 32 and 256 KiB. MPICH's 2 KiB suits
// networks with a much lower latency-bandwidth product.
const ReduceLongBytes = 16 << 10

type reduceAlg int

const (
	reduceBinomial reduceAlg = iota
	reduceRabenseifner
)

func pickReduce(n, bytes, p int) reduceAlg {
	if bytes >= ReduceLongBytes && n >= pof2Floor(p) {
		return reduceRabenseifner
	}
	return reduceBinomial
}

// Reduce combines every rank's send with op, in rank order, into recv on
// root: recv = send₀ ⊕ send₁ ⊕ … ⊕ send_{p−1}. Every rank's send has the same
// length; recv is used on root only (it must have len(send) elements there;
// other ranks may pass nil). send is never modified.
func Reduce[T Elem](ctx context.Context, t Transport, send, recv []T, op Op[T], root int) error {
	c := begin(ctx, t, "reduce")
	if err := c.checkRoot(root); err != nil {
		return err
	}
	if !op.Valid() {
		return c.errorf(ErrOp, "zero Op")
	}
	var bad error
	if c.rank == root && len(recv) != len(send) {
		// Take part with a scratch buffer so that the other ranks finish.
		bad = c.errorf(ErrCount, "len(recv) = %d on root, want len(send) = %d", len(recv), len(send))
		recv = make([]T, len(send))
	}
	return firstErr(bad, c.done(reduce(c, send, recv, op, root, pickReduce(len(send), len(send)*SizeOf[T](), c.size))))
}

func reduce[T Elem](c *call, send, recv []T, op Op[T], root int, alg reduceAlg) error {
	if c.size == 1 {
		copy(recv, send)
		return nil
	}
	if alg == reduceRabenseifner {
		return rabenseifnerReduce(c, send, recv, op, root)
	}
	return binomialReduce(c, send, recv, op, root)
}

// binomialReduce: the mirror of the binomial broadcast, ⌈log₂ p⌉ rounds and
// p − 1 messages of the whole vector. The subtree of the rank at distance v
// covers distances [v, v + lowbit(v)), so partial results are combined in
// distance order; for a non-commutative op the tree is rooted at rank 0
// (distance = rank) and the result takes one more hop to root.
func binomialReduce[T Elem](c *call, send, recv []T, op Op[T], root int) error {
	p := c.size
	treeRoot := root
	if !op.commutative {
		treeRoot = 0
	}
	v := c.relOf(treeRoot)
	var acc []T
	if c.rank == root {
		acc = recv
	} else {
		acc = make([]T, len(send))
	}
	copy(acc, send)
	scratch := make([]T, len(acc))
	for mask := 1; mask < p; mask <<= 1 {
		if v&mask != 0 {
			if err := c.send(c.realFromRel(v-mask, treeRoot), phaseMain, AsBytes(acc)); err != nil {
				return err
			}
			break
		}
		if src := v | mask; src < p {
			in, err := recvElems(c, c.realFromRel(src, treeRoot), phaseMain, scratch)
			if err != nil {
				return err
			}
			op.left(acc, in)
		}
	}
	return hop(c, treeRoot, root, acc, recv)
}

// hop moves a reduction's result from the rank that holds it to root's recv.
func hop[T Elem](c *call, holder, root int, result, recv []T) error {
	if holder == root {
		return nil
	}
	switch c.rank {
	case holder:
		return c.send(root, phaseHop, AsBytes(result))
	case root:
		return c.recvInto(holder, phaseHop, AsBytes(recv))
	}
	return nil
}

// rabenseifnerReduce: a reduce-scatter by recursive halving (see halving)
// leaves each of pof2 ranks with one fully reduced block, then a binomial
// gather that undoes the halving steps brings the blocks to root (through
// root's odd neighbour when root was folded out). 2·log₂ pof2 (+2) rounds;
// each rank sends about 2n·(pof2−1)/pof2 elements instead of n·log₂ p.
func rabenseifnerReduce[T Elem](c *call, send, recv []T, op Op[T], root int) error {
	buf := recv
	if c.rank != root {
		buf = make([]T, len(send))
	}
	h, err := halving(c, buf, send, op, false)
	if err != nil {
		return err
	}
	newroot, proxy := root-h.rem, root
	if root < 2*h.rem {
		newroot, proxy = root/2, root|1
	}
	if h.newrank >= 0 {
		for i := len(h.steps) - 1; i >= 0; i-- {
			s := h.steps[i]
			if h.newrank&s.mask != newroot&s.mask {
				if err := c.send(s.partner, phaseGather, AsBytes(span(h, buf, s.keep))); err != nil {
					return err
				}
				break
			}
			if err := c.recvInto(s.partner, phaseGather, AsBytes(span(h, buf, s.give))); err != nil {
				return err
			}
		}
	}
	return hop(c, proxy, root, buf, recv)
}

// halvingState is what halving leaves: this rank's place among the pof2
// ranks that take part (newrank, −1 if folded out) and the steps it took.
type halvingState struct {
	pof2, rem int
	newrank   int
	displs    []int // element offsets of the pof2 blocks (len pof2+1)
	steps     []halvingStep
}

// halvingStep: at bit mask, the exchange with partner (a real rank) kept
// blocks [keep[0], keep[1]) and gave away [give[0], give[1]).
type halvingStep struct {
	mask, partner int
	keep, give    [2]int
	at            int // where in halving's scratch the step receives
}

// span returns blocks [r[0], r[1]) of buf.
func span[T Elem](h *halvingState, buf []T, r [2]int) []T {
	return buf[h.displs[r[0]]:h.displs[r[1]]]
}

// fold reduces the size to pof2, the largest power of two ≤ p: among the
// first 2·rem ranks (rem = p − pof2) each even rank sends its vector to the
// odd rank above it, which combines the two (even ⊕ odd, rank order kept)
// and takes part as newrank = rank/2; the others take part as rank − rem. The
// participants' newrank order is their rank order, so contiguous newrank
// groups hold contiguous rank ranges. It returns −1 for a folded-out rank.
func fold[T Elem](c *call, buf []T, op Op[T]) (newrank, pof2, rem int, err error) {
	pof2 = pof2Floor(c.size)
	rem = c.size - pof2
	r := c.rank
	if r >= 2*rem {
		return r - rem, pof2, rem, nil
	}
	if r%2 == 0 {
		return -1, pof2, rem, c.send(r+1, phaseFold, AsBytes(buf))
	}
	in, err := recvElems(c, r-1, phaseFold, make([]T, len(buf)))
	if err != nil {
		return 0, pof2, rem, err
	}
	op.right(in, buf)
	return r / 2, pof2, rem, nil
}

// unfold hands the result back to the ranks fold left out.
func unfold[T Elem](c *call, buf []T, rem int) error {
	r := c.rank
	switch {
	case r >= 2*rem:
		return nil
	case r%2 == 1:
		return c.send(r-1, phaseUnfold, AsBytes(buf))
	default:
		return c.recvInto(r+1, phaseUnfold, AsBytes(buf))
	}
}

// rankOfNew maps a newrank of fold back to a rank.
func rankOfNew(newrank, rem int) int {
	if newrank < rem {
		return 2*newrank + 1
	}
	return newrank + rem
}

// halving is the reduce-scatter half of Rabenseifner's algorithm: after fold,
// the vector is cut into pof2 blocks; in step k (mask = 2^k) newranks v and
// v xor mask split the range they share, each sending the half it gives up and
// combining the half it keeps. After log₂ pof2 steps newrank v holds block
// bitreverse(v) reduced over all ranks. Each step merges two aligned groups
// of newranks, lower group on the left, so the result is in rank order even
// for a non-commutative op.
//
// src, if not nil, is this rank's input, which buf (of its length) does not
// hold yet. When it can, the first step then sends its half straight from
// src and receives the partner's half straight into buf, combining src's
// other half into it: the input is never copied whole into buf, and the half
// given away is left for the caller to fill (the allgather, or the gather,
// overwrites it). That takes a commutative op (the received half is the left
// operand in place, the order a commutative op ignores), no fold (p a power
// of two), and src apart from buf; otherwise src is copied into buf first.
func halving[T Elem](c *call, buf, src []T, op Op[T], allgather bool) (*halvingState, error) {
	if src != nil && (!op.commutative || pof2Floor(c.size) != c.size || overlap(buf, src)) {
		copy(buf, src)
		src = nil
	}
	newrank, pof2, rem, err := fold(c, buf, op)
	h := &c.hs
	h.pof2, h.rem, h.newrank, h.steps = pof2, rem, newrank, h.steps[:0]
	if err != nil || newrank < 0 {
		return h, err
	}
	n := len(buf)
	h.displs = slices.Grow(h.displs[:0], pof2+1)[:pof2+1]
	for i := range h.displs {
		h.displs[i] = i*(n/pof2) + min(i, n%pof2)
	}
	// Each step receives into its own part of scratch (into the half it
	// keeps, for a first step that reads src), so that all the receives
	// can be posted now: a partner that runs ahead then finds its step's
	// receive posted. The allgather that replays the steps backwards, if
	// the caller runs it, receives into the halves given away. Each half
	// is written by the reduction of the step before and sent by its
	// own; its allgather receive is posted right before that send when
	// the partner answers only what reached it (Paced): its answer, its
	// allgather step, comes after its own reduction, often before this
	// rank, waking to its step's data, would have posted it after the
	// exchange, and a large step that finds no receive posted is copied
	// once more. Otherwise it is posted as soon as its step's exchange is
	// over, the half being neither read nor written here after it: the
	// partner's pace is not this rank's (a replicated rank's partners
	// follow its master, which a backup may trail). Without posting
	// ahead, every step receives at the start of scratch.
	_, pre := c.t.(Preposter)
	early := false
	if p, ok := c.t.(Paced); ok && pre && allgather {
		early = p.Paced()
	}
	lo, hi, kept := 0, pof2, 0
	for mask := 1; mask < pof2; mask <<= 1 {
		mid := (lo + hi) / 2
		s := halvingStep{mask: mask, partner: rankOfNew(newrank^mask, rem), keep: [2]int{lo, mid}, give: [2]int{mid, hi}}
		if newrank&mask != 0 {
			s.keep, s.give = s.give, s.keep
		}
		lo, hi = s.keep[0], s.keep[1]
		if pre && (mask > 1 || src == nil) { // a first step that reads src receives into buf
			s.at = kept
			kept += h.displs[hi] - h.displs[lo]
		}
		h.steps = append(h.steps, s)
	}
	scratch := callScratch[T](c, max(kept, h.displs[pof2/2])) // the halves kept, one after the other, or the largest
	into := func(i int) []T {
		s := h.steps[i]
		if i == 0 && src != nil {
			return span(h, buf, s.keep)
		}
		return scratch[s.at : s.at+h.displs[s.keep[1]]-h.displs[s.keep[0]]]
	}
	if pre {
		for i, s := range h.steps {
			if err := c.prepost(s.partner, phaseMain, AsBytes(into(i))); err != nil {
				return h, err
			}
		}
	}
	for i, s := range h.steps {
		mine := span(h, buf, s.keep)
		give := span(h, buf, s.give)
		if early {
			if err := c.prepost(s.partner, phaseAllgather, AsBytes(give)); err != nil {
				return h, err
			}
		}
		if src != nil {
			give = span(h, src, s.give)
		}
		// The input is the caller's, never written here: it may stay
		// lent to the transport until the call returns. So may buf's
		// half under an allgather, which writes it only with this
		// partner's later step, sent once the partner has this one
		// (Lender).
		in, err := sendrecvElemsKeep(c, s.partner, give, s.partner, phaseMain, into(i), src != nil || allgather)
		if err != nil {
			return h, err
		}
		if pre && allgather && !early {
			if err := c.prepost(s.partner, phaseAllgather, AsBytes(span(h, buf, s.give))); err != nil {
				return h, err
			}
		}
		switch {
		case src == nil:
			if newrank < newrank^s.mask {
				op.left(mine, in)
			} else {
				op.right(in, mine)
			}
		case len(in) > 0 && &in[0] == &mine[0]:
			op.left(mine, span(h, src, s.keep)) // commutative: see above
		default: // the transport gave its own buffer
			copy(mine, span(h, src, s.keep))
			op.left(mine, in)
		}
		src = nil
	}
	return h, nil
}
