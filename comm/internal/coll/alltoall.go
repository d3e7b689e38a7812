package coll

import "context"

// Alltoall's switch: blocks of at most AlltoallShortBytes with at least
// AlltoallMinRanks ranks use Bruck's algorithm (⌈log₂p⌉ rounds of about
// p/2 blocks each), others pairwise exchange (p − 1 rounds of one block).
const (
	AlltoallShortBytes = 256
	AlltoallMinRanks   = 8
)

type alltoallAlg int

const (
	alltoallPairwise alltoallAlg = iota
	alltoallBruck
)

func pickAlltoall(blockBytes, p int) alltoallAlg {
	if blockBytes <= AlltoallShortBytes && p >= AlltoallMinRanks {
		return alltoallBruck
	}
	return alltoallPairwise
}

// Alltoall sends block j of every rank i's send to block i of rank j's recv:
// send and recv have Size·k elements on every rank, for one k.
func Alltoall[T Elem](ctx context.Context, t Transport, send, recv []T) error {
	c := begin(ctx, t, "alltoall")
	if len(send)%c.size != 0 || len(recv) != len(send) {
		return c.errorf(ErrCount, "len(send) = %d, len(recv) = %d, want equal multiples of %d ranks",
			len(send), len(recv), c.size)
	}
	k := len(send) / c.size * SizeOf[T]()
	return c.done(alltoallBytes(c, AsBytes(send), AsBytes(recv), k, pickAlltoall(k, c.size)))
}

func alltoallBytes(c *call, send, recv []byte, k int, alg alltoallAlg) error {
	if alg == alltoallBruck {
		return bruckAlltoall(c, send, recv, k)
	}
	displs := make([]int, c.size+1)
	for i := range displs {
		displs[i] = i * k
	}
	return pairwiseAlltoall(c, send, displs, recv, displs)
}

// bruckAlltoall is Bruck's all-to-all for blocks of k bytes: rotate the
// blocks so that position j holds the block for rank + j; in step d = 2ᵏ
// send every block whose position has bit d set to rank + d (packed in one
// message) and put the ones from rank − d in the same positions; position j
// then holds rank − j's block for this rank. ⌈log₂p⌉ rounds instead of
// p − 1, at the price of moving each block up to ⌈log₂p⌉ times.
func bruckAlltoall(c *call, send, recv []byte, k int) error {
	p, r := c.size, c.rank
	tmp := make([]byte, p*k)
	copy(tmp, send[r*k:])
	copy(tmp[(p-r)*k:], send[:r*k])
	pack := make([]byte, 0, (p+1)/2*k)
	in := make([]byte, (p+1)/2*k)
	for d := 1; d < p; d <<= 1 {
		pack = pack[:0]
		for j := d; j < p; j++ {
			if j&d != 0 {
				pack = append(pack, tmp[j*k:(j+1)*k]...)
			}
		}
		got := in[:len(pack)]
		if err := c.sendrecvInto((r+d)%p, pack, (r-d+p)%p, phaseMain, got); err != nil {
			return err
		}
		for j, o := d, 0; j < p; j++ {
			if j&d != 0 {
				copy(tmp[j*k:(j+1)*k], got[o:o+k])
				o += k
			}
		}
	}
	for j := 0; j < p; j++ {
		from := (r - j + p) % p
		copy(recv[from*k:(from+1)*k], tmp[j*k:(j+1)*k])
	}
	return nil
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
