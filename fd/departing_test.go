package fd

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// leaving is a core.Departing, as member.Leaving is.
type leaving core.NodeID

func (l leaving) DepartingNode() core.NodeID { return core.NodeID(l) }

// A member that announced it leaves goes silent as a crashed one does,
// and the heartbeat detector suspects it, but gives no verdict: the
// membership excludes it as a leaver. Without the announcement the same
// silence is declared (the check can fail).
func TestHeartbeatNoVerdictOnLeaver(t *testing.T) {
	cfg := DefaultHeartbeatConfig()
	cfg.IndirectProbes = 3
	for _, leaves := range []bool{false, true} {
		h, env := startHB(t, cfg, 0, ids(8), 1)
		if leaves {
			h.Handle(leaving(3))
		}
		h.Receive(5, HeartbeatNotice{Subject: 3})
		env.Advance(cfg.Broken*(1+3)+cfg.probeTimeout(), h)
		failed := slices.Contains(env.TakeEmitted(), core.Event(core.Failed{Node: 3}))
		if failed == leaves {
			t.Errorf("n3 leaving %v: declared failed = %v", leaves, failed)
		}
	}
}

// The gossip detector likewise: its consensus pings go unanswered, and a
// leaver is marked failed without a verdict.
func TestGossipNoVerdictOnLeaver(t *testing.T) {
	for _, leaves := range []bool{false, true} {
		members := gfirst(4)
		g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 0, members)
		if leaves {
			g.Handle(leaving(3))
		}
		for k := uint32(1); env.Now() < 5*time.Second; k++ {
			g.Receive(1, gossipTable(t, members, 0, k, k, 0))
			env.Advance(500*time.Millisecond, g)
		}
		failed := slices.Contains(env.TakeEmitted(), core.Event(core.Failed{Node: 3}))
		if failed == leaves || g.Status(3) != StatusFailed {
			t.Errorf("n3 leaving %v: declared failed = %v, status %v", leaves, failed, g.Status(3))
		}
	}
}

// A leaver is forgotten once a view no longer holds it, or holds a new
// incarnation of it: a process that comes back under its id is judged.
func TestDepartingKeep(t *testing.T) {
	var d departing
	d.add(2)
	d.add(3)
	d.add(3)
	if !slices.Equal(d, departing{2, 3}) {
		t.Fatalf("leavers %v, want [2 3]", d)
	}
	d.keep([]core.NodeID{0, 1, 3}, nil)
	if d.has(2) || !d.has(3) {
		t.Fatalf("after a view without n2: %v, want [3]", d)
	}
	d.keep([]core.NodeID{0, 1, 3}, []core.NodeID{3})
	if len(d) != 0 {
		t.Fatalf("after n3 renewed: %v, want none", d)
	}
}
