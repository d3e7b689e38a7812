package tcp_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// TestShmPingPongLaps bounces small frames between two transports over
// shared memory, each side waiting for the other's as a blocking receive
// does: polling (PollUntil), then parked until the reader goroutine
// delivers. Hundreds of laps of the rings pass, and a reader often reads
// a record before its writer has stored the tail after it: no frame is
// lost or stuck, and the connection is never taken for corrupt.
func TestShmPingPongLaps(t *testing.T) {
	a, c := shmPollPair(t)
	const n = 60000
	var gotA, gotC atomic.Uint64
	wakeA, wakeC := make(chan struct{}, 1), make(chan struct{}, 1)
	var doneA, doneC atomic.Uint32
	handler := func(got *atomic.Uint64, done *atomic.Uint32, wake chan struct{}) transport.Handler {
		return transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
			if f.Kind != seqKind {
				return
			}
			got.Add(1)
			done.Store(1)
			select {
			case wake <- struct{}{}:
			default:
			}
		}}
	}
	a.SetHandler(handler(&gotA, &doneA, wakeA))
	c.SetHandler(handler(&gotC, &doneC, wakeC))
	// A frame is stuck when none arrives for stall: a loaded machine (the
	// race detector's included) slows the laps, but never stops them.
	const stall = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recv := func(tr interface {
		PollUntil(*atomic.Uint32, uint32, time.Duration) bool
	}, got *atomic.Uint64, done *atomic.Uint32, wake chan struct{}, want uint64) {
		var timer *time.Timer
		for got.Load() < want {
			if tr.PollUntil(done, 1, 50*time.Microsecond) {
				done.Store(0)
				continue
			}
			if timer == nil {
				timer = time.NewTimer(stall)
				defer timer.Stop()
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return
			case <-timer.C:
				t.Errorf("stuck waiting for frame %d (have %d) for %v", want, got.Load(), stall)
				cancel()
				return
			}
		}
		done.Store(0)
	}
	body := make([]byte, 8)
	echoed := make(chan struct{})
	defer func() { cancel(); <-echoed }()
	go func() {
		defer close(echoed)
		for i := uint64(1); i <= n && ctx.Err() == nil; i++ {
			recv(c, &gotC, &doneC, wakeC, i)
			if err := c.SendDirect(ctx, 1, wire.Frame{Kind: seqKind, Payload: body[:4]}, body); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := uint64(1); i <= n && ctx.Err() == nil; i++ {
		if err := a.SendDirect(ctx, 2, wire.Frame{Kind: seqKind, Payload: body[:4]}, body); err != nil {
			t.Fatal(err)
		}
		recv(a, &gotA, &doneA, wakeA, i)
		if t.Failed() {
			return
		}
	}
}
