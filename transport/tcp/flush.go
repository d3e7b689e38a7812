package tcp

import (
	"context"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
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
	var tick *time.Ticker
	for len(wait) > 0 {
		rest := wait[:0]
		for _, w := range wait {
			if !t.flushing(&w) {
				continue
			}
			rest = append(rest, w)
		}
		wait = rest
		if len(wait) == 0 {
			break
		}
		if tick == nil {
			tick = time.NewTicker(flushPoll)
			defer tick.Stop()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.closing:
			return transport.ErrClosed
		}
	}
	return nil
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
