package colltest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNewRefusesEmpty(t *testing.T) {
	if _, err := New(0); !errors.Is(err, ErrSize) {
		t.Fatalf("New(0) err = %v, want ErrSize", err)
	}
	if _, err := NewSync(-1); !errors.Is(err, ErrSize) {
		t.Fatalf("NewSync(-1) err = %v, want ErrSize", err)
	}
}

// Messages from one sender with one tag arrive in order; tags and senders
// are separate queues.
func TestFIFOPerSenderAndTag(t *testing.T) {
	net, _ := New(3)
	ctx := context.Background()
	a, b, c := net.Endpoint(0), net.Endpoint(1), net.Endpoint(2)
	for i := byte(0); i < 5; i++ {
		if err := a.Send(ctx, 2, 7, []byte{i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(ctx, 2, 7, []byte{100}); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx, 2, 8, []byte{200}); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Recv(ctx, 0, 8); err != nil || m[0] != 200 {
		t.Fatalf("Recv(0, 8) = %v, %v", m, err)
	}
	if m, err := c.Recv(ctx, 1, 7); err != nil || m[0] != 100 {
		t.Fatalf("Recv(1, 7) = %v, %v", m, err)
	}
	buf := make([]byte, 4)
	for i := byte(0); i < 5; i++ {
		if n, err := c.RecvInto(ctx, 0, 7, buf); err != nil || n != 1 || buf[0] != i {
			t.Fatalf("RecvInto(0, 7) #%d = %d %v, %v", i, n, buf[:1], err)
		}
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("Pending() = %d after receiving everything", n)
	}
}

// Fail ends a pending Recv on another rank; a crashed rank's own calls fail
// with ErrCrashed; a rendezvous Send returns when the message is taken.
func TestFailuresAndRendezvous(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	net, _ := NewSync(2)
	net.FailAt(1, 1) // rank 1's second call crashes it
	done := make(chan error, 1)
	go func() { done <- net.Endpoint(0).Send(ctx, 1, 0, []byte("x")) }()
	if m, err := net.Endpoint(1).Recv(ctx, 0, 0); err != nil || string(m) != "x" {
		t.Fatalf("Recv = %q, %v", m, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("rendezvous Send after the Recv: %v", err)
	}
	pending := make(chan error, 1)
	go func() { _, err := net.Endpoint(0).Recv(ctx, 1, 0); pending <- err }()
	if _, err := net.Endpoint(1).Recv(ctx, 0, 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashed rank's Recv: %v, want ErrCrashed", err)
	}
	var pf *PeerFailedError
	if err := <-pending; !errors.As(err, &pf) || pf.Rank != 1 {
		t.Fatalf("pending Recv on rank 0: %v, want PeerFailedError{1}", err)
	}
	if ctx.Err() != nil {
		t.Fatal("safety deadline reached")
	}
}
