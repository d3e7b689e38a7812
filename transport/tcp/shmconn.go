package tcp

import (
	"encoding/binary"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// shmConn is a connection whose byte stream runs over two rings; sock is
// the Unix socket it was set up on, which now carries wake-ups and tells
// of the peer's death. It implements net.Conn (and CloseWrite), so that
// everything above it is the socket's code.
type shmConn struct {
	sock    net.Conn
	in, out *ring
	// pid is the peer's process, from the socket's credentials
	// (SO_PEERCRED); 0 unknown. Single-copy reads come from it
	// (singlecopy.go).
	pid  int
	poll *pollState // the connection's (set by newConn before any Read or Write)
	// pollers is the transport's guard of the callers polling its rings
	// (progress.go; set by newConn).
	pollers *pollGuard
	// lazy is the transport's period of lazy reads (ns, 0 off; set by
	// newConn; shmlazy.go).
	lazy *atomic.Int64
	// working is the transport's count of goroutines moving frames (it
	// counts a Read's or Write's wait; set by newConn).
	working *atomic.Int32
	// handoff is raised by a caller that left the reader goroutine
	// something beyond the ring (bytes in the frame reader, or its error).
	handoff atomic.Bool
	// heads decodes the frames callers take from the ring (nextFrame,
	// under the connection's read lock).
	heads wire.HeadCache
	// line is readLineShm's memory of a header (under the read lock).
	line lineHead
	try  io.Reader       // tryReader of this connection, made once
	raw  syscall.RawConn // sock's, for raw reads and writes; nil: sock's own
	// wakeR and wakeW (capacity 1) tell the reader and the writer that a
	// wake-up byte came (the byte does not say for whom: both look).
	wakeR, wakeW chan struct{}
	gone         chan struct{} // closed when the peer's socket ended
	goneSet      atomic.Bool   // set as gone is closed: a load, for every frame
	watched      chan struct{} // closed when the watcher ended
	closed       chan struct{} // closed by Close
	closing      atomic.Bool   // set by Close, before closed is closed
	// timers are wait's, the writer's and the reader's (each used by one
	// goroutine at a time: under wmu, and by the reader goroutine).
	timers    [2]*time.Timer
	closeOnce sync.Once
	rmu       sync.Mutex    // one reader at a time
	wmu       hotsync.Mutex // one writer at a time
	// lineWriting is 1 while writeLineShm writes c.out without wmu. Its
	// writer holds the owner peer's write lock (peer.wmu), which every
	// writer of c.out holds (the writer goroutine, the direct writes,
	// the inline acknowledgements, CloseWrite's callers): that lock keeps
	// the writers apart, and wmu, which they also take, only Close out.
	// A plain store, fenced by Close alone (guardBarrier), as the poll
	// guard's slots are: see Close.
	lineWriting atomic.Uint32
	use         sync.RWMutex // held shared by Read and CloseWrite, exclusively to unmap (writers hold wmu, which Close takes too)
	unmap       func()
	wshut       atomic.Bool
	readDL      atomic.Int64 // deadlines, Unix ns; 0 none
	writeDL     atomic.Int64
}

// doorbell is the wake-up byte (its value means nothing).
var doorbell = []byte{0}

var _ net.Conn = (*shmConn)(nil)

// newShmConn starts the watcher of sock; pending says the handshake's
// reader already read bytes past the handshake (wake-ups).
func newShmConn(sock net.Conn, in, out *ring, unmap func(), pending bool) *shmConn {
	c := &shmConn{sock: sock, in: in, out: out, unmap: unmap,
		wakeR: make(chan struct{}, 1), wakeW: make(chan struct{}, 1),
		gone: make(chan struct{}), watched: make(chan struct{}), closed: make(chan struct{})}
	c.try = tryReader{c}
	if sc, ok := sock.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	if pending {
		c.poke()
	}
	go c.watch()
	return c
}

// watch reads wake-up bytes from the socket until it ends.
func (c *shmConn) watch() {
	defer close(c.watched)
	read := c.sockReader()
	for {
		if err := read(); err != nil {
			c.goneSet.Store(true)
			close(c.gone)
			return
		}
		c.poke()
	}
}

// sockReader returns the watcher's read of wake-up bytes from the socket:
// raw reads (see rawRead) when it can, the socket's Read otherwise; its
// error is io.EOF at the socket's end. The function is made once.
//
// A call returns once a read returned bytes or the end, and parks only
// when a read finds the socket empty (EAGAIN): the watcher reads again
// after every doorbell, even one read short, which has emptied the socket
// of bytes but maybe not of its end. A peer that rings and then ends
// before the read (it exits after its last frame) leaves one readiness
// for both, the netpoller being edge-triggered, reported before the read;
// a read that returns the doorbell cannot return the end too. Parked
// after it, the watcher would wait for an edge that never comes: the
// connection would not end, and a Flush would wait out its deadline for
// acknowledgements the peer will never send.
func (c *shmConn) sockReader() func() error {
	var buf [64]byte
	if c.raw == nil {
		return func() error {
			_, err := c.sock.Read(buf[:])
			return err
		}
	}
	var rerr error
	readFD := func(fd uintptr) bool {
		for {
			n, errno := rawRead(fd, buf[:])
			switch {
			case errno == syscall.EINTR:
				continue
			case errno == syscall.EAGAIN:
				return false // park until readable
			case errno != 0:
				rerr = errno
			case n == 0:
				rerr = io.EOF
			}
			return true
		}
	}
	return func() error {
		rerr = nil
		if err := c.raw.Read(readFD); err != nil {
			return err
		}
		return rerr
	}
}

// writeDoorbell writes the wake-up byte, with a raw write (see rawRead)
// when it can. A failure shows as the socket's end, to the watcher.
func (c *shmConn) writeDoorbell() {
	if c.raw == nil {
		c.sock.Write(doorbell)
		return
	}
	c.raw.Write(writeDoorbellFD)
}

// writeDoorbellFD is writeDoorbell's RawConn function (a closure per
// write would allocate): false waits until the socket is writable.
func writeDoorbellFD(fd uintptr) bool {
	for {
		switch _, errno := rawWrite(fd, doorbell); errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		return true
	}
}

// ring rings the peer's doorbell if flag (in r's header) is raised. Each
// frame written or taken looks at a flag that is seldom up, so the look
// is inlined into the caller and only a raised flag costs a call.
func (c *shmConn) ring(r *ring, flag int) {
	if r.u32(flag).Load() != 0 {
		c.ringRaised(r, flag)
	}
}

// ringRaised is ring once the flag was seen raised: the peer may be
// asleep, and whoever lowers the flag rings it. Kept out of line: inlined
// into ring, it would make ring too large to inline where it is called.
//
//go:noinline
func (c *shmConn) ringRaised(r *ring, flag int) {
	v := r.u32(flag).Load()
	if v == waitingLazy && !r.pastHalf() {
		return // the reader looks by itself soon (shmlazy.go)
	}
	if v != 0 && r.u32(flag).CompareAndSwap(v, 0) {
		c.writeDoorbell()
	}
}

// wait sleeps until a wake-up, the peer's death, Close or deadline dl
// (Unix ns, 0 none). The reader (reading) waits for data in c.in, the
// writer for room in c.out: each first raises its flag in that ring's
// header to arm (waitingRing, or waitingLazy for a lazy reader, which
// the writer rings only past half the ring: shmlazy.go) and checks the
// ring once more (the futex pattern: the peer either sees the flag or we
// see its change). A reader that callers are polling for waits without
// its flag (unarmed, arm 0): the peer need not ring, and the reader
// looks again soon (await). count: the wait is a Read's or
// a Write's, which a caller's stretched poll must not delay (it is
// counted in working while it lasts: its doorbell comes through the
// netpoller, which a caller polling on the process's only processor keeps
// waiting, progress.go).
func (c *shmConn) wait(reading bool, arm uint32, count bool, dl int64) error {
	r, flag, wake := c.out, offWWaiting, c.wakeW
	if reading {
		r, flag, wake = c.in, offRWaiting, c.wakeR
	}
	if arm != 0 {
		r.u32(flag).Store(arm)
		if count && c.working != nil {
			c.working.Add(1)
			defer c.working.Add(-1)
		}
	}
	disarm := func() {
		if arm != 0 {
			r.u32(flag).Store(0)
		}
	}
	if reading && (!r.empty() || r.u32(offClosed).Load() != 0) || !reading && !r.full() {
		disarm()
		return nil
	}
	var timeout <-chan time.Time
	if dl != 0 {
		d := time.Until(time.Unix(0, dl))
		if d <= 0 {
			disarm()
			return os.ErrDeadlineExceeded
		}
		// One timer per side, made once: the reader parks with a
		// deadline at every frame while callers poll (await).
		tm := &c.timers[0]
		if reading {
			tm = &c.timers[1]
		}
		if *tm == nil {
			*tm = time.NewTimer(d)
		} else {
			(*tm).Reset(d)
		}
		defer (*tm).Stop()
		timeout = (*tm).C
	}
	select {
	case <-wake:
	case <-c.gone:
	case <-c.closed:
	case <-timeout:
	}
	disarm()
	return nil
}

// unarmedWait is how long a reader parked unarmed sleeps before it looks
// whether callers still poll (await).
const unarmedWait = time.Millisecond

// await is the reader goroutine's wait between two frames: it returns
// once c.in has bytes or the stream may have ended (or a deadline passed),
// without reading, so that a caller's progress may take the bytes first
// (progress.go). While callers poll it parks at once and unarmed, for
// unarmedWait at most: when the callers stop, it raises its flag within
// that time (what arrives meanwhile waits as long), rather than being
// woken by every caller that stops, a hand-off per message.
func (c *shmConn) await() {
	c.use.RLock()
	defer c.use.RUnlock()
	polls, looks := 0, 0
	for !c.handoff.Load() && !c.readableLocked() {
		dl := c.readDL.Load()
		if dl != 0 && time.Now().UnixNano() >= dl {
			return // Read reports it
		}
		if !c.pollers.polling() && c.poll.again(&polls, c.poll.last.Load()) {
			continue
		}
		arm := !c.pollers.polling()
		if arm && c.lazyLook(&looks, &dl) {
			c.wait(true, waitingLazy, false, dl)
			continue
		}
		if !arm {
			// Look again in a while, in case the callers stopped
			// meanwhile: then the flag is raised.
			if until := time.Now().Add(unarmedWait).UnixNano(); dl == 0 || until < dl {
				dl = until
			}
		}
		c.wait(true, waitingFlag(arm), false, dl)
	}
}

// readable reports whether a Read would not wait: c.in has bytes, or the
// stream or the connection ended.
func (c *shmConn) readable() bool {
	c.use.RLock()
	defer c.use.RUnlock()
	return c.readableLocked()
}

func (c *shmConn) readableLocked() bool {
	return c.isClosed() || !c.in.empty() || c.in.u32(offClosed).Load() != 0 || c.goneSet.Load()
}

// nextFrame reads the frame at the head of c.in, if the ring holds it
// whole and in one piece (not across the ring's end) and it fits buf: it
// copies the frame into buf, decodes it (a limit of max bytes on its
// declared length) and consumes it, and the frame's payload aliases buf.
// Otherwise, or if the frame does not decode, it reads nothing and
// returns false (and empty true if the ring holds nothing): the frame
// reader's path (TryReadFrame, or the reader
// goroutine) takes the frame and reports what is wrong with it. The
// caller holds the connection's read lock (conn.rd), and the frame
// reader holds no byte of the stream. This is a caller's progress's
// common case, a small frame, with one copy and none of the frame
// reader's buffering.
//
// Like pending, it takes no lock against Close: a caller's progress polls
// inside the transport's poll guard, which keeps the rings mapped.
func (c *shmConn) nextFrame(f *wire.Frame, buf []byte, max int) (ok, empty bool) {
	if c.isClosed() {
		return false, false
	}
	r := c.in
	// The frame starts at pos, in the current record, or after the
	// header of the next one (entered only if the frame is taken).
	pos, avail := r.pos, r.left
	if avail == 0 {
		if !r.committed() {
			return false, true
		}
		n, err := r.recordLen()
		if err != nil {
			return false, false
		}
		pos, avail = pos+recHead, n
	}
	at := pos & r.mask
	if avail < wire.LengthSize || r.size-at < wire.LengthSize {
		return false, false
	}
	n := wire.LengthSize + uint64(binary.BigEndian.Uint32(r.data[at:]))
	if n > avail || n > uint64(len(buf)) || n > r.size-at || n-wire.LengthSize > uint64(max) {
		return false, false
	}
	b := buf[:copy(buf, r.data[at:at+n])]
	if !c.heads.DecodeHit(f, b) {
		used, err := c.heads.Decode(f, b, max)
		if err != nil || used != len(b) {
			return false, false
		}
	}
	r.pos, r.left = pos, avail
	r.consume(n, false) // the caller rings the writer once it holds no lock (progress)
	return true, false
}

// tryReader reads c's stream without waiting: wire.ErrWouldBlock when
// nothing is published, or when the connection closed (Read reports
// the ends).
type tryReader struct{ c *shmConn }

func (t tryReader) Read(b []byte) (int, error) { return t.c.readRing(b, false) }

// pending reports whether c.in holds bytes not yet read (false once
// closed): whether the record at the reader's head (the one it is
// reading, or the next) is committed. A caller's progress asks it at
// every look without the read lock, so it reads the head the reader
// published, not the reader's own position. The commit word lies in the
// line where the record's bytes start: while nothing is published, that
// line is fetched again each time the writer invalidates it, and when a
// small frame comes, it comes in the same transfer.
//
// The caller polls inside the transport's poll guard (progress.go): Close
// unmaps the rings only once no caller polls, and a caller that comes
// after Close sees closing set, so no lock is needed.
func (c *shmConn) pending() bool {
	if c.isClosed() {
		return false
	}
	r := c.in
	head := r.u64(offHead).Load()
	return r.word(head, 0).Load() == ^head
}

// isClosed reports whether Close was called (a load, not a channel
// select: the callers' progress asks at every look).
func (c *shmConn) isClosed() bool { return c.closing.Load() }

// Read reads the peer's stream from the ring.
func (c *shmConn) Read(b []byte) (int, error) { return c.readRing(b, true) }

// readRing is Read (block) and tryReader's Read (!block: whatever would
// wait, or report the connection's end, is wire.ErrWouldBlock instead).
func (c *shmConn) readRing(b []byte, block bool) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	// The locks are released by defers in this function of one return
	// (open-coded, nearly free); readRingLocked has many.
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.use.RLock()
	defer c.use.RUnlock()
	return c.readRingLocked(b, block)
}

// readRingLocked is readRing under c.rmu and c.use (read).
func (c *shmConn) readRingLocked(b []byte, block bool) (int, error) {
	if c.isClosed() {
		if !block {
			return 0, wire.ErrWouldBlock
		}
		return 0, net.ErrClosed
	}
	r := c.in
	polls := 0
	for {
		n, err := r.read(b)
		if err != nil {
			return 0, err
		}
		if n > 0 {
			c.ring(r, offWWaiting)
			return n, nil
		}
		if !block {
			return 0, wire.ErrWouldBlock
		}
		// Nothing published: the end of the stream, the end of the
		// connection, or wait. The flags are read before the ring is
		// looked at again: what the peer published before it half-closed
		// or died is read first.
		if r.u32(offClosed).Load() != 0 || c.goneSet.Load() {
			if r.empty() {
				return 0, io.EOF
			}
			continue
		}
		if c.isClosed() {
			return 0, net.ErrClosed
		}
		dl := c.readDL.Load()
		if dl != 0 && time.Now().UnixNano() >= dl {
			return 0, os.ErrDeadlineExceeded
		}
		if c.poll.again(&polls, c.poll.last.Load()) {
			continue
		}
		if err := c.wait(true, waitingRing, true, dl); err != nil {
			return 0, err
		}
	}
}

// Write copies b into the ring, waiting for room as the peer reads.
func (c *shmConn) Write(b []byte) (int, error) {
	n, err := c.writev([][]byte{b})
	return int(n), err
}

// writev copies bufs into the ring one after the other and publishes them
// together (or as the ring fills, waiting for room as the peer reads): the
// direct path's header and payload cost one publication and at most one
// wake-up.
//
// The writer holds only wmu: Close takes it too before it unmaps the
// rings, so no other lock is needed against the unmapping.
func (c *shmConn) writev(bufs [][]byte) (int64, error) {
	c.wmu.Lock()
	n, err := c.writevHeld(bufs)
	c.wmu.Unlock()
	return n, err
}

// writevHeld is writev under c.wmu.
func (c *shmConn) writevHeld(bufs [][]byte) (int64, error) {
	if n, ok := c.writeRecord(bufs); ok {
		return n, nil
	}
	return c.writevLocked(bufs)
}

// writeRecord is writevLocked's common case, a small frame (the direct
// path's head and payload) into a ring with room for it: one record,
// without the loop. It reports false, having written nothing, otherwise.
func (c *shmConn) writeRecord(bufs [][]byte) (int64, bool) {
	r := c.out
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if !c.recordFits(uint64(total)) {
		return 0, false
	}
	for _, b := range bufs {
		r.put(b)
	}
	r.publish()
	c.ring(r, offRWaiting)
	return int64(total), true
}

// writeHeadBody is writeRecord of the direct path's frame, its head and
// body, without the loops over a vector of buffers.
//
// The record is committed as publish commits one, without opening it:
// its bytes, its length and commit word (ordered stores), then the tail.
func (c *shmConn) writeHeadBody(head, body []byte) bool {
	r := c.out
	n := uint64(len(head) + len(body))
	if !c.recordFits(n) {
		return false
	}
	p := r.pos
	if at := p&r.mask + recHead; n <= r.size-at {
		// Not across the ring's end: one slice, no wrap to check.
		d := r.data[at : at+n]
		copy(d[copy(d, head):], body)
	} else {
		r.pos = p + recHead
		r.copyIn(head)
		r.pos += uint64(len(head))
		r.copyIn(body)
	}
	hotsync.StoreRelease64(r.word(p, 1), n)
	hotsync.StoreRelease64(r.word(p, 0), ^p)
	r.pos = alignUp(p+recHead+n, recAlign)
	r.u64(offTail).Store(r.pos)
	c.ring(r, offRWaiting)
	return true
}

// recordFits reports whether a record of n bytes can be written to c.out
// now, whole: no record is open, n is within a record's bound (and not 0:
// a record of no bytes is the peer's corruption to its reader, recordLen,
// and writevLocked writes nothing for nothing), the ring has room for it,
// and the connection is open for writing.
func (c *shmConn) recordFits(n uint64) bool {
	r := c.out
	if r.open || n == 0 || n > r.recMax() || c.isClosed() || c.wshut.Load() || c.goneSet.Load() {
		return false
	}
	room, err := r.room(n + r.overhead())
	return err == nil && room >= n+r.overhead()
}

// writevLocked is writev under c.wmu.
func (c *shmConn) writevLocked(bufs [][]byte) (int64, error) {
	r := c.out
	if c.working != nil {
		total := 0
		for _, b := range bufs {
			total += len(b)
		}
		if uint64(total) >= r.size/ringSlices {
			// A long write (a large frame, on a writer goroutine): a
			// caller's stretched poll ends for it (progress.go).
			c.working.Add(1)
			defer c.working.Add(-1)
		}
	}
	var done int64
	var last int64 // monoNow of the last progress while the ring was full; 0: not full
	polls := 0
	for _, b := range bufs {
		for len(b) > 0 {
			if c.isClosed() {
				return done, net.ErrClosed
			}
			if c.wshut.Load() || c.goneSet.Load() {
				return done, fmt.Errorf("tcp: shared-memory connection: %w", io.ErrClosedPipe)
			}
			over, bound := r.overhead(), r.recMax()-r.recLen()
			room, err := r.room(min(uint64(len(b)), bound) + over)
			if err != nil {
				return done, r.writerState(err)
			}
			if room > over {
				n := min(room-over, uint64(len(b)), bound)
				r.put(b[:n])
				b, done, last = b[n:], done+int64(n), 0
				if n == bound { // the record is full
					r.publish()
					c.ring(r, offRWaiting)
				}
				continue
			}
			// Full: let the reader have what is put, then wait for room.
			r.publish()
			c.ring(r, offRWaiting)
			if last == 0 {
				last = monoNow()
			}
			dl := c.writeDL.Load()
			if dl != 0 && time.Now().UnixNano() >= dl {
				return done, os.ErrDeadlineExceeded
			}
			if c.poll.again(&polls, last) {
				continue
			}
			if err := c.wait(false, waitingRing, true, dl); err != nil {
				return done, err
			}
		}
	}
	r.publish()
	c.ring(r, offRWaiting)
	return done, nil
}

// CloseWrite ends our stream: the peer reads what was written, then the
// end of stream.
func (c *shmConn) CloseWrite() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.use.RLock()
	defer c.use.RUnlock()
	if c.isClosed() || !c.wshut.CompareAndSwap(false, true) {
		return nil
	}
	c.out.u32(offClosed).Store(1)
	c.out.u32(offRWaiting).Store(1) // ring even if the reader polls
	c.ring(c.out, offRWaiting)
	return nil
}

// Close closes the socket (the peer sees our end), wakes our reader and
// writer, waits until they are out and the watcher has ended, and unmaps
// both rings. It must not be called from inside Read or Write.
func (c *shmConn) Close() error {
	c.closing.Store(true)
	if !closeFirst(&c.closeOnce, c.closed) {
		return nil
	}
	err := c.sock.Close()
	c.wmu.Lock() // Write returns on closed
	c.use.Lock() // and so does Read
	c.awaitLineWriter()
	c.pollers.unmap(c.unmap) // once no caller polls (progress.go)
	c.use.Unlock()
	c.wmu.Unlock()
	<-c.watched
	return err
}

// awaitLineWriter waits until no writeLineShm writes c.out, once
// closing is stored: a line writer stores lineWriting, then loads
// closing, with no fence between (a plain store and a load, which the
// processor may reorder); Close stored closing (an atomic Store, a full
// barrier) and runs guardBarrier before its load of lineWriting, which
// makes every thread of the process run a full barrier. So either the
// writer's store came before its thread's barrier and is seen here, and
// Close waits for its release, or its load of closing came after it and
// sees closing set, and it writes nothing. The writer holds no lock it
// could wait for here and never waits itself: the wait is a few
// instructions' long, unless its thread is descheduled.
func (c *shmConn) awaitLineWriter() {
	if !guardFenced {
		return // writeLineShm takes wmu then
	}
	guardBarrier()
	for i := 0; c.lineWriting.Load() != 0; i++ {
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

func (c *shmConn) LocalAddr() net.Addr { return c.sock.LocalAddr() }

func (c *shmConn) RemoteAddr() net.Addr { return c.sock.RemoteAddr() }

func (c *shmConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// readExpired reports whether the read deadline has passed.
func (c *shmConn) readExpired() bool {
	dl := c.readDL.Load()
	return dl != 0 && time.Now().UnixNano() >= dl
}

func (c *shmConn) SetReadDeadline(t time.Time) error {
	c.readDL.Store(deadlineNS(t))
	c.poke()
	return nil
}

func (c *shmConn) SetWriteDeadline(t time.Time) error {
	c.writeDL.Store(deadlineNS(t))
	c.poke()
	return nil
}

// poke wakes a sleeping Read and Write (a wake-up byte came, or a
// deadline changed).
func (c *shmConn) poke() {
	for _, ch := range [2]chan struct{}{c.wakeR, c.wakeW} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func deadlineNS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixNano(), 1)
}
