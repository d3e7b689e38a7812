package tcp

import (
	"context"
	"maps"
	"unsafe"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// SendDirect sends a frame whose payload is f.Payload followed by body
// (a data message: a small header and the user's buffer). When the peer
// has a connection in use, nothing waits in its queue, no one is writing
// to it and the payload is at most Config.DirectMax bytes, the frame is
// written on the caller's goroutine with one vectored write (writev) of
// length prefix, header and payload (on a shared-memory connection, into
// its ring), without copying body and without a hand-off to the writer
// goroutine. Otherwise the payload is copied and queued as by Send.
// Either way the caller may reuse body when SendDirect returns (the
// resend log keeps a copy).
//
// A direct write returns once the kernel, or the ring, has taken the
// whole frame, which waits while the peer reads nothing, or once ctx
// ends. A frame partly written when ctx ends cannot be withdrawn (the
// stream would be torn): what is left of it is copied and handed to the
// peer's writer goroutine, which writes it before anything else, and
// SendDirect returns nil, the frame taken as one queued by Send is
// (TrySendDirectRef reports ctx's error instead). Over TLS, which cannot
// finish a frame once its write has timed out, the connection is given
// up instead, and the frame goes out again on the next; a frame whose
// context has ended before the write is queued there.
//
// A frame written to a connection that then fails is resent on the next,
// as one queued is (see the package doc); the error is returned only
// when the frame cannot be queued.
func (t *Transport) SendDirect(ctx context.Context, to core.NodeID, f wire.Frame, body []byte) error {
	if t.trySendDirect(ctx, to, f, body) {
		return nil
	}
	// Queued: the frame is copied, a small one into a pooled buffer (as
	// SendCopy's), into a frame of its own, so that neither f.Payload nor
	// body escapes (a caller may build f's header on its stack).
	q := wire.Frame{Kind: f.Kind, Src: f.Src, Dst: f.Dst, Epoch: f.Epoch}
	return t.sendCopied(ctx, to, q, f.Payload, body)
}

// TrySendDirect is SendDirect's write on the caller's goroutine alone:
// where SendDirect would copy and queue the frame, it reports false,
// having done nothing. It keeps neither f.Payload nor body. It watches no
// context: a write that finds no room waits until the peer reads
// (TrySendDirectRef watches one).
func (t *Transport) TrySendDirect(to core.NodeID, f wire.Frame, body []byte) bool {
	return t.trySendDirect(context.Background(), to, f, body)
}

// trySendDirect is TrySendDirect whose write on a plain socket watches
// ctx (nil, or one that never ends: it does not), as SendDirect's.
func (t *Transport) trySendDirect(ctx context.Context, to core.NodeID, f wire.Frame, body []byte) bool {
	if len(f.Payload)+len(body) > t.cfg.DirectMax || to == t.self {
		return false
	}
	p, c := t.current(to)
	if c == nil {
		return false
	}
	if c.shm != nil && t.writeLineShm(p, c, &f, body) {
		return true
	}
	ok, _ := t.writeDirectCtx(ctx, p, c, &f, body, nil)
	return ok
}

// LendMin is the smallest payload TryLendDirect lends: a frame of at
// least this many bytes is acknowledged as soon as it is delivered (a
// smaller one may wait for more or for ackDelay), so the lender gets its
// buffer back about one small frame's trip after the peer has it, unless
// the peer holds its acknowledgements (HoldAcks).
const LendMin = ackBytes

// TryLendDirect is TrySendDirect for a body the caller lends until the
// peer acknowledges the frame: the resend log holds body by reference
// instead of a copy of it (a large message then costs its sender one copy,
// the kernel's, instead of two). When it reports true, the transport
// calls release once it no longer needs body: when the peer acknowledges
// the frame, or the frame is dropped with the peer's stream (a restarted
// peer), the peer (RemovePeer) or the transport (Close); until then body
// must not change, since a connection that breaks resends it. release
// runs on a transport goroutine or the caller's and must not block. When
// it reports false it has done nothing and will not call release: a body
// under LendMin bytes, a shared-memory connection (whose large messages
// take the single-copy path) or any case where TrySendDirect declines.
func (t *Transport) TryLendDirect(to core.NodeID, f wire.Frame, body []byte, release func()) bool {
	ok, _ := t.TryLendDirectCtx(context.Background(), to, f, body, release)
	return ok
}

// TryLendDirectAny is TryLendDirect for a lender that can wait for its
// buffer: it lends a body of 4 KiB or more (where a frame's body is
// aligned on the stream), on a shared-memory connection too, whose log
// then holds body instead of a copy of it (the ring still copies it). A
// frame under LendMin bytes may be acknowledged only once more frames
// follow it or after a delay of up to 50 ms, and body is released then.
func (t *Transport) TryLendDirectAny(to core.NodeID, f wire.Frame, body []byte, release func()) bool {
	if len(body) < padFrom || len(f.Payload)+len(body) > t.cfg.DirectMax || to == t.self {
		return false
	}
	p, c := t.current(to)
	return c != nil && t.writeDirect(p, c, &f, body, release)
}

// current returns peer to and its connection in use (nil: none, or the
// transport is closed). It takes no lock when byID has the peer and it has
// a connection: a send on the direct path pays no transport-wide lock.
// What it returns may be replaced at once, as with a lock: writeDirect
// checks the connection under the peer's write lock (a shared-memory
// connection under its own: writeDirectShm).
func (t *Transport) current(to core.NodeID) (*peer, *conn) {
	if m := t.byID.Load(); m != nil {
		if p := (*m)[to]; p != nil {
			if c := p.live.Load(); c != nil {
				return p, c
			}
		}
	}
	return t.currentLocked(to)
}

// currentLocked is current under t.mu; it makes byID again when byID
// lacks peer to (or has a removed one) and to has a connection.
func (t *Transport) currentLocked(to core.NodeID) (*peer, *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[to]
	var c *conn
	if p != nil && !t.closed {
		c = p.cur
	}
	if c != nil {
		if m := t.byID.Load(); m == nil || (*m)[to] != p {
			byID := maps.Clone(t.peers)
			t.byID.Store(&byID)
		}
	}
	return p, c
}

// writeDirect writes f (payload f.Payload then body) to c if p's queue is
// drained and flushed and no one holds p.wmu; it reports whether it did
// (a write that fails closes c and counts as done: the frame is in p's
// log, and the next connection resends it). With release not nil, body is
// lent to p's log (TryLendDirect, TryLendDirectAny). It waits as long as
// the kernel takes no bytes: writeDirectCtx watches a context.
func (t *Transport) writeDirect(p *peer, c *conn, f *wire.Frame, body []byte, release func()) bool {
	ok, _ := t.writeDirectCtx(context.Background(), p, c, f, body, release)
	return ok
}

// writeDirectCtx is writeDirect whose write watches ctx (nil, or one
// that never ends: it does not; see directctx.go): ended reports that
// ctx ended before the kernel, or the peer's ring, took the whole frame,
// whose rest the writer goroutine then writes (p.rest, as SendNow leaves
// it), the frame counted as a queued one (accepted, written; flushed once
// the writer has written it).
func (t *Transport) writeDirectCtx(ctx context.Context, p *peer, c *conn, f *wire.Frame, body []byte, release func()) (ok, ended bool) {
	if headMax(f)+len(body) > t.cfg.MaxFrameSize {
		return false, false // let Send report the exact size
	}
	if c.shm != nil && len(f.Payload) <= shmDirectPayload {
		return t.writeDirectShm(ctx, p, c, f, body, release)
	}
	if c.raw == nil && c.shm == nil && ctx != nil && ctx.Err() != nil {
		// Over TLS a write watching an ended context would give the
		// connection up at once (writeTLSCtx): the queue takes the frame.
		return false, false
	}
	if !p.wmu.TryLock() {
		return false, false
	}
	if p.flushed.Load() != p.accepted.Load() || len(p.rest) > 0 || c.stopped() || !c.resumed.Load() {
		p.wmu.Unlock()
		return false, false
	}
	f.Src, f.Dst = t.self, p.id
	kept := false // body lent to the log, which releases it
	if release != nil {
		var ok bool
		if ok, kept = p.log.addLentFrame(c.peerStream, f, body, release); !ok {
			p.wmu.Unlock()
			return false, false
		}
	} else if !p.log.addFrame(c.peerStream, f, body, true) {
		p.wmu.Unlock()
		return false, false // no room in the log: Send waits for it
	}
	// The frame is written before SendDirect returns, under p.wmu, so it
	// is not counted in accepted and flushed (Flush has nothing to wait
	// for, and the idle sweeper holds p.wmu).
	var err error
	if rc, ok := c.nc.(*recordConn); ok {
		p.hdr = t.directHead(p.hdr, f, body, recordExtra(len(body)))
		if c.raw == nil {
			err = rc.writeVectored(p.hdr, body)
		} else {
			if ctx == nil {
				ctx = context.Background()
			}
			ended, err = t.writeRecordsCtx(ctx, p, c, rc, p.hdr, body)
		}
	} else if sc, ok := c.nc.(*shmConn); ok {
		p.hdr = t.directHead(p.hdr, f, body, 0)
		if ctx == nil || ctx.Done() == nil {
			bufs := [2][]byte{p.hdr, body}
			_, err = sc.writev(bufs[:])
		} else {
			sc.wmu.Lock()
			if !sc.writeHeadBody(p.hdr, body) {
				ended, err = t.writeShmCtx(ctx, p, c, p.hdr, body)
			}
			sc.wmu.Unlock()
		}
	} else if c.raw != nil {
		p.hdr = t.directHead(p.hdr, f, body, 0)
		if len(body) <= rawCopyMax {
			p.hdr = append(p.hdr, body...) // one piece: one write(2)
			body = nil
		}
		if ctx == nil || ctx.Done() == nil {
			err = c.writeAll(p.hdr, body)
		} else {
			ended, err = t.writeAllCtx(ctx, p, c, p.hdr, body)
		}
	} else {
		p.hdr = t.directHead(p.hdr, f, body, 0)
		p.bufs = append(p.bufs[:0], p.hdr, body)
		p.wbufs = p.bufs
		if ctx == nil || ctx.Done() == nil {
			_, err = p.wbufs.WriteTo(c.nc)
		} else {
			ended, err = t.writeTLSCtx(ctx, c, &p.wbufs)
		}
		p.bufs[0], p.bufs[1], p.wbufs = nil, nil, nil // do not keep the caller's buffer
	}
	if err != nil {
		c.writeFailed(err)
	} else {
		c.markActive()
		t.stats.direct.Add(1) // counted in FramesOut too (Stats)
	}
	if release != nil {
		t.stats.lent.Add(1)
	}
	p.wmu.Unlock()
	if kept {
		p.log.written()
	} else if release != nil {
		release() // written, and not kept: the body is free
	}
	if ended {
		t.kickRest(p)
	}
	return true, ended
}

// writeDirectShm is writeDirect on a shared-memory connection, under p.wmu
// (which orders the frames kept in p's log as they enter the stream) and
// the connection's write lock, which is enough for the ring:
//   - Every other write to c is under it too (shmConn.writev), so no
//     frame is torn; a frame that the writer goroutine writes in several
//     writes was taken from p's queue, which leaves p.flushed behind
//     p.accepted until the frame is out, and the check below then
//     declines, as it does while frames wait in the queue.
//   - What SendNow left of a frame (p.rest) is on a socket; what a
//     direct write whose context ended left of one may be on c. Either
//     way the check reads that it exists from p.restPending, not p.rest.
//   - A connection is retired (idle, the peer's goodbye, replaced) by
//     marking it, then shutting its writing side under this lock
//     (shmConn.CloseWrite): a write that came first is read before the
//     end of stream (after an idle goodbye too: a retired connection is
//     read to its end); one that comes after finds c stopped.
//
// The head is encoded once, for the log and the ring, into p.hdr (p's
// under p.wmu, and already grown: a stack buffer would be zeroed at every
// call); a failed write is handled once the lock is released, since
// closing c takes it. The locks are released by hand, not deferred: this
// is every small message's path. With release not nil, body (of padFrom
// bytes or more) is lent to p's log, as by writeDirect. A frame the ring
// has no room for waits for it, watching ctx as writeDirectCtx does.
func (t *Transport) writeDirectShm(ctx context.Context, p *peer, c *conn, f *wire.Frame, body []byte, release func()) (ok, ended bool) {
	sc := c.shm
	if release != nil && len(body) < padFrom {
		return false, false // lent only with a pad (TryLendDirectAny)
	}
	if !tryLockShmWrite(p, sc) {
		return false, false
	}
	if p.flushed.Load() != p.accepted.Load() || p.restPending.Load() || c.stopped() || !c.resumed.Load() {
		sc.wmu.Unlock()
		p.wmu.Unlock()
		return false, false
	}
	f.Src, f.Dst = t.self, p.id
	var kept bool
	lent := false // body lent to the log, which releases it
	if len(body) < padFrom {
		p.hdr = p.heads.appendHead(p.hdr[:0], f, len(body))
		kept = p.log.addHeadBody(c.peerStream, p.hdr, body)
	} else if release != nil {
		if kept, lent = p.log.addLentFrame(c.peerStream, f, body, release); kept {
			p.hdr = t.directHead(p.hdr, f, body, 0)
		}
	} else {
		// A body to align: the ring's head starts with a pad frame,
		// which the log does not keep.
		if kept = p.log.addFrame(c.peerStream, f, body, true); kept {
			p.hdr = t.directHead(p.hdr, f, body, 0)
		}
	}
	if !kept {
		sc.wmu.Unlock()
		p.wmu.Unlock()
		return false, false // no room in the log: Send waits for it
	}
	var err error
	if !sc.writeHeadBody(p.hdr, body) {
		if ctx == nil || ctx.Done() == nil {
			bufs := [2][]byte{p.hdr, body}
			_, err = sc.writevHeld(bufs[:])
		} else {
			ended, err = t.writeShmCtx(ctx, p, c, p.hdr, body)
		}
	}
	sc.wmu.Unlock()
	if err != nil {
		c.writeFailed(err)
	} else {
		c.markActive()
		t.stats.direct.Add(1) // counted in FramesOut too (Stats)
	}
	if release != nil {
		t.stats.lent.Add(1)
	}
	p.wmu.Unlock()
	if lent {
		p.log.written()
	} else if release != nil {
		release() // written, and not kept: the body is free
	}
	if ended {
		t.kickRest(p)
	}
	return true, ended
}

// shmDirectPayload bounds the f.Payload that writeDirectShm takes (the
// data path's header is far smaller).
const shmDirectPayload = 128

// headMax bounds the head of f (its length, header and payload).
func headMax(f *wire.Frame) int { return wire.LengthSize + 4*binaryMaxVarint + len(f.Payload) }

// directHead encodes into buf (its array reused) the head of f for a
// vectored write with body: from padFrom bytes of body, preceded by the
// pad frame that starts body on the stream at its alignment in memory
// (wire.PadFor). The head is encoded once, behind room for the longest
// pad, then moved down behind the pad it needs, so that what it returns
// starts where buf does: the next call has buf's whole array again.
// extra counts what the write adds between head and body (the records'
// framing: recordExtra).
func (t *Transport) directHead(buf []byte, f *wire.Frame, body []byte, extra int) []byte {
	if len(body) < padFrom {
		return f.AppendHead(buf[:0], len(body))
	}
	buf = f.AppendHead(append(buf[:0], make([]byte, wire.PadMax)...), len(body))
	head := len(buf) - wire.PadMax
	pad := wire.PadFor(head+extra, uintptr(unsafe.Pointer(unsafe.SliceData(body))))
	copy(buf[pad:], buf[wire.PadMax:])
	wire.AppendPad(buf[:0], f.Src, f.Dst, pad)
	return buf[:pad+head]
}

// padFrom is the smallest payload SendDirect aligns on the stream with a
// pad frame (wire.PadFor): below it the copy is too short to gain.
const padFrom = 4 << 10

// binaryMaxVarint is the longest encoding of a header field.
const binaryMaxVarint = 10
