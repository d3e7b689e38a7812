package host

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/topo"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// The background of an idle job — the gossip detector's rounds, the
// membership's probe timer, the host's timer queue, the encoding of every
// frame and the decoding of every received one — runs for as long as the
// job does. These tests drive it by hand, period by period, and count the
// heap allocations it makes.

// syncTransport hands every frame straight to the destination host's
// handler, on the sender's goroutine. It copies nothing: the handler sees
// the sender's payload, valid only during Deliver (as transport.Handler
// allows), so a host that kept an alias of it would read later frames'
// bytes. It implements transport.Copier, since it is done with a payload
// when Send returns.
type syncTransport struct {
	self  core.NodeID
	peers map[core.NodeID]*Host
	h     transport.Handler
}

func (t *syncTransport) Self() core.NodeID              { return t.self }
func (t *syncTransport) Addr() string                   { return "sync" }
func (t *syncTransport) SetPeer(core.NodeID, string)    {}
func (t *syncTransport) RemovePeer(core.NodeID)         {}
func (t *syncTransport) SetHandler(h transport.Handler) { t.h = h }
func (t *syncTransport) Close() error                   { return nil }
func (t *syncTransport) Send(ctx context.Context, to core.NodeID, f wire.Frame) error {
	return t.SendCopy(ctx, to, f)
}

func (t *syncTransport) SendCopy(_ context.Context, to core.NodeID, f wire.Frame) error {
	f.Src, f.Dst = t.self, to
	t.peers[to].tr.(*syncTransport).h.Deliver(f)
	return nil
}

// steadyJob is n hosts, each running the stack comm and package group give
// a node (the BRR gossip detector under the membership), driven by hand:
// period advances every host's clock by one gossip interval, fires the
// timers that are due and delivers every message sent meanwhile.
type steadyJob struct {
	hosts    []*Host
	gossip   []*fd.Gossip
	interval time.Duration
}

func newSteadyJob(t testing.TB, n int) *steadyJob {
	codec := wire.NewCodec()
	if err := fd.RegisterCodecs(codec); err != nil {
		t.Fatal(err)
	}
	if err := member.RegisterCodecs(codec); err != nil {
		t.Fatal(err)
	}
	ids := make([]core.NodeID, n)
	for i := range ids {
		ids[i] = core.NodeID(i)
	}
	gcfg := fd.LANGossipConfig()
	gcfg.Schedule = topo.BinaryRoundRobin // group's default detector
	j := &steadyJob{interval: gcfg.GossipInterval}
	peers := map[core.NodeID]*Host{}
	for _, id := range ids {
		g, err := fd.NewGossip(gcfg, ids)
		if err != nil {
			t.Fatal(err)
		}
		m, err := member.New(member.DefaultConfig(), ids)
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(core.NewStack(g, m), Config{Transport: &syncTransport{self: id, peers: peers}, Codec: codec, Seed: uint64(id) + 1})
		if err != nil {
			t.Fatal(err)
		}
		peers[id] = h
		j.hosts = append(j.hosts, h)
		j.gossip = append(j.gossip, g)
	}
	for _, h := range j.hosts {
		h.tr.SetHandler(handler{h}) // before any host starts sending
	}
	for _, h := range j.hosts {
		h.begin()
	}
	t.Cleanup(func() {
		for _, h := range j.hosts {
			h.stop()
		}
	})
	return j
}

// period moves every host's clock one gossip interval ahead (its start
// back), fires what is due and delivers until no message is left.
func (j *steadyJob) period() {
	for _, h := range j.hosts {
		h.start = h.start.Add(-j.interval)
	}
	for _, h := range j.hosts {
		h.fireDue()
		h.nowTo = h.nowTo[:0]
	}
	for busy := true; busy; {
		busy = false
		for _, h := range j.hosts {
			for len(h.inbox) > 0 {
				busy = true
				h.receive(<-h.inbox)
				h.drain()
			}
		}
	}
}

// mallocs counts the heap allocations of f; other goroutines of the test
// binary can only add to the count.
func mallocs(f func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.Mallocs
	f()
	runtime.ReadMemStats(&ms)
	return ms.Mallocs - before
}

// TestSteadyStateAllocations checks that a 2-node job's background
// allocates nothing once it is running: a gossip table sent and received
// per node and period (encoded into the host's buffer, decoded into the
// table the detector handed back), the round timer, the late-round check
// and the membership's probe timer. The first periods grow the slices,
// free lists and pools that the later ones reuse.
func TestSteadyStateAllocations(t *testing.T) {
	for _, n := range []int{2, 5} {
		j := newSteadyJob(t, n)
		for range 50 {
			j.period()
		}
		sent, timers := j.hosts[0].Stats().Sent, j.hosts[0].Stats().Timers
		const periods = 100
		// Take the best of a few windows: a goroutine left by another
		// test (a transport's, the runtime's) may allocate during one.
		best := ^uint64(0)
		for range 3 {
			got := mallocs(func() {
				for range periods {
					j.period()
				}
			})
			best = min(best, got)
			if best == 0 {
				break
			}
		}
		if best != 0 {
			t.Errorf("n=%d: %d allocations in %d gossip periods (%.2f per period), want 0", n, best, periods, float64(best)/periods)
		}
		// The periods did the work: tables went out every period, the
		// round and probe timers fired, and no one was suspected.
		s := j.hosts[0].Stats()
		t.Logf("n=%d: %d allocations in %d periods; node 0 sent %d messages, fired %d timers", n, best, periods, s.Sent-sent, s.Timers-timers)
		if s.Sent-sent < periods || s.Timers-timers < periods+periods/10 {
			t.Errorf("n=%d: %d messages sent and %d timers fired in %d periods", n, s.Sent-sent, s.Timers-timers, periods)
		}
		if s.SendDropped != 0 || s.Undecodable != 0 {
			t.Errorf("n=%d: stats %+v", n, s)
		}
		for i, g := range j.gossip {
			for _, h := range j.hosts {
				if st := g.Status(h.self); st != fd.StatusAlive {
					t.Errorf("n=%d: node %d sees %v as %v", n, i, h.self, st)
				}
			}
		}
	}
}

// recycler is a machine that hands back every message it receives, and
// also another one it holds.
type recycler struct {
	env   core.Env
	other core.Msg
}

func (r *recycler) Start(env core.Env) { r.env = env }
func (r *recycler) Fire(core.Timer)    {}
func (r *recycler) Handle(core.Event)  {}
func (r *recycler) Receive(_ core.NodeID, m core.Msg) {
	rc := r.env.(core.Recycler)
	rc.Recycle(m)
	rc.Recycle(r.other) // not the message delivered: ignored
}

// TestRecycleTakesOnlyDecoded checks that the host keeps for reuse only
// the message it is delivering from the readers, of a reusable kind: not
// a message handed to the machine otherwise (by Do, or sent to itself),
// which may still be its sender's, nor a second one in the same call.
func TestRecycleTakesOnlyDecoded(t *testing.T) {
	codec := wire.NewCodec()
	if err := fd.RegisterCodecs(codec); err != nil {
		t.Fatal(err)
	}
	r := &recycler{other: &fd.GossipMsg{}}
	h, err := New(r, Config{Transport: &syncTransport{self: 0}, Codec: codec, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	h.begin()
	defer h.stop()
	kept := func() int { return h.spares.kept(fd.KindGossip) }
	hostEnv{h}.Recycle(&fd.GossipMsg{}) // not delivering
	h.m.Receive(1, &fd.GossipMsg{})     // as Do or a self-send would
	if kept() != 0 {
		t.Fatalf("%d messages kept that the readers did not decode", kept())
	}
	h.receive(inbound{from: 1, m: &fd.GossipMsg{}})
	h.receive(inbound{from: 1, m: fd.GossipPing{Seq: 1}}) // not reusable
	if kept() != 1 {
		t.Errorf("%d messages kept after delivering one reusable message, want 1", kept())
	}
}
