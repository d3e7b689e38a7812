package transporttest

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// Options tune the transports a [Factory] builds. Zero fields mean the
// implementation's defaults.
type Options struct {
	// QueueLen is the send queue length per peer, in frames.
	QueueLen int
	// MaxFrameSize is the frame body limit, in bytes.
	MaxFrameSize int
	// SocketBuffer is the kernel socket buffer size, in bytes, for
	// transports that have one (so that back-pressure shows up after
	// little data); others ignore it.
	SocketBuffer int
}

// Factory builds n transports with distinct node ids whose address books
// name each other, with no handler installed, and arranges (t.Cleanup) for
// them to be closed at the end of the test.
type Factory func(t *testing.T, n int, opt Options) []transport.Transport

// Timeout bounds every wait of the suite: a hung transport fails the test
// instead of hanging it. It is not a performance target.
const Timeout = 20 * time.Second

// KindTest is the message kind of the suite's frames.
var KindTest = core.MakeKind(core.ProtoTest, 1)

// Payload returns a test payload: seq as 8 bytes, then pad bytes.
func Payload(seq uint64, pad int) []byte {
	p := make([]byte, 8+pad)
	binary.BigEndian.PutUint64(p, seq)
	for i := 8; i < len(p); i++ {
		p[i] = byte(seq) + byte(i)
	}
	return p
}

// Seq reads the sequence number of a payload made by Payload; it returns
// false if the payload is not one (wrong length or corrupted padding).
func Seq(p []byte) (uint64, bool) {
	if len(p) < 8 {
		return 0, false
	}
	seq := binary.BigEndian.Uint64(p)
	for i := 8; i < len(p); i++ {
		if p[i] != byte(seq)+byte(i) {
			return 0, false
		}
	}
	return seq, true
}

// Run runs the contract tests against the transports f builds. seed drives
// the random frame sizes; the caller prints it (or takes it from a flag)
// so that a failure can be replayed.
func Run(t *testing.T, f Factory, seed uint64) {
	t.Run("Exchange", func(t *testing.T) { testExchange(t, f) })
	t.Run("FIFOUnderLoad", func(t *testing.T) { testFIFOUnderLoad(t, f, seed) })
	t.Run("BackPressure", func(t *testing.T) { testBackPressure(t, f) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, f) })
	t.Run("LateHandler", func(t *testing.T) { testLateHandler(t, f) })
}

func handlers(ts []transport.Transport) []*Recorder {
	rs := make([]*Recorder, len(ts))
	for i, tr := range ts {
		rs[i] = NewRecorder()
		tr.SetHandler(rs[i])
	}
	return rs
}

// testExchange: every node sends frames to every other; each frame arrives
// once, intact, with the sender's id as Src, the receiver's as Dst, and the
// kind and epoch it was sent with.
func testExchange(t *testing.T, f Factory) {
	const n, per = 3, 10
	ts := f(t, n, Options{})
	rs := handlers(ts)
	ctx := context.Background()
	for _, a := range ts {
		for _, b := range ts {
			if a == b {
				continue
			}
			for s := range uint64(per) {
				fr := wire.Frame{Kind: KindTest, Epoch: 7 + s, Payload: Payload(s, int(s))}
				if err := a.Send(ctx, b.Self(), fr); err != nil {
					t.Fatalf("%v→%v: %v", a.Self(), b.Self(), err)
				}
			}
		}
	}
	for i, b := range ts {
		rs[i].Wait(t, Timeout, "all frames at "+b.Self().String(), func(fs []wire.Frame, _ []core.PeerHint) bool {
			return len(fs) >= per*(n-1)
		})
		fs := rs[i].Frames()
		if len(fs) != per*(n-1) {
			t.Fatalf("%v got %d frames, want %d", b.Self(), len(fs), per*(n-1))
		}
		next := map[core.NodeID]uint64{}
		for _, fr := range fs {
			seq, ok := Seq(fr.Payload)
			switch {
			case !ok:
				t.Fatalf("%v: corrupted payload %x", b.Self(), fr.Payload)
			case fr.Dst != b.Self() || fr.Kind != KindTest || fr.Epoch != 7+seq:
				t.Fatalf("%v: frame %v (seq %d): got dst %v kind %v epoch %d", b.Self(), fr, seq, fr.Dst, fr.Kind, fr.Epoch)
			case seq != next[fr.Src]:
				t.Fatalf("%v: from %v got seq %d, want %d", b.Self(), fr.Src, seq, next[fr.Src])
			}
			next[fr.Src]++
		}
	}
}

// testFIFOUnderLoad: two senders stream frames of random sizes (up to
// 64 KiB) to one receiver that streams back to both, all at once; each
// pair's frames arrive complete and in order (package doc: FIFO per pair).
func testFIFOUnderLoad(t *testing.T, f Factory, seed uint64) {
	const per = 2000
	ts := f(t, 3, Options{})
	rs := handlers(ts)
	ctx := context.Background()
	type flow struct{ from, to int }
	flows := []flow{{1, 0}, {2, 0}, {0, 1}, {0, 2}}
	var wg sync.WaitGroup
	errs := make(chan error, len(flows))
	for fi, fl := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(fi)))
			for s := range uint64(per) {
				pad := rng.IntN(64)
				if rng.IntN(50) == 0 {
					pad = rng.IntN(64 << 10)
				}
				if err := ts[fl.from].Send(ctx, ts[fl.to].Self(), wire.Frame{Kind: KindTest, Payload: Payload(s, pad)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("send: %v", err)
	}
	want := map[int][]int{0: {1, 2}, 1: {0}, 2: {0}}
	for to, froms := range want {
		rs[to].Wait(t, Timeout, "the streams at "+ts[to].Self().String(), func(fs []wire.Frame, _ []core.PeerHint) bool {
			return len(fs) >= per*len(froms)
		})
		next := map[core.NodeID]uint64{}
		for _, fr := range rs[to].Frames() {
			seq, ok := Seq(fr.Payload)
			if !ok {
				t.Fatalf("%v: corrupted payload of %d bytes from %v", ts[to].Self(), len(fr.Payload), fr.Src)
			}
			if seq != next[fr.Src] {
				t.Fatalf("%v: from %v got seq %d, want %d (FIFO per pair broken)", ts[to].Self(), fr.Src, seq, next[fr.Src])
			}
			next[fr.Src]++
		}
		for _, from := range froms {
			if got := next[ts[from].Self()]; got != per {
				t.Fatalf("%v: %d frames from %v, want %d", ts[to].Self(), got, ts[from].Self(), per)
			}
		}
	}
}

// testBackPressure: with the receiver's handler stalled, Send eventually
// blocks until its context ends and returns ErrQueueFull; a done context
// then makes Send fail at once; once the receiver goes on, every frame that
// Send accepted arrives, in order.
//
// A timed Send can also end while the queue is full only because the
// writer has not run yet (a loaded machine), so after each blocked Send a
// Send with a done context probes the queue: it may take the frame (the
// queue had room), and the test goes on filling; once it refuses, the
// queue was full.
func testBackPressure(t *testing.T, f Factory) {
	const pad = 16 << 10
	const limit = 4096 // frames: far more than the queue and the socket buffers hold
	ts := f(t, 2, Options{QueueLen: 8, SocketBuffer: 32 << 10})
	rs := handlers(ts)
	a, b := ts[0], ts[1]
	rs[1].Hold()
	t.Cleanup(rs[1].Release) // runs before the factory's Close
	accepted := uint64(0)
	blocked, refused := 0, false
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for accepted < limit && !refused {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := a.Send(ctx, b.Self(), wire.Frame{Kind: KindTest, Payload: Payload(accepted, pad)})
		cancel()
		if err == nil {
			accepted++
			continue
		}
		if !errors.Is(err, transport.ErrQueueFull) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("blocked send: got %v, want ErrQueueFull wrapping DeadlineExceeded", err)
		}
		blocked++
		err = a.Send(done, b.Self(), wire.Frame{Kind: KindTest, Payload: Payload(accepted, pad)})
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, transport.ErrQueueFull) && errors.Is(err, context.Canceled):
			refused = true
		default:
			t.Fatalf("send with a done context after a blocked send: got %v, want success or ErrQueueFull wrapping Canceled", err)
		}
	}
	if !refused {
		t.Fatalf("%d frames of %d bytes accepted with the receiver stalled (%d timed sends blocked): no back-pressure", accepted, pad, blocked)
	}
	t.Logf("back-pressure after %d frames of %d bytes (%d timed sends blocked)", accepted, pad, blocked)
	rs[1].Release()
	rs[1].Wait(t, Timeout, "the accepted frames", func(fs []wire.Frame, _ []core.PeerHint) bool {
		return uint64(len(fs)) >= accepted
	})
	for i, fr := range rs[1].Frames() {
		if seq, ok := Seq(fr.Payload); !ok || seq != uint64(i) {
			t.Fatalf("frame %d after release: seq %d (valid %v)", i, seq, ok)
		}
	}
	// The refused frames were not queued: sending goes on from accepted.
	if err := a.Send(context.Background(), b.Self(), wire.Frame{Kind: KindTest, Payload: Payload(accepted, 0)}); err != nil {
		t.Fatal(err)
	}
	rs[1].Wait(t, Timeout, "the frame after the release", func(fs []wire.Frame, _ []core.PeerHint) bool {
		return uint64(len(fs)) == accepted+1
	})
}

// testErrors: the sentinels of package transport.
func testErrors(t *testing.T, f Factory) {
	ts := f(t, 2, Options{MaxFrameSize: 1024})
	handlers(ts)
	a, b := ts[0], ts[1]
	ctx := context.Background()
	fr := wire.Frame{Kind: KindTest, Payload: Payload(0, 0)}
	if err := a.Send(ctx, a.Self(), fr); !errors.Is(err, transport.ErrSelf) {
		t.Errorf("send to self: got %v, want ErrSelf", err)
	}
	stranger := max(a.Self(), b.Self()) + 100
	if err := a.Send(ctx, stranger, fr); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("send to a node not in the book: got %v, want ErrUnknownPeer", err)
	}
	big := wire.Frame{Kind: KindTest, Payload: make([]byte, 2048)}
	if err := a.Send(ctx, b.Self(), big); !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Errorf("frame over the limit: got %v, want ErrFrameTooLarge", err)
	}
	a.RemovePeer(b.Self())
	if err := a.Send(ctx, b.Self(), fr); !errors.Is(err, transport.ErrUnknownPeer) {
		t.Errorf("send to a removed peer: got %v, want ErrUnknownPeer", err)
	}
	a.SetPeer(b.Self(), b.Addr())
	if err := a.Send(ctx, b.Self(), fr); err != nil {
		t.Errorf("send after re-adding the peer: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := a.Send(ctx, b.Self(), fr); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("send after close: got %v, want ErrClosed", err)
	}
}

// testLateHandler: frames that arrive before the receiver installs its
// handler wait for it; none is lost.
func testLateHandler(t *testing.T, f Factory) {
	const per = 50
	ts := f(t, 2, Options{})
	a, b := ts[0], ts[1]
	ra := NewRecorder()
	a.SetHandler(ra)
	for s := range uint64(per) {
		if err := a.Send(context.Background(), b.Self(), wire.Frame{Kind: KindTest, Payload: Payload(s, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	rb := NewRecorder()
	b.SetHandler(rb)
	rb.Wait(t, Timeout, "frames sent before the handler", func(fs []wire.Frame, _ []core.PeerHint) bool {
		return len(fs) >= per
	})
	for i, fr := range rb.Frames() {
		if seq, _ := Seq(fr.Payload); seq != uint64(i) {
			t.Fatalf("frame %d has seq %d", i, seq)
		}
	}
}
