//go:build linux

package tcp

import (
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport/hotsync"
	"golang.org/x/sys/unix"
)

// TestShmCloseWaitsForLineWriter: a line write holds no ring lock, only
// its flag (shmConn.lineWriting); Close must not unmap the rings while
// the flag is up, and unmaps them once it is down.
func TestShmCloseWaitsForLineWriter(t *testing.T) {
	if !guardFenced {
		t.Skip("no membarrier: the line write takes the ring's lock, which Close waits for")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	sock := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "shmline")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	peer := sock(fds[1])
	defer peer.Close()
	in := make([]byte, ringHeader+minShmRingSize)
	out := make([]byte, ringHeader+minShmRingSize)
	var unmapped atomic.Bool
	c := newShmConn(sock(fds[0]), newRing(in), newRing(out), func() { unmapped.Store(true) }, false)
	c.poll = &pollState{spin: new(atomic.Int64)}
	c.pollers = new(pollGuard)

	// A line writer inside its write: the flag up, closing not yet seen.
	hotsync.StoreRelease32(&c.lineWriting, 1)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	// Close is past its locks once the mapping lock is held (or, wrongly,
	// once it unmapped).
	deadline := time.Now().Add(time.Minute)
	for !unmapped.Load() && c.use.TryLock() {
		c.use.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("Close never took the mapping lock")
		}
		runtime.Gosched()
	}
	for range 2000 {
		if unmapped.Load() {
			t.Fatal("Close unmapped the rings while a line write was in them")
		}
		runtime.Gosched()
	}
	hotsync.StoreRelease32(&c.lineWriting, 0)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not return once the line write ended")
	}
	if !unmapped.Load() {
		t.Fatal("Close returned without unmapping the rings")
	}
}
