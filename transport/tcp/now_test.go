package tcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// The tests in this file check SendNow: frames written on the caller's
// goroutine without waiting stay in order with queued ones, also when the
// socket takes only part of one, and SendNow declines (writing nothing)
// when it cannot write at once.

// TestSendNowOrder sends frames to a peer whose handler is blocked, so
// that the socket fills: SendNow writes while the socket takes frames
// (the last one possibly in part) and then declines, and the frames it
// declines go through Send. Once the handler runs again, every frame
// arrives once, in order and intact. Over the Unix socket and over TCP,
// with small socket buffers (4 KiB) and frames larger than them.
func TestSendNowOrder(t *testing.T) {
	for _, path := range []pathKind{{name: "unix"}, {name: "tcp", noUnix: true}} {
		t.Run(path.name, func(t *testing.T) { testSendNowOrder(t, path) })
	}
}

func testSendNowOrder(t *testing.T, path pathKind) {
	ca, cc := config(1, nil), config(2, nil)
	path.set(&ca)
	path.set(&cc)
	ca.SocketBuffer, cc.SocketBuffer = sockBuf, sockBuf
	a, c := listen(t, ca), listen(t, cc)
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())

	const n, size = 200, 20 << 10
	gate := make(chan struct{})
	log := newSeqLog(n)
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		<-gate
		if f.Kind == seqKind {
			log.add(f.Payload, true)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A first frame through Send opens the connection.
	first := make([]byte, 8)
	seqBody(first, 0)
	if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: first}); err != nil {
		t.Fatal(err)
	}
	if err := tcp.FlushWritten(ctx, a); err != nil { // the handler holds it
		t.Fatal(err)
	}
	now, declined := 0, 0
	for seq := uint64(1); seq < n; seq++ {
		body := make([]byte, size/2+int(seq*7919)%(size/2))
		seqBody(body, seq)
		f := wire.Frame{Kind: seqKind, Payload: body}
		if a.SendNow(2, f) {
			now++
			continue
		}
		declined++
		if err := a.Send(ctx, 2, f); err != nil {
			t.Fatal(err)
		}
	}
	rest := tcp.NowPartial(a) > 0
	t.Logf("%d frames written by SendNow, %d declined; a frame written in part: %v", now, declined, rest)
	if now == 0 || declined == 0 || !rest {
		t.Errorf("SendNow wrote %d frames (one in part: %v) and declined %d; want some of each, and the socket to take one in part (it fills while the handler waits)", now, rest, declined)
	}
	if s := a.Stats(); s.Now != uint64(now) {
		t.Errorf("Stats.Now = %d, want %d", s.Now, now)
	}
	close(gate)
	log.wait(ctx, t)
	log.check(t)
}

// TestSendNowDeclines: without a connection, to itself and for the
// failure detector's frames (their own lane), SendNow writes nothing and
// says so.
func TestSendNowDeclines(t *testing.T) {
	a, c := listen(t, config(1, nil)), listen(t, config(2, nil))
	a.SetPeer(2, c.Addr())
	f := wire.Frame{Kind: seqKind, Payload: []byte{1}}
	if a.SendNow(2, f) {
		t.Error("SendNow took a frame for a peer without a connection")
	}
	if a.SendNow(1, f) {
		t.Error("SendNow took a frame for the transport itself")
	}
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) {}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Send(ctx, 2, f); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if a.SendNow(2, wire.Frame{Kind: core.MakeKind(core.ProtoFD, 1), Payload: []byte{1}}) {
		t.Error("SendNow took a failure detector's frame")
	}
	if !a.SendNow(2, f) {
		t.Error("SendNow declined a frame for an idle connection")
	}
	if s := a.Stats(); s.Now != 1 || s.Dials != 1 {
		t.Errorf("Now %d, Dials %d; want 1 and 1", s.Now, s.Dials)
	}
}

// TestSendNowBatchOrder sends batches of frames with SendNowBatch to a
// peer whose handler is blocked, so that the socket fills: batches are
// written whole while the socket takes them (the last possibly in part)
// and then declined, having written nothing, and the frames of a declined
// batch go through Send. Once the handler runs again, every frame arrives
// once, in order and intact (a batch the socket took in part too, whose
// rest the writer finishes). Over the Unix socket, TCP, and TCP with the
// frames in records, with small socket buffers (4 KiB).
func TestSendNowBatchOrder(t *testing.T) {
	for _, path := range []pathKind{{name: "unix"}, {name: "tcp", noUnix: true}, {name: "records", noUnix: true, records: true}} {
		t.Run(path.name, func(t *testing.T) { testSendNowBatchOrder(t, path) })
	}
}

func testSendNowBatchOrder(t *testing.T, path pathKind) {
	ca, cc := config(1, nil), config(2, nil)
	path.set(&ca)
	path.set(&cc)
	ca.SocketBuffer, cc.SocketBuffer = sockBuf, sockBuf
	a, c := listen(t, ca), listen(t, cc)
	a.SetPeer(2, c.Addr())
	c.SetPeer(1, a.Addr())

	const n = 600
	gate := make(chan struct{})
	log := newSeqLog(n)
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		<-gate
		if f.Kind == seqKind {
			log.add(f.Payload, true)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := make([]byte, 8)
	seqBody(first, 0)
	if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: first}); err != nil {
		t.Fatal(err)
	}
	if err := tcp.FlushWritten(ctx, a); err != nil { // the handler holds it
		t.Fatal(err)
	}
	taken, declined, frames := 0, 0, 0
	var fs []wire.Frame
	var bodies [][]byte
	for seq := uint64(1); seq < n; {
		// A batch of 1 to 8 frames of 8 bytes to 2 KiB, each split
		// between the frame's payload (its first 8 bytes) and a body.
		fs, bodies = fs[:0], bodies[:0]
		for k := 0; k < 1+int(seq%8) && seq < n; k++ {
			b := make([]byte, 8+int(seq*7919)%(2<<10))
			seqBody(b, seq)
			fs = append(fs, wire.Frame{Kind: seqKind, Payload: b[:8]})
			bodies = append(bodies, b[8:])
			seq++
		}
		if a.SendNowBatch(2, fs, bodies) {
			taken++
			frames += len(fs)
			continue
		}
		declined++
		for i := range fs {
			f := wire.Frame{Kind: seqKind, Payload: append(fs[i].Payload[:8:8], bodies[i]...)}
			if err := a.Send(ctx, 2, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	rest := tcp.NowPartial(a) > 0
	t.Logf("%d batches written by SendNowBatch, %d declined; a batch written in part: %v", taken, declined, rest)
	if taken == 0 || declined == 0 {
		t.Errorf("SendNowBatch wrote %d batches and declined %d; want some of each (the socket fills while the handler waits)", taken, declined)
	}
	if s := a.Stats(); s.Now != uint64(frames) {
		t.Errorf("Stats.Now = %d, want %d", s.Now, frames)
	}
	close(gate)
	log.wait(ctx, t)
	log.check(t)
}
