package tcp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// A direct write to a peer that reads nothing (its reader is held by its
// handler, so the kernel's buffers fill) returns when its context ends,
// with the context's error, though the kernel has taken only part of the
// frame; the writer goroutine completes the frame on the same connection,
// so once the peer reads again it receives every frame whole and in
// order: the one written in part, and those sent after it through the
// queue and the direct path. Over plain sockets, whose direct writes
// watch the context: loopback TCP and the same-host Unix socket.
func TestDirectWriteEndsWithContext(t *testing.T) {
	const big = 64 << 20
	for _, path := range []pathKind{{name: "tcp", noUnix: true}, {name: "unix"}} {
		for _, how := range []string{"cancel", "deadline"} {
			t.Run(path.name+"/"+how, func(t *testing.T) {
				a, c := pathPair(t, path, func(ca, cc *tcp.Config) {
					for _, cfg := range []*tcp.Config{ca, cc} {
						cfg.MaxFrameSize, cfg.DirectMax = big+1<<10, big+1<<10
						cfg.SocketBuffer = 256 << 10
						cfg.ResendBuffer = 2 * big // room behind frame 0, which is not acknowledged
					}
				})
				const n = 5 // 0: holds the reader; 1: the large frame; 2-4: behind it
				log := newSeqLog(n)
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
				defer func() {
					select {
					case <-gate:
					default:
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

				var ctx context.Context
				var want error
				switch how {
				case "cancel":
					cctx, cancel := context.WithCancel(bg)
					defer cancel()
					go func() {
						// Whenever it comes, the kernel cannot take the
						// whole frame: its reader is held.
						time.Sleep(20 * time.Millisecond)
						cancel()
					}()
					ctx, want = cctx, context.Canceled
				case "deadline":
					dctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
					defer cancel()
					ctx, want = dctx, context.DeadlineExceeded
				}
				var ref tcp.DirectRef
				body := frame(1, big)
				directBefore := a.Stats().Direct
				ok, err := a.TrySendDirectRef(ctx, &ref, 2, &wire.Frame{Kind: seqKind}, body)
				if !ok {
					t.Fatal("the direct write declined the frame")
				}
				if !errors.Is(err, want) {
					t.Fatalf("direct write to a peer that reads nothing: got %v, want %v", err, want)
				}
				if d := a.Stats().Direct - directBefore; d != 1 {
					t.Fatalf("%d frames written directly, want 1", d)
				}
				clear(body) // the caller's buffer is free: the rest was copied

				// Behind it: one queued frame, then two direct sends
				// (declined while the rest is pending, or written after
				// it).
				if err := a.Send(bg, 2, wire.Frame{Kind: seqKind, Payload: frame(2, 100)}); err != nil {
					t.Fatal(err)
				}
				if err := a.SendDirect(bg, 2, wire.Frame{Kind: seqKind}, frame(3, 5000)); err != nil {
					t.Fatal(err)
				}
				if err := a.SendDirect(bg, 2, wire.Frame{Kind: seqKind}, frame(4, 300)); err != nil {
					t.Fatal(err)
				}
				close(gate)
				select {
				case <-log.done:
				case <-bg.Done():
					t.Fatalf("%d of %d frames arrived", log.arrived(), n)
				}
				log.check(t)
				checkPath(t, a, path)
				if err := tcp.FlushWritten(bg, a); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
