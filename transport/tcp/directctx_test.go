package tcp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/tcp/tcptest"
	"github.com/cohort-mp/cohort/wire"
)

// A direct write to a peer that reads nothing (its reader is held by its
// handler, so the kernel's buffers fill) returns when its context ends,
// with the context's error, though the kernel has taken only part of the
// frame; the writer goroutine completes the frame on the same connection,
// so once the peer reads again it receives every frame whole and in
// order: the one written in part, and those sent after it through the
// queue and the direct path. Over every path: the same-host Unix socket,
// shared memory (whose ring is full), loopback TCP, in records or not;
// with one large frame (over records, a record whose tag is computed as
// its pieces are written), with frames of 32 KiB (over records, each
// hashed first and written with its tag) and with small frames, sent
// until the socket or the ring is full (one record each, copied behind
// the head).
func TestDirectWriteEndsWithContext(t *testing.T) {
	for _, path := range pathKinds {
		for _, how := range []string{"cancel", "deadline", "ended"} {
			t.Run(path.name+"/large/"+how, func(t *testing.T) { directWriteEnds(t, path, how, 64<<20, 1) })
		}
		for _, how := range []string{"deadline", "ended"} {
			t.Run(path.name+"/small/"+how, func(t *testing.T) { directWriteEnds(t, path, how, 200, 1<<20) })
			t.Run(path.name+"/medium/"+how, func(t *testing.T) { directWriteEnds(t, path, how, 32<<10, 1<<12) })
		}
	}
	// Over TLS, which cannot finish a frame once a write timed out, the
	// connection is given up and the frame resent on the next (a context
	// that had ended before the write has the frame queued instead).
	tlsPath := pathKind{name: "tls", noUnix: true, tls: true}
	for _, how := range []string{"cancel", "deadline"} {
		t.Run("tls/large/"+how, func(t *testing.T) { directWriteEnds(t, tlsPath, how, 64<<20, 1) })
	}
}

// directWriteEnds sends frame 0 to hold the peer's reader, then frames of
// size bytes with TrySendDirectRef and a context that ends (how: "cancel",
// "deadline", or "ended" before the first: a caller that never waits), at
// most most of them, until one reports the context's error, then three
// frames behind them, and checks that the peer receives them all once its
// reader goes on.
func directWriteEnds(t *testing.T, path pathKind, how string, size, most int) {
	var tlsConfig *tls.Config
	if path.tls {
		tlsConfig = tcptest.SelfSignedTLS(t)
	}
	frameMax := max(size, 8<<10) + 1<<10
	a, c := pathPair(t, path, func(ca, cc *tcp.Config) {
		for _, cfg := range []*tcp.Config{ca, cc} {
			cfg.MaxFrameSize, cfg.DirectMax = frameMax, frameMax
			cfg.SocketBuffer = 256 << 10
			cfg.ResendBuffer = 2*size + 16<<20 // room behind frame 0, which is not acknowledged
			// Off: some kernels fail a connection whose peer's window
			// stays shut for TCP_USER_TIMEOUT, answered probes or not,
			// and the test's peer reads nothing for as long as it is held.
			cfg.LinkTimeout = -1
			if path.tls {
				cfg.TLS = tlsConfig
			}
		}
	})
	log := newSeqLog(0) // its count is set once known, before c's reader goes on
	held, gate := make(chan struct{}), make(chan struct{})
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind != seqKind {
			return
		}
		if log.arrived() == 0 {
			close(held)
			<-gate
		}
		log.add(f.Payload, true)
	}})
	opened := false
	defer func() {
		if !opened {
			close(gate)
		}
	}()
	bg, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	frame := func(seq uint64, size int) []byte {
		b := make([]byte, size)
		seqBody(b, seq)
		return b
	}
	if err := a.Send(bg, 2, wire.Frame{Kind: seqKind, Payload: frame(0, 64)}); err != nil {
		t.Fatal(err)
	}
	<-held
	if err := tcp.FlushWritten(bg, a); err != nil { // frame 0 is out: the direct path is free
		t.Fatal(err)
	}

	first := frame(1, size) // made before the context: filling 64 MiB takes a while
	var ctx context.Context
	var want error
	switch how {
	case "cancel":
		cctx, cancel := context.WithCancel(bg)
		defer cancel()
		go func() {
			// Whenever it comes, the kernel cannot take the whole
			// frame: the peer's reader is held.
			time.Sleep(20 * time.Millisecond)
			cancel()
		}()
		ctx, want = cctx, context.Canceled
	case "deadline":
		dctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
		defer cancel()
		ctx, want = dctx, context.DeadlineExceeded
	case "ended":
		cctx, cancel := context.WithCancel(bg)
		cancel()
		ctx, want = cctx, context.Canceled
	}
	var ref tcp.DirectRef
	seq := uint64(1)
	directBefore := a.Stats().Direct
	for ; ; seq++ {
		if seq > uint64(most) {
			t.Fatalf("the peer's kernel took %d frames of %d bytes", most, size)
		}
		body := first
		if seq > 1 {
			body = frame(seq, size)
		}
		ended := ctx.Err() != nil
		ok, err := a.TrySendDirectRef(ctx, &ref, 2, &wire.Frame{Kind: seqKind}, body)
		if !ok && path.tls && ended {
			t.Skip("the context ended before the write began (a loaded machine): over TLS the direct write then declines")
		}
		if !ok {
			t.Fatalf("the direct write declined frame %d", seq)
		}
		clear(body) // the caller's buffer is free: the rest, if any, was copied
		if err != nil {
			if !errors.Is(err, want) {
				t.Fatalf("direct write %d to a peer that reads nothing: got %v, want %v", seq, err, want)
			}
			break
		}
	}
	if d := a.Stats().Direct - directBefore; d != seq {
		t.Fatalf("%d frames written directly, want %d", d, seq)
	}
	t.Logf("frame %d of %d bytes ended with its context", seq, size)

	// Behind it: one queued frame, then two direct sends (declined while
	// the rest is pending, or written after it).
	if err := a.Send(bg, 2, wire.Frame{Kind: seqKind, Payload: frame(seq+1, 100)}); err != nil {
		t.Fatal(err)
	}
	if err := a.SendDirect(bg, 2, wire.Frame{Kind: seqKind}, frame(seq+2, 5000)); err != nil {
		t.Fatal(err)
	}
	if err := a.SendDirect(bg, 2, wire.Frame{Kind: seqKind}, frame(seq+3, 300)); err != nil {
		t.Fatal(err)
	}
	log.n = int(seq + 4) // c's reader adds nothing before the gate opens
	opened = true
	close(gate)
	select {
	case <-log.done:
	case <-bg.Done():
		t.Fatalf("%d of %d frames arrived", log.arrived(), log.n)
	}
	log.check(t)
	checkPath(t, a, path)
	// On the same connection: a rest written wrong (a record's tag left
	// out) would fail the peer's check, and the frames would come whole
	// all the same, resent on the next connection.
	if !path.tls {
		if sa, sc := a.Stats(), c.Stats(); sa.Lost+sc.Lost+sc.Tampered != 0 {
			t.Errorf("connections lost %d and %d, records tampered %d; want none", sa.Lost, sc.Lost, sc.Tampered)
		}
	}
	if err := tcp.FlushWritten(bg, a); err != nil {
		t.Fatal(err)
	}
}
