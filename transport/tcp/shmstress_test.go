package tcp_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// TestShmRingWritersAndReaders runs every writer and every reader of a
// small ring at once: the one-line write (TrySendDirect of a small
// frame, without the ring's lock), the direct write of a head and body
// (SendDirect), the writer goroutine's batches (Send) and frames larger
// than the ring; on the other side, two callers polling (PollUntil:
// readLineShm, nextFrame) and the reader goroutine, reading now as rung
// and now lazily (SetLazyReads), with pauses that park them. Every frame
// arrives intact, once and in order, and no connection ends: neither
// side ever finds the ring's indices inconsistent (Malformed) or loses a
// connection (Lost).
func TestShmRingWritersAndReaders(t *testing.T) {
	if !tcp.ShmSupported {
		t.Skip("no shared memory here")
	}
	t.Logf("seed %d (replay: go test -run TestShmRingWritersAndReaders -seed %d)", *seed, *seed)
	rng := rand.New(rand.NewPCG(*seed, 48))
	const ringSize = 4 << 10
	ca, cc := config(1, nil), config(2, nil)
	for _, cfg := range []*tcp.Config{&ca, &cc} {
		tcp.ShmInProcess(cfg)
		cfg.ShmRingSize = ringSize
	}
	a, c := listen(t, ca), listen(t, cc)
	for _, tr := range []*tcp.Transport{a, c} {
		if err := tr.SetSpin(50 * time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())
	n := 20000
	if testing.Short() {
		n = 4000
	}
	log := newSeqLog(n)
	waits := make([]atomic.Uint32, n) // waits[seq] is 1 once seq arrives
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind != seqKind {
			return
		}
		if seq, ok := log.add(f.Payload, true); ok && seq < uint64(n) {
			waits[seq].Store(1)
		}
	}})
	var wg sync.WaitGroup
	defer wg.Wait()
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := g; next < n; next += 2 {
				for !c.PollUntil(&waits[next], 1, 100*time.Microsecond) {
					select {
					case <-log.done:
						return
					default:
					}
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	big := make([]byte, 2*ringSize)
	lazy := false
	for seq := range uint64(n) {
		var size int
		switch r := rng.IntN(100); {
		case r < 50:
			size = 8 + rng.IntN(24) // one line of the ring
		case r < 95:
			size = 8 + rng.IntN(1500)
		default:
			size = ringSize + rng.IntN(ringSize) // larger than the ring
		}
		body := big[:size]
		seqBody(body, seq)
		cut := 8 + rng.IntN(size-7)
		var err error
		switch r := rng.IntN(20); {
		case r < 12:
			// A direct write declines while queued frames are
			// unwritten or the log is full: it is tried again a
			// while before the queue takes the frame.
			sent := false
			for try := 0; !sent && try < 200; try++ {
				if sent = a.TrySendDirect(2, wire.Frame{Kind: seqKind, Payload: body[:cut]}, body[cut:]); !sent {
					runtime.Gosched()
				}
			}
			if !sent {
				err = a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: bytes.Clone(body)})
			}
		case r < 18:
			err = a.SendDirect(ctx, 2, wire.Frame{Kind: seqKind, Payload: body[:cut]}, body[cut:])
		default:
			err = a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: bytes.Clone(body)})
		}
		if err != nil {
			t.Fatalf("frame %d: %v", seq, err)
		}
		if rng.IntN(500) == 0 {
			period := time.Duration(0)
			if lazy = !lazy; lazy {
				period = time.Millisecond
			}
			c.SetLazyReads(period)
		}
		if rng.IntN(200) == 0 {
			flushAndPark(ctx, t, a, rng)
		}
	}
	log.wait(ctx, t)
	log.check(t)
	for i, tr := range []*tcp.Transport{a, c} {
		st := tr.Stats()
		if st.Shm == 0 || st.Malformed != 0 || st.Lost != 0 {
			t.Fatalf("side %d: %d connections over shared memory, %d closed as malformed, %d lost; want some, 0, 0", i+1, st.Shm, st.Malformed, st.Lost)
		}
	}
	st := c.Stats()
	t.Logf("%d frames in, %d by callers; %d written directly, %d in all", st.FramesIn, st.Polled, a.Stats().Direct, a.Stats().FramesOut)
}
