package runner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/workload"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport/mem"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// eventLog collects the events of several in-process hosts.
type eventLog struct {
	mu      sync.Mutex
	events  []nodeEvent
	changed chan struct{}
}

type nodeEvent struct {
	node core.NodeID
	e    core.Event
}

func (l *eventLog) add(node core.NodeID, e core.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, nodeEvent{node, e})
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait waits until cond holds on the events, for at most timeout (a bound
// for a hung test, not a measurement).
func (l *eventLog) wait(t *testing.T, timeout time.Duration, what string, cond func([]nodeEvent) bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		ok, ch := cond(l.events), l.changed
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("waiting for %s: not within %v", what, timeout)
		}
	}
}

func (l *eventLog) since(i int) []nodeEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events[i:])
}

func (l *eventLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// lastView returns the last view each node installed.
func lastViews(events []nodeEvent) map[core.NodeID]member.ViewInstalled {
	out := map[core.NodeID]member.ViewInstalled{}
	for _, ne := range events {
		if v, ok := ne.e.(member.ViewInstalled); ok {
			out[ne.node] = v
		}
	}
	return out
}

// TestFrameFromEvictedNodeIgnored runs four nodes (the real stacks of
// NewNode: heartbeat detector, membership, probe) in one process over an
// in-memory network, crashes n3 and, once the three others hold a view
// without it, lets a process with n3's id (the evicted node, still alive
// and still holding the job's credentials) send the root a NODE_FAILURE
// that accuses n1 and send n1 a FAILED_NODE proposal that drops n2. Both
// must be ignored (paper footnote 1, DESIGN.md "Security": frames from
// processes outside the current view are dropped): no node starts a
// stabilization or installs a view. A ping sent right after each forged
// frame, on the same FIFO link, proves that the target has handled it.
func TestFrameFromEvictedNodeIgnored(t *testing.T) {
	hub, err := mem.NewHub(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	members := []core.NodeID{0, 1, 2, 3}
	log := &eventLog{changed: make(chan struct{})}
	type running struct {
		node   *Node
		host   *host.Host
		ep     *mem.Endpoint
		cancel context.CancelFunc
		done   chan struct{}
	}
	nodes := map[core.NodeID]*running{}
	stop := func(r *running) {
		r.cancel()
		<-r.done
		r.ep.Close()
	}
	for _, id := range members {
		ep, err := hub.Join(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, peer := range members {
			if peer != id {
				ep.SetPeer(peer, mem.Addr(peer))
			}
		}
		n, err := NewNode(id, members, NodeOptions{Detector: DetectorHeartbeat, Fanout: 2})
		if err != nil {
			t.Fatal(err)
		}
		h, err := host.New(n.Stack, host.Config{
			Transport: ep, Codec: codec, Seed: uint64(id) + 1,
			OnEvent: func(_ time.Duration, e core.Event) { log.add(id, e) },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &running{node: n, host: h, ep: ep, cancel: cancel, done: make(chan struct{})}
		nodes[id] = r
		go func() {
			defer close(r.done)
			h.Run(ctx)
		}()
		t.Cleanup(func() { stop(r) })
	}
	e1 := member.MakeEpoch(1, 0)
	log.wait(t, 20*time.Second, "the first view everywhere", func(ev []nodeEvent) bool {
		v := lastViews(ev)
		return len(v) == 4 && v[0].Epoch == e1 && v[1].Epoch == e1 && v[2].Epoch == e1 && v[3].Epoch == e1
	})

	// n3 crashes.
	stop(nodes[3])
	var e2 uint64
	log.wait(t, 20*time.Second, "a view without n3 at n0, n1 and n2", func(ev []nodeEvent) bool {
		v := lastViews(ev)
		e2 = v[0].Epoch
		for _, id := range []core.NodeID{0, 1, 2} {
			if v[id].Epoch != e2 || !slices.Equal(v[id].Members, []core.NodeID{0, 1, 2}) {
				return false
			}
		}
		return true
	})
	mark := log.len()

	// The evicted n3 speaks again, with the job's credentials.
	ghost, err := hub.Join(3)
	if err != nil {
		t.Fatal(err)
	}
	defer ghost.Close()
	rec := transporttest.NewRecorder()
	ghost.SetHandler(rec)
	ghost.SetPeer(0, mem.Addr(0))
	ghost.SetPeer(1, mem.Addr(1))
	send := func(to core.NodeID, m core.Msg) {
		t.Helper()
		payload, err := codec.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := ghost.Send(context.Background(), to, wire.Frame{Kind: m.Kind(), Epoch: e1, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	pongFrom := func(from core.NodeID, seq uint32) {
		t.Helper()
		rec.Wait(t, 20*time.Second, "the pong that follows the forged frame", func(frames []wire.Frame, _ []core.PeerHint) bool {
			for _, f := range frames {
				if f.Src == from && f.Kind == workload.KindProbePong {
					if m, err := codec.Unmarshal(f.Kind, f.Payload); err == nil && m == (workload.ProbePong{Seq: seq}) {
						return true
					}
				}
			}
			return false
		})
	}
	send(0, &member.Report{Epoch: e1, Failed: []member.Joiner{{ID: 1}}})
	send(0, workload.ProbePing{Seq: 1001})
	pongFrom(0, 1001)
	send(1, &member.Prepare{
		Cause: member.CauseFailedNode, Epoch: member.MakeEpoch(member.EpochCounter(e2)+5, 3),
		Ancestry: []uint64{e2}, Failed: []core.NodeID{2}, Committed: true,
	})
	send(1, workload.ProbePing{Seq: 1002})
	pongFrom(1, 1002)

	for _, ne := range log.since(mark) {
		switch ne.e.(type) {
		case member.StabilizationStarted, member.ViewInstalled, core.MembersChanged:
			t.Errorf("%v emitted %T %+v after the evicted node's frames", ne.node, ne.e, ne.e)
		}
	}
	for _, id := range []core.NodeID{0, 1} {
		var view member.View
		var stabilizing bool
		if err := nodes[id].host.Do(context.Background(), func(core.Machine, core.Env) {
			view, stabilizing = nodes[id].node.Member.View(), nodes[id].node.Member.Stabilizing()
		}); err != nil {
			t.Fatal(err)
		}
		if view.Epoch != e2 || !slices.Equal(view.Members, []core.NodeID{0, 1, 2}) || stabilizing {
			t.Errorf("%v: view %s %v, stabilizing %v; want %s [n0 n1 n2], not stabilizing",
				id, member.FormatEpoch(view.Epoch), view.Members, stabilizing, member.FormatEpoch(e2))
		}
	}
}
