package tcp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
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

// TestFlushWaitsForDelivery: Flush returns once the peer has delivered
// the frames (acknowledged them), not once they are written: with the
// peer's handler held at the first frame it does not return, and once the
// handler goes on it does. Written is not enough between hosts: a process
// that closes a TCP socket with unread input resets the connection, and
// the kernel drops what it had not sent yet.
func TestFlushWaitsForDelivery(t *testing.T) {
	a := listen(t, config(1, nil))
	b := listen(t, config(2, nil))
	const n = 20
	var got atomic.Int64
	held, gate := make(chan struct{}), make(chan struct{})
	b.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if got.Add(1) == 1 {
			close(held)
			<-gate
		}
	}})
	a.SetPeer(2, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if err := a.Send(ctx, 2, frame(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	<-held
	if err := tcp.FlushWritten(ctx, a); err != nil {
		t.Fatalf("the frames were not written: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	err := a.Flush(short)
	cancelShort()
	if err != context.DeadlineExceeded {
		t.Fatalf("Flush with the peer's handler held: %v, want its context's end (%d of %d frames delivered)", err, got.Load(), n)
	}
	close(gate)
	if err := a.Flush(ctx); err != nil || got.Load() != n {
		t.Fatalf("Flush once the handler goes on: %v, %d of %d frames delivered", err, got.Load(), n)
	}
}

// TestFlushPeerRemovedAndBack: frames to a peer that RemovePeer drops
// are not waited for, even when the peer is added back while Flush
// waits (the new peer is another stream).
func TestFlushPeerRemovedAndBack(t *testing.T) {
	a := listen(t, config(1, nil))
	b := listen(t, config(2, nil))
	held, gate := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	b.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if once.CompareAndSwap(false, true) {
			close(held)
			<-gate
		}
	}})
	defer close(gate)
	a.SetPeer(2, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		if err := a.Send(ctx, 2, frame(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	<-held
	flushed := make(chan error, 1)
	go func() { flushed <- a.Flush(ctx) }()
	// Let Flush take the peer's frames as its target first (if it has
	// not, the test passes without testing anything, never wrongly).
	time.Sleep(100 * time.Millisecond)
	a.RemovePeer(2)
	a.SetPeer(2, b.Addr())
	if err := <-flushed; err != nil {
		t.Fatalf("Flush with its peer removed and added back: %v, want nil", err)
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

// TestFlushRelayed: over a pair whose direct link is cut, Flush returns
// only once the peer has every frame sent before it (acknowledged end to
// end through the relay), large frames and small; with no relay left, it
// does not wait for frames nothing can carry.
func TestFlushRelayed(t *testing.T) {
	for _, size := range []int{64, 256 << 10} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			nodes := relayMesh(t, []core.NodeID{1, 2, 3}, nil)
			cut(nodes, 1, 3, true)
			keep(t, nodes, []core.NodeID{1, 3}, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sent := 0
			for round := range 3 {
				n := 2000
				if size > 4<<10 {
					n = 40
				}
				if err := streamFrom(ctx, nodes[1].tr, 3, sent, n, size); err != nil {
					t.Fatal(err)
				}
				sent += n
				if err := nodes[1].tr.Flush(ctx); err != nil {
					t.Fatalf("round %d: Flush: %v", round, err)
				}
				if got := nodes[3].received(1); got != uint64(sent) {
					t.Fatalf("round %d: Flush returned with %d of the %d frames sent delivered", round, got, sent)
				}
				nodes[3].check(t)
			}
			if s := nodes[2].tr.Stats(); s.Forwarded < uint64(sent) {
				t.Fatalf("2 forwarded %d frames, want %d or more", s.Forwarded, sent)
			}

			// The relay leaves: 3 can no longer be reached, and Flush
			// does not wait for what is sent to it now.
			nodes[2].tr.Close()
			waitFor(t, "1 lost its connection to 2", func() bool { return !nodes[1].tr.Connected(2) })
			if err := streamFrom(ctx, nodes[1].tr, 3, sent, 10, size); err != nil {
				t.Fatal(err)
			}
			if err := nodes[1].tr.Flush(ctx); err != nil {
				t.Fatalf("Flush with no path to the peer: %v (want nil)", err)
			}
		})
	}
}

// streamFrom sends n frames of size bytes from a to node to, numbered
// from first (relayNode's numbering).
func streamFrom(ctx context.Context, a *tcp.Transport, to core.NodeID, first, n, size int) error {
	buf := make([]byte, size)
	for i := range n {
		binary.LittleEndian.PutUint64(buf, uint64(first+i))
		if err := a.SendCopy(ctx, to, wire.Frame{Kind: seqKind, Payload: buf}); err != nil {
			return fmt.Errorf("frame %d: %w", first+i, err)
		}
	}
	return nil
}

// A node that relays for two peers is part of their path: its Flush waits
// while it has carried frames between them lately and both are still
// connected to it, and returns once one of them has gone, so that a relay
// finishing its own work does not cut off the last frames between them.
func TestFlushWaitsWhileRelaying(t *testing.T) {
	nodes := relayMesh(t, []core.NodeID{1, 2, 3}, nil)
	cut(nodes, 1, 3, true)
	keep(t, nodes, []core.NodeID{1, 3}, 2)
	relayExchange(t, nodes, 1, 3, 100, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := nodes[2].tr.Flush(ctx)
	cancel()
	if err != context.DeadlineExceeded {
		t.Fatalf("the relay's Flush with both ends connected: %v, want %v", err, context.DeadlineExceeded)
	}
	nodes[3].tr.Close()
	waitFor(t, "2 disconnected from 3", func() bool { return !nodes[2].tr.Connected(3) })
	ctx, cancel = context.WithTimeout(context.Background(), transporttest.Timeout)
	defer cancel()
	if err := nodes[2].tr.Flush(ctx); err != nil {
		t.Fatalf("the relay's Flush once an end has gone: %v", err)
	}
}
