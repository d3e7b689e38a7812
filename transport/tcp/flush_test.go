package tcp_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// TestFlushBeforeClose: every frame Send accepted before Flush reaches the
// peer even though the sender closes right after Flush returns (Close drops
// what is still queued, Flush is what a process calls before it leaves).
func TestFlushBeforeClose(t *testing.T) {
	for round := range 5 {
		a := listen(t, config(1, nil))
		b := listen(t, config(2, nil))
		var got atomic.Int64
		done := make(chan struct{})
		const n = 3000
		b.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
			if got.Add(1) == n {
				close(done)
			}
		}})
		a.SetPeer(2, b.Addr())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for i := range n {
			if err := a.Send(ctx, 2, frame(uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Flush(ctx); err != nil {
			t.Fatalf("round %d: Flush: %v", round, err)
		}
		a.Close()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("round %d: the peer got %d of %d frames sent before Flush and Close", round, got.Load(), n)
		}
		cancel()
		b.Close()
	}
}

// TestFlushUnreachable: Flush does not wait for frames to a peer that
// cannot be reached (its dials fail): they are lost with it.
func TestFlushUnreachable(t *testing.T) {
	a := listen(t, config(1, nil))
	gone := listen(t, config(2, nil))
	addr := gone.Addr()
	gone.Close()
	a.SetPeer(2, addr)
	var hinted atomic.Bool
	a.SetHandler(transport.HandlerFuncs{OnHint: func(core.PeerHint) { hinted.Store(true) }})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 10 {
		if err := a.Send(ctx, 2, frame(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush with an unreachable peer: %v (want nil once its dial failed)", err)
	}
	if !hinted.Load() {
		t.Fatal("Flush returned before the dial to the unreachable peer failed")
	}
	a.Close()
	if err := a.Flush(ctx); err != transport.ErrClosed {
		t.Fatalf("Flush after Close: %v, want transport.ErrClosed", err)
	}
}
