//go:build linux

package tcp

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shmPair returns two shared-memory connections joined by a socket pair
// and two rings of minShmRingSize, as a handshake leaves them, with no
// polling: a reader that finds its ring empty, or a writer its ring full,
// raises its flag and parks at once, so that every frame may need a
// doorbell and a watcher's wake-up.
func shmPair(t *testing.T) (a, b *shmConn) {
	t.Helper()
	return shmPairOf(t, minShmRingSize, 0)
}

// shmPairOf is shmPair with rings of size bytes (a power of two, a
// multiple of recAlign) and a polling time of spin: a side polls for that
// long since its last progress before it parks (0: it parks at once).
func shmPairOf(t *testing.T, size int, spin time.Duration) (a, b *shmConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "shmpair")
		defer f.Close()
		c, err := net.FileConn(f) // a copy of fd, on the netpoller
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Each side has its own ring of each direction's memory: a ring
	// keeps its side's position.
	ab := make([]byte, ringHeader+size)
	ba := make([]byte, ringHeader+size)
	conn := func(fd int, in, out []byte) *shmConn {
		c := newShmConn(sock(fd), newRing(in), newRing(out), func() {}, false)
		c.poll = &pollState{spin: new(atomic.Int64)}
		c.poll.spin.Store(int64(spin))
		c.pollers = new(pollGuard)
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0], ba, ab), conn(fds[1], ab, ba)
}

// watchdog fails the test with the rings' state and every goroutine's
// stack if *done stops moving for transporttest's bound on a wait (a hang:
// a lost wake-up leaves a side parked with nothing to wake it), and is
// stopped by the returned function.
func watchdog(t *testing.T, done *atomic.Int64, conns ...*shmConn) (stop func()) {
	quit, out := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(out)
		const stall = 30 * time.Second // generous: the host may be loaded
		last, since := done.Load(), time.Now()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if n := done.Load(); n != last {
				last, since = n, time.Now()
				continue
			}
			if time.Since(since) < stall {
				continue
			}
			msg := fmt.Sprintf("no progress for %v at %d:", stall, last)
			for i, c := range conns {
				for _, r := range []*ring{c.in, c.out} {
					msg += fmt.Sprintf("\n  conn %d ring at %p: tail %d head %d rwaiting %d wwaiting %d",
						i, unsafe.SliceData(r.mem), r.u64(offTail).Load(), r.u64(offHead).Load(), r.u32(offRWaiting).Load(), r.u32(offWWaiting).Load())
				}
			}
			buf := make([]byte, 1<<20)
			t.Errorf("%s\n%s", msg, buf[:runtime.Stack(buf, true)])
			for _, c := range conns {
				c.Close()
			}
			return
		}
	}()
	return func() { close(quit); <-out }
}

// A reader and a writer that park whenever they find nothing to do are
// each woken, every time, by the other's doorbell: the flag raised, the
// ring checked again, the flag seen by the other side after it published
// or made room (the futex pattern), and the watcher's read of the socket
// that wakes the parked side. A wake-up lost anywhere on the way leaves
// one side parked for good, which the watchdog reports. A stream through
// a small ring parks the writer on a full ring and the reader on an empty
// one; a ping-pong parks each side on every message.
func TestShmWakeUpsUnderStress(t *testing.T) {
	frames, rounds := 400_000, 100_000
	if testing.Short() {
		frames, rounds = 40_000, 10_000
	}
	t.Run("stream", func(t *testing.T) {
		a, b := shmPair(t)
		var got atomic.Int64
		defer watchdog(t, &got, a, b)()
		errc := make(chan error, 1)
		go func() {
			msg := make([]byte, 1000)
			for i := range frames {
				n := 1 + i*7919%len(msg)
				for j := range msg[:n] {
					msg[j] = byte(i + j)
				}
				if _, err := a.Write(msg[:n]); err != nil {
					errc <- err
					return
				}
			}
			errc <- a.CloseWrite()
		}()
		buf := make([]byte, 1000)
		var total int64
		for i := range frames {
			n := 1 + i*7919%len(buf)
			if _, err := io.ReadFull(b, buf[:n]); err != nil {
				t.Fatalf("frame %d of %d (after %d bytes): %v", i, frames, total, err)
			}
			for j, v := range buf[:n] {
				if v != byte(i+j) {
					t.Fatalf("frame %d, byte %d: got %d, want %d", i, j, v, byte(i+j))
				}
			}
			total += int64(n)
			got.Add(1)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if n, err := b.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("after the stream: got %d bytes, %v; want 0, EOF", n, err)
		}
	})
	t.Run("pingpong", func(t *testing.T) {
		a, b := shmPair(t)
		var got atomic.Int64
		defer watchdog(t, &got, a, b)()
		go func() {
			var m [8]byte
			for {
				if _, err := io.ReadFull(b, m[:]); err != nil {
					return
				}
				if _, err := b.Write(m[:]); err != nil {
					return
				}
			}
		}()
		var m, r [8]byte
		for i := range rounds {
			m[0], m[7] = byte(i), byte(i>>8)
			if _, err := a.Write(m[:]); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(a, r[:]); err != nil {
				t.Fatalf("round %d of %d: %v", i, rounds, err)
			}
			if r != m {
				t.Fatalf("round %d: got %v, want %v", i, r, m)
			}
			got.Add(1)
		}
	})
}

// A peer that rings and then ends (it exits after its last frame) may
// do both before the watcher reads: the netpoller, edge-triggered, then
// reports the socket readable once, for the doorbell and the end
// together, and a read that returns the doorbell bytes cannot return the
// end as well. The watcher must read on, until a read finds the socket
// empty or at its end, before it parks: parked after the doorbell, it
// waits for an edge that never comes, the connection never ends, and a
// Flush waiting for the peer's acknowledgements waits out its deadline.
// Each round parks a Read on a fresh connection, then rings and ends the
// peer's side with two system calls back to back; every Read must return
// io.EOF. The rounds run together, so that a lost end shows as a Read
// still waiting when the others are done.
func TestShmWatcherSeesEndAfterDoorbells(t *testing.T) {
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	errcs := make([]chan error, rounds)
	for i := range errcs {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(fds[0]), "shmend")
		sock, err := net.FileConn(f) // a copy of fds[0], on the netpoller
		f.Close()
		if err != nil {
			unix.Close(fds[1])
			t.Fatal(err)
		}
		in := make([]byte, ringHeader+minShmRingSize)
		out := make([]byte, ringHeader+minShmRingSize)
		c := newShmConn(sock, newRing(in), newRing(out), func() {}, false)
		c.poll = &pollState{spin: new(atomic.Int64)}
		c.pollers = new(pollGuard)
		t.Cleanup(func() { c.Close() })
		errc := make(chan error, 1)
		errcs[i] = errc
		go func() {
			var b [8]byte
			_, err := c.Read(b[:])
			errc <- err
		}()
		// Let the reader and the watcher park (no wait can tell when
		// they have: a round that rings first tests less, not wrongly).
		for range 4 {
			runtime.Gosched()
		}
		doorbells := 1 + i%3*31 // 1, 32 and 63: a short read each
		rawWrite(uintptr(fds[1]), make([]byte, doorbells))
		unix.Close(fds[1])
	}
	const bound = 20 * time.Second // generous: the host may be loaded
	deadline := time.After(bound)
	for i, errc := range errcs {
		select {
		case err := <-errc:
			if err != io.EOF {
				t.Fatalf("round %d: Read after the doorbells and the peer's end: got %v, want io.EOF", i, err)
			}
		case <-deadline:
			left := 0
			for _, errc := range errcs[i:] {
				if len(errc) == 0 {
					left++
				}
			}
			t.Fatalf("%d of %d Reads still wait %v after the peer rang and ended (the first: round %d): a watcher parked without reading the end", left, rounds, bound, i)
		}
	}
}
