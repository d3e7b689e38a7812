package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The shared-memory path (Config.NoShm, the package doc's "Same host").
//
// Two processes of one host that connected over the Unix socket, without
// TLS, end their handshake by offering each other a ring: a region of
// shared memory (a sealed memfd, passed beside the offer over the socket)
// that the offering side writes the connection's byte stream into and the
// other reads it from. If both accept both rings, the stream leaves the
// socket: frames are copied into the ring by the writer and out of it by
// the reader, with no system call while the reader is polling; the socket
// stays open for two things only, wake-ups and death:
//
//   - Wake-ups are futex-style: a side that finds its ring empty (or the
//     peer's full) and stops polling raises a flag in the ring's header,
//     checks the ring once more, and sleeps; the other side, after it
//     publishes data (or frees space), looks at the flag and, only if it is
//     raised, clears it and writes one byte to the socket. The wait itself
//     is a read of the socket by a watcher goroutine, which Go's netpoller
//     parks without holding a thread (a futex wait would hold one thread
//     per sleeping connection).
//   - Death: when the peer process ends, however it ends, the kernel closes
//     its socket; the watcher reads the end of stream, and the reader, once
//     it has read everything the peer published, returns it as the end of
//     the stream, so the connection dies and the failure detector is hinted
//     as over TCP. A peer killed in the middle of a write never published
//     that write (a record is committed, and the tail moved, only after its
//     bytes are copied: see Records below), so no torn frame is read: the
//     reader sees a frame cut at a published boundary, which the frame
//     reader reports as cut off.
//
// A ring is trusted only after checks: its memfd must be sealed against
// shrinking (so the peer cannot make our reads fault), of exactly the
// offered size, and its header must name the two nodes of this connection
// and carry wire.RingTag, an HMAC of the job secret over both hellos of
// this very handshake and the direction: a ring of another job, another
// connection or the other direction is refused, and the connection goes on
// over the socket. The indices in the header and the records' headers are
// read from memory the peer can write: every value is checked (no more
// than the ring's size between the indices, a record's length within its
// bound, no tail ahead of a missing commit), and a bad one closes the
// connection as a malformed frame would.
//
// Polling (poll.go): while its connection's polling time runs, a reader
// looks at its ring again instead of sleeping, and a writer at a full
// ring; a look is a load of a word (the next record's commit, or an
// index), no system call.

// DefaultShmRingSize is the data size of a ring (one per direction of a
// connection) unless Config.ShmRingSize sets it.
const DefaultShmRingSize = 256 << 10

// minShmRingSize is the smallest ring's data size.
const minShmRingSize = 4 << 10

// The ring's header: one page, fields at fixed offsets, each index on a
// cache line of its own (the writer's tail, the reader's head).
const (
	ringHeader  = 4096
	ringMagic   = "cohortR2"
	offMagic    = 0   // 8 bytes
	offSize     = 8   // uint64: the data size
	offFrom     = 16  // uint32: the writer's node id
	offTo       = 20  // uint32: the reader's node id
	offTag      = 32  // wire.ProofSize bytes
	offTail     = 128 // uint64, written by the writer: bytes published
	offClosed   = 136 // uint32, written by the writer: 1 = no more data (half-close)
	offRWaiting = 140 // uint32: the reader sleeps (set by it, cleared by the writer)
	offHead     = 192 // uint64, written by the reader: bytes consumed
	offWWaiting = 200 // uint32: the writer sleeps (set by it, cleared by the reader)
)

// ringSlices: a writer publishes at most a ringSlices-th of the ring at a
// time (a record, below), so that a large frame streams through it with
// both sides copying at once rather than in turn.
const ringSlices = 4

// Records. The byte stream runs through the ring in records, each of
// which starts on a cache line with a header of two words: the commit
// word, ^p for a record at stream position p, and the length of the bytes
// that follow it; the next record starts on the next cache line after
// them. The writer copies a record's bytes, stores its length, then its
// commit word (an atomic store: everything before it is visible first),
// then the tail as before. A reader that polls looks at the commit word
// where the next record will start, the line in which a small frame also
// lies: one line crosses between the cores per message, where a separate
// tail index took a second line, fetched after the first. A stale word (a
// record of an earlier lap, or a byte of its data) names another position
// and is not a commit: the ring's size is a multiple of the line, so a
// record's header never spans its end (the data may wrap). The tail,
// stored after the commit, still says how far the stream is published:
// it is what the wake-up flags and a half-close are checked against, and
// a reader that finds a tail ahead of a missing commit knows the peer
// wrote its ring wrongly.
const (
	recHead  = 16 // the commit word and the length
	recAlign = 64 // a record starts on a cache line
)

// errRingCorrupt: the ring's indices are impossible; the peer wrote its
// header wrongly. It closes the connection like a malformed frame.
var errRingCorrupt = fmt.Errorf("%w: the shared-memory ring's indices are inconsistent", wire.ErrMalformedFrame)

// ring is one direction of a shared-memory connection: mem is the whole
// mapping, header then data.
type ring struct {
	mem  []byte
	data []byte
	size uint64 // a power of two (Config.Validate, mapPeerRing)
	mask uint64 // size-1: a position's offset in data is pos&mask
	// pos is this side's own index (the tail for the writer, the head for
	// the reader): only this side writes it, so it is kept here too. It
	// counts records' headers and padding as the stream's bytes.
	pos uint64
	// seen is the writer's copy of the reader's head (room).
	seen uint64
	// rec is the position of the writer's open record (open: one is);
	// left is what the reader has still to read of its current record
	// (0: pos is at a record's header).
	rec  uint64
	open bool
	left uint64
}

func newRing(mem []byte) *ring {
	size := uint64(len(mem) - ringHeader)
	return &ring{mem: mem, data: mem[ringHeader:], size: size, mask: size - 1}
}

func (r *ring) u64(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&r.mem[off])) }
func (r *ring) u32(off int) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&r.mem[off])) }

// writeHeader initialises the header of a ring we write to node to.
func (r *ring) writeHeader(from, to uint32, tag [wire.ProofSize]byte) {
	copy(r.mem[offMagic:], ringMagic)
	*(*uint64)(unsafe.Pointer(&r.mem[offSize])) = r.size
	*(*uint32)(unsafe.Pointer(&r.mem[offFrom])) = from
	*(*uint32)(unsafe.Pointer(&r.mem[offTo])) = to
	copy(r.mem[offTag:], tag[:])
}

// checkHeader checks the header of a ring the peer offered us; check
// verifies its tag.
func (r *ring) checkHeader(from, to uint32, check func(tag []byte) bool) error {
	switch {
	case string(r.mem[offMagic:offMagic+len(ringMagic)]) != ringMagic:
		return errors.New("not a cohort ring")
	case *(*uint64)(unsafe.Pointer(&r.mem[offSize])) != r.size:
		return errors.New("its header states another size")
	case *(*uint32)(unsafe.Pointer(&r.mem[offFrom])) != from || *(*uint32)(unsafe.Pointer(&r.mem[offTo])) != to:
		return errors.New("it is for another pair of nodes")
	case !check(r.mem[offTag : offTag+wire.ProofSize]):
		return errors.New("its tag does not match this connection and job secret (a ring of another job or connection)")
	case r.u64(offTail).Load() != 0 || r.u64(offHead).Load() != 0:
		return errors.New("it is not empty")
	}
	return nil
}

// word is the i-th word of the record header at stream position p.
func (r *ring) word(p uint64, i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.data[p&r.mask+uint64(8*i)]))
}

// recMax is the most a record carries: with its header and padding, a
// ringSlices-th of the ring.
func (r *ring) recMax() uint64 { return r.size/ringSlices - recHead - recAlign }

// record reports the length of the committed record at the reader's
// position (0: none yet). A length out of bounds is the peer's
// corruption; so is, when strict, a tail ahead of a missing commit. A
// caller's progress is not strict: a look that finds no commit costs it
// no load of the tail's line, which the writer stores at every message;
// the reader goroutine, which reads only once the tail moved (readable),
// is, and a ring whose tail runs ahead of its records ends there.
func (r *ring) record(strict bool) (uint64, error) {
	if r.word(r.pos, 0).Load() != ^r.pos {
		if !strict {
			return 0, nil
		}
		// The tail is stored after the commit: it may still be behind
		// a record the reader has already read. Loaded first, a tail
		// past pos proves the commit is there.
		ahead := int64(r.u64(offTail).Load() - r.pos)
		if ahead <= 0 {
			return 0, nil
		}
		if uint64(ahead) > r.size || r.word(r.pos, 0).Load() != ^r.pos {
			return 0, errRingCorrupt
		}
	}
	n := r.word(r.pos, 1).Load()
	if n == 0 || n > r.recMax() {
		return 0, errRingCorrupt
	}
	return n, nil
}

// consume moves the reader n bytes on in its current record; at the
// record's end, to the next record, which it then publishes as its head.
// fenced: the head is stored by an atomic Store, which no later load
// passes, as the check of the writer's wake-up flag that follows must
// not (the futex pattern, see wait); otherwise by a release store, and
// the caller checks the flag only after a locked instruction of its own
// (a caller's progress: after it releases the read lock).
func (r *ring) consume(n uint64, fenced bool) {
	r.pos += n
	r.left -= n
	if r.left == 0 {
		r.pos = alignUp(r.pos, recAlign)
		if fenced {
			r.u64(offHead).Store(r.pos)
		} else {
			storeOrdered(r.u64(offHead), r.pos)
		}
	}
}

func alignUp(p, a uint64) uint64 { return (p + a - 1) &^ (a - 1) }

// read copies published bytes into b and consumes them; 0 if none.
func (r *ring) read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if r.left == 0 {
		n, err := r.record(true)
		if n == 0 {
			return 0, err
		}
		r.pos += recHead
		r.left = n
	}
	n := min(uint64(len(b)), r.left)
	r.copyOut(b[:n])
	r.consume(n, true)
	return int(n), nil
}

// room returns how many bytes the writer may put, from the head it saw
// last, reloaded only when that leaves less than want: the head's cache
// line, written by the reader at every read, then crosses between the
// cores only when the ring fills, not at every message.
func (r *ring) room(want uint64) (uint64, error) {
	if free := r.size - (r.pos - r.seen); free >= want {
		return free, nil
	}
	head := r.u64(offHead).Load()
	used := r.pos - head
	if used > r.size {
		return 0, errRingCorrupt
	}
	r.seen = head
	return r.size - used, nil
}

// overhead is the room a writer needs beyond its bytes: a header unless a
// record is open, and the padding at its end.
func (r *ring) overhead() uint64 {
	if r.open {
		return recAlign - 1
	}
	return recHead + recAlign - 1
}

// put copies b after what the writer has put, in the open record (opened
// here if none is), without publishing it. The caller checked the room
// (b and overhead) and the record's bound (recMax).
func (r *ring) put(b []byte) {
	if !r.open {
		r.rec, r.open = r.pos, true
		r.pos += recHead
	}
	r.copyIn(b)
	r.pos += uint64(len(b))
}

// recLen is the length of the open record's bytes.
func (r *ring) recLen() uint64 {
	if !r.open {
		return 0
	}
	return r.pos - r.rec - recHead
}

// publish makes what the writer has put readable: it commits the open
// record (see Records), then stores the tail.
func (r *ring) publish() {
	if !r.open {
		return
	}
	storeOrdered(r.word(r.rec, 1), r.recLen())
	r.open = false
	storeOrdered(r.word(r.rec, 0), ^r.rec)
	r.pos = alignUp(r.pos, recAlign)
	r.u64(offTail).Store(r.pos)
}

// copyOut and copyIn copy across the ring's end in a second copy, made
// only when one is needed (most are not: an empty copy still costs a
// call).
func (r *ring) copyOut(b []byte) {
	at := r.pos & r.mask
	if k := copy(b, r.data[at:]); k < len(b) {
		copy(b[k:], r.data)
	}
}

func (r *ring) copyIn(b []byte) {
	at := r.pos & r.mask
	if k := copy(r.data[at:], b); k < len(b) {
		copy(r.data, b[k:])
	}
}

// empty reports whether the reader has consumed everything published. It
// reads the head from the header (stored at the end of each record), so
// that a goroutine other than the one reading may ask. The head may pass
// the tail for a moment: the reader can read a record between its commit
// and the tail's store.
func (r *ring) empty() bool { return int64(r.u64(offTail).Load()-r.u64(offHead).Load()) <= 0 }

// full reports whether the writer has no room for a byte more.
func (r *ring) full() bool { return r.size-(r.pos-r.u64(offHead).Load()) <= r.overhead() }

// shmConn is a connection whose byte stream runs over two rings; sock is
// the Unix socket it was set up on, which now carries wake-ups and tells
// of the peer's death. It implements net.Conn (and CloseWrite), so that
// everything above it is the socket's code.
type shmConn struct {
	sock    net.Conn
	in, out *ring
	poll    *pollState // the connection's (set by newConn before any Read or Write)
	// pollers is the transport's guard of the callers polling its rings
	// (progress.go; set by newConn).
	pollers *pollGuard
	// working is the transport's count of goroutines moving frames (it
	// counts a Read's or Write's wait; set by newConn).
	working *atomic.Int32
	// handoff is raised by a caller that left the reader goroutine
	// something beyond the ring (bytes in the frame reader, or its error).
	handoff atomic.Bool
	// heads decodes the frames callers take from the ring (nextFrame,
	// under the connection's read lock).
	heads wire.HeadCache
	try   io.Reader       // tryReader of this connection, made once
	raw   syscall.RawConn // sock's, for raw reads and writes; nil: sock's own
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
	rmu, wmu  sync.Mutex   // one reader, one writer at a time
	use       sync.RWMutex // held shared by Read and CloseWrite, exclusively to unmap (writers hold wmu, which Close takes too)
	unmap     func()
	wshut     atomic.Bool
	readDL    atomic.Int64 // deadlines, Unix ns; 0 none
	writeDL   atomic.Int64
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

// ring rings the peer's doorbell if flag (in r's header) is raised.
func (c *shmConn) ring(r *ring, flag int) {
	if r.u32(flag).Load() == 0 || !r.u32(flag).CompareAndSwap(1, 0) {
		return
	}
	c.writeDoorbell()
}

// wait sleeps until a wake-up, the peer's death, Close or deadline dl
// (Unix ns, 0 none). The reader (reading) waits for data in c.in, the
// writer for room in c.out: each first raises its flag in that ring's
// header and checks the ring once more (the futex pattern: the peer
// either sees the flag or we see its change). A reader that callers are
// polling for waits without its flag (unarmed): the peer need not ring,
// and the reader looks again soon (await). count: the wait is a Read's or
// a Write's, which a caller's stretched poll must not delay (it is
// counted in working while it lasts: its doorbell comes through the
// netpoller, which a caller polling on the process's only processor keeps
// waiting, progress.go).
func (c *shmConn) wait(reading, arm, count bool, dl int64) error {
	r, flag, wake := c.out, offWWaiting, c.wakeW
	if reading {
		r, flag, wake = c.in, offRWaiting, c.wakeR
	}
	if arm {
		r.u32(flag).Store(1)
		if count && c.working != nil {
			c.working.Add(1)
			defer c.working.Add(-1)
		}
	}
	disarm := func() {
		if arm {
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
	polls := 0
	for !c.handoff.Load() && !c.readableLocked() {
		dl := c.readDL.Load()
		if dl != 0 && time.Now().UnixNano() >= dl {
			return // Read reports it
		}
		if !c.pollers.polling() && c.poll.again(&polls, c.poll.last.Load()) {
			continue
		}
		arm := !c.pollers.polling()
		if !arm {
			// Look again in a while, in case the callers stopped
			// meanwhile: then the flag is raised.
			if until := time.Now().Add(unarmedWait).UnixNano(); dl == 0 || until < dl {
				dl = until
			}
		}
		c.wait(true, arm, false, dl)
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
		n, err := r.record(false)
		if n == 0 {
			return false, err == nil
		}
		pos, avail = pos+recHead, n
	}
	at := pos & r.mask
	if avail < wire.LengthSize || r.size-at < wire.LengthSize {
		return false, false
	}
	n := wire.LengthSize + uint64(binary.BigEndian.Uint32(r.data[at:]))
	if n > avail || n > uint64(len(buf)) || n > r.size-at {
		return false, false
	}
	b := buf[:copy(buf, r.data[at:at+n])]
	used, err := c.heads.Decode(f, b, max)
	if err != nil || used != len(b) {
		return false, false
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
		if err := c.wait(true, true, true, dl); err != nil {
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

// recordFits reports whether a record of n bytes can be written to c.out
// now, whole: no record is open, n is within a record's bound, the ring
// has room for it, and the connection is open for writing.
func (c *shmConn) recordFits(n uint64) bool {
	r := c.out
	if r.open || n > r.recMax() || c.isClosed() || c.wshut.Load() || c.goneSet.Load() {
		return false
	}
	room, err := r.room(n + r.overhead())
	return err == nil && room >= n+r.overhead()
}

// writeFrame is writeRecord of a frame (f's head, then body) whose head
// it encodes in the ring itself, where writeRecord would copy it from a
// buffer: the head's bytes, just stored, would be loaded again by that
// copy, which waits for them to leave the store buffer. It reports
// false, having written nothing, when the head could wrap the ring's end
// (or as writeRecord does). The caller holds c.wmu and checked f's size
// (a head of at most maxHead bytes).
func (c *shmConn) writeFrame(f *wire.Frame, body []byte, maxHead int) bool {
	r := c.out
	if !c.recordFits(uint64(maxHead + len(body))) {
		return false
	}
	at := (r.pos + recHead) & r.mask
	if r.size-at < uint64(maxHead) {
		return false
	}
	r.rec, r.open = r.pos, true
	r.pos += recHead
	head := f.AppendHead(r.data[at:at:at+uint64(maxHead)], len(body))
	r.pos += uint64(len(head))
	r.copyIn(body)
	r.pos += uint64(len(body))
	r.publish()
	c.ring(r, offRWaiting)
	return true
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
				return done, err
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
			if err := c.wait(false, true, true, dl); err != nil {
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
	c.wmu.Lock()             // Write returns on closed
	c.use.Lock()             // and so does Read
	c.pollers.unmap(c.unmap) // once no caller polls (progress.go)
	c.use.Unlock()
	c.wmu.Unlock()
	<-c.watched
	return err
}

func (c *shmConn) LocalAddr() net.Addr  { return c.sock.LocalAddr() }
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

// shmRefusal says why this connection (a plain Unix socket) offers no
// ring, or "" if it does.
func (t *Transport) shmRefusal(rc *rightsConn) string {
	switch {
	case !shmSupported:
		return "not supported here"
	case t.cfg.NoShm:
		return "turned off"
	}
	_, pid, ok := peerCred(rc.UnixConn)
	switch {
	case !ok:
		return "the peer's process is unknown"
	case pid == os.Getpid() && !t.cfg.ShmInProcess:
		return "the peer is this process" // nothing to gain, memory to lose
	}
	return ""
}

// ringStep ends the handshake of a connection: on a plain Unix socket (hc
// is then the rightsConn the handshake read through), each side offers a
// ring and answers the peer's offer (wire.Ring); if both accept both, the
// connection returned runs over shared memory, with its own frame reader.
// Any other connection has no ring step and is returned as is, and so is
// a Unix one when either side offers nothing or refuses.
func (t *Transport) ringStep(hc net.Conn, fr *wire.FrameReader, local, remote wire.Hello, initiator bool) (net.Conn, *wire.FrameReader, error) {
	rc, ok := hc.(*rightsConn)
	if !ok {
		return hc, fr, nil
	}
	defer rc.stopCollecting()
	peer := remote.Node
	var in, out *ring
	release := func() {
		for _, r := range [2]*ring{in, out} {
			if r != nil {
				unmapRing(r.mem)
			}
		}
	}
	fd := -1
	if why := t.shmRefusal(rc); why != "" {
		t.log.Debug("tcp: no shared-memory ring offered", "peer", uint32(peer), "why", why)
	} else {
		var mem []byte
		var err error
		if fd, mem, err = createRing(t.cfg.ShmRingSize); err != nil {
			t.log.Warn("tcp: cannot make a shared-memory ring; the connection stays on its Unix socket", "peer", uint32(peer), "err", err)
		} else {
			out = newRing(mem)
			out.writeHeader(uint32(t.self), uint32(peer), wire.RingTag(t.cfg.Secret, local, remote, initiator, true))
		}
	}
	var offer wire.Ring
	if out != nil {
		offer.Size = out.size
	}
	theirs, err := t.exchangeRing(rc, fr, peer, offer, fd)
	if fd >= 0 {
		closeFD(fd) // the mapping keeps the memory; the peer has its own descriptor
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%w: the ring offers: %w", ErrHandshake, err)
	}
	fds := rc.take()
	if theirs.Size > 0 && out != nil {
		if in, err = mapPeerRing(fds, theirs.Size, uint32(peer), uint32(t.self), func(tag []byte) bool {
			return wire.CheckRingTag(t.cfg.Secret, local, remote, initiator, false, tag)
		}); err != nil {
			t.stats.shmRefused.Add(1)
			t.log.Warn("tcp: refusing the peer's shared-memory ring; the connection stays on its Unix socket", "peer", uint32(peer), "err", err)
		}
	}
	for _, fd := range fds {
		closeFD(fd)
	}
	answer := wire.Ring{Answer: true}
	if in != nil {
		answer.Size = 1
	}
	theirAnswer, err := t.exchangeRing(rc, fr, peer, answer, -1)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%w: the ring answers: %w", ErrHandshake, err)
	}
	if in == nil || out == nil || theirAnswer.Size == 0 {
		release()
		return rc, fr, nil
	}
	rc.SetDeadline(time.Time{}) // the watcher reads the socket from now on
	sc := newShmConn(rc, in, out, release, fr.Buffered() > 0)
	return sc, wire.NewFrameReader(sc), nil
}

// mapPeerRing maps and checks the ring a peer offered (size data bytes,
// fds the descriptors that came with the offer), written by node from for
// node to; check verifies its tag.
func mapPeerRing(fds []int, size uint64, from, to uint32, check func(tag []byte) bool) (*ring, error) {
	switch {
	case len(fds) != 1:
		return nil, fmt.Errorf("the offer came with %d descriptors, not 1", len(fds))
	case size < minShmRingSize:
		return nil, fmt.Errorf("a ring of %d bytes is too small", size)
	case size&(size-1) != 0:
		return nil, fmt.Errorf("a ring of %d bytes: its size is not a power of two", size)
	}
	mem, err := mapRing(fds[0], size)
	if err != nil {
		return nil, err
	}
	r := newRing(mem)
	if err := r.checkHeader(from, to, check); err != nil {
		unmapRing(mem)
		return nil, err
	}
	return r, nil
}

// exchangeRing sends our ring message (with fd beside it unless fd < 0)
// and reads the peer's of the same step.
func (t *Transport) exchangeRing(rc *rightsConn, fr *wire.FrameReader, peer core.NodeID, ours wire.Ring, fd int) (wire.Ring, error) {
	msg := ringFrame(t.self, peer, ours)
	var err error
	if fd >= 0 {
		err = writeWithFD(rc.UnixConn, msg, fd)
	} else {
		_, err = rc.Write(msg)
	}
	if err != nil {
		return wire.Ring{}, err
	}
	return readRing(fr, peer, t.self, ours.Answer)
}

// ringFrame encodes a KindRing frame.
func ringFrame(src, dst core.NodeID, r wire.Ring) []byte {
	var e wire.Encoder
	r.MarshalWire(&e)
	return wire.AppendFrame(nil, wire.Frame{Kind: wire.KindRing, Src: src, Dst: dst, Payload: e.B})
}

// readRing reads the peer's ring offer (answer false) or answer.
func readRing(fr *wire.FrameReader, from, to core.NodeID, answer bool) (wire.Ring, error) {
	f, err := fr.ReadFrame()
	if err != nil {
		return wire.Ring{}, err
	}
	if f.Kind != wire.KindRing || f.Src != from || f.Dst != to {
		return wire.Ring{}, fmt.Errorf("expected a ring message from %v, got %v", from, f)
	}
	r, err := wire.DecodeRing(f.Payload)
	if err == nil && r.Answer != answer {
		err = fmt.Errorf("%w: a ring message out of order", wire.ErrInvalid)
	}
	return r, err
}
