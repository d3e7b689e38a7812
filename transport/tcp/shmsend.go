package tcp

import (
	"encoding/binary"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"net"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// lineFrameMax is the largest frame whose record fits one cache line of
// a ring: the record's header, then the frame, then nothing of the next
// record (which starts on the next line).
const lineFrameMax = recAlign - recHead

// tryLockShmWrite takes p's write lock, then sc's, without waiting: a
// writer that finds either taken declines (the caller falls back to its
// slower path), holding neither.
func tryLockShmWrite(p *peer, sc *shmConn) bool {
	if !p.wmu.TryLock() {
		return false
	}
	if !sc.wmu.TryLock() {
		p.wmu.Unlock()
		return false
	}
	return true
}

// writeLineShm is writeDirectShm for the common small message: a frame
// of at most lineFrameMax bytes whose header is the one p's head encoder
// remembers, to a connection whose ring has room and whose log has a free
// slot. The frame is built once, in a line on the stack, and goes to the
// log's slot and to the ring's line each by a copy of fixed size (moves of
// a few words, no call), without headEncoder.appendHead, the log's add or
// the ring's record checks. It reports whether it wrote the line: whatever
// falls outside that case, or any check that fails, the caller gives to
// writeDirectCtx (its bound on the frame's size, then writeDirectShm),
// which decides with the same locks held and watches the caller's
// context while the ring is full.
//
// The record's line is written whole: the bytes after the frame are the
// record's padding, which no reader reads (the next record starts on the
// next line, and its commit word is stored only by its own write).
func (t *Transport) writeLineShm(p *peer, c *conn, f *wire.Frame, body []byte) bool {
	sc := c.shm
	// p.wmu keeps c.out's other writers out (shmConn.lineWriting); Close
	// is kept out by lineWriting, stored before closing is loaded below,
	// rather than by the ring's own lock, a compare-and-swap per message
	// (without membarrier, guardFenced false, the lock is taken).
	if !p.wmu.TryLock() {
		return false
	}
	if guardFenced {
		hotsync.StoreRelease32(&sc.lineWriting, 1)
	} else if !sc.wmu.TryLock() {
		p.wmu.Unlock()
		return false
	}
	e := &p.heads
	size := wire.LengthSize + e.n + len(f.Payload) + len(body)
	r := sc.out
	// The ring's checks are recordFits', for a record of one line.
	if size > lineFrameMax || e.n == 0 || e.n > 16 || size-wire.LengthSize > t.cfg.MaxFrameSize ||
		f.Kind != e.kind || t.self != e.src || p.id != e.dst || f.Epoch != e.epoch ||
		p.flushed.Load() != p.accepted.Load() || p.restPending.Load() || c.stopped() || !c.resumed.Load() ||
		r.open || sc.isClosed() || sc.wshut.Load() || sc.goneSet.Load() {
		sc.unlockLine()
		p.wmu.Unlock()
		return false
	}
	if room, err := r.room(recAlign); err != nil || room < recAlign {
		sc.unlockLine()
		p.wmu.Unlock()
		return false
	}
	// The head as headEncoder.appendHead writes it: the length prefix,
	// then the remembered header as two words (its bytes past e.n are
	// overwritten by the payload or lie past the frame).
	var line [lineFrameMax]byte
	binary.BigEndian.PutUint32(line[:], uint32(size-wire.LengthSize))
	binary.LittleEndian.PutUint64(line[wire.LengthSize:], binary.LittleEndian.Uint64(e.head[:]))
	binary.LittleEndian.PutUint64(line[wire.LengthSize+8:], binary.LittleEndian.Uint64(e.head[8:]))
	k := wire.LengthSize + e.n
	k += copy(line[k:], f.Payload)
	copy(line[k:], body)
	if !p.log.addLine(c.peerStream, &line, size) {
		sc.unlockLine()
		p.wmu.Unlock()
		return false
	}
	// Committed as writeHeadBody commits a record: its bytes, its length
	// and commit word (ordered stores), then the tail, whose store no
	// later load passes (the reader's flag, ring).
	pos := r.pos
	at := pos&r.mask + recHead
	*(*[lineFrameMax]byte)(r.data[at : at+lineFrameMax]) = line
	hotsync.StoreRelease64(r.word(pos, 1), uint64(size))
	hotsync.StoreRelease64(r.word(pos, 0), ^pos)
	r.pos = pos + recAlign
	r.u64(offTail).Store(r.pos)
	sc.ring(r, offRWaiting)
	sc.unlockLine()
	c.markActive()
	bump(&p.directLines) // counted in FramesOut too (Stats)
	p.wmu.Unlock()
	return true
}

// unlockLine ends writeLineShm's write of c.out: lineWriting's release
// store, after the ring's stores (which it keeps before it), or the
// ring's lock.
func (c *shmConn) unlockLine() {
	if guardFenced {
		hotsync.StoreRelease32(&c.lineWriting, 0)
		return
	}
	c.unlockRing()
}

// unlockRing is unlockLine without membarrier: out of line, so that
// unlockLine inlines where it is called.
//
//go:noinline
func (c *shmConn) unlockRing() { c.wmu.Unlock() }

// addLine is addHeadBody of a frame of size bytes (at most
// lineFrameMax) built in line (writeLineShm): the line goes into the
// slot whole, a copy of fixed size. It reports false, having kept
// nothing, where addHeadBody would not use a slot (slotLocked's cases,
// tested here without its call); the caller then takes addHeadBody's
// path.
func (l *sendLog) addLine(stream uint64, line *[lineFrameMax]byte, size int) bool {
	l.mu.Lock()
	sm := &l.sm
	total := l.n + l.refN + sm.bytes
	if stream != l.stream || total != 0 && total+size > l.limit || sm.n == len(sm.slots) {
		l.mu.Unlock()
		return false // slotLocked makes the slots, at the first frame
	}
	s := &sm.slots[l.next&uint64(len(sm.slots)-1)]
	*(*[lineFrameMax]byte)(s.b[:]) = *line
	s.n = uint8(size)
	sm.n++
	sm.bytes += size
	l.next++
	l.mu.Unlock()
	return true
}

// readLineShm is readFrame(c, true) for the common frame a caller's
// progress takes from a shared-memory ring: a record of one line holding
// one frame whose header is the one c's head cache remembers, of a kind
// the transport hands to its handler (not one of its own), from the peer
// to us, on a counted stream. The line is copied out by moves of fixed
// size, and the delivery is readFrame's for such a frame without its
// tests of the other kinds. It reports whether it decided: the frame
// delivered (or dropped as a duplicate), or nothing published
// (wire.ErrWouldBlock); otherwise it has read nothing, and readFrame
// decides. The caller holds c.rd.
func (t *Transport) readLineShm(c *conn) (bool, error) {
	sc := c.shm
	r := sc.in
	if c.next == 0 || r.left != 0 || len(c.scratch) < lineFrameMax || c.fr.Buffered() != 0 || c.fr.Err() != nil || sc.isClosed() {
		return false, nil
	}
	pos := r.pos
	if !r.committed() {
		return true, wire.ErrWouldBlock
	}
	n := r.word(pos, 1).Load()
	if n > lineFrameMax {
		return false, nil
	}
	// A copy of the line, not of the frame: bytes past the frame are
	// the record's padding, read but not used.
	b := c.scratch[:lineFrameMax]
	copyLine(b, r.data[pos&r.mask+recHead:])
	fl := wire.LengthSize + uint64(binary.BigEndian.Uint32(b))
	if fl != n || int(fl)-wire.LengthSize > t.cfg.MaxFrameSize {
		return false, nil
	}
	var f wire.Frame
	if lh := &sc.line; !lh.hit(&f, b, int(fl)) {
		if !sc.heads.DecodeHit(&f, b[:fl]) || f.Kind.Proto() == core.ProtoCore || f.Src != c.peer || f.Dst != t.self {
			return false, nil
		}
		lh.remember(&f, b, int(fl))
	}
	r.pos, r.left = pos+recHead, n
	r.consume(n, false) // the caller rings the writer once it holds no lock (progress)
	c.markActive()
	seq := c.next
	c.next++
	dl := c.owner.lockDelivery()
	if seq <= c.rs.recvd.Load() {
		dl.Unlock()
		t.stats.duplicates.Add(1)
		t.duplicate(c.rs)
		return true, nil
	}
	if c.polledOut { // counted in FramesIn too (Stats)
		t.stats.polled.Add(1)
	} else {
		bump(&c.polled)
	}
	h := t.slot.Get()
	if h == nil {
		if h = t.slot.Wait(c.dead, t.closing); h == nil {
			dl.Unlock()
			return true, net.ErrClosed
		}
	}
	h.Deliver(f)
	t.delivered(c, seq, len(f.Payload))
	dl.Unlock()
	return true, nil
}

// copyLine copies the lineFrameMax bytes at the start of src to dst, by
// word, without a call.
func copyLine(dst, src []byte) {
	d, s := (*[lineFrameMax]byte)(dst), (*[lineFrameMax]byte)(src[:lineFrameMax])
	le := binary.LittleEndian
	a0, a1, a2 := le.Uint64(s[0:]), le.Uint64(s[8:]), le.Uint64(s[16:])
	a3, a4, a5 := le.Uint64(s[24:]), le.Uint64(s[32:]), le.Uint64(s[40:])
	le.PutUint64(d[0:], a0)
	le.PutUint64(d[8:], a1)
	le.PutUint64(d[16:], a2)
	le.PutUint64(d[24:], a3)
	le.PutUint64(d[32:], a4)
	le.PutUint64(d[40:], a5)
}

// lineHead is readLineShm's memory of the header of the last frame it
// took, a frame it checked (a kind the transport hands on, from the peer
// to us): a frame of the same header bytes is that frame's header again,
// taken by a comparison of two masked words inline, without
// wire.HeadCache.DecodeHit's call or the checks of its kind and ends.
// It is the connection's, under its read lock (conn.rd).
type lineHead struct {
	n        int    // the header's length, at most 16; 0: none
	lo, hi   uint64 // its bytes, as two little-endian words
	mlo, mhi uint64 // the masks of its bytes in lo and hi
	f        wire.Frame
}

// hit decodes into *f the frame of fl bytes at the start of line (its
// length prefix first) if its header is the one h remembers.
func (h *lineHead) hit(f *wire.Frame, line []byte, fl int) bool {
	le := binary.LittleEndian
	if h.n == 0 || fl < wire.LengthSize+h.n ||
		le.Uint64(line[wire.LengthSize:])&h.mlo != h.lo || le.Uint64(line[wire.LengthSize+8:])&h.mhi != h.hi {
		return false
	}
	*f = h.f
	f.Payload = line[wire.LengthSize+h.n : fl : fl]
	return true
}

// remember keeps the header of f, decoded from the frame of fl bytes at
// the start of line, unless it is longer than two words.
func (h *lineHead) remember(f *wire.Frame, line []byte, fl int) {
	n := fl - wire.LengthSize - len(f.Payload)
	if n <= 0 || n > 16 {
		h.n = 0
		return
	}
	h.mlo, h.mhi = ^uint64(0), uint64(1)<<(8*max(n-8, 0))-1 // a shift by 64 gives 0: all eight
	if n < 8 {
		h.mlo, h.mhi = uint64(1)<<(8*n)-1, 0
	}
	le := binary.LittleEndian
	h.lo = le.Uint64(line[wire.LengthSize:]) & h.mlo
	h.hi = le.Uint64(line[wire.LengthSize+8:]) & h.mhi
	h.n, h.f = n, *f
	h.f.Payload = nil
}
