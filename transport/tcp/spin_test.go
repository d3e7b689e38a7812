package tcp_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// blockingHandler holds its first delivery until release is closed, so
// that the connection's reader is stuck in it: the reader is what clears
// a closed connection from its peer.
type blockingHandler struct {
	once    sync.Once
	holding chan struct{} // closed once the first delivery is held
	release chan struct{}
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{holding: make(chan struct{}), release: make(chan struct{})}
}

func (h *blockingHandler) Deliver(wire.Frame) {
	first := false
	h.once.Do(func() { first = true; close(h.holding) })
	if first {
		<-h.release
	}
}

func (h *blockingHandler) Hint(core.PeerHint) {}

// yieldMany gives every runnable goroutine many chances to run; a writer
// that spins runs its loop on each of them.
func yieldMany() {
	for range 2000 {
		runtime.Gosched()
	}
}

// heldReader returns two connected transports, a (node 1) and b (node 2),
// with b's writer to a running and b's reader held in its handler hb by a
// frame from a.
func heldReader(t *testing.T) (a, b *tcp.Transport, hb *blockingHandler) {
	t.Helper()
	a, b = listen(t, config(1, nil)), listen(t, config(2, nil))
	hb = newBlockingHandler()
	ra := transporttest.NewRecorder()
	a.SetHandler(ra)
	b.SetHandler(hb)
	a.SetPeer(2, b.Addr())
	b.SetPeer(1, a.Addr())
	ctx := context.Background()
	if err := b.Send(ctx, 1, frame(0)); err != nil { // b's writer to a runs
		t.Fatal(err)
	}
	ra.Wait(t, transporttest.Timeout, "b's frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	if err := a.Send(ctx, 2, frame(0)); err != nil { // on b's connection
		t.Fatal(err)
	}
	select {
	case <-hb.holding: // b's reader is held in Deliver
	case <-time.After(transporttest.Timeout):
		t.Fatal("a's frame never reached b")
	}
	return a, b, hb
}

// While a transport closes, a peer's writer whose connection is still in
// place (its reader has not ended yet: here it is held in the handler)
// ends; it does not start run after run over the connection, each
// allocating a write buffer. It did: in a process running 128 nodes, the
// writers of nodes being closed and of connections being torn down took
// over a quarter of the CPU, and the other nodes' heartbeats came late.
func TestClosingWriterDoesNotSpin(t *testing.T) {
	_, b, hb := heldReader(t)
	ctx := context.Background()
	before := tcp.WriterRuns(b)
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	deadline := time.Now().Add(transporttest.Timeout)
	for !errors.Is(b.Send(ctx, 1, frame(1)), transport.ErrClosed) {
		if time.Now().After(deadline) {
			t.Fatal("b never started closing")
		}
		runtime.Gosched()
	}
	yieldMany()
	runs := tcp.WriterRuns(b) - before
	close(hb.release)
	<-closed
	if runs > 1 {
		t.Errorf("b's writer started %d runs while b was closing, want at most 1", runs)
	}
}

// A writer whose connection broke (a write failed) waits for the reader to
// clear it, rather than starting run after run over it meanwhile; the
// reader may be held for a while by its handler (a host's full inbox).
func TestBrokenConnectionWriterDoesNotSpin(t *testing.T) {
	a, b, hb := heldReader(t)
	ctx := context.Background()
	before := tcp.WriterRuns(b)
	a.Close()
	// b writes until a write fails (the first ones may still be accepted
	// by the socket).
	deadline := time.Now().Add(transporttest.Timeout)
	for seq := uint64(1); !tcp.ConnStopped(b, 1); seq++ {
		if time.Now().After(deadline) {
			t.Fatal("b's connection to the closed a never broke")
		}
		b.Send(ctx, 1, frame(seq))
		time.Sleep(time.Millisecond)
	}
	yieldMany()
	runs := tcp.WriterRuns(b) - before
	close(hb.release)
	if runs > 1 {
		t.Errorf("b's writer started %d runs over its broken connection, want at most 1", runs)
	}
}
