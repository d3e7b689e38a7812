package coll

import "context"

// Alltoall sends block j of every rank i's send to block i of rank j's recv:
// send and recv have Size·k elements on every rank, for one k.
func Alltoall[T Elem](ctx context.Context, t Transport, send, recv []T) error {
	c := begin(ctx, t, "alltoall")
	if len(send)%c.size != 0 || len(recv) != len(send) {
		return c.errorf(ErrCount, "len(send) = %d, len(recv) = %d, want equal multiples of %d ranks",
			len(send), len(recv), c.size)
	}
	k := len(send) / c.size * SizeOf[T]()
	displs := make([]int, c.size+1)
	for i := range displs {
		displs[i] = i * k
	}
	return c.done(pairwiseAlltoall(c, AsBytes(send), displs, AsBytes(recv), displs))
}

// Alltoallv is Alltoall with per-pair lengths: this rank sends
// sendCounts[j] elements to rank j (packed in rank order in send) and
// receives recvCounts[i] elements from rank i (packed in recv); recvCounts[i]
// here must equal sendCounts[Rank] on rank i.
func Alltoallv[T Elem](ctx context.Context, t Transport, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	c := begin(ctx, t, "alltoallv")
	sd, err := c.checkCounts("sendCounts", sendCounts)
	if err != nil {
		return err
	}
	rd, err := c.checkCounts("recvCounts", recvCounts)
	if err != nil {
		return err
	}
	if len(send) != sd[c.size] || len(recv) != rd[c.size] {
		return c.errorf(ErrCount, "len(send) = %d, len(recv) = %d, want sums of counts %d and %d",
			len(send), len(recv), sd[c.size], rd[c.size])
	}
	if sendCounts[c.rank] != recvCounts[c.rank] {
		return c.errorf(ErrCount, "sendCounts[%d] = %d ≠ recvCounts[%d] = %d",
			c.rank, sendCounts[c.rank], c.rank, recvCounts[c.rank])
	}
	size := SizeOf[T]()
	for i := range sd {
		sd[i] *= size
		rd[i] *= size
	}
	return c.done(pairwiseAlltoall(c, AsBytes(send), sd, AsBytes(recv), rd))
}

// pairwiseAlltoall: in step s = 1 … p−1 every rank sends its block for
// rank + s and receives the block of rank − s, so each link carries one
// message per step and no rank is flooded (P2P-MPI's "asynchronous
// rotation"): p − 1 rounds.
func pairwiseAlltoall(c *call, send []byte, sd []int, recv []byte, rd []int) error {
	p, r := c.size, c.rank
	copy(recv[rd[r]:rd[r+1]], send[sd[r]:sd[r+1]])
	for s := 1; s < p; s++ {
		to, from := (r+s)%p, (r-s+p)%p
		if err := c.sendrecvInto(to, send[sd[to]:sd[to+1]], from, phaseMain, recv[rd[from]:rd[from+1]]); err != nil {
			return err
		}
	}
	return nil
}
