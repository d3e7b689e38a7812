package coll

import "context"

const (
	// AllgatherShortBytes: below this total (all ranks' data) Allgather(v)
	// uses Bruck's algorithm when the size is not a power of two.
	AllgatherShortBytes = 80 << 10
	// AllgatherLongBytes: below this total, with a power-of-two size,
	// recursive doubling; at or above it (or ≥ AllgatherShortBytes with
	// another size) a ring.
	AllgatherLongBytes = 512 << 10
)

type allgatherAlg int

const (
	allgatherDoubling allgatherAlg = iota
	allgatherBruck
	allgatherRing
)

func pickAllgather(total, p int) allgatherAlg {
	switch {
	case p&(p-1) == 0 && total < AllgatherLongBytes:
		return allgatherDoubling
	case total < AllgatherShortBytes:
		return allgatherBruck
	default:
		return allgatherRing
	}
}

// Allgather concatenates every rank's send, in rank order, into recv on every
// rank: len(recv) = Size·len(send), and every rank's send has the same length.
func Allgather[T Elem](ctx context.Context, t Transport, send, recv []T) error {
	c := begin(ctx, t, "allgather")
	if len(recv) != c.size*len(send) {
		return c.errorf(ErrCount, "len(recv) = %d, want %d ranks × %d", len(recv), c.size, len(send))
	}
	k := len(send) * SizeOf[T]()
	displs := make([]int, c.size+1)
	for i := range displs {
		displs[i] = i * k
	}
	rb := AsBytes(recv)
	copy(rb[displs[c.rank]:], AsBytes(send))
	return c.done(allgatherBytes(c, rb, displs, pickAllgather(len(rb), c.size)))
}

// Allgatherv is Allgather with per-rank lengths: rank i contributes counts[i]
// elements (len(send) = counts[Rank]), packed in rank order into recv
// (len(recv) = sum of counts). Every rank passes the same counts.
func Allgatherv[T Elem](ctx context.Context, t Transport, send, recv []T, counts []int) error {
	c := begin(ctx, t, "allgatherv")
	displs, err := c.checkCounts("counts", counts)
	if err != nil {
		return err
	}
	if len(send) != counts[c.rank] || len(recv) != displs[c.size] {
		return c.errorf(ErrCount, "len(send) = %d, len(recv) = %d, want counts[%d] = %d and %d",
			len(send), len(recv), c.rank, counts[c.rank], displs[c.size])
	}
	size := SizeOf[T]()
	for i := range displs {
		displs[i] *= size
	}
	rb := AsBytes(recv)
	copy(rb[displs[c.rank]:], AsBytes(send))
	return c.done(allgatherBytes(c, rb, displs, pickAllgather(len(rb), c.size)))
}

// allgatherBytes completes buf, in which this rank's block
// buf[displs[rank]:displs[rank+1]] is already in place.
func allgatherBytes(c *call, buf []byte, displs []int, alg allgatherAlg) error {
	if c.size == 1 {
		return nil
	}
	id := func(i int) int { return i }
	switch {
	case alg == allgatherDoubling && c.size&(c.size-1) == 0:
		return doublingAllgather(c, buf, displs, c.rank, id, phaseMain)
	case alg == allgatherBruck || alg == allgatherDoubling:
		return bruckAllgather(c, buf, displs)
	default:
		return ringAllgather(c, buf, displs, c.rank, id, phaseMain)
	}
}

// ringAllgather: block i of buf (buf[displs[i]:displs[i+1]]) belongs to the
// rank numbered i in a ring order given by rankOf; v (this rank's number) owns
// block v. In step s every rank sends block v−s to v+1 and receives block
// v−s−1 from v−1: p − 1 rounds, each rank sends total·(p−1)/p bytes.
func ringAllgather(c *call, buf []byte, displs []int, v int, rankOf func(int) int, phase int) error {
	p := c.size
	right, left := rankOf((v+1)%p), rankOf((v-1+p)%p)
	blk := func(i int) []byte { return buf[displs[i]:displs[i+1]] }
	for s := 0; s < p-1; s++ {
		sb, rb := (v-s+p)%p, (v-s-1+p)%p
		if err := c.sendrecvInto(right, blk(sb), left, phase, blk(rb)); err != nil {
			return err
		}
	}
	return nil
}

// doublingAllgather (p a power of two): in step k ranks v and v xor 2^k swap
// the 2^k blocks their group has gathered: log₂ p rounds.
func doublingAllgather(c *call, buf []byte, displs []int, v int, rankOf func(int) int, phase int) error {
	for mask := 1; mask < c.size; mask <<= 1 {
		pv := v ^ mask
		g, pg := v&^(mask-1), pv&^(mask-1)
		if err := c.sendrecvInto(rankOf(pv), buf[displs[g]:displs[g+mask]], rankOf(pv), phase,
			buf[displs[pg]:displs[pg+mask]]); err != nil {
			return err
		}
	}
	return nil
}

// bruckAllgather is Bruck's algorithm: blocks are kept rotated so that this
// rank's is first; in step k (distance d = 2^k) a rank sends its first
// min(d, p−d) blocks to rank − d and appends those of rank + d: ⌈log₂ p⌉
// rounds for any p, then one local rotation.
func bruckAllgather(c *call, buf []byte, displs []int) error {
	p, r := c.size, c.rank
	toff := make([]int, p+1) // offsets in rotated order
	for j := 0; j < p; j++ {
		b := (r + j) % p
		toff[j+1] = toff[j] + displs[b+1] - displs[b]
	}
	tmp := make([]byte, toff[p])
	copy(tmp, buf[displs[r]:displs[r+1]])
	for d := 1; d < p; d <<= 1 {
		m := min(d, p-d)
		if err := c.sendrecvInto((r-d+p)%p, tmp[:toff[m]], (r+d)%p, phaseMain, tmp[toff[d]:toff[d+m]]); err != nil {
			return err
		}
	}
	copy(buf[displs[r]:], tmp[:toff[p-r]])
	copy(buf[:displs[r]], tmp[toff[p-r]:])
	return nil
}
