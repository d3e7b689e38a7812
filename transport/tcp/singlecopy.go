package tcp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cohort-mp/cohort/core"
)

// Single-copy transfers between two processes of one host. A ring copies a
// large message twice, into shared memory and out of it; a receiver that
// knows where the message lies in the sender's memory can instead have the
// kernel copy it once, straight from the sender's process into its own
// buffer (process_vm_readv, Linux's cross-memory attach). The protocol
// above (comm's rendezvous) agrees when the sender's buffer holds still: the
// sender offers its address (BufferAddr) only where SingleCopy says the
// peer can read it, keeps the buffer unchanged until the receiver says it
// has read it, and the receiver reads it with Pull.
//
// The peer's process is the one at the other end of the shared-memory
// connection's Unix socket (SO_PEERCRED), never one named by the peer. The
// kernel lets a process read another's memory if it may ptrace it: the same
// user, and under Yama's ptrace_scope 1 only an ancestor or a process the
// other allowed (PR_SET_PTRACER, which a process with a shared-memory
// connection does for the processes of its user: allowPeerReads); 2 and 3
// forbid it. Where the kernel refuses, Pull says so once in the log and
// refuses from then on, and large messages go through the ring.

// ErrSingleCopyRefused is wrapped by Pull's errors when the kernel refused
// to read the peer's memory (no permission, no such system call, an address
// that is not mapped there). Single copy is then off for this transport:
// SingleCopy reports false from then on.
var ErrSingleCopyRefused = errors.New("tcp: single-copy read refused")

// ErrSingleCopyGone is wrapped by Pull's errors when the peer has no
// shared-memory connection any more, or its process ended during the read.
var ErrSingleCopyGone = errors.New("tcp: single-copy peer gone")

// singleCopy is a transport's single-copy state.
type singleCopy struct {
	off  atomic.Bool // the kernel refused once
	once sync.Once   // the refusal's log
}

// SingleCopy reports whether Pull can read from peer's memory: the
// connection to it in use runs over shared memory, with a known process at
// the other end, and the kernel has not refused a read.
func (t *Transport) SingleCopy(peer core.NodeID) bool {
	if !singleCopySupported || t.single.off.Load() {
		return false
	}
	_, c := t.current(peer)
	return c != nil && c.shm != nil && c.shm.pid > 0 && !c.deadSet.Load()
}

// BufferAddr is the address of b's first byte in this process, as a
// peer's Pull takes it (0 for an empty b). The caller keeps b alive and
// unchanged until the peer has read it: the Go collector moves no heap
// object, and b escapes to the heap once it is held beyond its caller's
// frame. A b of 512 KiB or more is backed by huge pages where the kernel
// allows it, the first time its memory is offered (see adviseHuge): the
// peer's read pins a huge page at once where it would pin 512 small ones,
// which is most of the read's cost. That first time may take a few
// hundred microseconds.
func BufferAddr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	adviseHuge(b)
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// Pull copies len(dst) bytes from address addr of peer's process into dst,
// with one copy by the kernel. The peer's process is the one at the other
// end of the shared-memory connection in use. It returns an error wrapping
// ErrSingleCopyRefused when the kernel refuses (after which single copy is
// off for this transport, and said so once in the log), or
// ErrSingleCopyGone when there is no such connection or the process ended.
func (t *Transport) Pull(peer core.NodeID, dst []byte, addr uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if !singleCopySupported || t.single.off.Load() {
		return fmt.Errorf("%w: off", ErrSingleCopyRefused)
	}
	_, c := t.current(peer)
	if c == nil || c.shm == nil || c.shm.pid <= 0 || c.deadSet.Load() {
		return fmt.Errorf("%w: no shared-memory connection to %v", ErrSingleCopyGone, peer)
	}
	pid := c.shm.pid
	for len(dst) > 0 {
		n, err := readPeer(pid, dst, addr)
		switch {
		case err == errPeerEnded || err == nil && n == 0:
			return fmt.Errorf("%w: process %d of %v", ErrSingleCopyGone, pid, peer)
		case err != nil:
			t.single.off.Store(true)
			t.single.once.Do(func() {
				t.log.Warn("tcp: the kernel refuses single-copy reads from a peer's memory; large messages go through the shared-memory rings",
					"peer", uint32(peer), "pid", pid, "err", err)
			})
			return fmt.Errorf("%w: %w", ErrSingleCopyRefused, err)
		}
		dst, addr = dst[n:], addr+uint64(n)
	}
	if c.deadSet.Load() {
		// The connection ended meanwhile: the process may have ended
		// during the read, and its memory changed as it went.
		return fmt.Errorf("%w: the connection to %v ended", ErrSingleCopyGone, peer)
	}
	return nil
}
