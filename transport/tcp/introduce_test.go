package tcp_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp/tcptest"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

func gotFrames(n int) func([]wire.Frame, []core.PeerHint) bool {
	return func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) >= n }
}

// Introduce learns a seed's id from its address, and the connection it
// opened carries frames both ways.
func TestIntroduceLearnsID(t *testing.T) {
	a := listen(t, config(7, nil))
	b := listen(t, config(3, nil))
	ra, rb := transporttest.NewRecorder(), transporttest.NewRecorder()
	a.SetHandler(ra)
	b.SetHandler(rb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, err := b.Introduce(ctx, a.Addr())
	if err != nil || id != 7 {
		t.Fatalf("Introduce = %v, %v; want n7", id, err)
	}
	if err := b.Send(ctx, 7, frame(1)); err != nil {
		t.Fatal(err)
	}
	ra.Wait(t, transporttest.Timeout, "a frame at a", gotFrames(1))
	if err := a.Send(ctx, 3, frame(2)); err != nil { // over the inbound connection
		t.Fatal(err)
	}
	rb.Wait(t, transporttest.Timeout, "a frame at b", gotFrames(1))
	// Introducing the same node again (its connection exists) still works.
	if id, err := b.Introduce(ctx, a.Addr()); err != nil || id != 7 {
		t.Fatalf("second Introduce = %v, %v", id, err)
	}
}

// Introduce fails, with the reason, on a node of another secret and on an
// address where nobody listens.
func TestIntroduceRefused(t *testing.T) {
	other := config(7, nil)
	other.Secret = []byte("another secret of sixteen+ bytes")
	a := listen(t, other)
	b := listen(t, config(3, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.Introduce(ctx, a.Addr()); err == nil {
		t.Fatal("Introduce to a node of another secret succeeded")
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	if _, err := b.Introduce(ctx, dead); err == nil {
		t.Fatal("Introduce to a closed port succeeded")
	}
}

// With QueueUnknown, frames for a node without an address wait until
// SetPeer gives one; without it, Send refuses them.
func TestQueueUnknown(t *testing.T) {
	cfg := config(1, nil)
	cfg.QueueUnknown = true
	a := listen(t, cfg)
	b := listen(t, config(2, nil))
	rb := transporttest.NewRecorder()
	b.SetHandler(rb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 3 {
		if err := a.Send(ctx, 2, frame(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	a.SetPeer(2, b.Addr())
	rb.Wait(t, transporttest.Timeout, "the queued frames", gotFrames(3))
	if err := b.Send(ctx, 9, frame(0)); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("Send to an unknown node without QueueUnknown: %v", err)
	}
}

// Over TLS frames flow as over plain TCP; a plain node cannot talk to a TLS
// one.
func TestTLS(t *testing.T) {
	tc := tcptest.SelfSignedTLS(t)
	ca, cb := config(1, nil), config(2, nil)
	ca.TLS, cb.TLS = tc, tc
	a, b := listen(t, ca), listen(t, cb)
	rb := transporttest.NewRecorder()
	b.SetHandler(rb)
	a.SetPeer(2, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Send(ctx, 2, frame(1)); err != nil {
		t.Fatal(err)
	}
	rb.Wait(t, transporttest.Timeout, "a frame over TLS", gotFrames(1))

	plain := listen(t, config(3, nil))
	if _, err := plain.Introduce(ctx, b.Addr()); err == nil {
		t.Fatal("a plain node completed a handshake with a TLS node")
	}
}
