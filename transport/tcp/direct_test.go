package tcp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// The tests in this file check SendDirect: frames written on the caller's
// goroutine stay in order with queued ones, the caller's buffer is not kept,
// Flush counts them, the steady state allocates nothing, and a peer that
// dies mid-stream neither hangs the sender nor goes unreported.

var (
	seqKind   = core.MakeKind(core.ProtoTest, 20)
	noiseKind = core.MakeKind(core.ProtoTest, 21)
)

// directPair returns two connected transports (a → c) with cfg's DirectMax,
// over loopback TCP if noUnix, else over the same-host Unix socket.
func directPair(t *testing.T, directMax int, path pathKind) (a, c *tcp.Transport) {
	t.Helper()
	return pathPair(t, path, func(ca, cc *tcp.Config) {
		ca.DirectMax, cc.DirectMax = directMax, directMax
		ca.QueueLen = 8 // a small queue: back-pressure mixes both paths
	})
}

// pathPair returns two transports of this process, a (node 1) and c
// (node 2), that know each other's address and connect over path; edit,
// if not nil, changes their configurations first.
func pathPair(t *testing.T, path pathKind, edit func(ca, cc *tcp.Config)) (a, c *tcp.Transport) {
	t.Helper()
	ca, cc := config(1, nil), config(2, nil)
	path.set(&ca)
	path.set(&cc)
	if edit != nil {
		edit(&ca, &cc)
	}
	a, c = listen(t, ca), listen(t, cc)
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())
	return a, c
}

// flushAndPark waits until a has written what it queued, then sleeps up
// to 3 ms (a random while from rng), so that the peer's readers park.
func flushAndPark(ctx context.Context, t *testing.T, a *tcp.Transport, rng *rand.Rand) {
	t.Helper()
	if err := tcp.FlushWritten(ctx, a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
}

// seqBody fills a body of n ≥ 8 bytes: the sequence number then a pattern
// derived from it.
func seqBody(b []byte, seq uint64) {
	binary.BigEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq) ^ byte(i)
	}
}

// seqLog is what a test's handler received of the bodies seqBody made:
// their sequence numbers in order of arrival, and what was wrong with
// any; done is closed when the n-th arrives.
type seqLog struct {
	n    int
	done chan struct{}
	mu   sync.Mutex
	got  []uint64
	bad  []string
}

func newSeqLog(n int) *seqLog { return &seqLog{n: n, done: make(chan struct{})} }

// add records body b; intact false records it as corrupt whatever it
// holds (the caller found its frame wrong). It returns b's sequence
// number, and false if b is too short to have one.
func (l *seqLog) add(b []byte, intact bool) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(b) < 8 {
		l.bad = append(l.bad, "short payload")
		return 0, false
	}
	seq := binary.BigEndian.Uint64(b)
	want := make([]byte, len(b))
	seqBody(want, seq)
	if !intact || !bytes.Equal(b, want) {
		l.bad = append(l.bad, "corrupt payload")
	}
	l.got = append(l.got, seq)
	if len(l.got) == l.n {
		close(l.done)
	}
	return seq, true
}

// fail records a problem with a frame that is not one of the sequence.
func (l *seqLog) fail(problem string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bad = append(l.bad, problem)
}

// arrived is how many bodies arrived so far.
func (l *seqLog) arrived() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

// wait returns once every body arrived, and fails t if ctx ends first.
func (l *seqLog) wait(ctx context.Context, t *testing.T) {
	t.Helper()
	select {
	case <-l.done:
	case <-ctx.Done():
		t.Fatalf("%d of %d frames arrived", l.arrived(), l.n)
	}
}

// check fails t unless every body arrived intact, once and in order.
func (l *seqLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Fatalf("%d bad frames, first: %s", len(l.bad), l.bad[0])
	}
	if len(l.got) != l.n {
		t.Fatalf("%d of %d frames arrived", len(l.got), l.n)
	}
	for i, seq := range l.got {
		if seq != uint64(i) {
			t.Fatalf("frame %d has sequence number %d: reordered or repeated", i, seq)
		}
	}
}

// TestSendDirectOrder interleaves SendDirect of small bodies (direct when
// the connection is idle), of bodies above DirectMax (queued) and plain
// Sends, with another goroutine sending control frames meanwhile; every
// frame of the first goroutine arrives once, in order and intact although
// the caller overwrites its buffer as soon as SendDirect returns. Over the
// same-host Unix socket and over TCP.
func TestSendDirectOrder(t *testing.T) {
	t.Logf("seed %d (replay: go test -run TestSendDirectOrder -seed %d)", *seed, *seed)
	forPaths(t, testSendDirectOrder)
}

func testSendDirectOrder(t *testing.T, path pathKind) {
	rng := rand.New(rand.NewPCG(*seed, 20))
	const directMax = 16 << 10
	a, c := directPair(t, directMax, path)

	const n = 3000
	log := newSeqLog(n)
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind == wire.KindPad {
			log.fail("a pad frame delivered")
		}
		if f.Kind == seqKind && len(f.Payload) > 0 {
			log.add(f.Payload[1:], f.Payload[0] == 0xAB)
		} else if f.Kind == seqKind {
			log.fail("short payload")
		}
	}})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // control traffic on the same connection
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := a.Send(ctx, 2, wire.Frame{Kind: noiseKind, Payload: []byte{1, 2, 3}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	buf := make([]byte, 3*directMax)
	hdr := []byte{0xAB}
	for seq := range uint64(n) {
		var size, off int
		switch rng.IntN(10) {
		case 0:
			size = directMax + 1 + rng.IntN(directMax) // queued
		case 1:
			// Direct, large enough to be aligned by a pad frame, from
			// any address.
			size, off = 4<<10+rng.IntN(directMax-4<<10), rng.IntN(64)
		default:
			size = 8 + rng.IntN(200)
		}
		body := buf[off : off+size]
		seqBody(body, seq)
		var err error
		if rng.IntN(8) == 0 {
			err = a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: append([]byte{0xAB}, body...)})
		} else {
			err = a.SendDirect(ctx, 2, wire.Frame{Kind: seqKind, Payload: hdr}, body)
		}
		if err != nil {
			t.Fatal(err)
		}
		clear(body) // the transport must not read it after return
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	log.wait(ctx, t)
	close(stop)
	wg.Wait()
	log.check(t)
	// Both paths were taken: direct writes, and queued frames written by
	// the writer (the plain Sends, the large bodies, the control frames).
	st := a.Stats()
	t.Logf("%d frames out, %d written directly", st.FramesOut, st.Direct)
	if st.Direct == 0 || st.Direct >= st.FramesOut {
		t.Fatalf("%d of %d frames written directly: want both paths", st.Direct, st.FramesOut)
	}
	checkPath(t, a, path)
}

// TestSendDirectAllocs: a ping-pong of SendDirect (idle connection) and a
// reader that hands the frame to a channel allocates nothing per message.
func TestSendDirectAllocs(t *testing.T) {
	a, c := directPair(t, 0, pathKinds[0])
	pong := make(chan struct{}, 1)
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) { pong <- struct{}{} }})
	ctx := context.Background()
	hdr, body := []byte{1, 2, 3, 4}, make([]byte, 1024)
	f := wire.Frame{Kind: seqKind, Payload: hdr}
	for range 10 { // warm up: dial, handshake, buffers
		if err := a.SendDirect(ctx, 2, f, body); err != nil {
			t.Fatal(err)
		}
		<-pong
	}
	allocs := testing.AllocsPerRun(200, func() {
		if err := a.SendDirect(ctx, 2, f, body); err != nil {
			t.Fatal(err)
		}
		<-pong
	})
	if allocs > 0 {
		t.Fatalf("%.2f allocations per message, want 0", allocs)
	}
}

// TestSendDirectPeerDies: the receiving transport closes in the middle of
// a stream of SendDirect; the sender neither hangs nor goes without a hint
// naming the peer, and Flush does not wait for the lost frames. Over the
// same-host Unix socket (whose redials then fall back to TCP, refused too)
// and over TCP.
func TestSendDirectPeerDies(t *testing.T) {
	forPaths(t, testSendDirectPeerDies)
}

func testSendDirectPeerDies(t *testing.T, path pathKind) {
	a, c := directPair(t, 0, path)
	hints := make(chan core.PeerHint, 64)
	a.SetHandler(transport.HandlerFuncs{OnHint: func(h core.PeerHint) {
		select {
		case hints <- h:
		default:
		}
	}})
	var received sync.WaitGroup
	received.Add(100)
	var count int
	var mu sync.Mutex
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) {
		mu.Lock()
		count++
		if count <= 100 {
			received.Done()
		}
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := make([]byte, 16<<10)
	for i := range 100 {
		if err := a.SendDirect(ctx, 2, wire.Frame{Kind: seqKind}, body); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	received.Wait()
	checkPath(t, a, path)
	c.Close()
	// Frames after the death go to the dead connection (lost) or, once
	// the transport knows, to the queue, which fills while the redials
	// fail: the send then gives up with its context instead of hanging.
	full := 0
	for i := range 40 {
		sctx, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err := a.SendDirect(sctx, 2, wire.Frame{Kind: seqKind}, body)
		scancel()
		switch {
		case err == nil:
		case errors.Is(err, transport.ErrQueueFull):
			full++
		default:
			t.Fatalf("send %d after the death: %v", i, err)
		}
	}
	t.Logf("%d of 40 sends after the death found the queue full", full)
	select {
	case h := <-hints:
		if h.Node != 2 {
			t.Fatalf("hint names %v, want 2", h.Node)
		}
	case <-ctx.Done():
		t.Fatal("no hint about the dead peer")
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// SendDirect and Send mixed by one sender keep its order, whatever path
// each frame takes (direct when the connection is idle, queued otherwise),
// with bodies of every size around DirectMax; the body is not kept. Over
// the same-host Unix socket and over TCP.
func TestSendDirectKeepsOrder(t *testing.T) {
	forPaths(t, testSendDirectKeepsOrder)
}

func testSendDirectKeepsOrder(t *testing.T, path pathKind) {
	const limit = 64 << 10 // DirectMax of this test: bodies on both sides of it
	ca, cb := config(1, nil), config(2, nil)
	ca.DirectMax = limit
	path.set(&ca)
	path.set(&cb)
	a := listen(t, ca)
	b := listen(t, cb)
	rb := transporttest.NewRecorder()
	b.SetHandler(rb)
	a.SetPeer(2, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
	defer cancel()
	rng := rand.New(rand.NewPCG(*seed, 2))
	const n = 2000
	for i := range uint64(n) {
		if i%100 == 99 {
			// Let the writer catch up now and then: a sender that always
			// runs ahead of it (a loaded machine; a Unix socket's smaller
			// buffer, full of 64 KiB bodies) would otherwise find frames
			// queued before every SendDirect and never take the direct path.
			if err := tcp.FlushWritten(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		p := transporttest.Payload(i, 0)
		var err error
		if rng.IntN(3) == 0 {
			err = a.Send(ctx, 2, wire.Frame{Kind: transporttest.KindTest, Payload: p})
		} else {
			// The header part in the frame's payload, the rest as body.
			pad := 0
			if rng.IntN(10) == 0 {
				pad = limit - 64 + rng.IntN(128) // both sides of the limit
			}
			full := transporttest.Payload(i, pad)
			body := append([]byte(nil), full[len(p)/2:]...)
			err = a.SendDirect(ctx, 2, wire.Frame{Kind: transporttest.KindTest, Payload: append([]byte(nil), full[:len(p)/2]...)}, body)
			clear(body) // the transport must not keep it
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rb.Wait(t, transporttest.Timeout, "every frame", gotFrames(n))
	for i, f := range rb.Frames() {
		seq, ok := transporttest.Seq(f.Payload)
		if !ok || seq != uint64(i) || f.Src != 1 || f.Dst != 2 {
			t.Fatalf("frame %d: seq %d (valid %v), %v→%v", i, seq, ok, f.Src, f.Dst)
		}
	}
	if st := a.Stats(); st.Direct == 0 || st.Direct == st.FramesOut {
		t.Errorf("stats %+v: want some frames written directly and some queued", st)
	}
	checkPath(t, a, path)
}

// SendDirect to a node without a connection queues the frame (and fails
// like Send for an unknown node or itself).
func TestSendDirectFallsBack(t *testing.T) {
	a := listen(t, config(1, nil))
	ctx := context.Background()
	if err := a.SendDirect(ctx, 1, wire.Frame{Kind: transporttest.KindTest}, []byte{1}); err == nil {
		t.Error("SendDirect to itself succeeded")
	}
	if err := a.SendDirect(ctx, 9, wire.Frame{Kind: transporttest.KindTest}, []byte{1}); err == nil {
		t.Error("SendDirect to an unknown node succeeded")
	}
}

// TestDetectorLaneOvertakesData: with a backlog of large data frames
// queued to a peer that does not read (its handler is blocked), a failure
// detector frame sent afterwards is written before the queued data: it
// arrives before the last frames of the backlog, not after all of it.
func TestDetectorLaneOvertakesData(t *testing.T) {
	ca, cc := config(1, nil), config(2, nil)
	ca.QueueLen = 256
	a, c := listen(t, ca), listen(t, cc)
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())
	dataKind, hbKind := core.MakeKind(core.ProtoComm, 99), core.MakeKind(core.ProtoFD, 99)
	const n = 200
	release := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var order []core.Kind
	got := make(chan struct{})
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind == dataKind {
			once.Do(func() { <-release }) // the first data frame blocks the reader
		}
		mu.Lock()
		order = append(order, f.Kind)
		if len(order) == n+1 {
			close(got)
		}
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := make([]byte, 256<<10)
	for i := range n {
		if err := a.Send(ctx, core.NodeID(2), wire.Frame{Kind: dataKind, Payload: body}); err != nil {
			t.Fatalf("data frame %d: %v", i, err)
		}
	}
	// Let the writer fill the socket buffers and block on the rest.
	deadline := time.Now().Add(5 * time.Second)
	for a.Stats().FramesOut < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if err := a.Send(ctx, core.NodeID(2), wire.Frame{Kind: hbKind, Payload: []byte("alive")}); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatalf("only %d of %d frames arrived", len(order), n+1)
	}
	mu.Lock()
	defer mu.Unlock()
	at := slices.Index(order, hbKind)
	t.Logf("the detector's frame arrived %d-th of %d (%d data frames were queued before it)", at+1, n+1, n)
	if at < 0 || at >= n-50 {
		t.Fatalf("the detector's frame arrived %d-th of %d: behind the data backlog", at+1, n+1)
	}
}

// A peer's last frames before it ends survive a write of ours that fails
// because it ended: they wait unread (our reader is busy) when the peer's
// process closes its end, and our next write fails; the connection then
// stops taking frames but its reader still delivers every frame the peer
// sent, in order, before it meets the end of the stream. Over the
// same-host Unix socket and shared memory (over TCP the kernel itself
// drops unread data when the peer's close resets the connection).
func TestPeerLastFramesSurviveFailedWrite(t *testing.T) {
	for _, path := range pathKinds[:2] {
		t.Run(path.name, func(t *testing.T) {
			a, c := pathPair(t, path, nil)
			const n = 50
			log := newSeqLog(n)
			held, gate := make(chan struct{}), make(chan struct{})
			c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
				if f.Kind == seqKind {
					if log.arrived() == 0 {
						close(held)
						<-gate
					}
					log.add(f.Payload, true)
				}
			}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			send := func(seq uint64) {
				body := make([]byte, 64)
				seqBody(body, seq)
				if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: body}); err != nil {
					t.Fatal(err)
				}
			}
			// Frame 0 holds c's reader; the others then wait unread in
			// the socket's buffer or the ring.
			send(0)
			<-held
			for seq := uint64(1); seq < n; seq++ {
				send(seq)
			}
			if err := tcp.FlushWritten(ctx, a); err != nil {
				t.Fatal(err)
			}
			checkPath(t, a, path)
			a.Close() // the peer's process ends; c's reader is held at frame 0
			// c writes to the ended peer until a write fails.
			for !tcp.ConnStopped(c, 1) {
				if ctx.Err() != nil {
					t.Fatal("no write to the ended peer failed")
				}
				if err := c.Send(ctx, 1, wire.Frame{Kind: seqKind, Payload: make([]byte, 8)}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			close(gate)
			select {
			case <-log.done:
			case <-ctx.Done():
				t.Fatalf("%d of the peer's %d frames arrived", log.arrived(), n)
			}
			log.check(t)
		})
	}
}

// A connection whose read deadline passes with nothing to read ends (its
// reader reports the deadline and the connection is given up), rather
// than its reader looking again and again at an empty stream: a replaced
// connection whose peer never ends its stream must end so that the reader
// of the connection that replaced it, which waits for it, can start. Over
// each same-host path.
func TestReadDeadlineEndsIdleConnection(t *testing.T) {
	for _, path := range pathKinds[:2] {
		t.Run(path.name, func(t *testing.T) {
			a, c := pathPair(t, path, nil)
			rc := transporttest.NewRecorder()
			c.SetHandler(rc)
			a.SetHandler(transporttest.NewRecorder())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: make([]byte, 8)}); err != nil {
				t.Fatal(err)
			}
			for !c.Connected(1) || !a.Connected(2) {
				if ctx.Err() != nil {
					t.Fatal("no connection")
				}
				time.Sleep(time.Millisecond)
			}
			ended := tcp.ExpireRead(c, 1)
			if ended == nil {
				t.Fatal("no connection to expire")
			}
			// The connection itself must end (its peer may have dialled
			// a new one meanwhile).
			for !ended() {
				if ctx.Err() != nil {
					t.Fatal("the connection outlived its read deadline")
				}
				time.Sleep(time.Millisecond)
			}
			checkPath(t, a, path)
		})
	}
}

// TestSendDirectAfterRemovePeer: a send finds its peer's connection
// without the transport's lock (a copy of the peer table); a peer removed
// and added again under the same id, and a transport closed, must not be
// served from that copy. Frames sent after the peer came back reach it,
// over a new connection, on the direct path again; after Close, SendDirect
// fails.
func TestSendDirectAfterRemovePeer(t *testing.T) {
	forPaths(t, testSendDirectAfterRemovePeer)
}

func testSendDirectAfterRemovePeer(t *testing.T, path pathKind) {
	a, c := directPair(t, 0, path)
	var mu sync.Mutex
	var got []byte
	arrived := make(chan struct{}, 64)
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		mu.Lock()
		got = append(got, f.Payload...)
		mu.Unlock()
		arrived <- struct{}{}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var sent []byte
	send := func() {
		t.Helper()
		b := byte(len(sent))
		if err := a.SendDirect(ctx, 2, wire.Frame{Kind: seqKind}, []byte{b}); err != nil {
			t.Fatalf("send %d: %v", b, err)
		}
		sent = append(sent, b)
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatalf("frame %d did not arrive", b)
		}
		// A frame that went through the queue keeps the writer busy a
		// moment after it arrived, and the next send would queue too:
		// let the writer finish.
		if err := tcp.FlushWritten(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// The first frames may go through the queue (no connection yet, or
	// its writer still busy): send until one goes on the direct path.
	untilDirect := func(what string) {
		t.Helper()
		before := a.Stats().Direct
		for a.Stats().Direct == before {
			if len(sent) >= 200 {
				t.Fatalf("%s: no frame of %d went on the direct path (%+v)", what, len(sent), a.Stats())
			}
			send()
		}
	}
	untilDirect("a new peer")
	if !tcp.LockFree(a, 2) {
		t.Fatal("a send to a connected peer looks it up under the transport's lock")
	}
	established := a.Stats().Established
	a.RemovePeer(2)
	a.SetPeer(2, c.Addr())
	untilDirect("the peer added again")
	if !tcp.LockFree(a, 2) {
		t.Fatal("the peer that came back is looked up under the transport's lock")
	}
	if st := a.Stats(); st.Established <= established {
		t.Fatalf("the peer that came back was reached without a new connection (%d connections)", st.Established)
	}
	mu.Lock()
	if !bytes.Equal(got, sent) {
		t.Fatalf("got %v, want %v in order", got, sent)
	}
	mu.Unlock()
	a.Close()
	if err := a.SendDirect(ctx, 2, wire.Frame{Kind: seqKind}, []byte{0xff}); err == nil {
		t.Fatal("SendDirect after Close succeeded")
	}
}
