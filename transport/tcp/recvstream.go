package tcp

import (
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/transport/hotsync"
	"github.com/cohort-mp/cohort/wire"
)

// The receiving side of a pair's stream (resend.go): what a receiver
// counts of the frames it delivers, and how it acknowledges them — on
// traffic the other way, inline on the connection it read them from, or
// with a frame of its own after ackDelay.

// recvStream counts the frames of a peer's stream delivered to the
// handler. recvd and bytes are written by the one goroutine that delivers
// the peer's frames at a time (a reader, or a caller's progress under the
// connection's rd: connections of a peer are read one after the other).
type recvStream struct {
	stream uint64
	recvd  atomic.Uint64 // counted frames delivered
	bytes  atomic.Uint64 // their encoded bytes (an approximation: the body)
	// ackedN and ackedBytes are recvd and bytes as last acknowledged (the
	// writer's, under the peer's wmu).
	ackedN, ackedBytes atomic.Uint64
	due                atomic.Bool // an acknowledgement is due now
	armed              atomic.Bool // timer runs
	timer              *time.Timer
}

// unacked reports whether frames were delivered since the last
// acknowledgement.
func (r *recvStream) unacked() bool { return r.recvd.Load() != r.ackedN.Load() }

// delivered counts frame seq, of size bytes, of c's stream as delivered
// and asks for an acknowledgement: at once past ackFrames or ackBytes,
// else within ackDelay.
func (t *Transport) delivered(c *conn, seq uint64, size int) {
	t.deliveredTo(c.owner, c.rs, seq, size)
}

// deliveredTo is delivered for p's stream r, whichever path the frame
// came by.
func (t *Transport) deliveredTo(p *peer, r *recvStream, seq uint64, size int) {
	t.deliveredAckAfter(p, r, seq, size, ackBytes)
}

// deliveredAckAfter is deliveredTo acknowledging at once past ackFrames or
// ackAfter bytes (a relayed frame's destination: relayAckBytes).
func (t *Transport) deliveredAckAfter(p *peer, r *recvStream, seq uint64, size int, ackAfter uint64) {
	hotsync.StoreRelease64(&r.recvd, seq)
	b := r.bytes.Load() + uint64(size)
	hotsync.StoreRelease64(&r.bytes, b)
	if r.due.Load() {
		// Asked of the writer already, which may never write it: a
		// writer that took its wake-up on a connection that had
		// stopped left it, and the next connection's writer waits for
		// frames, which a receiver may never send. The timer asks
		// again (ackNow) within ackDelay if it is still not written.
		r.armAck()
		return
	}
	if seq-r.ackedN.Load() >= ackFrames || b-r.ackedBytes.Load() >= ackAfter {
		if !t.holdAck(p, r, seq-r.ackedN.Load(), b-r.ackedBytes.Load()) {
			t.ackNow(p, r)
		}
		return
	}
	r.armAck()
}

// duplicate notes a frame of r's stream that the peer sent again after it
// was delivered. The peer resends only what its log holds, so the
// acknowledgement that covered the frame never reached it: written to a
// connection that broke under it, after the handshake of the next had
// told the peer an older count. Nothing else would tell it (r counts the
// frame as acknowledged), and it would hold the frame, and the body a
// caller lent with it, until it sent a new one; so the count is
// acknowledged again, within ackDelay as after a new frame.
func (t *Transport) duplicate(r *recvStream) {
	if n := r.recvd.Load(); n > 0 {
		// Below recvd, whatever the writer stores meanwhile: either
		// way an acknowledgement of recvd is written after this.
		r.ackedN.CompareAndSwap(n, n-1)
	}
	r.armAck()
}

// armAck starts r's acknowledgement timer, unless it runs: the count is
// acknowledged within ackDelay.
func (r *recvStream) armAck() {
	if !r.armed.Load() {
		r.armed.Store(true)
		r.timer.Reset(ackDelay)
	}
}

// newRecvStream returns peer p's stream.
func (t *Transport) newRecvStream(p *peer, stream uint64) *recvStream {
	r := &recvStream{stream: stream}
	r.timer = time.AfterFunc(time.Hour, func() {
		r.armed.Store(false)
		if r.unacked() {
			t.ackNow(p, r)
		}
	})
	r.timer.Stop()
	return r
}

// ackNow acknowledges r: on the calling goroutine when p's connection is
// a plain socket or a shared-memory ring with nothing being written to it
// (ackInline, ackInlineShm), or, p's frames relayed, when the relay's
// connection is idle (relayAckNow); else by p's writer, started if the
// peer has none (a peer we only receive from).
func (t *Transport) ackNow(p *peer, r *recvStream) {
	if c := p.live.Load(); c != nil && c.rs == r && c.shm != nil {
		if t.ackInlineShm(p, c, r) {
			return
		}
	} else if c != nil && c.rs == r && c.raw != nil {
		switch t.ackInline(p, c, r) {
		case ackWritten:
			return
		case ackPartial:
			// The writer writes the rest (p.rest), as for SendNow.
			t.wakeWriter(p)
			return
		}
	} else if c == nil && t.relayAckNow(p, r) {
		return
	}
	r.due.Store(true)
	t.wakeWriter(p)
}

// Results of ackInline.
const (
	ackNotWritten = iota
	ackWritten
	ackPartial // written in part: the rest is p.rest
)

// ackInline writes an acknowledgement of r to c with one non-blocking
// write, as SendNow writes a frame, if nothing is being written to c: no
// wake-up of the writer, whose turn a sender waiting for room in its log
// would otherwise wait for.
func (t *Transport) ackInline(p *peer, c *conn, r *recvStream) int {
	if !p.wmu.TryLock() {
		return ackNotWritten
	}
	defer p.wmu.Unlock()
	if p.flushed.Load() != p.accepted.Load() || len(p.rest) > 0 || c.stopped() {
		return ackNotWritten
	}
	// Cleared before the count is read, as in appendAck; a failed write
	// sets it again (ackNow).
	r.due.Store(false)
	n, b := r.recvd.Load(), r.bytes.Load()
	var pb [binaryMaxVarint]byte
	// Encoded into SendNow's buffer, p.now (p.wmu is held): writeFrameNow
	// keeps what it writes out of sight of escape analysis, and a frame
	// on the stack would be moved to the heap, once per acknowledgement.
	p.now = wire.AppendFrame(p.now[:0], wire.Frame{Kind: wire.KindAck, Src: t.self, Dst: p.id, Payload: wire.AppendCount(pb[:0], n)})
	frame, k, errno := c.writeFrameNow(p.now)
	if errno != 0 {
		return ackNotWritten
	}
	r.ackedN.Store(n)
	r.ackedBytes.Store(b)
	t.stats.acks.Add(1)
	c.markActive()
	if k < len(frame) {
		p.rest, p.restConn = append(p.rest[:0], frame[k:]...), c
		p.restPending.Store(true)
		return ackPartial
	}
	return ackWritten
}

// ackInlineShm writes an acknowledgement of r to c's ring, as
// writeDirectShm writes a frame, if nothing is being written to c. The
// peer then has it at its next look at the ring, where the writer
// goroutine, whose turn comes only when the caller yields, would keep the
// peer holding the frames in its log (and the log growing) meanwhile.
func (t *Transport) ackInlineShm(p *peer, c *conn, r *recvStream) bool {
	sc := c.shm
	if !tryLockShmWrite(p, sc) {
		return false
	}
	written := false
	if p.flushed.Load() == p.accepted.Load() && !p.restPending.Load() && !c.stopped() && c.resumed.Load() {
		// Cleared before the count is read, as in appendAck; a failed
		// write sets it again (ackNow).
		r.due.Store(false)
		n, b := r.recvd.Load(), r.bytes.Load()
		var pb [binaryMaxVarint]byte
		var fb [wire.LengthSize + wire.MaxHeaderSize + binaryMaxVarint]byte
		frame := wire.AppendFrame(fb[:0], wire.Frame{Kind: wire.KindAck, Src: t.self, Dst: p.id, Payload: wire.AppendCount(pb[:0], n)})
		if written = sc.writeHeadBody(frame, nil); written {
			r.ackedN.Store(n)
			r.ackedBytes.Store(b)
			t.stats.acks.Add(1)
			c.markActive()
		}
	}
	sc.wmu.Unlock()
	p.wmu.Unlock()
	return written
}

// appendAck appends to fw an acknowledgement of c's stream if one is
// due, or if frames were delivered since the last one and fw holds a
// batch anyway; the caller holds p.wmu.
func (t *Transport) appendAck(fw *wire.FrameWriter, p *peer, c *conn) error {
	r := c.rs
	if r == nil || !r.due.Load() && (fw.Buffered() == 0 || !r.unacked()) {
		return nil
	}
	// due is cleared before the count is read: a frame delivered after
	// the read asks again (deliveredAckAfter skips the asking while due
	// is set), and a due left set with nothing to acknowledge would keep
	// every later frame from asking.
	r.due.Store(false)
	if !r.unacked() {
		return nil
	}
	n, b := r.recvd.Load(), r.bytes.Load()
	// The count goes in SendNow's buffer (p.wmu is held; fw copies it):
	// one on the stack would escape through WriteFrame, once per
	// acknowledgement.
	p.now = wire.AppendCount(p.now[:0], n)
	if err := fw.WriteFrame(wire.Frame{Kind: wire.KindAck, Src: t.self, Dst: p.id, Payload: p.now}); err != nil {
		return err
	}
	r.ackedN.Store(n)
	r.ackedBytes.Store(b)
	t.stats.acks.Add(1)
	return nil
}
