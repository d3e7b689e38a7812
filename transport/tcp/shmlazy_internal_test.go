//go:build linux

package tcp

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport/transporttest"
)

// waitFlag waits, with transporttest's bound, until the waiting flag at
// off in r holds want.
func waitFlag(t *testing.T, r *ring, off int, want uint32) {
	t.Helper()
	deadline := time.Now().Add(transporttest.Timeout)
	for r.u32(off).Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("waiting flag %d, want %d", r.u32(off).Load(), want)
		}
		runtime.Gosched()
	}
}

// lazyPair is shmPair whose second side reads lazily, looking every
// period, and a function that starts that side's reader wait (await) and
// returns a function waiting, with transporttest's bound, for its end.
func lazyPair(t *testing.T, period time.Duration) (a, b *shmConn, await func() (wait func())) {
	a, b = shmPair(t)
	b.lazy = new(atomic.Int64)
	b.lazy.Store(int64(period))
	await = func() func() {
		done := make(chan struct{})
		go func() { b.await(); close(done) }()
		return func() {
			t.Helper()
			select {
			case <-done:
			case <-time.After(transporttest.Timeout):
				t.Fatal("the lazy reader's wait did not end")
			}
		}
	}
	return a, b, await
}

// A lazy reader that nobody rings finds a write by its own look.
func TestShmLazyReaderLooks(t *testing.T) {
	a, _, await := lazyPair(t, time.Millisecond)
	wait := await()
	if _, err := a.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	wait()
}

// A lazy reader is not rung while its ring is less than half full; the
// write that brings it past half rings it, and so does the end of the
// stream. Its own looks come an hour apart here: only a doorbell wakes it.
func TestShmLazyReaderRungPastHalf(t *testing.T) {
	a, b, await := lazyPair(t, time.Hour)

	wait := await()
	waitFlag(t, a.out, offRWaiting, waitingLazy)
	if _, err := a.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if got := a.out.u32(offRWaiting).Load(); got != waitingLazy {
		t.Fatalf("after a small write the reader's flag is %d, want %d (not rung)", got, waitingLazy)
	}
	for !a.out.pastHalf() {
		if _, err := a.Write(make([]byte, 256)); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.out.u32(offRWaiting).Load(); got != waitingNone {
		t.Fatalf("past half the ring the reader's flag is %d, want %d (rung)", got, waitingNone)
	}
	wait()

	buf := make([]byte, minShmRingSize)
	for !b.in.empty() {
		if _, err := b.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	wait = await()
	waitFlag(t, a.out, offRWaiting, waitingLazy)
	if err := a.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got := a.out.u32(offRWaiting).Load(); got != waitingNone {
		t.Fatalf("after CloseWrite the reader's flag is %d, want %d (rung)", got, waitingNone)
	}
	wait()
}

// A lazy reader that found nothing lazyLooks times raises its flag as
// usual, so that a quiet connection costs no wake-ups; it is then rung
// by any write.
func TestShmLazyReaderArmsWhenQuiet(t *testing.T) {
	a, _, await := lazyPair(t, time.Millisecond)
	wait := await()
	waitFlag(t, a.out, offRWaiting, waitingRing)
	if _, err := a.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if got := a.out.u32(offRWaiting).Load(); got != waitingNone {
		t.Fatalf("the reader's flag is %d after a write, want %d (rung)", got, waitingNone)
	}
	wait()
}
