package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
	"github.com/cohort-mp/cohort/topo"
)

// Simulations of the indirect probes: live members behind broken links
// are not declared failed, and a process whose every link is cut is
// declared as fast as before.

// partialCuts cuts, from at on: n0↔n3 both ways, n5→n6 one way, and every
// link of n7 but the one to n1 (n7 reaches one member only).
func partialCuts(w *sim.World, n int, at time.Duration) {
	w.At(at, func() {
		w.Cut(0, 3)
		w.CutOneWay(5, 6)
		for i := range n {
			if id := core.NodeID(i); id != 7 && id != 1 {
				w.Cut(7, id)
			}
		}
	})
}

// failures counts core.Failed events and remembers the earliest and latest.
type failures struct {
	n           int
	first, last time.Duration
}

func countFailures(w *sim.World, about core.NodeID) *failures {
	f := &failures{first: -1}
	w.OnEmit(func(at time.Duration, _ core.NodeID, e core.Event) {
		if e, ok := e.(core.Failed); ok && (about == core.None || e.Node == about) {
			f.n++
			if f.first < 0 {
				f.first = at
			}
			f.last = at
		}
	})
	return f
}

// TestHeartbeatSimPartialPartition: with the links n0↔n3, n5→n6 and all
// of n7's but one cut for a minute, no member is declared failed; without
// indirect probes (the paper's detector) some are.
func TestHeartbeatSimPartialPartition(t *testing.T) {
	const n = 8
	for _, seed := range simtest.Seeds(t, 5) {
		for _, probes := range []int{3, 0} {
			cfg := LANHeartbeatConfig()
			cfg.IndirectProbes = probes
			w := hbWorld(t, seed, n, cfg, nil)
			w.SetReplay("go test ./fd -run TestHeartbeatSimPartialPartition -seed=%d")
			partialCuts(w, n, 5*time.Second)
			f := countFailures(w, core.None)
			w.RunUntil(65 * time.Second)
			var alive uint64
			for i := range n {
				alive += hbOf(w, core.NodeID(i)).Stats().IndirectAlive
			}
			t.Logf("seed %d, probes=%d: %d failure verdicts, %d suspicions refuted by helpers", seed, probes, f.n, alive)
			if probes > 0 && f.n > 0 {
				t.Errorf("seed %d: %d failure verdicts about live members that others reach (first at %v)", seed, f.n, f.first)
			}
		}
	}
}

// TestGossipSimPartialPartition is TestHeartbeatSimPartialPartition for
// the gossip detector (DBRR, LAN timing). Its tables go around the cut
// links, so it rarely suspects anyone here even without indirect probes.
func TestGossipSimPartialPartition(t *testing.T) {
	const n = 8
	for _, seed := range simtest.Seeds(t, 5) {
		for _, probes := range []int{3, 0} {
			cfg := LANGossipConfig()
			cfg.IndirectProbes = probes
			gw := newGossipWorld(t, cfg, n, seed)
			partialCuts(gw.w, n, 5*time.Second)
			f := countFailures(gw.w, core.None)
			gw.w.RunUntil(65 * time.Second)
			var alive uint64
			for i := range n {
				alive += gw.w.Node(core.NodeID(i)).(*Gossip).ProbeStats().IndirectAlive
			}
			t.Logf("seed %d, probes=%d: %d failure verdicts, %d suspicions refuted by helpers", seed, probes, f.n, alive)
			if probes > 0 && f.n > 0 {
				t.Errorf("seed %d: %d failure verdicts about live members that others reach (first at %v)", seed, f.n, f.first)
			}
		}
	}
}

// TestHeartbeatSimWholeHostCrash: a process whose every link is cut (a
// whole host gone) is declared failed by every member, the first verdict
// no later with indirect probes than without (the probe runs while the
// suspicion waits T_broken) and the last within 1.2 times as long. The figures of the log are
// those of docs/PERFORMANCE.md:
//
//	go test ./fd -run 'SimWholeHostCrash' -v
func TestHeartbeatSimWholeHostCrash(t *testing.T) {
	const n, victim = 16, core.NodeID(5)
	crashAt := 10 * time.Second
	for _, seed := range simtest.Seeds(t, 5) {
		var first, last [2]time.Duration
		for k, probes := range []int{0, 3} {
			cfg := LANHeartbeatConfig()
			cfg.IndirectProbes = probes
			w := hbWorld(t, seed, n, cfg, nil)
			f := countFailures(w, victim)
			w.At(crashAt, func() {
				for i := range n {
					if id := core.NodeID(i); id != victim {
						w.Cut(victim, id)
					}
				}
			})
			w.RunUntil(crashAt + 30*time.Second)
			if f.n != n-1 {
				t.Fatalf("seed %d, probes=%d: %d of %d members declared the cut-off process failed", seed, probes, f.n, n-1)
			}
			first[k], last[k] = f.first-crashAt, f.last-crashAt
			t.Logf("seed %d, probes=%d: cut off at %v, first verdict %v later, last %v later", seed, probes, crashAt, f.first-crashAt, f.last-crashAt)
		}
		if first[1] > first[0] || last[1] > last[0]*6/5 {
			t.Errorf("seed %d: verdicts %v to %v after the cut with indirect probes, %v to %v without", seed, first[1], last[1], first[0], last[0])
		}
	}
}

// TestGossipSimWholeHostCrash is TestHeartbeatSimWholeHostCrash for the
// gossip detector (DBRR, LAN timing): every verdict within DetectionBound.
func TestGossipSimWholeHostCrash(t *testing.T) {
	const n, victim = 16, core.NodeID(5)
	crashAt := 10 * time.Second
	seed := simSeed(t, 3)
	var first [2]time.Duration
	for k, probes := range []int{0, 3} {
		cfg := LANGossipConfig()
		cfg.Schedule = topo.DoubleBinaryRoundRobin
		cfg.IndirectProbes = probes
		gw := newGossipWorld(t, cfg, n, seed)
		f := countFailures(gw.w, victim)
		gw.w.At(crashAt, func() {
			for i := range n {
				if id := core.NodeID(i); id != victim {
					gw.w.Cut(victim, id)
				}
			}
		})
		gw.w.RunUntil(crashAt + 30*time.Second)
		_, hi, err := DetectionBound(cfg, n, simMaxLatency)
		if err != nil {
			t.Fatal(err)
		}
		if f.n != n-1 || f.last-crashAt > hi {
			t.Fatalf("probes=%d: %d of %d members declared the cut-off process failed, the last %v after the cut, want all within %v", probes, f.n, n-1, f.last-crashAt, hi)
		}
		first[k] = f.first - crashAt
		t.Logf("probes=%d: first verdict %v after the cut, last %v (bound %v)", probes, f.first-crashAt, f.last-crashAt, hi)
	}
	if first[1] > first[0] {
		t.Errorf("first verdict %v after the cut with indirect probes, %v without", first[1], first[0])
	}
}
