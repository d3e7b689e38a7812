package tcp

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Polling before parking (Transport.SetSpin). A reader that has just
// delivered a data frame expects the next one soon (a reply, the next
// step of a collective): for the polling time it looks for more without
// parking, so that the next frame costs neither the netpoller's wake-up
// nor a thread's; on a socket, bytes that come while it polls (the body of
// a large frame, read in many pieces as its sender writes it) start the
// polling time again, and so does the start of a frame placed in the
// handler's memory. On a socket a look is a non-blocking read; on a
// shared-memory ring it is a load of the ring's tail, with no system call
// at all. Only frames of the protocols above the failure detector start a
// polling time: heartbeats never make an idle process poll (one read while
// a polling time runs only extends it). Between looks
// the poller yields to the process's other goroutines (one of them may be
// the one the data is for, on the same processor) and, every 16th look,
// to the other threads of the system (a poller must not keep a core from
// a descheduled peer on a loaded host).

// MaxSpin bounds SetSpin.
const MaxSpin = 10 * time.Millisecond

// SetSpin sets how long a connection's reader polls after the last data
// frame it delivered before it parks (and a writer polls a full
// shared-memory ring): 0, the default, parks at once. Polling keeps a core
// busy meanwhile: use it only when every process of the host has a core
// of its own. TLS connections do not poll. It returns an error outside
// [0, MaxSpin].
func (t *Transport) SetSpin(d time.Duration) error {
	if d < 0 || d > MaxSpin {
		return fmt.Errorf("tcp: polling time %v outside [0, %v]", d, MaxSpin)
	}
	t.spin.Store(int64(d))
	return nil
}

// pollState is a connection's polling clock: the transport's polling time
// and when a data frame was last delivered (by the reader goroutine or a
// caller's progress, progress.go), in monoNow's clock.
type pollState struct {
	spin *atomic.Int64
	last atomic.Int64
}

// monoEpoch and monoNow: a monotonic clock in ns, cheap to store
// atomically.
var monoEpoch = time.Now()

func monoNow() int64 { return int64(time.Since(monoEpoch)) }

// active reports whether the reader should still poll.
func (p *pollState) active() bool { return p.since(p.last.Load()) }

// since reports whether a poller whose last progress was at last
// (monoNow's clock) should still poll.
func (p *pollState) since(last int64) bool {
	d := p.spin.Load()
	return d > 0 && monoNow()-last < d
}

// mark starts a polling time (a data frame was delivered).
func (p *pollState) mark() {
	if p.spin.Load() > 0 {
		p.last.Store(monoNow())
	}
}

// yieldToHandler lets the goroutine a socket's reader has just handed a
// data frame to run before the reader looks at the socket again, while
// the polling time runs. The handler's goroutine, made ready by the
// delivery, waits on the reader's processor; the look would find nothing
// when the frame was the one the peer waits on (its next comes only after
// the handler's answer), and would delay that answer by a system call.
func (p *pollState) yieldToHandler() {
	if p.spin.Load() > 0 {
		runtime.Gosched()
	}
}

// again decides, after a look that found nothing (the polls-th), whether
// to look again, after yielding, or to park: a poller whose last progress
// was at last reads the clock at its first look and every 8th only (a
// clock read costs more than a look at a ring).
func (p *pollState) again(polls *int, last int64) bool {
	*polls++
	if *polls%8 == 1 && !p.since(last) {
		return false
	}
	pollYield(*polls)
	return true
}

// pollYield lets others run between two looks (see above).
func pollYield(polls int) {
	if polls%16 == 0 {
		osYield()
		return
	}
	runtime.Gosched()
}

// pollReader reads a plain socket (TCP or Unix), polling it with
// non-blocking reads while its connection's polling time runs, then as
// the socket's own Read (parked in the netpoller).
type pollReader struct {
	nc   net.Conn
	raw  syscall.RawConn
	poll *pollState
	// One Read's state for readFD, which RawConn.Read calls: the method
	// value is made once (a closure per Read would allocate).
	fn   func(fd uintptr) bool
	b    []byte
	n    int
	rerr error
	// head: the next Read takes at most headReadMax bytes (headFirst).
	head bool
}

// headReadMax bounds the first read after a placed frame (headFirst).
const headReadMax = 4 << 10

// headFirst makes the next Read take at most headReadMax bytes; the
// reader goroutine calls it after a placed frame (a large one: a step
// of a large Allreduce, a large message), and after the transport's own
// small frames that follow one, when nothing of the stream is left in
// the frame reader's buffer. A frame reader fills its buffer
// (64 KiB) before it knows the next frame's length; when that frame is
// large again and placed, what of its body the fill took is copied out
// of the buffer into its place, the rest read there directly. Capped, the
// fill takes its header and a few KiB: over loopback TCP a 1 MiB
// Allreduce on 4 ranks reads 64 KiB per step that way, an eighth to a
// quarter of its bytes. A stream of small frames after a large one pays
// at most one read more.
func (r *pollReader) headFirst() { r.head = true }

// newPollReader returns a pollReader of nc, or nil if nc is not a plain
// socket.
func newPollReader(nc net.Conn, poll *pollState) *pollReader {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *rightsConn:
		sc = c.UnixConn
	default:
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &pollReader{nc: nc, raw: raw, poll: poll}
	r.fn = r.readFD
	return r
}

func (r *pollReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return r.nc.Read(b)
	}
	// Outside a polling time readFD reads once and parks at EAGAIN: a
	// raw read still, which spares the runtime's monitor thread a wake-up
	// per read (rawIO).
	polling := r.poll.active()
	most := rawReadMax
	if r.head {
		r.head, most = false, headReadMax
	}
	r.b = b[:min(len(b), most)]
	err := r.raw.Read(r.fn)
	n, rerr := r.n, r.rerr
	r.b, r.rerr = nil, nil
	switch {
	case err != nil: // closed, or a deadline
		return 0, err
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	// Bytes came while polling: poll on. The body of a large frame takes
	// many reads, and its sender is still writing; measured from the last
	// frame delivered, the polling time would run out in the middle of it
	// and every read after would park (1 MiB messages over loopback TCP go
	// at 0.65× the rate they reach polling).
	if polling {
		r.poll.mark()
	}
	return n, nil
}

// readFD reads r.b from fd without blocking, looking again while the
// polling time runs; false parks the caller until fd is readable.
func (r *pollReader) readFD(fd uintptr) bool {
	for polls := 0; ; {
		n, errno := rawRead(fd, r.b) // n is 0 on an error
		r.n, r.rerr = n, nil
		if errno != 0 {
			r.rerr = errno
		}
		switch {
		case errno == syscall.EINTR:
			continue
		case errno != syscall.EAGAIN:
			return true
		case !r.poll.again(&polls, r.poll.last.Load()):
			return false // park until readable, then read once more
		}
	}
}

// Raw reads and writes of a socket, which is non-blocking (Go's netpoller
// makes it so): the system call cannot block, so it need not tell the Go
// scheduler, as syscall.Read and Write (and net.Conn's) do. Entering the
// scheduler's system-call state wakes the runtime's monitor thread
// (sysmon) when it sleeps, which is always in an idle process; woken so,
// it polls in 20 µs sleeps until the process is idle again. An idle rank
// of a 16-rank job with the 100 ms heartbeat detector made 1,944 context
// switches in 6 s that way, 809 with raw calls (perf stat; its processor
// time did not change measurably: the wake-ups themselves cost it, see
// fd's heartbeats on a shared clock). The doorbells and wake-up reads of
// shared-memory connections and the polling reads use these.

// rawReadMax bounds one raw read of a socket (pollReader): the kernel
// copies at most that much, in about 100 µs, during which the runtime
// can neither preempt the reader nor stop the world for the collector.
// A short read is as good as a long one to the frame reader above, which
// reads on until it has what it needs.
const rawReadMax = 1 << 20

// rawWriter writes a frame's head and body to a plain socket with raw
// write(2) or writev(2) calls (writeAll); a connection's is used under
// its peer's write lock.
type rawWriter struct {
	fn      func(fd uintptr) bool // writeFD, made once (a closure per write would allocate)
	a, b, t []byte                // what is left to write: a, then b, then t (a record's tag: writeRecordsCtx)
	iov     [3]syscall.Iovec
	errno   syscall.Errno
}

// rawWriteMax bounds what one raw write of a socket (rawWriter) is
// given, as rawReadMax bounds a read: a larger body takes several. Direct
// frames of every size are written raw, since the socket's own writev
// (the runtime's system-call state) wakes the monitor thread at each
// write of a large frame too: a 1 MiB Allreduce on 4 ranks over loopback
// TCP, whose steps are direct frames of 256 and 512 KiB, made about a
// fifth as many nanosleep, futex and sched_yield calls with them raw
// (strace -c), and its ranks spent about a fifth less processor time.
const rawWriteMax = rawReadMax

// rawCopyMax bounds the body a direct write copies behind its head, to
// write both with one write(2) rather than a writev(2) of two pieces.
const rawCopyMax = 256

// writeAll writes head, then body (which may be empty), to c's plain
// socket (c.raw) with raw system calls, parking in the netpoller while
// the socket is full; the caller holds c's peer's write lock, and
// neither buffer is kept. A small frame then costs one write(2) or
// writev(2), which does not wake the runtime's monitor thread (rawIO),
// where net.Buffers' writev does.
func (c *conn) writeAll(head, body []byte) error {
	w := &c.rw
	if w.fn == nil {
		w.fn = w.writeFD
	}
	w.a, w.b, w.errno = head, body, 0
	err := c.raw.Write(w.fn)
	errno := w.errno
	w.a, w.b = nil, nil
	switch {
	case err != nil: // closed, or a deadline
		return err
	case errno != 0:
		return &net.OpError{Op: "write", Net: c.nc.LocalAddr().Network(), Addr: c.nc.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return nil
}

// writeFD writes w.a, w.b and w.t to fd; false waits until fd is
// writable, then writes the rest.
func (w *rawWriter) writeFD(fd uintptr) bool {
	for len(w.a)+len(w.b)+len(w.t) > 0 {
		var n int
		var errno syscall.Errno
		switch {
		case len(w.b) == 0 && len(w.t) == 0:
			n, errno = rawWrite(fd, w.a)
		case len(w.a) == 0 && len(w.t) == 0:
			n, errno = rawWrite(fd, w.b[:min(len(w.b), rawWriteMax)])
		default:
			n, errno = w.writev(fd)
		}
		switch errno {
		case 0:
			k := min(n, len(w.a))
			w.a, n = w.a[k:], n-k
			k = min(n, len(w.b))
			w.b, n = w.b[k:], n-k
			w.t = w.t[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.errno = errno
			return true
		}
	}
	return true
}

// writev writes what is left of w.a, w.b and w.t (two of them at least
// not empty) with one writev(2), of w.b at most rawWriteMax bytes (and
// then w.t only once w.b fits); errno is 0 on success.
func (w *rawWriter) writev(fd uintptr) (int, syscall.Errno) {
	k := 0
	if len(w.a) > 0 {
		w.iov[k].Base = &w.a[0]
		w.iov[k].SetLen(len(w.a))
		k++
	}
	if len(w.b) > 0 {
		w.iov[k].Base = &w.b[0]
		w.iov[k].SetLen(min(len(w.b), rawWriteMax))
		k++
	}
	if len(w.t) > 0 && len(w.b) <= rawWriteMax {
		w.iov[k].Base = &w.t[0]
		w.iov[k].SetLen(len(w.t))
		k++
	}
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(k))
	w.iov = [3]syscall.Iovec{} // do not keep the caller's buffers
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// rawRead reads b from fd with one read(2); errno is 0 on success.
func rawRead(fd uintptr, b []byte) (int, syscall.Errno) { return rawIO(syscall.SYS_READ, fd, b) }

// rawWrite writes b to fd with one write(2); errno is 0 on success.
func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) { return rawIO(syscall.SYS_WRITE, fd, b) }

// rawIO makes the read or write system call trap on fd and b.
func rawIO(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	n, _, errno := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}
