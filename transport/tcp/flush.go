package tcp

import (
	"context"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/internal/poll"
)

// flushPoll is how often Flush looks at the writers and the
// acknowledgements again.
const flushPoll = time.Millisecond

// Flush waits until every frame that Send accepted before the call, and
// every frame written before it, has been delivered to its peer's handler
// (the peer acknowledged it, see "A pair's stream" in the package doc), or
// cannot be: frames to a peer that is unreachable — its last dial failed
// or its connection died, and none is in use since — are lost anyway (see
// the package doc), so Flush does not wait for them. Frames to a peer
// whose direct link is down and that a relay reaches (see "Relaying" in
// the package doc) are acknowledged end to end through the relay; when no
// relay reaches the peer any more and no connection to it is in use, the
// frames are kept for a later path, and Flush does not wait for them, as
// for an unreachable peer. It returns ctx's error if ctx ends first,
// ErrClosed after Close.
//
// Written is not enough: a frame handed to the kernel may still sit in
// the socket's send queue, and a process that closes a TCP socket with
// unread input in it makes the kernel reset the connection and drop that
// queue; its peer never sees the frame. The peer acknowledges within
// ackDelay, sooner if it sends anything.
//
// A process that relays for others is, to them, part of the network:
// Flush waits while it has carried frames between two peers lately
// (relayDutyWindow) and both still reach it, so that the last messages of a job (a result, the answers to it) between
// two processes a partial partition separates are not cut off by the
// processes between them finishing first.
//
// A process calls Flush before it closes the transport on purpose, so that
// its last messages are not dropped with the queues (comm.Session.Finalize
// does).
func (t *Transport) Flush(ctx context.Context) error { return t.flush(ctx, true) }

// flush is Flush; without delivered it waits, for a peer with a
// connection in use, only until the frames are written.
func (t *Transport) flush(ctx context.Context, delivered bool) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return transport.ErrClosed
	}
	var wait []flushTarget
	for _, p := range t.peers {
		if n := p.accepted.Load(); p.flushed.Load() < n || (delivered || p.cur == nil) && !p.log.empty() {
			wait = append(wait, flushTarget{p: p, n: n, delivered: delivered})
		}
	}
	t.mu.Unlock()
	err := poll.Until(ctx, t.closing, transport.ErrClosed, flushPoll, func() bool {
		rest := wait[:0]
		for _, w := range wait {
			if t.flushing(&w) { // may set w's mark: keep the copy
				rest = append(rest, w)
			}
		}
		wait = rest
		return len(wait) == 0
	})
	if err != nil {
		return err
	}
	return t.flushRelayed(ctx)
}

// relayDutyWindow is how recently this node must have forwarded a frame
// between two peers for Flush to wait for one of them to leave.
const relayDutyWindow = 5 * time.Second

// noteDuty records that this node forwarded a frame from origin to final.
// t.mu is held.
func (t *Transport) noteDutyLocked(origin, final core.NodeID, now time.Time) {
	if t.rt.duty == nil {
		t.rt.duty = map[[2]core.NodeID]time.Time{}
	}
	t.rt.duty[[2]core.NodeID{origin, final}] = now
}

// flushRelayed is Flush's wait for the pairs this node relays (see
// Flush); the relayed peers' own acknowledgements are flushing's.
func (t *Transport) flushRelayed(ctx context.Context) error {
	return poll.Until(ctx, t.closing, transport.ErrClosed, 10*flushPoll, func() bool { return !t.relaying(time.Now()) })
}

// relaying reports whether this node forwarded frames between two peers
// within relayDutyWindow of now and has a connection to both still; it
// forgets the pairs for which that no longer holds.
func (t *Transport) relaying(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A peer that finished closed its connections to us: one with none
	// in use is taken to have left.
	reaches := func(id core.NodeID) bool {
		p := t.peers[id]
		return p != nil && p.cur != nil
	}
	busy := false
	for pair, at := range t.rt.duty {
		if now.Sub(at) > relayDutyWindow || !reaches(pair[0]) || !reaches(pair[1]) {
			delete(t.rt.duty, pair)
			continue
		}
		busy = true
	}
	return busy
}

// flushTarget is a peer Flush waits for: until n frames accepted are
// flushed and until the peer acknowledged the frames numbered up to mark.
type flushTarget struct {
	p         *peer
	n         uint64
	delivered bool // wait for the acknowledgement over a connection too
	marked    bool
	mark      logMark
}

// flushing reports whether Flush must still wait for w.
func (t *Transport) flushing(w *flushTarget) bool {
	p := w.p
	select {
	case <-p.removed:
		// RemovePeer dropped its frames; a peer added back since is a
		// new one, with only frames sent after this Flush began.
		return false
	default:
	}
	if c := p.live.Load(); c != nil {
		// A connection is in use: the frames a relay had not got
		// acknowledged are written to it first (its resume), and
		// flushed counts them; then the peer acknowledges them.
		if p.flushed.Load() < w.n {
			return true
		}
		if !w.delivered {
			return false
		}
		if !w.marked {
			w.mark, w.marked = p.log.mark(), true
		}
		return !p.log.acked(w.mark)
	}
	if !t.reachable(p) {
		return false // lost anyway, or kept for a later path
	}
	if p.flushed.Load() < w.n {
		return true
	}
	// Every frame accepted is numbered and kept in the log, which holds
	// it until the peer acknowledges it. Without a connection the peer
	// gets the frames through a relay: wait for its acknowledgement of
	// the last one numbered now.
	if !w.marked {
		w.mark, w.marked = p.log.mark(), true
	}
	return !p.log.acked(w.mark)
}

// reachable reports whether p has a connection in use or a relay that
// reaches it, or, with neither, its direct link is not known down (its
// writer dials it).
func (t *Transport) reachable(p *peer) bool {
	t.mu.Lock()
	direct := p.cur != nil || !p.unreachable && !p.dialOutOnly
	t.mu.Unlock()
	return direct || !t.cfg.NoRelay && t.chooseRelay(p, core.None, false) != nil
}
