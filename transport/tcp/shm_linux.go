package tcp

import (
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// shmSupported: sealed memfds exist on Linux.
const shmSupported = true

// ringSeals are the seals a ring's memfd must carry: its size can no
// longer change (a shrink would make the other side's reads fault) and no
// seal can be removed or added.
const ringSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// createRing returns a sealed memfd of a ring with size data bytes and its
// mapping.
func createRing(size int) (fd int, mem []byte, err error) {
	fd, err = unix.MemfdCreate("cohort-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	fail := func(what string, err error) (int, []byte, error) {
		if mem != nil {
			unix.Munmap(mem)
		}
		unix.Close(fd)
		return -1, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(ringHeader+size)); err != nil {
		return fail("ftruncate", err)
	}
	if mem, err = unix.Mmap(fd, 0, ringHeader+size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mmap", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, ringSeals); err != nil {
		return fail("sealing", err)
	}
	return fd, mem, nil
}

// mapRing maps the ring the peer passed as fd, whose offer stated size
// data bytes, after checking that the memfd is sealed and of that size.
func mapRing(fd int, size uint64) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("not a sealable memory file: %w", err)
	}
	if seals&ringSeals != ringSeals {
		return nil, fmt.Errorf("its memory is not sealed against resizing (seals %#x)", seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %w", err)
	}
	if uint64(st.Size) != ringHeader+size {
		return nil, fmt.Errorf("its memory has %d bytes, the offer says %d", st.Size, ringHeader+size)
	}
	mem, err := unix.Mmap(fd, 0, int(ringHeader+size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return mem, nil
}

func unmapRing(mem []byte) {
	if mem != nil {
		unix.Munmap(mem)
	}
}

func closeFD(fd int) { unix.Close(fd) }

// writeWithFD writes b on uc with fd passed beside it (SCM_RIGHTS).
func writeWithFD(uc *net.UnixConn, b []byte, fd int) error {
	n, _, err := uc.WriteMsgUnix(b, unix.UnixRights(fd), nil)
	if err == nil && n < len(b) {
		_, err = uc.Write(b[n:])
	}
	return err
}

// rightsConn is a plain Unix socket whose reads also take the file
// descriptors passed beside the bytes, from the moment the peer's hello
// has been read (startCollecting) to the end of the handshake: a ring's
// memfd may come with any read of the proof or of the ring step (the
// frame reader reads ahead). Before that, and afterwards, a read leaves
// no room for them and the kernel closes them. At most maxRightsFDs are
// kept (a ring offer carries one); any beyond are closed at once, and so
// are those kept when the handshake fails (stopCollecting), so that a
// connection that never proves the secret leaves no descriptor behind.
type rightsConn struct {
	*net.UnixConn
	oob []byte

	mu         sync.Mutex
	collecting atomic.Bool // (written under mu)
	fds        []int
}

// maxRightsFDs bounds the descriptors a connection's handshake keeps: one
// for the ring offer, one more so that an offer with more than one is
// recognised as such (mapPeerRing refuses it).
const maxRightsFDs = 2

func newRightsConn(uc *net.UnixConn) *rightsConn {
	return &rightsConn{UnixConn: uc, oob: make([]byte, unix.CmsgSpace(4*4))}
}

// Read reads like the socket's Read and, while collecting, collects the
// descriptors. Otherwise it is the socket's Read: the kernel closes
// descriptors sent beside bytes read without room for them.
func (r *rightsConn) Read(b []byte) (int, error) {
	if !r.collecting.Load() {
		return r.UnixConn.Read(b)
	}
	n, oobn, _, _, err := r.UnixConn.ReadMsgUnix(b, r.oob)
	if oobn > 0 {
		r.collect(r.oob[:oobn])
	}
	if n < 0 {
		// ReadMsgUnix reports -1 with an error (a reset by the peer); an
		// io.Reader reports 0, and the frame reader takes -1 for a broken
		// reader instead of the peer's close (the tie-break's refusal).
		n = 0
	}
	return n, err
}

// collect keeps the descriptors of oob's control messages, up to
// maxRightsFDs, and closes the others.
func (r *rightsConn) collect(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range msgs {
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if r.collecting.Load() && len(r.fds) < maxRightsFDs {
				r.fds = append(r.fds, fd)
				continue
			}
			unix.Close(fd)
		}
	}
}

// startCollecting makes the reads from now on collect descriptors (the
// peer's hello has been read: what follows may come with a ring offer).
func (r *rightsConn) startCollecting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collecting.Store(true)
}

// take returns the descriptors collected so far and forgets them.
func (r *rightsConn) take() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	fds := r.fds
	r.fds = nil
	return fds
}

// stopCollecting closes any descriptor collected and not taken, and any
// that comes later. The handshake calls it as it ends, failed or not.
func (r *rightsConn) stopCollecting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collecting.Store(false)
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
}

// handshakeConn returns the connection a handshake reads from: a plain
// Unix socket as a rightsConn (it may end with a ring), anything else as
// is.
func handshakeConn(nc net.Conn) net.Conn {
	if uc, ok := nc.(*net.UnixConn); ok {
		return newRightsConn(uc)
	}
	return nc
}

// osYield gives the processor to another thread of the system if one
// waits (a poller must not hold a core that a descheduled peer needs):
// hotsync.Yield, the raw sched_yield comm's waits use too.
func osYield() { hotsync.Yield() }
