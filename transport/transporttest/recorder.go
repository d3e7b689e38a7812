// Package transporttest checks that a [transport.Transport] keeps the
// contract of package transport, and provides a recording [Recorder]
// handler for tests of code built on transports.
//
// An implementation's tests call [Run] with a [Factory] that builds n
// connected transports; Run exercises exchange, FIFO order under load,
// back-pressure, the error sentinels and a late handler, the same way for
// every implementation (transport/mem and transport/tcp use it).
package transporttest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Recorder is a [transport.Handler] that records every frame (with a copy
// of its payload) and hint, and lets a test wait for a condition on them.
// It can also hold deliveries back (Hold, Release) to stall a reader.
type Recorder struct {
	mu      sync.Mutex
	frames  []wire.Frame
	hints   []core.PeerHint
	changed chan struct{} // closed and replaced on every change
	gate    chan struct{} // non-nil while held
	waiting int           // deliveries waiting at the gate
}

// NewRecorder returns an empty recorder that does not hold.
func NewRecorder() *Recorder { return &Recorder{changed: make(chan struct{})} }

// Deliver records f, after waiting while the recorder is held.
func (r *Recorder) Deliver(f wire.Frame) {
	r.mu.Lock()
	if g := r.gate; g != nil {
		r.waiting++
		r.notify()
		r.mu.Unlock()
		<-g
		r.mu.Lock()
		r.waiting--
	}
	r.frames = append(r.frames, f)
	r.frames[len(r.frames)-1].Payload = slices.Clone(f.Payload)
	r.notify()
	r.mu.Unlock()
}

// Hint records h.
func (r *Recorder) Hint(h core.PeerHint) {
	r.mu.Lock()
	r.hints = append(r.hints, h)
	r.notify()
	r.mu.Unlock()
}

func (r *Recorder) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Hold makes later deliveries wait until Release.
func (r *Recorder) Hold() {
	r.mu.Lock()
	if r.gate == nil {
		r.gate = make(chan struct{})
	}
	r.mu.Unlock()
}

// Release lets held deliveries proceed. It is a no-op if not held.
func (r *Recorder) Release() {
	r.mu.Lock()
	if r.gate != nil {
		close(r.gate)
		r.gate = nil
	}
	r.mu.Unlock()
}

// Waiting returns the number of deliveries waiting for Release.
func (r *Recorder) Waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting
}

// WaitHeld waits until n deliveries are waiting for Release, and fails the
// test if they are not within timeout.
func (r *Recorder) WaitHeld(t testing.TB, timeout time.Duration, n int) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok, ch := r.waiting >= n, r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %d held deliveries: %d after %v", n, r.Waiting(), timeout)
		}
	}
}

// Frames returns a copy of the frames recorded so far, in delivery order.
func (r *Recorder) Frames() []wire.Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.frames)
}

// Hints returns a copy of the hints recorded so far.
func (r *Recorder) Hints() []core.PeerHint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hints)
}

// Wait waits until cond holds for the recorded frames and hints, checking
// after every change, and fails the test if it does not within timeout (a
// bound for a hung test, not a measurement). cond must not keep the slices.
func (r *Recorder) Wait(t testing.TB, timeout time.Duration, what string, cond func(frames []wire.Frame, hints []core.PeerHint) bool) {
	t.Helper()
	if err := r.WaitErr(timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// WaitErr is Wait returning an error instead of failing a test.
func (r *Recorder) WaitErr(timeout time.Duration, cond func(frames []wire.Frame, hints []core.PeerHint) bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := cond(r.frames, r.hints)
		ch := r.changed
		n, h := len(r.frames), len(r.hints)
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("not reached after %v (%d frames, %d hints recorded)", timeout, n, h)
		}
	}
}

// CountFrom returns how many recorded frames came from src.
func CountFrom(frames []wire.Frame, src core.NodeID) int {
	n := 0
	for _, f := range frames {
		if f.Src == src {
			n++
		}
	}
	return n
}
