package mem_test

import (
	"context"
	"errors"
	"flag"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/mem"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

var seed = flag.Uint64("seed", 1, "seed of the random frame sizes, loss and jitter")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func factory(cfg mem.Config) transporttest.Factory {
	return func(t *testing.T, n int, opt transporttest.Options) []transport.Transport {
		c := cfg
		c.QueueLen, c.MaxFrameSize = opt.QueueLen, opt.MaxFrameSize
		hub := newHub(t, c)
		ts := make([]transport.Transport, n)
		for i := range ts {
			e, err := hub.Join(core.NodeID(i + 1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			ts[i] = e
		}
		for _, a := range ts {
			for _, b := range ts {
				if a != b {
					a.SetPeer(b.Self(), b.Addr())
				}
			}
		}
		return ts
	}
}

// TestContract runs the transport contract (package transport doc) on a
// perfect hub and on one with latency and jitter, which must not reorder.
func TestContract(t *testing.T) {
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	t.Run("perfect", func(t *testing.T) { transporttest.Run(t, factory(mem.Config{Seed: *seed}), *seed) })
	t.Run("jitter", func(t *testing.T) {
		transporttest.Run(t, factory(mem.Config{Seed: *seed, Latency: 50 * time.Microsecond, Jitter: 200 * time.Microsecond}), *seed)
	})
}

func newHub(t *testing.T, cfg mem.Config) *mem.Hub {
	t.Helper()
	hub, err := mem.NewHub(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return hub
}

func join(t *testing.T, hub *mem.Hub, id core.NodeID) (*mem.Endpoint, *transporttest.Recorder) {
	t.Helper()
	e, err := hub.Join(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	r := transporttest.NewRecorder()
	e.SetHandler(r)
	return e, r
}

func frame(seq uint64) wire.Frame {
	return wire.Frame{Kind: transporttest.KindTest, Payload: transporttest.Payload(seq, 0)}
}

// TestLoss checks that injected loss drops about the configured share of
// frames, never reorders the rest, and is reproducible from the seed.
func TestLoss(t *testing.T) {
	const n, p = 4000, 0.25
	run := func() []uint64 {
		hub := newHub(t, mem.Config{Loss: p, Seed: *seed})
		a, _ := join(t, hub, 1)
		_, rb := join(t, hub, 2)
		a.SetPeer(2, mem.Addr(2))
		for s := range uint64(n) {
			if err := a.Send(context.Background(), 2, frame(s)); err != nil {
				t.Fatal(err)
			}
		}
		// A marker sent after loss is turned off tells when all arrived.
		hub.SetLoss(0)
		if err := a.Send(context.Background(), 2, frame(n)); err != nil {
			t.Fatal(err)
		}
		rb.Wait(t, transporttest.Timeout, "the marker", func(fs []wire.Frame, _ []core.PeerHint) bool {
			return len(fs) > 0 && mustSeq(fs[len(fs)-1]) == n
		})
		var got []uint64
		for _, f := range rb.Frames() {
			got = append(got, mustSeq(f))
		}
		return got[:len(got)-1]
	}
	got := run()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("reordered: seq %d after %d", got[i], got[i-1])
		}
	}
	lost := float64(n-len(got)) / n
	// Binomial(4000, 0.25): the standard deviation of the share is 0.007,
	// so 0.05 is seven standard deviations.
	if math.Abs(lost-p) > 0.05 {
		t.Fatalf("lost %.3f of the frames, want about %.2f", lost, p)
	}
	again := run()
	if len(again) != len(got) {
		t.Fatalf("same seed, different loss: %d then %d frames delivered", len(got), len(again))
	}
}

// TestRestartAndHint checks that frames to an absent endpoint are dropped
// with a hint to the sender, and that an endpoint joining again under the
// same id (a restarted process) receives what is sent afterwards.
func TestRestartAndHint(t *testing.T) {
	hub := newHub(t, mem.Config{})
	a, ra := join(t, hub, 1)
	b, rb := join(t, hub, 2)
	a.SetPeer(2, b.Addr())
	if err := a.Send(context.Background(), 2, frame(0)); err != nil {
		t.Fatal(err)
	}
	rb.Wait(t, transporttest.Timeout, "the first frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	// b answers without a book entry: a is known because it sent to b.
	if err := b.Send(context.Background(), 1, frame(0)); err != nil {
		t.Fatalf("reply to a sender not in the book: %v", err)
	}
	ra.Wait(t, transporttest.Timeout, "the reply", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	b.Close()
	if err := a.Send(context.Background(), 2, frame(1)); err != nil {
		t.Fatal(err)
	}
	ra.Wait(t, transporttest.Timeout, "a hint about node 2", func(_ []wire.Frame, hs []core.PeerHint) bool {
		return len(hs) == 1 && hs[0].Node == 2 && strings.Contains(hs[0].Reason, "no endpoint")
	})
	_, rb2 := join(t, hub, 2)
	if err := a.Send(context.Background(), 2, frame(2)); err != nil {
		t.Fatal(err)
	}
	rb2.Wait(t, transporttest.Timeout, "the frame at the restarted node", func(fs []wire.Frame, _ []core.PeerHint) bool {
		return len(fs) == 1 && mustSeq(fs[0]) == 2
	})
	if _, err := hub.Join(2); !errors.Is(err, transport.ErrAddrInUse) {
		t.Fatalf("joining an id twice: got %v, want ErrAddrInUse", err)
	}
}

// TestCut checks that a cut drops frames both ways until healed.
func TestCut(t *testing.T) {
	hub := newHub(t, mem.Config{})
	a, _ := join(t, hub, 1)
	_, rb := join(t, hub, 2)
	a.SetPeer(2, mem.Addr(2))
	hub.Cut(2, 1)
	if err := a.Send(context.Background(), 2, frame(0)); err != nil {
		t.Fatal(err)
	}
	hub.Heal(1, 2)
	if err := a.Send(context.Background(), 2, frame(1)); err != nil {
		t.Fatal(err)
	}
	rb.Wait(t, transporttest.Timeout, "the frame after healing", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) > 0 })
	if fs := rb.Frames(); len(fs) != 1 || mustSeq(fs[0]) != 1 {
		t.Fatalf("got %d frames (first seq %d), want only seq 1", len(fs), mustSeq(fs[0]))
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []mem.Config{{QueueLen: -1}, {Loss: 1.5}, {Latency: -1}, {MaxFrameSize: -1}} {
		if _, err := mem.NewHub(c); !errors.Is(err, transport.ErrBadConfig) {
			t.Errorf("%+v: got %v, want ErrBadConfig", c, err)
		}
	}
}

func mustSeq(f wire.Frame) uint64 {
	s, ok := transporttest.Seq(f.Payload)
	if !ok {
		panic("corrupted payload")
	}
	return s
}

// taker is a transport.Taker that declines the TryDeliver calls its
// decline function picks (as a full inbox would) and records every frame
// it takes, by either path, in order.
type taker struct {
	*transporttest.Recorder
	mu      sync.Mutex
	tries   int
	direct  int
	decline func(try int) bool
}

func (k *taker) TryDeliver(f wire.Frame) bool {
	k.mu.Lock()
	k.tries++
	no := k.decline(k.tries)
	if !no {
		k.direct++
	}
	k.mu.Unlock()
	if no {
		return false
	}
	k.Recorder.Deliver(f)
	return true
}

// takerPair joins nodes 1 and 2 to a hub of cfg and returns node 1's
// transport, which knows node 2, and node 2's handler, a taker that
// declines the offers decline says to.
func takerPair(t *testing.T, cfg mem.Config, decline func(try int) bool) (*mem.Endpoint, *taker) {
	t.Helper()
	hub := newHub(t, cfg)
	a, _ := hub.Join(1)
	b, _ := hub.Join(2)
	t.Cleanup(func() { a.Close(); b.Close() })
	a.SetPeer(2, b.Addr())
	k := &taker{Recorder: transporttest.NewRecorder(), decline: decline}
	b.SetHandler(k)
	return a, k
}

// TestDirectPathKeepsOrder checks the direct path (transport.Taker): a
// frame is handed over by Send itself when nothing waits before it, and
// queued behind the frames that wait otherwise, so that the frames
// of a pair arrive in order however the receiver declines.
func TestDirectPathKeepsOrder(t *testing.T) {
	a, k := takerPair(t, mem.Config{}, func(try int) bool { return try%7 < 2 })
	// Rounds of frames, each sent once the one before has arrived, so that
	// every round starts with nothing queued: its first frame is offered
	// to TryDeliver, and a declined one makes the rest of the round queue.
	const n, round = 3000, 10
	for i := range n {
		if err := a.Send(context.Background(), 2, wire.Frame{Kind: 1, Payload: transporttest.Payload(uint64(i), 0)}); err != nil {
			t.Fatal(err)
		}
		if (i+1)%round == 0 {
			k.Wait(t, transporttest.Timeout, "the round", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == i+1 })
		}
	}
	for i, f := range k.Frames() {
		if s, ok := transporttest.Seq(f.Payload); !ok || s != uint64(i) {
			t.Fatalf("frame %d carries seq %d (ok %v): the order broke", i, s, ok)
		}
	}
	k.mu.Lock()
	direct := k.direct
	k.mu.Unlock()
	if direct == 0 || direct == n {
		t.Fatalf("%d of %d frames took the direct path, want some but not all (the receiver declines some)", direct, n)
	}
}

// TestDirectPathNotWithLatency checks that a hub with latency never hands
// a frame over on the sender's goroutine.
func TestDirectPathNotWithLatency(t *testing.T) {
	a, k := takerPair(t, mem.Config{Latency: time.Millisecond}, func(int) bool { return false })
	for i := range 10 {
		if err := a.Send(context.Background(), 2, wire.Frame{Kind: 1, Payload: transporttest.Payload(uint64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	k.Wait(t, transporttest.Timeout, "every frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 10 })
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tries != 0 {
		t.Errorf("TryDeliver called %d times on a hub with latency, want 0", k.tries)
	}
}

// TestKeepReadiesLinks: Keep introduces an endpoint to the peers it keeps
// before any frame, as a first frame would (the peer can then answer it
// without an address of its own), and passes over itself and peers
// without an address.
func TestKeepReadiesLinks(t *testing.T) {
	hub := newHub(t, mem.Config{})
	a, rec := join(t, hub, 1)
	b, _ := join(t, hub, 2)
	a.SetPeer(2, b.Addr())
	ctx := context.Background()
	if err := b.Send(ctx, 1, wire.Frame{Kind: 1}); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("before Keep, a send from b to a: %v, want ErrUnknownPeer", err)
	}
	a.Keep([]core.NodeID{1, 2, 99})
	if err := b.Send(ctx, 1, wire.Frame{Kind: 1, Payload: []byte("hi")}); err != nil {
		t.Fatalf("after Keep, a send from b to a: %v", err)
	}
	rec.Wait(t, transporttest.Timeout, "b's frame", func(fs []wire.Frame, _ []core.PeerHint) bool {
		return len(fs) == 1 && fs[0].Src == 2 && string(fs[0].Payload) == "hi"
	})
	if err := a.Send(ctx, 99, wire.Frame{Kind: 1}); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Fatalf("a send to a peer Keep passed over: %v, want ErrUnknownPeer", err)
	}
}

// TestFlushWaitsForDelivery: Flush returns once every frame sent before it
// has reached the receiver's handler (here delayed by the hub's latency),
// does not wait for a removed peer's, and fails after Close.
func TestFlushWaitsForDelivery(t *testing.T) {
	hub := newHub(t, mem.Config{Latency: 20 * time.Millisecond})
	a, _ := join(t, hub, 1)
	b, rec := join(t, hub, 2)
	c, _ := join(t, hub, 3)
	a.SetPeer(2, b.Addr())
	a.SetPeer(3, c.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
	defer cancel()
	const n = 50
	for i := range n {
		if err := a.Send(ctx, 2, wire.Frame{Kind: 1, Payload: transporttest.Payload(uint64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := len(rec.Frames()); got != n {
		t.Fatalf("Flush returned with %d of %d frames delivered", got, n)
	}
	if err := a.Send(ctx, 3, wire.Frame{Kind: 1}); err != nil {
		t.Fatal(err)
	}
	a.RemovePeer(3)
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush with a removed peer's frame queued: %v", err)
	}
	a.Close()
	if err := a.Flush(ctx); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Flush after Close: %v, want ErrClosed", err)
	}
}
