package tcp

import (
	"errors"
	mrand "math/rand/v2"
	"net"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// manage is the writer goroutine of peer p: it waits for frames, dials when
// there is no connection, and drains the queue into the connection.
func (t *Transport) manage(p *peer) {
	defer t.wg.Done()
	var pending *wire.Frame // taken from the queue, not yet written
	for {
		if t.isClosing() || isClosed(p.removed) {
			return // writeLoop would return at once, with c still in place
		}
		t.mu.Lock()
		c, kept := p.cur, p.kept
		// senders first: once it reads 0, every Send that took the queues
		// has put its frame in (the push precedes the decrement) and no
		// other can take them while we hold t.mu, so the lengths below
		// are final. (Read after them, a Send could push and leave between
		// the two reads.)
		// An acknowledgement due holds the writer only while the pair is
		// relayed, when a relay carries it: without a connection or a
		// relay it has nowhere to go, and the next connection's resume
		// carries the count (an ack timer that fires as an idle
		// connection retires would otherwise keep the writer for good).
		relayed := p.routeDownLocked() || p.rl.in.Load()
		if c == nil && pending == nil && !kept && p.senders.Load() == 0 && len(p.q) == 0 && len(p.hq) == 0 && p.log.empty() &&
			!(relayed && p.rs.due.Load()) && !p.rl.ackWanted.Load() {
			// Nothing to write and no connection: end, releasing the
			// queues; the next Send starts a writer again.
			p.active = false
			if len(t.spareQueues) < maxSpareQueues {
				t.spareQueues = append(t.spareQueues, peerQueues{p.q, p.hq})
			}
			p.q, p.hq = nil, nil
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
		if c != nil && c.stopped() {
			// c is closed but its reader has not cleared it yet (connDied
			// does, and signals), or the transport is closing: writeLoop
			// would return at once, and calling it again and again
			// would spin. Wait for the change instead.
			if !t.pause(p, nil) {
				return
			}
			continue
		}
		if c == nil && t.relayWanted(p) {
			// The direct link is down and a relay reaches p (relay.go).
			pending = t.relayLoop(p, pending)
			continue
		}
		if c == nil {
			if pending == nil {
				// Nothing to write: wait for a frame. A kept peer is
				// dialled without one, at once when it is new, after the
				// first back-off when its last connection died or its
				// last dial failed: a peer that has just crashed is
				// typically a kept one (a tree neighbour), and dialling
				// it in the first milliseconds after its crash takes
				// the processor from the view change that excludes it.
				// Frames the peer has not acknowledged are held as a
				// queued one is: they go out on the next connection.
				holding := !p.log.empty()
				wait := !kept && !holding
				var backoff *time.Timer
				if kept || holding {
					t.mu.Lock()
					unreachable := p.unreachable
					t.mu.Unlock()
					if unreachable {
						backoff = time.NewTimer(t.backoff(0))
						wait = true
					}
				}
				if wait && !t.waitFrame(p, &pending, backoff) {
					continue
				}
			}
			if c = t.connect(p, pending != nil || !p.log.empty()); c == nil {
				// Closed, removed, or nothing left to dial for: the
				// top of the loop ends the writer.
				continue
			}
		}
		t.reportDirect(p)
		pending = t.writeLoop(p, c, pending)
	}
}

// waitFrame waits for a frame of p's queues, which it puts in *pending,
// or for backoff (if not nil) to fire, which it then stops; it returns
// false if p's wake signal came first, or the transport closes, or p is
// removed (the caller's loop then sees why).
func (t *Transport) waitFrame(p *peer, pending **wire.Frame, backoff *time.Timer) bool {
	var fired <-chan time.Time
	if backoff != nil {
		fired = backoff.C
		defer backoff.Stop()
	}
	select {
	case x := <-p.hq:
		*pending = t.unwritten(p, x, false)
	case x := <-p.q:
		*pending = t.unwritten(p, x, false)
	case <-fired:
	case <-p.wake:
		return false
	case <-p.removed:
		return false
	case <-t.closing:
		return false
	}
	return true
}

// connect returns a connection to p: the one in use, one accepted
// meanwhile, or one it dials, retrying with back-off. It returns nil when
// the transport closes or p is removed, and, after a failed dial, when
// there is nothing to dial for any more: the caller holds no frame
// (holding is false), none is queued and p is not kept. A peer that is
// gone for good (a crashed node a view has excluded) is then no longer
// dialled for ever, every BackoffMax, by every writer that once had a
// connection to it; the next Send starts a writer that dials again.
func (t *Transport) connect(p *peer, holding bool) *conn {
	refusals := 0
	for attempt := 0; ; {
		t.mu.Lock()
		if t.closed || t.peers[p.id] != p {
			t.mu.Unlock()
			return nil
		}
		if c := p.cur; c != nil {
			t.mu.Unlock()
			return c
		}
		addr := p.addr
		if p.inbound > 0 || addr == "" || p.dialOutOnly {
			// An inbound handshake will give us a connection, or we wait
			// for an address, or for a peer that cannot be dialled to
			// dial us (meanwhile its frames may go through a relay).
			t.mu.Unlock()
			if (holding || !p.log.empty()) && t.relayWanted(p) {
				return nil
			}
			if !t.pause(p, nil) {
				return nil
			}
			continue
		}
		p.dialing = true
		t.mu.Unlock()

		_, err := t.dial(p, addr)

		t.mu.Lock()
		p.dialing = false
		settled := p.cur != nil || p.inbound > 0
		t.mu.Unlock()
		if err == nil || settled || t.isClosing() {
			continue // the loop returns the connection now in use
		}
		if errors.Is(err, errRefusedAfterProof) && refusals < maxQuietRefusals {
			// The peer's own dial to us wins the tie-break: its
			// connection is on its way (install wakes us). Not a failure,
			// unless it keeps happening.
			refusals++
			tm := time.NewTimer(t.backoff(refusals))
			ok := t.pause(p, tm.C)
			tm.Stop()
			if !ok {
				return nil
			}
			continue
		}
		refusals = 0
		// After the hint: whoever sees the peer unreachable (Flush) may
		// count on the detector having heard of it.
		t.dialFailed(p, addr, err)
		if t.relayWanted(p) {
			return nil // relayLoop relays and redials
		}
		tm := time.NewTimer(t.backoff(attempt))
		attempt++
		if !t.pause(p, tm.C) {
			tm.Stop()
			return nil
		}
		tm.Stop()
		t.mu.Lock()
		idle := !holding && !p.kept && p.cur == nil && len(p.q) == 0 && len(p.hq) == 0 && p.log.empty()
		t.mu.Unlock()
		if idle {
			return nil
		}
	}
}

// maxQuietRefusals is how many dials in a row the peer may close after its
// hello (the tie-break) before connect reports them as failures: a peer
// whose winning connection to us is in fact gone keeps refusing until it
// notices (see the package doc's limits).
const maxQuietRefusals = 3

// pause waits for p's wake signal or for timer (if not nil); it returns
// false if the transport closes or p is removed.
func (t *Transport) pause(p *peer, timer <-chan time.Time) bool {
	select {
	case <-p.wake:
	case <-timer:
	case <-p.removed:
		return false
	case <-t.closing:
		return false
	}
	return true
}

// backoff returns the wait after the attempt-th consecutive failed dial: a
// random duration in [d/2, d), d = min(BackoffMax, BackoffMin·2^attempt).
func (t *Transport) backoff(attempt int) time.Duration {
	d := t.cfg.BackoffMin
	for i := 0; i < attempt && d < t.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, t.cfg.BackoffMax)
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)))
}

// vecConn is a connection as its writer's FrameWriter sees it: a
// wire.VectorWriter, whose vectored write is one writev on a socket (one
// write after the other on a connection of another kind), so that a
// relayed frame's header and payload leave together (queued.write).
type vecConn struct {
	net.Conn
	arr  [2][]byte
	bufs net.Buffers
}

// WriteVectored writes a, then b.
func (v *vecConn) WriteVectored(a, b []byte) (int, error) {
	v.arr = [2][]byte{a, b}
	v.bufs = v.arr[:]
	n, err := v.bufs.WriteTo(v.Conn)
	v.arr, v.bufs = [2][]byte{}, nil // do not keep the caller's buffers
	return int(n), err
}

// frameRef returns a pointer to a copy of f (only this call allocates).
func frameRef(f wire.Frame) *wire.Frame { return &f }

// unwritten returns x, taken from p's queue and not written, as a frame
// for the writer to hold (manage's pending). A relayed frame in pieces
// (queued.body) cannot be held as one frame: it is dropped, counted as
// written, and its origin resends it from its log, as it does for a
// relayed frame lost with a hop's connection. held: the caller holds
// p.wmu.
func (t *Transport) unwritten(p *peer, x queued, held bool) *wire.Frame {
	if x.body == nil {
		return frameRef(x.f)
	}
	if !held {
		p.wmu.Lock()
		defer p.wmu.Unlock()
	}
	p.written++
	t.stats.relayDropped.Add(1)
	putCopyBuf(x.buf)
	return nil
}

// writeLoop drains p's queue into c through a coalescing buffer, flushing
// whenever the queue is empty, until c dies, p is removed or the transport
// closes. pending, if not nil, is written first. A frame taken from the
// queue after c is known to be dead is not written but returned, so that it
// goes out on the next connection; frames handed to a connection that then
// breaks are in p's log, and the next connection begins with them
// (resend.go). The writer holds p.wmu
// from the first frame it takes until the queue is empty and its buffer
// flushed, so that SendDirect never writes between queued frames.
func (t *Transport) writeLoop(p *peer, c *conn, pending *wire.Frame) (unwritten *wire.Frame) {
	t.writerRuns.Add(1)
	fw := wire.NewFrameWriter(&vecConn{Conn: c.nc}, t.cfg.WriteBufferSize)
	fw.SetMaxFrameSize(t.streamMax())
	// write writes f, which keep has put in p's log.
	write := func(x *queued) bool {
		c.markActive()
		p.written++ // written or lost with c: either way no longer queued
		if err := x.write(fw); err != nil {
			c.writeFailed(err)
			return false
		}
		t.stats.framesOut.Add(1)
		return true
	}
	p.wmu.Lock()
	if p.restConn != nil && p.restConn != c {
		// The rest of a frame SendNow wrote to an earlier connection,
		// retired since (and read to its end) or dead.
		t.writeRest(p)
	}
	if !c.resumed.Load() {
		if err := t.resume(fw, p, c); err != nil {
			c.writeFailed(err)
			p.wmu.Unlock()
			return pending
		}
	}
	rest := len(p.rest) > 0
	if pending == nil && !rest {
		// Frames lost with the previous connection count as written.
		p.flushed.Store(p.written)
	}
	p.wmu.Unlock()
	// next is a frame to write (have); a value, not a pointer, so that a
	// frame taken from the queue is not moved to the heap.
	var next queued
	have := pending != nil
	if have {
		next.f = *pending
	}
	for {
		if !have && !rest {
			select {
			case next = <-p.hq:
				have = true
			case next = <-p.q:
				have = true
			case <-p.kick: // SendNow left the rest of a frame
			case <-c.dead:
				return nil
			case <-c.retiring:
				return nil
			case <-p.removed:
				return nil
			case <-t.closing:
				return nil
			}
		}
		rest = false
		p.wmu.Lock()
		if c.stopped() {
			t.writeRest(p) // a retired c is read to its end
			if !have {
				p.wmu.Unlock()
				return nil
			}
			f := t.unwritten(p, next, true)
			p.wmu.Unlock()
			return f
		}
		// What SendNow left goes first, before the buffer's frames.
		ok := t.writeRest(p)
		if ok && have {
			if !t.keep(fw, p, c, &next.f) {
				p.wmu.Unlock()
				return frameRef(next.f) // not relayed: keep takes those
			}
			ok = write(&next)
			putCopyBuf(next.buf) // written into fw's buffer and the log, or lost with c
		}
		next = queued{}
		have = false
		for ok {
			f, more := p.take()
			if !more {
				break
			}
			if c.stopped() {
				// Retired by the peer's goodbye meanwhile (a dead c fails
				// the flush): what is buffered still goes out on c, f on
				// the next connection.
				if fw.Buffered() > 0 && fw.Flush() != nil {
					c.writeFailed(fw.Err())
				}
				u := t.unwritten(p, f, true)
				p.flushed.Store(p.written)
				p.wmu.Unlock()
				return u
			}
			if !t.keep(fw, p, c, &f.f) {
				p.wmu.Unlock()
				return frameRef(f.f) // not relayed: keep takes those
			}
			ok = write(&f)
			putCopyBuf(f.buf)
		}
		if ok {
			if err := t.appendAck(fw, p, c); err != nil {
				c.writeFailed(err)
				ok = false
			}
		}
		if ok && fw.Buffered() > 0 {
			if err := fw.Flush(); err != nil {
				c.writeFailed(err)
				ok = false
			}
		}
		if ok {
			p.flushed.Store(p.written)
		}
		p.wmu.Unlock()
		if !ok {
			return nil
		}
	}
}
