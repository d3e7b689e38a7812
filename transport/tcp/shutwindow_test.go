package tcp_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// A peer that reads nothing for twice LinkTimeout while frames wait for
// its window (its process computes; its kernel answers the zero-window
// probes) keeps its connection: on kernels that count a shut window
// against TCP_USER_TIMEOUT the link check turns it off meanwhile. It
// receives every frame whole and in order once it reads again, and the
// sender's failure detector is told nothing.
func TestShutWindowOutlastsLinkTimeout(t *testing.T) {
	const link = time.Second
	a, c := pathPair(t, pathKind{name: "tcp", noUnix: true}, func(ca, cc *tcp.Config) {
		for _, cfg := range []*tcp.Config{ca, cc} {
			cfg.LinkTimeout = link
			cfg.SocketBuffer = 128 << 10
			cfg.ResendBuffer = 64 << 20
		}
	})
	const n, size = 8, 1 << 20
	log := newSeqLog(n + 1)
	var hmu sync.Mutex
	var hints []core.PeerHint
	held := make(chan struct{})
	first := true
	c.SetHandler(transport.HandlerFuncs{OnDeliver: func(f wire.Frame) {
		if f.Kind != seqKind {
			return
		}
		if first {
			first = false
			close(held)
			time.Sleep(2 * link) // the process computes, reading nothing
		}
		log.add(f.Payload, true)
	}})
	a.SetHandler(transport.HandlerFuncs{OnHint: func(h core.PeerHint) {
		hmu.Lock()
		hints = append(hints, h)
		hmu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	frame := func(seq uint64, size int) []byte {
		b := make([]byte, size)
		seqBody(b, seq)
		return b
	}
	if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: frame(0, 64)}); err != nil {
		t.Fatal(err)
	}
	<-held
	for seq := uint64(1); seq <= n; seq++ {
		if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: frame(seq, size)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-log.done:
	case <-ctx.Done():
		t.Fatalf("%d of %d frames arrived", log.arrived(), n+1)
	}
	log.check(t)
	st := a.Stats()
	hmu.Lock()
	defer hmu.Unlock()
	t.Logf("lost %d, dials %d, hints %v", st.Lost, st.Dials, hints)
	if st.Lost != 0 || len(hints) != 0 {
		t.Errorf("a peer slow to read: %d connections lost, hints %v; want none", st.Lost, hints)
	}
}
