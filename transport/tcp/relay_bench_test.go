package tcp_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// countingEnd counts the frames delivered to it and signals each
// window-th.
type countingEnd struct {
	n      atomic.Int64
	window int64
	done   chan struct{}
}

func (e *countingEnd) Deliver(f wire.Frame) {
	if e.n.Add(1)%e.window == 0 {
		e.done <- struct{}{}
	}
}

func (e *countingEnd) Hint(core.PeerHint) {}

// BenchmarkRelayed streams frames from node 1 to node 3 over loopback
// TCP, with their direct link cut (BlockPeer): each goes through node 2
// (path=relayed); or over their connection (path=direct), for a profile
// of both. A window of 64 frames is sent, then waited for; the bytes per
// second are the bandwidth (`cohort bench p2p --relayed` measures both
// paths in one run, in turn).
//
//	go test -run '^$' -bench Relayed/path=relayed -benchtime 20x -cpuprofile cpu.out ./transport/tcp
func BenchmarkRelayed(b *testing.B) {
	for _, path := range []string{"direct", "relayed"} {
		for _, size := range []int{64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("path=%s/size=%d", path, size), func(b *testing.B) {
				benchmarkRelayed(b, path == "relayed", size)
			})
		}
	}
}

func benchmarkRelayed(b *testing.B, relayed bool, size int) {
	const window = 64
	var trs [3]*tcp.Transport
	end := &countingEnd{window: window, done: make(chan struct{}, 1)}
	for i := range trs {
		cfg := config(core.NodeID(i+1), nil)
		cfg.NoUnix = true
		tr, err := tcp.Listen(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		trs[i] = tr
	}
	for i, a := range trs {
		for j, c := range trs {
			if i != j {
				a.SetPeer(core.NodeID(j+1), c.Addr())
			}
		}
	}
	trs[0].SetHandler(transport.HandlerFuncs{})
	trs[1].SetHandler(transport.HandlerFuncs{})
	trs[2].SetHandler(end)
	trs[0].Keep([]core.NodeID{2})
	trs[2].Keep([]core.NodeID{2})
	if relayed {
		trs[0].BlockPeer(3, true)
		trs[2].BlockPeer(1, true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	payload := make([]byte, size)
	sendWindow := func() {
		for range window {
			if err := trs[0].Send(ctx, 3, wire.Frame{Kind: seqKind, Payload: payload}); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-end.done:
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
	}
	sendWindow() // the path settles
	if f := trs[1].Stats().Forwarded; (f > 0) != relayed {
		b.Fatalf("node 2 forwarded %d frames (relayed: %v)", f, relayed)
	}
	b.SetBytes(int64(window * size))
	b.ResetTimer()
	for range b.N {
		sendWindow()
	}
	b.StopTimer()
	// Frames sent again (a rewind: the acknowledgements came too
	// late) or dropped on the way cost the bandwidth twice.
	s1, s2, s3 := trs[0].Stats(), trs[1].Stats(), trs[2].Stats()
	b.ReportMetric(float64(s1.Resent)/float64(b.N), "resent/op")
	b.ReportMetric(float64(s2.RelayDropped+s3.RelayGaps+s3.Duplicates)/float64(b.N), "lost/op")
}

// echoEnd echoes every frame back to its sender, or, on the near side
// (echo false), signals it.
type echoEnd struct {
	tr   *tcp.Transport
	echo bool
	got  chan struct{}
}

func (e *echoEnd) Deliver(f wire.Frame) {
	if e.echo {
		e.tr.SendCopy(context.Background(), f.Src, wire.Frame{Kind: f.Kind, Payload: f.Payload})
		return
	}
	e.got <- struct{}{}
}

func (e *echoEnd) Hint(core.PeerHint) {}

// BenchmarkRelayRoundTrip times round trips of an 8-byte frame between
// nodes 1 and 3 over loopback TCP, direct and with their link cut
// (through node 2), both through Send: the relayed path's per-frame
// cost, for a profile.
//
//	go test -run '^$' -bench RelayRoundTrip/path=relayed -benchtime 20000x -cpuprofile cpu.out ./transport/tcp
func BenchmarkRelayRoundTrip(b *testing.B) {
	for _, path := range []string{"direct", "relayed"} {
		b.Run("path="+path, func(b *testing.B) {
			var trs [3]*tcp.Transport
			for i := range trs {
				cfg := config(core.NodeID(i+1), nil)
				cfg.NoUnix = true
				tr, err := tcp.Listen(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				trs[i] = tr
			}
			for i, a := range trs {
				for j, c := range trs {
					if i != j {
						a.SetPeer(core.NodeID(j+1), c.Addr())
					}
				}
			}
			near := &echoEnd{tr: trs[0], got: make(chan struct{}, 1)}
			trs[0].SetHandler(near)
			trs[1].SetHandler(transport.HandlerFuncs{})
			trs[2].SetHandler(&echoEnd{tr: trs[2], echo: true})
			trs[0].Keep([]core.NodeID{2})
			trs[2].Keep([]core.NodeID{2})
			if path == "relayed" {
				trs[0].BlockPeer(3, true)
				trs[2].BlockPeer(1, true)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			ping := make([]byte, 8)
			roundTrip := func() {
				if err := trs[0].Send(ctx, 3, wire.Frame{Kind: seqKind, Payload: ping}); err != nil {
					b.Fatal(err)
				}
				select {
				case <-near.got:
				case <-ctx.Done():
					b.Fatal(ctx.Err())
				}
			}
			for range 1000 { // the path settles
				roundTrip()
			}
			if f := trs[1].Stats().Forwarded; (f > 0) != (path == "relayed") {
				b.Fatalf("node 2 forwarded %d frames on the %s path", f, path)
			}
			b.ResetTimer()
			for range b.N {
				roundTrip()
			}
		})
	}
}
