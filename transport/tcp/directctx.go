package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// A direct write watches its caller's context (SendDirect,
// TrySendDirectRef) where the socket, or a shared-memory connection's
// ring, is full: a peer that reads slowly, or not at all, would otherwise
// hold the caller for as long as it does. A frame partly written cannot
// be withdrawn (the stream would be torn), so when the context ends what
// is left of it goes to p.rest, as SendNow leaves it, and the writer
// goroutine writes it before anything else. The wait is where the cost
// is: the first pass of each write never waits, and only a write that
// finds no room registers with the context (context.AfterFunc), so a
// send the kernel or the ring takes at once costs what it did.

// writeAllCtx is writeAll for a caller whose ctx may end while the kernel
// takes no bytes (the peer reads none: a full receive buffer). The first
// pass never waits; the wait after it, the only place where ctx can end,
// parks in the netpoller until the socket is writable or the write
// deadline, which ctx's end sets in the past, passes. ended reports that
// ctx ended first: what is left of head and body is then in p.rest, for
// the writer goroutine (the caller calls kickRest once p.wmu is
// released), and the frame is counted as SendNow counts one it wrote in
// part (leaveRest). The caller holds p.wmu; neither buffer is kept.
func (t *Transport) writeAllCtx(ctx context.Context, p *peer, c *conn, head, body []byte) (ended bool, err error) {
	return t.writeAllTailCtx(ctx, p, c, head, body, nil)
}

// writeAllTailCtx is writeAllCtx of head, body, then tail (a large
// record's tag), in one writev(2) when the socket takes them all.
func (t *Transport) writeAllTailCtx(ctx context.Context, p *peer, c *conn, head, body, tail []byte) (ended bool, err error) {
	w, d := &c.rw, &p.dw
	if w.fn == nil {
		w.fn = w.writeFD
	}
	if d.fn == nil {
		d.fn = d.writeFD
	}
	w.a, w.b, w.t, w.errno = head, body, tail, 0
	d.w, d.full = w, false
	err = c.raw.Write(d.fn)
	d.w = nil
	if err == nil && w.errno == 0 && d.full && ctx.Done() == nil {
		err = c.raw.Write(w.fn) // a context that never ends: wait for room
	} else if err == nil && w.errno == 0 && d.full {
		if err = ctx.Err(); err != nil {
			err = os.ErrDeadlineExceeded // ended already (a caller that never waits): nothing to register
		} else {
			err = c.waitWritable(ctx, t.cfg.HandshakeTimeout)
		}
		if w.errno == 0 && endedByCtx(ctx, err) {
			// Nothing broke: ctx ended. The bytes written are on the
			// stream, so the frame goes on there, and only there.
			leaveRest(p, c, w.a, w.b, w.t)
			ended, err = true, nil
		}
	}
	errno := w.errno
	w.a, w.b, w.t = nil, nil, nil
	switch {
	case err != nil: // closed, or a deadline not ctx's
		return false, err
	case errno != 0:
		return false, &net.OpError{Op: "write", Net: c.nc.LocalAddr().Network(), Addr: c.nc.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return ended, nil
}

// waitWritable writes what c.rw holds, waiting while the socket is full,
// until ctx ends (armWriteDeadline).
func (c *conn) waitWritable(ctx context.Context, retireWait time.Duration) error {
	disarm := c.armWriteDeadline(ctx, retireWait)
	err := c.raw.Write(c.rw.fn)
	disarm()
	return err
}

// armWriteDeadline has ctx's end set c's write deadline in the past,
// which wakes a write waiting for room with os.ErrDeadlineExceeded, until
// disarm is called (a ctx that has ended already sets it at once). disarm
// clears the deadline if ctx's end set it, unless c was retired meanwhile
// (retireReplaced bounds the writes to a retired connection by a deadline
// of its own): it is then set again, retireWait from now.
func (c *conn) armWriteDeadline(ctx context.Context, retireWait time.Duration) (disarm func()) {
	restore := func() {
		var dl time.Time
		if c.stopped() {
			dl = time.Now().Add(retireWait)
		}
		c.nc.SetWriteDeadline(dl)
	}
	if ctx.Err() != nil {
		c.nc.SetWriteDeadline(time.Unix(1, 0))
		return restore
	}
	set := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.nc.SetWriteDeadline(time.Unix(1, 0))
		close(set)
	})
	return func() {
		if !stop() {
			<-set
			restore()
		}
	}
}

// endedByCtx reports whether err, a wait's for room, is the write
// deadline that ctx's end set (armWriteDeadline), not a failure.
func endedByCtx(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && errors.Is(err, os.ErrDeadlineExceeded)
}

// restKeepMax is the largest array of p.rest that writeRest keeps for the
// next rest: SendNow's small frames reuse it, a direct write's large rest
// leaves it to the collector once written.
const restKeepMax = 64 << 10

// leaveRest makes a and b, the rest of a frame partly written to c, p's
// rest for the writer goroutine, and counts the frame as queued and
// written (flushed once the writer has written the rest), as SendNow
// counts one. The caller holds p.wmu and may append to p.rest what
// follows (writeRecordsCtx: the rest of a record).
func leaveRest(p *peer, c *conn, a, b, t []byte) {
	p.rest, p.restConn = append(append(append(p.rest[:0], a...), b...), t...), c
	p.restPending.Store(true)
	p.accepted.Add(1)
	p.written++
}

// kickRest has p's writer goroutine write p.rest, which a direct write
// left when its context ended (writeAllCtx), as SendNow has it write
// what it left.
func (t *Transport) kickRest(p *peer) {
	t.mu.Lock()
	if !t.closed && t.peers[p.id] == p {
		t.activateLocked(p) // a connection the peer opened may have no writer yet
	}
	t.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// directWriter is writeAllCtx's first pass, a peer's (under its wmu): its
// writeFD writes as much of w's frame as the socket takes and, where
// rawWriter.writeFD would wait for the socket to drain, records that it
// is full instead.
type directWriter struct {
	fn   func(fd uintptr) bool // writeFD, made once
	w    *rawWriter
	full bool
}

func (d *directWriter) writeFD(fd uintptr) bool {
	d.full = !d.w.writeFD(fd)
	return true
}

// writeRecordsCtx is rc.writeVectored for a caller whose ctx may end
// while the kernel takes no bytes: it seals head and body into records as
// writeRecords does and writes them with writeAllCtx, whose raw writes go
// below the records. When ctx ends, the records' rest, tag included (a
// large record's tag is computed once its bytes are hashed, which
// writeInPieces does piece by piece as it writes them: the pieces not
// written are hashed here), goes to p.rest, sealed already: the writer
// writes it raw (writeRest). The caller holds p.wmu. A large record of
// at most recordTagFirstMax bytes is hashed first, and written with its
// tag in one writev(2).
func (t *Transport) writeRecordsCtx(ctx context.Context, p *peer, c *conn, rc *recordConn, head, body []byte) (ended bool, err error) {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	first := body
	var rest []byte
	if len(body) > recordPeek && len(body) >= recordSplit {
		first, rest = body[:recordPeek], body[recordPeek:]
	}
	w := wire.AppendRecordLength(rc.wbuf[:0], len(head)+len(first))
	w = append(append(w, head...), first...)
	w = append(w, rc.seal.Seal(w[wire.RecordLengthSize:])...)
	if rest == nil {
		rc.wbuf = w
		return t.writeAllCtx(ctx, p, c, w, nil)
	}
	w = wire.AppendRecordLength(w, len(rest))
	rc.wbuf = w
	if !wire.RecordsInPieces() || len(rest) <= recordTagFirstMax {
		copy(rc.tags[:], rc.seal.Seal(rest))
		return t.writeAllTailCtx(ctx, p, c, w, rest, rc.tags[:])
	}
	rc.seal.Begin(&rc.wtag)
	for lead := w; len(rest) > 0; lead = nil {
		piece := rest[:min(len(rest), recordPiece)]
		rest = rest[len(piece):]
		if ended, err = t.writeAllCtx(ctx, p, c, lead, piece); err != nil {
			return false, err
		}
		rc.wtag.Write(piece)
		if ended {
			rc.wtag.Write(rest)
			p.rest = append(append(p.rest, rest...), rc.wtag.Sum()...)
			return true, nil
		}
	}
	return t.writeAllCtx(ctx, p, c, rc.wtag.Sum(), nil)
}

// recordTagFirstMax is the largest record writeRecordsCtx hashes before
// it writes it, to write its tag in the same system call; a larger one is
// hashed piece by piece as it is written (writeInPieces), and its tag
// follows in a write of its own. Written apart, the 16 bytes of a tag
// cost the writer a system call per large message, and its reader, who
// has read the record by then, often a wait in the netpoller for them: a
// master of r = 2 over loopback records made 3.6 to 4.0 writes per round
// trip of 16 to 64 KiB, half of them tags. Up to this size the hash costs
// less than the call (GHASH runs at several GB/s where pieces are used at
// all).
const recordTagFirstMax = 64 << 10

// writeShmCtx is shmConn.writevHeld of head and body for a caller whose
// ctx may end while the peer's ring has no room: ctx's end sets the
// connection's write deadline in the past, which ends the wait for room
// once what fits is published, and the rest goes to p.rest as
// writeAllCtx leaves it. The ring's own first pass, which writes what
// fits before any wait, comes before the registration with ctx would
// matter; the caller (writeDirectShm, which tried writeHeadBody first)
// comes here only when the frame does not fit. The caller holds p.wmu
// and the connection's write lock.
func (t *Transport) writeShmCtx(ctx context.Context, p *peer, c *conn, head, body []byte) (ended bool, err error) {
	disarm := c.armWriteDeadline(ctx, t.cfg.HandshakeTimeout)
	bufs := [2][]byte{head, body}
	n, err := c.shm.writevHeld(bufs[:])
	disarm()
	if endedByCtx(ctx, err) {
		k := min(int(n), len(head))
		leaveRest(p, c, head[k:], body[int(n)-k:], nil)
		return true, nil
	}
	return false, err
}

// writeTLSCtx is the vectored write of bufs to c, a connection over TLS,
// for a caller whose ctx may end first. A TLS connection can tell neither
// how much of the frame it has written nor write more once a write has
// timed out (its record state is lost), so the frame cannot be completed
// on it: when ctx ends, c is closed, on purpose (no hint of a failure,
// the peer is not unreachable), ended is reported, and the frame, in p's
// log, goes out again on the next connection, whose receiver drops what
// it delivered already. The registration with ctx comes before the
// write, not only once the socket is full: a TLS direct send with a
// context that can end pays it. (writeDirectCtx declines a frame whose
// context has ended already, which the queue then takes: its connection
// is not given up for it.)
func (t *Transport) writeTLSCtx(ctx context.Context, c *conn, bufs *net.Buffers) (ended bool, err error) {
	disarm := c.armWriteDeadline(ctx, t.cfg.HandshakeTimeout)
	_, err = bufs.WriteTo(c.nc)
	disarm()
	if endedByCtx(ctx, err) {
		c.close(true, fmt.Errorf("tcp: a direct write over TLS given up when its context ended: %w", err))
		return true, nil
	}
	return false, err
}
