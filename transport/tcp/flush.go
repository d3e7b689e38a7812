package tcp

import (
	"context"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
)

// flushPoll is how often Flush looks at the writers again.
const flushPoll = time.Millisecond

// Flush waits until every frame that Send accepted before the call has been
// written to its connection (handed to the kernel; on loopback that is the
// peer's receive buffer), or cannot be: frames to a peer that is
// unreachable — its last dial failed or its connection died, and none is in
// use since — are lost anyway (see the package doc), so Flush does not wait
// for them. It returns ctx's error if ctx ends first, ErrClosed after Close.
//
// A process calls Flush before it closes the transport on purpose, so that
// its last messages are not dropped with the queues (comm.Session.Finalize
// does).
func (t *Transport) Flush(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return transport.ErrClosed
	}
	type target struct {
		p *peer
		n uint64
	}
	var wait []target
	for _, p := range t.peers {
		if n := p.accepted.Load(); p.flushed.Load() < n {
			wait = append(wait, target{p, n})
		}
	}
	t.mu.Unlock()
	var tick *time.Ticker
	for len(wait) > 0 {
		rest := wait[:0]
		for _, w := range wait {
			if w.p.flushed.Load() >= w.n || t.unreachable(w.p.id) {
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

// unreachable reports whether id has no connection in use and its last
// dial failed or its last connection died.
func (t *Transport) unreachable(id core.NodeID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	return p == nil || (p.cur == nil && p.unreachable)
}
