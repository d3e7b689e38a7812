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

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// The tests in this file check callers' progress (Transport.PollUntil):
// frames that callers read off a shared-memory ring and frames that the
// connection's reader goroutine reads are delivered once each and in
// order, whatever their size; the reader takes over when callers stop;
// and a peer that dies under polling callers ends the connection as
// usual.

// pollWhileTesting starts two goroutines that poll tr until the test
// ends, for up to d at a time, with pauses of random length between
// (so that the readers also park, armed or not, and take over).
func pollWhileTesting(t *testing.T, tr *tcp.Transport, d time.Duration, stream uint64) {
	t.Cleanup(startPollers(tr, 2, d, stream))
}

// startPollers starts n goroutines that poll tr for up to d at a time
// until the returned function, which waits for them, is called; with a
// stream (> 0), each pauses for random times between polls.
func startPollers(tr *tcp.Transport, n int, d time.Duration, stream uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range uint64(n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(*seed, 100+uint64(n)*stream+g))
			var never atomic.Uint32
			for {
				select {
				case <-done:
					return
				default:
				}
				tr.PollUntil(&never, 1, d)
				if stream > 0 && rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// shmPollPair returns transports a → c over shared memory, polling for
// spin after data frames.
func shmPollPair(t *testing.T) (a, c *tcp.Transport) {
	t.Helper()
	ca, cc := config(1, nil), config(2, nil)
	tcp.ShmInProcess(&ca)
	tcp.ShmInProcess(&cc)
	a, c = listen(t, ca), listen(t, cc)
	for _, tr := range []*tcp.Transport{a, c} {
		if err := tr.SetSpin(50 * time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())
	return a, c
}

// TestPollUntilOrder sends frames of every size (small ones that callers
// take, ones above wire.PlaceMin and above the ring's size that they
// leave to the reader) with pauses, while two callers poll the receiver
// and each waits for a frame of its own choosing: every frame arrives
// once, intact and in order; callers delivered some and the reader the
// rest; and the callers' done flags were set.
func TestPollUntilOrder(t *testing.T) {
	t.Logf("seed %d (replay: go test -run TestPollUntilOrder -seed %d)", *seed, *seed)
	rng := rand.New(rand.NewPCG(*seed, 30))
	a, c := shmPollPair(t)
	const n = 2000
	log := newSeqLog(n)
	var waits [n]atomic.Uint32 // waits[seq] is 1 once seq arrives
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind != seqKind {
			return
		}
		if seq, ok := log.add(f.Payload, true); ok && seq < n {
			waits[seq].Store(1)
		}
	}})
	var wg sync.WaitGroup
	var pollsDone atomic.Int64
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := g; next < n; next += 2 {
				for !c.PollUntil(&waits[next], 1, 200*time.Microsecond) {
					select {
					case <-log.done:
					default:
						continue
					}
					break
				}
				if waits[next].Load() != 0 {
					pollsDone.Add(1)
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := make([]byte, tcp.DefaultShmRingSize+1000)
	for seq := range uint64(n) {
		var size int
		switch r := rng.IntN(100); {
		case r < 3:
			size = tcp.DefaultShmRingSize + rng.IntN(1000) // larger than the ring
		case r < 10:
			size = wire.PlaceMin + rng.IntN(wire.PlaceMin) // the reader's
		default:
			size = 8 + rng.IntN(2000)
		}
		body := big[:size]
		seqBody(body, seq)
		if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: bytes.Clone(body)}); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(50) == 0 {
			flushAndPark(ctx, t, a, rng)
		}
	}
	log.wait(ctx, t)
	wg.Wait()
	log.check(t)
	st := c.Stats()
	t.Logf("%d frames in, %d by callers; %d waits ended by their frame", st.FramesIn, st.Polled, pollsDone.Load())
	if st.Polled == 0 || st.Polled >= st.FramesIn {
		t.Fatalf("%d of %d frames delivered by callers: want both callers and the reader", st.Polled, st.FramesIn)
	}
	if pollsDone.Load() != n {
		t.Fatalf("%d of %d waits saw their frame", pollsDone.Load(), n)
	}
	checkPath(t, a, pathKind{shm: true})
}

// TestPollUntilReaderTakesOver: once callers stop polling (one got its
// frame and left, another gave up), frames sent afterwards are delivered
// by the reader goroutine, which parked unarmed while the callers polled:
// no frame waits for a caller that never comes.
func TestPollUntilReaderTakesOver(t *testing.T) {
	a, c := shmPollPair(t)
	rec := transporttest.NewRecorder()
	var awaited atomic.Uint64 // the sequence number the caller waits for
	var arrived atomic.Uint32
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		rec.Deliver(f)
		if seq, ok := transporttest.Seq(f.Payload); ok && seq == awaited.Load() {
			arrived.Store(1)
		}
	}, OnHint: rec.Hint})
	ctx := context.Background()
	send := func(i int) {
		if err := a.Send(ctx, 2, wire.Frame{Kind: transporttest.KindTest, Payload: transporttest.Payload(uint64(i), 10)}); err != nil {
			t.Error(err)
		}
	}
	send(0)
	rec.Wait(t, transporttest.Timeout, "the first frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	got := 0
	// A loaded machine may let the reader win a round now and then: the
	// rounds go on (within a bound) until a caller has taken one.
	for round := 0; round < 20 || got == 0 && round < 500; round++ {
		// A caller polls until its frame comes, the reader parked
		// meanwhile, and leaves with it.
		awaited.Store(uint64(1 + 2*round))
		arrived.Store(0)
		go func() {
			time.Sleep(2 * time.Millisecond)
			send(1 + 2*round)
		}()
		for !c.PollUntil(&arrived, 1, 10*time.Millisecond) {
		}
		if c.Stats().Polled > uint64(got) {
			got++
		}
		// Nobody polls: the next frame is the reader's.
		send(2 + 2*round)
		want := 3 + 2*round
		rec.Wait(t, transporttest.Timeout, "the frame sent with no caller polling", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == want })
	}
	inSequence(t, rec.Frames())
	if got == 0 {
		t.Fatalf("stats %+v: no awaited frame delivered by its caller", c.Stats())
	}
}

// TestPollUntilPeerDies: the peer's transport closes while callers poll
// the ring; the connection ends with a hint as without them, the callers
// return, and polling a transport whose rings are gone returns at once.
// Stats counts exactly the frames that callers delivered, before and
// after the connection's end (its count moves to the transport's).
func TestPollUntilPeerDies(t *testing.T) {
	a, c := shmPollPair(t)
	rec := transporttest.NewRecorder()
	var byCaller atomic.Uint64
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if onPollUntil() {
			byCaller.Add(1)
		}
		rec.Deliver(f)
	}, OnHint: rec.Hint})
	ctx := context.Background()
	if err := a.Send(ctx, 2, wire.Frame{Kind: transporttest.KindTest, Payload: transporttest.Payload(0, 10)}); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, transporttest.Timeout, "the first frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	stop := startPollers(c, 3, time.Millisecond, 0)
	go func() {
		for i := uint64(1); ; i++ {
			if a.Send(ctx, 2, wire.Frame{Kind: transporttest.KindTest, Payload: transporttest.Payload(i, 100)}) != nil {
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	a.Close()
	rec.Wait(t, transporttest.Timeout, "a hint about node 1", func(_ []wire.Frame, hs []core.PeerHint) bool { return len(hs) > 0 })
	stop()
	inSequence(t, rec.Frames())
	st := c.Stats()
	t.Logf("%d frames in, %d by callers", st.FramesIn, st.Polled)
	if st.Polled != byCaller.Load() || st.FramesIn != uint64(len(rec.Frames())) {
		t.Errorf("after the connection's end: %d frames counted polled and %d in; callers delivered %d of %d", st.Polled, st.FramesIn, byCaller.Load(), len(rec.Frames()))
	}
	var never atomic.Uint32
	if c.PollUntil(&never, 1, time.Hour) {
		t.Fatal("PollUntil reported done with nothing done")
	}
}

// inSequence fails unless frames carry sequence numbers 0, 1, 2, …
// (transporttest.Payload), intact.
func inSequence(t *testing.T, frames []wire.Frame) {
	t.Helper()
	for i, f := range frames {
		seq, ok := transporttest.Seq(f.Payload)
		if !ok || seq != uint64(i) {
			t.Fatalf("frame %d: sequence number %d (intact: %v)", i, seq, ok)
		}
	}
}

// TestPollUntilAllocs: a caller that polls for each frame of a stream of
// small frames (which it reads itself) and large ones (which it leaves
// to the reader goroutine, parked unarmed with a deadline meanwhile)
// allocates nothing per frame, nor does the reader.
func TestPollUntilAllocs(t *testing.T) {
	a, c := shmPollPair(t)
	var arrived atomic.Uint32
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) { arrived.Store(1) }})
	ctx := context.Background()
	hdr := []byte{1, 2, 3, 4}
	f := wire.Frame{Kind: seqKind, Payload: hdr}
	bodies := [][]byte{make([]byte, 100), make([]byte, 64<<10), make([]byte, 1000), make([]byte, tcp.DefaultShmRingSize+100)}
	i := 0
	one := func() {
		arrived.Store(0)
		if err := a.SendDirect(ctx, 2, f, bodies[i%len(bodies)]); err != nil {
			t.Fatal(err)
		}
		i++
		for !c.PollUntil(&arrived, 1, time.Millisecond) {
		}
	}
	for range 20 { // warm up: dial, handshake, buffers
		one()
	}
	if allocs := testing.AllocsPerRun(200, one); allocs > 0 {
		t.Fatalf("%.2f allocations per frame, want 0", allocs)
	}
	if st := c.Stats(); st.Polled == 0 || st.Polled == st.FramesIn {
		t.Fatalf("stats %+v: want frames delivered by the caller and by the reader", st)
	}
}

// onPollUntil reports whether the calling goroutine is in PollUntil: a
// frame delivered by a caller's progress rather than by the reader.
func onPollUntil() bool {
	buf := make([]byte, 16<<10)
	return bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("(*Transport).PollUntil("))
}
