package tcp

import (
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"sync/atomic"
	"unsafe"

	"github.com/cohort-mp/cohort/wire"
)

// The shared-memory path (Config.NoShm, the package doc's "Connections").
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
//     raised, clears it and writes one byte to the socket. Each side's
//     store and its load of the other's are fenced. The wait itself
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
// lies: one line crosses between the cores per message, where polling a
// separate tail index would fetch a second line after the first. A stale
// word (a
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

// u64 and u32 are the ring header's words at off, one of the header's
// offsets (under ringHeader, which mem always holds): addressed without
// the index's bounds check, which the path's tail, head and flags paid at
// every look.
func (r *ring) u64(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.mem)), off))
}

func (r *ring) u32(off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.mem)), off))
}

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

// word is the i-th word (0 or 1) of the record header at stream
// position p. A record starts on a line (recAlign) and data's size is a
// multiple of it, so the word lies within data: it is addressed without
// the index's bounds check, which every record's commit and look paid.
func (r *ring) word(p uint64, i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(r.data)), p&r.mask+uint64(8*i)))
}

// recMax is the most a record carries: with its header and padding, a
// ringSlices-th of the ring.
func (r *ring) recMax() uint64 { return r.size/ringSlices - recHead - recAlign }

// committed reports whether the record at the reader's position is
// committed; recordLen then gives its length. A caller's progress asks
// at every look: one that finds no commit costs it no load of the
// tail's line, which the writer stores at every message, and no call
// (both are inlined there).
func (r *ring) committed() bool { return r.word(r.pos, 0).Load() == ^r.pos }

// record reports the length of the committed record at the reader's
// position (0: none yet), for the reader goroutine, which reads only once
// the tail moved (readable): a length out of bounds is the peer's
// corruption, and so is a tail ahead of a missing commit: a ring whose
// tail runs ahead of its records ends there.
func (r *ring) record() (uint64, error) {
	if !r.committed() {
		// The tail is stored after the commit: it may still be behind
		// a record the reader has already read. Loaded first, a tail
		// past pos proves the commit is there.
		ahead := int64(r.u64(offTail).Load() - r.pos)
		if ahead <= 0 {
			return 0, nil
		}
		if uint64(ahead) > r.size || !r.committed() {
			return 0, errRingCorrupt
		}
	}
	return r.recordLen()
}

// recordLen is the length in the header of the committed record at the
// reader's position; a length out of bounds is the peer's corruption.
func (r *ring) recordLen() (uint64, error) {
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
// (a caller's progress: the delivery lock's compare-and-swap that
// follows a frame of readLineShm, or else the read lock's UnlockFence:
// Transport.progress).
func (r *ring) consume(n uint64, fenced bool) {
	r.pos += n
	r.left -= n
	if r.left == 0 {
		r.pos = alignUp(r.pos, recAlign)
		if fenced {
			r.u64(offHead).Store(r.pos)
		} else {
			hotsync.StoreRelease64(r.u64(offHead), r.pos)
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
		n, err := r.record()
		if n == 0 {
			if err != nil {
				err = r.readerState(err)
			}
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

// readerState is err, the reader's check that failed (record), with the
// words it compared as they are now, loaded again: which check failed,
// and whether what it missed has appeared since (a commit seen late is
// an ordering fault of ours; one still missing, the peer's corruption).
// Out of line: the checks stay small enough to inline where they are
// called.
//
//go:noinline
func (r *ring) readerState(err error) error {
	return fmt.Errorf("%w (reader at %d: tail %d, head %d, commit word %#x, length word %d)",
		err, r.pos, r.u64(offTail).Load(), r.u64(offHead).Load(), r.word(r.pos, 0).Load(), r.word(r.pos, 1).Load())
}

// writerState is err, the writer's check of the head that failed
// (room), with the words it compared, as readerState.
//
//go:noinline
func (r *ring) writerState(err error) error {
	return fmt.Errorf("%w (writer at %d: head %d, last seen %d)", err, r.pos, r.u64(offHead).Load(), r.seen)
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
	hotsync.StoreRelease64(r.word(r.rec, 1), r.recLen())
	r.open = false
	hotsync.StoreRelease64(r.word(r.rec, 0), ^r.rec)
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
