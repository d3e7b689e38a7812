package host_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/mem"
)

// handlerTap is a transport that keeps the handler the host installs.
type handlerTap struct {
	transport.Transport
	mu sync.Mutex
	h  transport.Handler
}

func (tp *handlerTap) SetHandler(h transport.Handler) {
	tp.mu.Lock()
	tp.h = h
	tp.mu.Unlock()
	tp.Transport.SetHandler(h)
}

func (tp *handlerTap) handler() transport.Handler {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.h
}

// TestPathEvents checks that a transport's path changes
// (transport.PathReporter) reach the host's observers as events of the
// node, in order, as they appear in the event stream.
func TestPathEvents(t *testing.T) {
	hub, err := mem.NewHub(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := hub.Join(1)
	tap := &handlerTap{Transport: a}
	c := startCluster(t, []transport.Transport{tap}, func(int) core.Machine { return &pinger{} }, nil)
	deadline := time.Now().Add(timeout)
	for tap.handler() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the host installed no handler")
		}
		time.Sleep(time.Millisecond)
	}
	pr, ok := tap.handler().(transport.PathReporter)
	if !ok {
		t.Fatal("the host's handler is not a transport.PathReporter")
	}
	want := []core.Event{transport.PairRelayed{Peer: 3, Via: 2}, transport.PairDirect{Peer: 3}}
	for _, ev := range want {
		pr.Path(ev)
	}
	c.obs.wait(t, "the path events", func(evs map[core.NodeID][]core.Event) bool {
		var got []core.Event
		for _, e := range evs[1] {
			switch e.(type) {
			case transport.PairRelayed, transport.PairDirect:
				got = append(got, e)
			}
		}
		return slices.Equal(got, want)
	})
}
