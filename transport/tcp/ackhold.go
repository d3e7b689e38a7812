package tcp

import (
	"sync"

	"github.com/cohort-mp/cohort/core"
)

// Held acknowledgements. A frame of ackBytes or more is acknowledged as
// soon as it is delivered, with a frame of its own, so that a sender that
// lent its body (TryLendDirect) gets it back about one small frame's trip
// later. A collective whose steps are lent needs most of them back only
// at its end, where every rank reclaims its steps, and every step a rank
// receives from a peer comes before that end: one acknowledgement per
// peer there (the count is cumulative) spares a frame, and a wake-up of
// the peer's reader, per step.
//
// So while a caller holds them (HoldAcks), the acknowledgements asked for
// at once are held instead, and ReleaseAcks writes them. A caller about
// to wait for a peer's acknowledgement first writes the one it holds for
// that peer (ReleaseAcks names it): the peer may be holding ours until it
// reaches the same point. A held acknowledgement keeps the timer of one
// that waits for ackDelay (recvStream.armAck), so a hold that no release
// ends costs its peer that delay, never a hang; and one is asked for at
// once, held or not, when the bytes not acknowledged reach a quarter of
// Config.ResendBuffer (or the frames ackFrames), so that a sender with
// the same buffer does not wait for room in its log on a hold.

// ackHold is the transport's held acknowledgements.
type ackHold struct {
	// mu orders a delivery's look at holders and its entry in held with
	// ReleaseAcks's decrement and collection: an acknowledgement is either
	// held before the collection, which writes it, or asked for at once.
	mu      sync.Mutex
	holders int
	held    []heldAck // distinct streams; its array is reused
}

// heldAck is a stream whose acknowledgement is held.
type heldAck struct {
	p *peer
	r *recvStream
}

// HoldAcks makes the transport hold, until ReleaseAcks ends the hold,
// the acknowledgements it would write at once on delivering a frame of
// LendMin bytes or more (see TryLendDirect); one is still written within
// ackDelay if no release comes first. A collective whose ranks lend their
// steps holds them from each lent step to its reclaim at the call's end.
// Holds nest: the acknowledgements held are written when the last ends,
// and the one for a peer a release names at that release.
func (t *Transport) HoldAcks() {
	t.acks.mu.Lock()
	t.acks.holders++
	t.acks.mu.Unlock()
}

// ReleaseAcks ends a hold HoldAcks began and writes, on the calling
// goroutine where the connection is free (else the peer's writer writes
// it), the acknowledgement held for peer to (core.None: none): a caller
// about to wait for to's acknowledgement of its own lent frame writes
// to's first, since to may hold ours until it does the same. When the
// last hold ends, every acknowledgement held is written, one per peer.
// It panics without a hold to end.
func (t *Transport) ReleaseAcks(to core.NodeID) {
	if to != core.None {
		if p, _ := t.current(to); p != nil {
			// A frame of to's that woke the caller (a collective's last
			// step) is counted delivered after its handler has it, under
			// the pair's delivery lock: once through it, the
			// acknowledgement below covers that frame too, and none is
			// left held for the last release to write.
			p.lockDelivery().Unlock()
		}
	}
	a := &t.acks
	a.mu.Lock()
	if a.holders--; a.holders < 0 {
		a.mu.Unlock()
		panic("tcp: ReleaseAcks without HoldAcks")
	}
	// Few streams (a collective's partners): each written on its own,
	// taken out under the lock, so that held keeps its array.
	for i := 0; i < len(a.held); {
		h := a.held[i]
		if a.holders > 0 && h.p.id != to {
			i++
			continue
		}
		last := len(a.held) - 1
		a.held[i], a.held[last], a.held = a.held[last], heldAck{}, a.held[:last]
		a.mu.Unlock()
		if h.r.unacked() {
			t.ackNow(h.p, h.r)
		}
		a.mu.Lock()
	}
	a.mu.Unlock()
}

// holdAck holds the acknowledgement of p's stream r, asked for at once,
// and reports true; or it reports false when no caller holds them, or
// when frames and bytes, what r has delivered and not acknowledged,
// reach ackFrames or the bound above.
func (t *Transport) holdAck(p *peer, r *recvStream, frames, bytes uint64) bool {
	if frames >= ackFrames || bytes >= uint64(t.cfg.ResendBuffer/4) {
		return false
	}
	a := &t.acks
	a.mu.Lock()
	if a.holders == 0 {
		a.mu.Unlock()
		return false
	}
	found := false
	for _, h := range a.held {
		if h.r == r {
			found = true
			break
		}
	}
	if !found {
		a.held = append(a.held, heldAck{p, r})
	}
	a.mu.Unlock()
	r.armAck()
	return true
}
