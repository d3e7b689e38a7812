package tcp

import (
	"net"
	"syscall"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Writing on the caller's goroutine without waiting (SendNow). A frame
// handed to Send goes through the peer's queue to its writer goroutine:
// one wake-up of that goroutine per frame that finds the writer idle,
// which is every frame of a protocol that sends one message per peer and
// event (a membership's proposal down its tree, the acknowledgements
// up). SendNow writes such a frame with one non-blocking system call
// instead, when nothing is queued before it. The socket may take only
// part of it (its buffer is nearly full): the rest is kept (peer.rest,
// for that connection only) and the writer, woken by peer.kick, writes
// it before anything else; frames sent meanwhile are queued behind it.
// If the socket takes nothing, SendNow reports false and the caller
// queues the frame with Send (on a connection in records, whose record
// is sealed by then, it keeps the whole record as the rest instead).

// SendNow writes f to node to on the calling goroutine, without ever
// waiting, if the peer has a connection in use over a plain socket (TCP
// or the same-host Unix socket, in records or not; not TLS, not shared
// memory) and nothing of it is queued or being written; the frame is then delivered as a
// frame queued by Send would be (if the connection breaks before it is
// delivered, the next resends it). It reports whether it took the frame;
// when it did not, nothing was written and the caller sends it with Send
// (which reports the errors). Frames sent to one peer with SendNow and Send
// keep their order.
func (t *Transport) SendNow(to core.NodeID, f wire.Frame) bool {
	return t.sendNow(to, f, true)
}

// sendNow is SendNow; logged false leaves the frame out of the peer's
// stream (a relayed frame a relay forwards, which its origin's stream
// counts and keeps).
func (t *Transport) sendNow(to core.NodeID, f wire.Frame, logged bool) bool {
	if to == t.self || f.Kind.Proto() == core.ProtoFD {
		// The detector's frames have their own lane (peer.hq), which
		// the writer drains first: they are left to it.
		return false
	}
	f.Src, f.Dst = t.self, to
	if wire.EncodedSize(f)-wire.LengthSize > t.cfg.MaxFrameSize {
		return false // Send reports the size
	}
	p, c := t.lockNow(to)
	if c == nil {
		return false
	}
	p.now = wire.AppendFrame(p.now[:0], f)
	if logged && !p.log.add(c.peerStream, true, p.now) {
		p.wmu.Unlock()
		return false // no room in the log: Send waits for it
	}
	out, n, errno := c.writeFrameNow(p.now)
	if errno == syscall.EAGAIN || errno == syscall.EINTR {
		if logged {
			p.log.dropLast(c.peerStream)
		}
		p.wmu.Unlock()
		return false
	}
	if errno != 0 {
		// Nothing written: c is broken. Send queues the frame for the
		// next connection.
		if logged {
			p.log.dropLast(c.peerStream)
		}
		p.wmu.Unlock()
		c.writeFailed(&net.OpError{Op: "write", Net: c.nc.LocalAddr().Network(), Addr: c.nc.RemoteAddr(), Err: errno})
		return false
	}
	t.wroteNow(p, c, out, n, 1)
	return true
}

// lockNow returns the peer to and its connection with the peer's wmu
// held, if a frame may be written now on the calling goroutine: the
// connection is up, nothing of the peer's is queued or left to finish,
// and nobody is writing; else a nil connection, the lock not held.
func (t *Transport) lockNow(to core.NodeID) (*peer, *conn) {
	p, c := t.current(to)
	if c == nil || c.raw == nil || !p.wmu.TryLock() {
		return nil, nil
	}
	if p.flushed.Load() != p.accepted.Load() || len(p.rest) > 0 || c.stopped() || !c.resumed.Load() {
		p.wmu.Unlock()
		return nil, nil
	}
	return p, c
}

// wroteNow records that a non-blocking write of frames frames took n
// bytes of out on c: the frames are accepted, and what the socket did not
// take is the peer's rest, which its writer finishes first. It releases
// p.wmu, held by the caller.
func (t *Transport) wroteNow(p *peer, c *conn, out []byte, n, frames int) {
	p.accepted.Add(uint64(frames))
	p.written += uint64(frames)
	kick := n < len(out)
	if kick {
		p.rest, p.restConn = append(p.rest[:0], out[n:]...), c
		p.restPending.Store(true)
		t.nowPartial.Add(1)
	} else {
		p.flushed.Store(p.written)
	}
	c.markActive()
	t.stats.now.Add(uint64(frames)) // counted in FramesOut too (Stats)
	p.wmu.Unlock()
	if kick {
		t.kickRest(p)
	}
}

// writeNow writes b to c's socket with one non-blocking write(2); errno
// is 0 on success (n may be short of len(b)), EAGAIN if the socket took
// nothing, another error if it is broken (nothing written). The caller
// holds c's peer's wmu.
func (c *conn) writeNow(b []byte) (n int, errno syscall.Errno) {
	w := &c.owner.nowW
	if w.fn == nil {
		w.fn = w.writeFD
	}
	w.b, w.n, w.errno = b, 0, syscall.EAGAIN
	err := c.raw.Write(w.fn)
	n, errno = w.n, w.errno
	w.b = nil // do not keep the caller's buffer
	if err != nil {
		return 0, syscall.EBADF // closed meanwhile
	}
	return n, errno
}

// nowWriter is a peer's writeNow state, under its wmu. Its write
// function is a method value made once: a closure per write, handed to
// RawConn.Write, would be allocated with the results it sets, twice or
// three times per frame, on every write of a relayed frame (forwarded
// or relayed on the sender's goroutine) and of an inline
// acknowledgement.
type nowWriter struct {
	fn    func(fd uintptr) bool // writeFD
	b     []byte
	n     int
	errno syscall.Errno
}

// writeFD writes w.b to fd once, never waiting for fd to become
// writable.
func (w *nowWriter) writeFD(fd uintptr) bool {
	w.n, w.errno = rawWrite(fd, w.b)
	return true
}

// writeRest writes what SendNow left of a frame to the connection it
// began on, restConn, before anything else is written to it or its
// writing side is shut (even retired, it is read to its end); the caller
// holds p.wmu and may wait. It reports false if that connection failed.
// On a connection closed meanwhile the frame is resent from the log, as
// queued frames written to it are.
func (t *Transport) writeRest(p *peer) bool {
	if len(p.rest) == 0 {
		return true
	}
	rest, rc := p.rest, p.restConn
	p.rest, p.restConn = p.rest[:0], nil
	if cap(rest) > restKeepMax {
		p.rest = nil // a direct write's large rest (directctx.go): not kept for the next
	}
	p.restPending.Store(false)
	if rc.isDead() {
		return true
	}
	if err := rc.writeRaw(rest); err != nil {
		rc.writeFailed(err)
		return false
	}
	return true
}

// SendNowBatch is SendNow of several frames to node to in one write: the
// frame of fs[i] has for payload fs[i].Payload followed by bodies[i] (nil
// for none). They are written, in order, as one record on a connection in
// records, with one system call that never waits, where SendNow would
// write each with its own: a sender that holds frames back to write them
// together (comm's data for a rank's replicas that are not its master)
// pays one write for them, and its peer one read. It reports whether it
// took them all; when it did not, nothing was written, and the caller
// sends them another way, in the same order. It declines where SendNow
// does, and a batch of more than Config.WriteBufferSize bytes (the
// largest record a writer's flush makes). It keeps neither fs nor
// bodies; it may set the frames' Src and Dst.
func (t *Transport) SendNowBatch(to core.NodeID, fs []wire.Frame, bodies [][]byte) bool {
	if to == t.self || len(fs) == 0 || len(bodies) != len(fs) {
		return false
	}
	size := 0
	for i := range fs {
		if fs[i].Kind.Proto() == core.ProtoFD {
			return false // the detector's lane (SendNow)
		}
		fs[i].Src, fs[i].Dst = t.self, to
		n := wire.EncodedSize(fs[i]) + len(bodies[i])
		if n-wire.LengthSize > t.cfg.MaxFrameSize {
			return false
		}
		size += n
	}
	if size > t.cfg.WriteBufferSize {
		return false
	}
	p, c := t.lockNow(to)
	if c == nil {
		return false
	}
	p.now = p.now[:0]
	for i := range fs {
		start := len(p.now)
		p.now = append(fs[i].AppendHead(p.now, len(bodies[i])), bodies[i]...)
		if !p.log.add(c.peerStream, true, p.now[start:]) {
			for range i {
				p.log.dropLast(c.peerStream)
			}
			p.wmu.Unlock()
			return false // no room in the log: Send waits for it
		}
	}
	out, n, errno := c.writeFrameNow(p.now)
	if errno != 0 {
		// Nothing written: the socket is full (EAGAIN), or c is broken
		// and the caller's Send queues the frames for the next one.
		for range fs {
			p.log.dropLast(c.peerStream)
		}
		p.wmu.Unlock()
		if errno != syscall.EAGAIN && errno != syscall.EINTR {
			c.writeFailed(&net.OpError{Op: "write", Net: c.nc.LocalAddr().Network(), Addr: c.nc.RemoteAddr(), Err: errno})
		}
		return false
	}
	t.wroteNow(p, c, out, n, len(fs))
	return true
}
