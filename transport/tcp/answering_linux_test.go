package tcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// A transport tells its failure detector that a peer it no longer hears
// from still answers on their link (core.PeerHint with Answering): over
// TCP, the peer's host acknowledged what was sent to it and its process
// holds the connection; on this host, the peer's process holds its socket
// and lives. After the peer closes (a crash), hints about it no longer
// say so.
func TestSilentPeerLinkAnswersHint(t *testing.T) {
	forPaths(t, testSilentPeerLinkAnswersHint)
}

func testSilentPeerLinkAnswersHint(t *testing.T, path pathKind) {
	a, c := pathPair(t, path, nil)
	hints := make(chan core.PeerHint, 256)
	a.SetHandler(transport.HandlerFuncs{OnHint: func(h core.PeerHint) {
		select {
		case hints <- h:
		default:
		}
	}})
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(wire.Frame) {}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: []byte("a heartbeat")}); err != nil {
		t.Fatal(err)
	}
	if !path.noUnix {
		a.Suspect(2, true) // a same-host peer is looked at only while suspected
	}
	for {
		select {
		case h := <-hints:
			if !h.Answering {
				continue
			}
			if h.Node != 2 || h.Refused {
				t.Fatalf("hint %+v, want an answering link to node 2", h)
			}
		case <-ctx.Done():
			t.Fatal("no hint that the silent peer's link answers within 30 s")
		}
		break
	}
	checkPath(t, a, path)
	c.Close()
	// Once a knows the connection lost (a hint that is not Answering),
	// no later hint says the link answers.
	for lost := false; ; {
		select {
		case h := <-hints:
			if lost && h.Answering {
				t.Fatalf("after the peer closed: hint %+v, want none answering", h)
			}
			if !h.Answering && !lost {
				// The first is the connection's end, from a peer
				// whose process (this one) lives: no refusal.
				if h.Refused {
					t.Fatalf("the connection to a live process ended: hint %+v, want it not Refused", h)
				}
			}
			if !h.Answering {
				lost = true
				if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: []byte("a notice")}); err != nil && ctx.Err() != nil {
					t.Fatal(err)
				}
			}
			if lost && len(hints) == 0 {
				return
			}
		case <-ctx.Done():
			t.Fatal("no hint that the connection to the closed peer was lost within 30 s")
		}
	}
}
