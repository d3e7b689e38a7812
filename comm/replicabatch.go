package comm

import (
	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/wire"
)

// Batches to non-masters over sockets. The Data held for a rank's other
// replicas (replicalazy.go) leave together, but written one by one
// (sendDirect) each costs the master a system call, on TCP a trip through
// the kernel's network stack: as many writes as the messages the master
// sends to its destination's master, on the processor the critical path
// needs. Over a socket the held Data under wire.PlaceMin bytes to one
// replica are written in one write instead, one record between hosts
// (tcp.Transport.SendNowBatch), which never waits: where it declines (the
// socket full, frames queued, a shared-memory connection, whose ring
// takes each frame without a system call), they go one by one as before.
// Each replica's Data keep their order; those to two replicas are
// independent streams.
//
// A batch copies its Data (into the write, and into the resend log)
// where sendDirect lends a payload of 4 KiB or more: for 4 to 16 KiB the
// copies cost the master less than the write and the record each would
// take on its own (over loopback records, whole job of a ping-pong of
// r = 2, per round trip: 4 KiB 15.4–15.7 system calls against 12.9
// batched, 8 KiB 16.6–17.5 against 14.6–15.3). From wire.PlaceMin on a write
// is cut in two records so that the reader places the payload; a batch
// would make it copy the payload instead.

// batchBodyMax bounds the payload of a Data written in a batch, which
// copies it into the batch's buffer: a larger one is written on its own
// (sendDirect, which lends it rather than copying it).
const batchBodyMax = wire.PlaceMin

// batchMaxBytes bounds the payload bytes of one batch's write: a larger
// one may find the socket of a replica that runs behind (the usual
// non-master) without room for it all, and its rest then holds back, in
// the transport's queue, the Data that follow it, each copied there. At
// 48 KiB a write (lazyMax Data of 3,000 B) did so often enough over the
// same-host Unix socket to cost 3 to 4 allocations a round trip; 32 KiB
// takes 7 Data of 4 KiB, 3 of 8 KiB, in one write.
const batchMaxBytes = 32 << 10

// lazyBatch is writeLazy's scratch state, reused from batch to batch
// (under lazyData.flush): the frames of one write, their bodies, and the
// headers they point into.
type lazyBatch struct {
	frames []wire.Frame
	bodies [][]byte
	heads  []byte
	ends   []int // heads[ends[i-1]:ends[i]] is frame i's header
	idx    []int // the batch's index of each frame
}

// writeLazy writes batch, the Data held for non-masters, in order per
// replica: over a socket the small ones to one replica in one write
// (SendNowBatch), the rest, and a batch the transport declines, by
// sendDirect. It clears the entries it wrote.
func (r *replicated) writeLazy(batch []directData) {
	t := r.sess.tcpTr
	if t == nil || len(batch) < 2 {
		for i := range batch {
			r.sendDirect(batch[i].to, &batch[i].m)
			batch[i] = directData{}
		}
		return
	}
	b := &r.lazy.batch
	epoch := r.sess.epoch.Load()
	for first := 0; first < len(batch); {
		to := batch[first].to
		if to == core.None {
			first++
			continue
		}
		// The small Data to `to` up to its first large one (which must
		// follow them), then that one; or up to batchMaxBytes, the rest
		// in a later pass.
		b.idx, b.heads, b.ends = b.idx[:0], b.heads[:0], b.ends[:0]
		large, bytes := -1, 0
		for i := first; i < len(batch); i++ {
			if batch[i].to != to {
				continue
			}
			if len(batch[i].m.Payload) >= batchBodyMax {
				large = i
				break
			}
			if bytes += len(batch[i].m.Payload); len(b.idx) > 0 && bytes > batchMaxBytes {
				break // the rest in the next write
			}
			b.idx = append(b.idx, i)
			b.heads = batch[i].m.AppendHeader(b.heads)
			b.ends = append(b.ends, len(b.heads))
		}
		if len(b.idx) >= 2 {
			b.frames, b.bodies = b.frames[:0], b.bodies[:0]
			start := 0
			for k, i := range b.idx {
				b.frames = append(b.frames, wire.Frame{Kind: replica.KindData, Epoch: epoch, Payload: b.heads[start:b.ends[k]]})
				b.bodies = append(b.bodies, batch[i].m.Payload)
				start = b.ends[k]
			}
			sent := t.SendNowBatch(to, b.frames, b.bodies)
			clear(b.frames)
			clear(b.bodies)
			if sent {
				r.batched.Add(uint64(len(b.idx)))
				for _, i := range b.idx {
					batch[i] = directData{to: core.None}
				}
			}
		}
		for _, i := range b.idx {
			if batch[i].to != core.None {
				r.sendDirect(batch[i].to, &batch[i].m)
				batch[i] = directData{to: core.None}
			}
		}
		if large >= 0 {
			r.sendDirect(batch[large].to, &batch[large].m)
			batch[large] = directData{to: core.None}
		}
	}
	clear(batch)
}
