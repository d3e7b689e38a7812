package tcp

import (
	"errors"
	"net"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"github.com/cohort-mp/cohort/wire"
)

// A pair's stream outlives its connections. Each side numbers the frames
// it writes to a peer (1, 2, ...: every frame but the transport's own
// pads, goodbyes, sequence marks, acknowledgements and relayed frames,
// which their origin's stream counts), keeps those not
// yet acknowledged in the peer's sendLog, and starts every connection with
// a wire.KindSeq mark that gives the number of the next frame on it. The
// receiver counts the frames it delivers (recvStream.recvd), drops a frame
// whose number it has delivered already, and acknowledges what it has
// (wire.KindAck). A connection that breaks loses nothing, then: the next
// one's handshake tells each side how far the other got (wire.Resume), and
// the writer writes the mark and the frames after that point before
// anything else.
//
// A stream belongs to a pair of stream ids (wire.Resume), drawn by each
// side when it makes its state for the other: a peer whose id changed is a
// new process (or one that forgot us: RemovePeer), so the frames kept for
// its predecessor are dropped, not resent, and its frames are counted from
// 1.

// ackDelay is how long a receiver waits before it acknowledges frames
// with a frame of its own when no traffic the other way carries the
// acknowledgement sooner: a peer that answers within it (a heartbeat, a
// reply) costs no extra frame.
const ackDelay = 50 * time.Millisecond

// ackFrames and ackBytes acknowledge at once after that many frames or
// bytes since the last acknowledgement, well before the sender's log
// (Config.ResendBuffer, at least minResendBuffer) fills.
const (
	ackFrames = 128
	ackBytes  = 256 << 10
)

// minResendBuffer is the smallest Config.ResendBuffer: four times the
// bytes a receiver lets pass before it acknowledges.
const minResendBuffer = 4 * ackBytes

// sendLog holds the encoded frames written to a peer's stream and not yet
// acknowledged, in order, in a ring that grows up to what it must hold.
// A frame whose payload the transport owns (a relayed one's: see
// addRefAt) or a caller lends it (addLent) is held as its head in the
// ring and a reference to its payload, which is not copied. Frames are
// added under the peer's wmu (in the order they enter the stream) and
// trimmed by the reader that reads the acknowledgements.
type sendLog struct {
	mu hotsync.Mutex
	// stream is the peer's stream id (0: not yet known); a frame written
	// to a connection of another is not kept.
	stream uint64
	buf    []byte // the ring; len(buf) is its capacity
	start  int    // offset of the first byte held
	n      int    // bytes held in the ring
	lens   []int  // the frames' sizes in the ring, oldest first, from lens[lhead]
	// refs, beside lens, holds each frame's payload held by reference
	// (nil: all of it is in the ring); refN counts their bytes, held
	// too, which the limit counts.
	refs [][]byte
	refN int
	// releases, beside lens, holds each lent frame's release (nil: not
	// lent), called once the frame leaves the log.
	releases []func()
	lhead    int
	first    uint64 // the number of the oldest frame held (lens[lhead])
	next     uint64 // the number of the next frame added
	limit    int    // Config.ResendBuffer
	// resets counts reset's calls: frames numbered before one are gone.
	resets uint64
	// space has a token when frames were trimmed: a writer waiting for
	// room looks again.
	space chan struct{}
	// dropped is set once the peer is gone (drop): nothing more is lent.
	dropped bool
	// writing counts the lent frames being written (addLent to
	// written): a reset or drop meanwhile leaves the releases of the lent
	// frames it forgets in deferred, for the last written to call, since
	// a write may still be reading one of those bodies. A count, not a
	// flag: the next lent frame's write may begin (under the peer's wmu)
	// before the last one's written (after wmu).
	writing  int
	deferred []func()
	// sm holds the log's newest frames while they are small (smallLog).
	sm smallLog
}

// smallLog keeps small frames, each in a fixed slot, in front of the
// ring: a small message's frame is kept with one copy into its slot and
// a count, where the ring's entries (its bytes, lens, refs and releases)
// cost several times that, and an acknowledgement forgets them by
// moving a count. The slots hold the n frames the log numbered last,
// [next-n, next), frame k in slots[k&(len(slots)-1)]; every frame in the
// ring comes before them. A frame that the slots cannot take (a larger
// one, one with a reference or a release, or any once they are full)
// first moves the slots' frames into the ring (fold), so that the ring
// keeps the frames in order; so does since, which reads the ring.
type smallLog struct {
	slots []smallFrame // made at the first small frame
	n     int          // frames held
	bytes int          // their sizes' sum, which the log's limit counts
}

// smallFrame is a slot: a frame's encoding of n bytes.
type smallFrame struct {
	n uint8
	b [smallFrameMax]byte
}

// smallFrameMax is the largest frame a slot keeps: a small message's
// frame, whose header and payload take a few dozen bytes.
const smallFrameMax = 63

// smallSlots is how many slots a log has: twice the frames a receiver
// lets pass before it acknowledges (ackFrames), so that a stream of small
// frames is acknowledged before the slots fill.
const smallSlots = 2 * ackFrames

func newSendLog(limit int) *sendLog {
	return &sendLog{first: 1, next: 1, limit: limit, space: make(chan struct{}, 1)}
}

// held returns how many frames the log holds.
func (l *sendLog) held() int { return l.inRing() + l.sm.n }

// inRing returns how many frames the log holds in its ring.
func (l *sendLog) inRing() int { return len(l.lens) - l.lhead }

// empty reports whether every frame written has been acknowledged.
func (l *sendLog) empty() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held() == 0
}

// fits reports whether a frame of size bytes may be added under add's
// bound.
func (l *sendLog) fits(size int) bool {
	total := l.n + l.refN + l.sm.bytes
	return total == 0 || total+size <= l.limit
}

// add appends the frame whose encoding is the concatenation of parts,
// written to a connection of the peer's stream, and reports true; or, if
// bound is set and the frame does not fit, it reports false, having kept
// nothing. The log holds at most limit bytes, except a frame larger than
// that alone.
func (l *sendLog) add(stream uint64, bound bool, parts ...[]byte) bool {
	size := 0
	for _, b := range parts {
		size += len(b)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if size <= smallFrameMax {
		if s := l.slotLocked(stream, bound, size); s != nil {
			w := s.b[:0]
			for _, b := range parts {
				w = append(w, b...) // within s.b: size fits it
			}
			return true
		}
	}
	return l.addLocked(stream, bound, size, nil, parts...)
}

// addHeadBody is add of the frame whose encoding is head then body (a
// direct send's). A small frame goes into a slot (smallLog): this is
// every small message's path, without add's loops over the parts, and
// the lock is released by hand, not deferred.
func (l *sendLog) addHeadBody(stream uint64, head, body []byte) bool {
	size := len(head) + len(body)
	l.mu.Lock()
	if size <= smallFrameMax {
		if s := l.slotLocked(stream, true, size); s != nil {
			copy(s.b[copy(s.b[:], head):], body)
			l.mu.Unlock()
			return true
		}
	}
	ok := l.addLocked(stream, true, size, nil, head, body)
	l.mu.Unlock()
	return ok
}

// slotLocked numbers a small frame of size bytes and returns the slot
// to copy it into; nil when the frame is to go to the ring instead (add's
// bound does not let it in, it is to a predecessor of the peer, or the
// slots are full). The caller holds l.mu.
func (l *sendLog) slotLocked(stream uint64, bound bool, size int) *smallFrame {
	if stream != l.stream || bound && !l.fits(size) {
		return nil
	}
	if l.sm.slots == nil {
		l.sm.slots = make([]smallFrame, smallSlots)
	}
	if l.sm.n == len(l.sm.slots) {
		return nil
	}
	s := &l.sm.slots[l.next&uint64(len(l.sm.slots)-1)]
	s.n = uint8(size)
	l.sm.n++
	l.sm.bytes += size
	l.next++
	return s
}

// addLocked is add with l.mu held and the frame's size known, into the
// ring; ref, if not nil, is the frame's payload after parts, held by
// reference (size does not count it).
func (l *sendLog) addLocked(stream uint64, bound bool, size int, ref []byte, parts ...[]byte) bool {
	if bound && !l.fits(size+len(ref)) {
		return false
	}
	if stream != l.stream {
		return true // to a predecessor of the peer: lost with it
	}
	l.foldLocked()
	l.putLocked(size, ref, parts...)
	l.next++
	return true
}

// foldLocked moves the frames of the slots into the ring, after those it
// holds: the ring then holds every frame, in order.
func (l *sendLog) foldLocked() {
	if l.sm.n == 0 {
		return
	}
	if need := l.n + l.sm.bytes; need > len(l.buf) {
		l.grow(need)
	}
	mask := uint64(len(l.sm.slots) - 1)
	for k := l.next - uint64(l.sm.n); k < l.next; k++ {
		s := &l.sm.slots[k&mask]
		l.putLocked(int(s.n), nil, s.b[:s.n])
	}
	l.sm.n, l.sm.bytes = 0, 0
}

// putLocked appends to the ring the entry of a frame of size bytes, the
// concatenation of parts, then ref held by reference.
func (l *sendLog) putLocked(size int, ref []byte, parts ...[]byte) {
	if l.n+size > len(l.buf) {
		l.grow(l.n + size)
	}
	w := (l.start + l.n) % len(l.buf)
	for _, b := range parts {
		k := copy(l.buf[w:], b)
		copy(l.buf, b[k:])
		w = (w + len(b)) % len(l.buf)
	}
	l.n += size
	l.lens = append(l.lens, size)
	l.refs = append(l.refs, ref)
	l.releases = append(l.releases, nil)
	l.refN += len(ref)
}

// addLent adds the frame whose encoding is head then body, holding body
// by reference: the caller lends it until the frame leaves the log
// (acknowledged, dropped with the peer's stream or with the peer), when
// release is called, once, outside the log's lock. ok is false, nothing
// kept, when the frame does not fit or the peer is gone; kept is false
// for a frame to a predecessor of the peer, which is not kept (the caller
// releases it itself once it has written it).
func (l *sendLog) addLent(stream uint64, head, body []byte, release func()) (ok, kept bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped || !l.fits(len(head)+len(body)) {
		return false, false
	}
	if stream != l.stream {
		return true, false
	}
	l.addLocked(stream, false, len(head), body, head)
	l.releases[len(l.releases)-1] = release
	l.writing++
	return true, true
}

// written ends the write of a frame addLent kept, calling, once no other
// is being written, the releases a reset or drop left meanwhile.
func (l *sendLog) written() {
	l.mu.Lock()
	if l.writing--; l.writing < 0 {
		panic("tcp: a lent frame's write ended twice")
	}
	var deferred []func()
	if l.writing == 0 {
		deferred, l.deferred = l.deferred, nil
	}
	l.mu.Unlock()
	for _, fn := range deferred {
		fn()
	}
}

// lentOut is where a log collects the releases of lent frames that leave
// it under its lock, to call them after: a few fit without a heap
// allocation. It holds no pointer into itself (a slice of arr would be
// one), so that a lentOut declared in a function stays on its stack: a
// log acknowledged on every read would otherwise allocate one each time.
type lentOut struct {
	arr  [4]func()
	n    int      // arr[:n] are taken
	more []func() // the rest, past arr
}

func (o *lentOut) take(fn *func()) {
	if *fn != nil {
		if o.n < len(o.arr) {
			o.arr[o.n] = *fn
			o.n++
		} else {
			o.more = append(o.more, *fn)
		}
		*fn = nil
	}
}

func (o *lentOut) call() {
	for _, fn := range o.arr[:o.n] {
		fn()
	}
	for _, fn := range o.more {
		fn()
	}
}

// dropLast removes the frame add appended last (SendNow's frame that the
// socket took nothing of).
func (l *sendLog) dropLast(stream uint64) {
	l.mu.Lock()
	if stream != l.stream || l.held() == 0 {
		l.mu.Unlock()
		return
	}
	if l.sm.n > 0 {
		s := &l.sm.slots[(l.next-1)&uint64(len(l.sm.slots)-1)]
		l.sm.n--
		l.sm.bytes -= int(s.n)
		l.next--
		l.mu.Unlock()
		return
	}
	last := len(l.lens) - 1
	l.n -= l.lens[last]
	l.refN -= len(l.refs[last])
	l.lens, l.refs[last], l.refs = l.lens[:last], nil, l.refs[:last]
	release := l.releases[last]
	l.releases[last], l.releases = nil, l.releases[:last]
	l.next--
	l.mu.Unlock()
	if release != nil {
		release()
	}
}

// grow makes the ring hold at least size bytes, its content unwrapped.
func (l *sendLog) grow(size int) {
	c := max(64<<10, len(l.buf))
	for c < size {
		c *= 2
	}
	nb := make([]byte, c)
	l.copyOut(nb, l.start, l.n)
	l.buf, l.start = nb, 0
}

// copyOut copies n bytes of the ring from offset off into dst.
func (l *sendLog) copyOut(dst []byte, off, n int) {
	if n == 0 {
		return
	}
	k := copy(dst[:n], l.buf[off:])
	copy(dst[k:n], l.buf)
}

// ack forgets the frames up to number upTo of the peer's stream.
func (l *sendLog) ack(stream, upTo uint64) {
	l.mu.Lock()
	if stream != l.stream || upTo < l.first {
		l.mu.Unlock()
		return
	}
	var lent lentOut
	k := int(min(upTo-l.first+1, uint64(l.inRing())))
	for i := l.lhead; i < l.lhead+k; i++ {
		l.n -= l.lens[i]
		l.start += l.lens[i]
		l.refN -= len(l.refs[i])
		l.refs[i] = nil // the payload is no longer ours to keep
		lent.take(&l.releases[i])
	}
	if len(l.buf) > 0 {
		l.start %= len(l.buf)
	}
	l.lhead += k
	l.first += uint64(k)
	if l.lhead == len(l.lens) {
		l.lens, l.refs, l.releases, l.lhead = l.lens[:0], l.refs[:0], l.releases[:0], 0
		l.start = 0
		if len(l.buf) > l.limit {
			l.buf = nil // an oversized frame's ring is not kept
		}
	} else if l.lhead > 1024 && l.lhead > len(l.lens)/2 {
		l.lens = l.lens[:copy(l.lens, l.lens[l.lhead:])]
		clear(l.refs[copy(l.refs, l.refs[l.lhead:]):])
		l.refs = l.refs[:len(l.lens)]
		clear(l.releases[copy(l.releases, l.releases[l.lhead:]):])
		l.releases = l.releases[:len(l.lens)]
		l.lhead = 0
	}
	if l.inRing() == 0 && l.sm.n > 0 && upTo >= l.first {
		// The slots' frames follow the ring's.
		d := int(min(upTo-l.first+1, uint64(l.sm.n)))
		mask := uint64(len(l.sm.slots) - 1)
		for i := range uint64(d) {
			l.sm.bytes -= int(l.sm.slots[(l.first+i)&mask].n)
		}
		l.sm.n -= d
		l.first += uint64(d)
	}
	l.mu.Unlock()
	lent.call()
	select {
	case l.space <- struct{}{}:
	default:
	}
}

// reset starts the stream with a new stream of the peer: what was kept
// for the old one is dropped.
func (l *sendLog) reset(stream uint64) {
	l.mu.Lock()
	l.resets++
	l.stream = stream
	lent := l.clearLocked()
	l.first, l.next = 1, 1
	l.mu.Unlock()
	lent.call()
	select {
	case l.space <- struct{}{}:
	default:
	}
}

// drop empties the log of a peer that is gone (removed, or the transport
// closed), releasing what was lent; nothing more is lent to it.
func (l *sendLog) drop() {
	l.mu.Lock()
	l.dropped = true
	lent := l.clearLocked()
	l.first = l.next
	l.mu.Unlock()
	lent.call()
	select {
	case l.space <- struct{}{}:
	default:
	}
}

// clearLocked forgets every frame held and returns the releases of the
// lent ones, to call once l.mu is released (or, while a lent frame is
// being written, leaves them for written).
func (l *sendLog) clearLocked() *lentOut {
	lent := new(lentOut)
	for i := l.lhead; i < len(l.releases); i++ {
		lent.take(&l.releases[i])
	}
	if l.writing > 0 {
		l.deferred = append(append(l.deferred, lent.arr[:lent.n]...), lent.more...)
		*lent = lentOut{}
	}
	l.buf, l.start, l.n = nil, 0, 0
	l.lens, l.refs, l.releases, l.refN, l.lhead = nil, nil, nil, 0, 0
	l.sm.n, l.sm.bytes = 0, 0
	return lent
}

// logMark is a point of a log's stream: the last frame numbered when
// mark was called.
type logMark struct{ resets, seq uint64 }

// mark returns the log's last frame numbered.
func (l *sendLog) mark() logMark {
	l.mu.Lock()
	defer l.mu.Unlock()
	return logMark{l.resets, l.next - 1}
}

// acked reports whether the peer has acknowledged every frame up to m,
// or they were dropped with the peer's stream (reset).
func (l *sendLog) acked(m logMark) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resets != m.resets || l.first > m.seq
}

// since returns the number of the first frame at or after from that the
// log holds (the next one to add if none) and a copy of those frames'
// encodings, back to back.
func (l *sendLog) since(stream, from uint64) (uint64, []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.foldLocked()
	if stream != l.stream {
		return l.next, nil
	}
	from = max(from, l.first)
	if from >= l.next {
		return l.next, nil
	}
	off, n := 0, 0
	for i, size := range l.lens[l.lhead:] {
		if l.first+uint64(i) < from {
			off += size
		} else {
			n += size + len(l.refs[l.lhead+i])
		}
	}
	out := make([]byte, 0, n)
	for i := l.lhead + int(from-l.first); i < len(l.lens); i++ {
		if size := l.lens[i]; size > 0 {
			out = out[:len(out)+size]
			l.copyOut(out[len(out)-size:], (l.start+off)%len(l.buf), size)
		}
		out = append(out, l.refs[i]...)
		off += l.lens[i]
	}
	return from, out
}

// resume starts c's stream: the sequence mark, then the frames of p's
// log that the peer has not delivered, into fw (flushed). The caller
// holds p.wmu; c takes frames from SendNow and SendDirect only after it.
func (t *Transport) resume(fw *wire.FrameWriter, p *peer, c *conn) error {
	from, frames := p.log.since(c.peerStream, c.resumeFrom)
	var buf [binaryMaxVarint]byte
	err := fw.WriteFrame(wire.Frame{Kind: wire.KindSeq, Src: t.self, Dst: p.id, Payload: wire.AppendCount(buf[:0], from)})
	resent := uint64(0)
	for len(frames) > 0 && err == nil {
		f, n, derr := wire.DecodeFrameMax(frames, max(t.cfg.MaxFrameSize, len(frames)))
		if derr != nil {
			panic("tcp: a frame of the resend log does not decode: " + derr.Error())
		}
		err = fw.WriteFrame(f)
		frames = frames[n:]
		resent++
	}
	if err == nil {
		err = fw.Flush()
	}
	if err != nil {
		return err
	}
	if resent > 0 {
		t.stats.resent.Add(resent)
		t.log.Debug("tcp: resent frames on a new connection", "peer", uint32(p.id), "from", from, "frames", resent)
	}
	c.resumed.Store(true)
	return nil
}

// addFrame is add for f, whose payload is f.Payload followed by body.
func (l *sendLog) addFrame(stream uint64, f *wire.Frame, body []byte, bound bool) bool {
	var hb [wire.LengthSize + wire.MaxHeaderSize]byte
	h := *f
	h.Payload = nil
	return l.add(stream, bound, h.AppendHead(hb[:0], len(f.Payload)+len(body)), f.Payload, body)
}

// addLentFrame is addLent for f, whose payload is f.Payload followed by
// the lent body.
func (l *sendLog) addLentFrame(stream uint64, f *wire.Frame, body []byte, release func()) (ok, kept bool) {
	var hb [wire.LengthSize + wire.MaxHeaderSize + maxLentHead]byte
	h := *f
	h.Payload = nil
	head := append(h.AppendHead(hb[:0], len(f.Payload)+len(body)), f.Payload...)
	return l.addLent(stream, head, body, release)
}

// maxLentHead is the payload before a lent body that addLentFrame keeps
// without a heap allocation (a data message's header).
const maxLentHead = 64

// keep adds f, about to be written to c, to p's log, waiting for room and
// writing the acknowledgements asked for meanwhile (the peer may be
// waiting for room too); the caller holds p.wmu and writes through fw to
// c. It returns false, having kept nothing and flushed fw, if c stopped or
// the peer or the transport went first.
func (t *Transport) keep(fw *wire.FrameWriter, p *peer, c *conn, f *wire.Frame) bool {
	if f.Kind == wire.KindRelay {
		return true // counted and kept by its origin's stream (relay.go)
	}
	for !p.log.addFrame(c.peerStream, f, nil, true) {
		if err := t.appendAck(fw, p, c); err == nil && fw.Buffered() > 0 {
			_ = fw.Flush() // a failure shows in fw.Err, checked next
		}
		if fw.Err() != nil {
			c.writeFailed(fw.Err())
			return false
		}
		select {
		case <-p.log.space:
		case <-p.kick:
			if c.rs != nil && c.rs.unacked() {
				c.rs.due.Store(true)
			}
		case <-c.dead:
			return false
		case <-c.retiring:
			return false
		case <-p.removed:
			return false
		case <-t.closing:
			return false
		}
	}
	return true
}

// errBroken is the cause of a connection BreakConns broke.
var errBroken = errors.New("tcp: connection broken on purpose (fault injection)")

// BreakConns breaks the connections to node id as a network fault would:
// closed at once, with no goodbye (over TCP with a reset), losing what
// they held in flight, and reported as lost connections. The pair's
// streams survive: the next connection, dialled as after any loss,
// begins with the frames the peer had not delivered. It returns how many
// connections it broke. It is meant for fault injection (tests, chaos
// tools).
func (t *Transport) BreakConns(id core.NodeID) int {
	t.mu.Lock()
	var cs []*conn
	if p := t.peers[id]; p != nil {
		for _, c := range []*conn{p.cur, p.draining} {
			if c != nil && !c.isDead() {
				cs = append(cs, c)
			}
		}
	}
	t.mu.Unlock()
	for _, c := range cs {
		if tc, ok := c.nc.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.close(false, errBroken)
	}
	return len(cs)
}

// wakeWriter starts p's writer if it has none (p still ours and the
// transport open) and kicks it, for a frame or an acknowledgement that
// it must write.
func (t *Transport) wakeWriter(p *peer) {
	t.mu.Lock()
	if !t.closed && t.peers[p.id] == p {
		t.activateLocked(p)
	}
	t.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}
