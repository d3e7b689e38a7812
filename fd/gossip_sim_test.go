package fd

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/topo"
)

var gossipSeed = flag.Uint64("gossip.seed", 0, "seed for the gossip simulation tests (0: each test's fixed seed)")

func simSeed(t *testing.T, def uint64) uint64 {
	s := def
	if *gossipSeed != 0 {
		s = *gossipSeed
	}
	t.Logf("seed %d (replay: go test ./fd -run '%s' -gossip.seed %d)", s, t.Name(), s)
	return s
}

// Simulated network of the tests: latency uniform in [1 ms, 10 ms], nodes
// started within 100 ms of each other, so that latency + phase spread
// (110 ms) stays below T_gossip (500 ms): assumption (S).
const (
	simMinLatency = time.Millisecond
	simMaxLatency = 10 * time.Millisecond
	simSpread     = 100 * time.Millisecond
)

// gossipWorld is a simulated world of n gossip detectors and a record of
// what they emitted.
type gossipWorld struct {
	w        *sim.World
	cfg      GossipConfig
	n        int
	members  []core.NodeID
	suspects map[[2]core.NodeID]int // (observer, node) -> Suspected count
	failed   map[[2]core.NodeID][]time.Duration
	recov    map[[2]core.NodeID]int
	total    map[string]int
}

func newGossipWorld(t *testing.T, cfg GossipConfig, n int, seed uint64) *gossipWorld {
	t.Helper()
	gw := &gossipWorld{
		w:        sim.New(sim.Config{Seed: seed, Network: sim.Uniform(simMinLatency, simMaxLatency)}),
		cfg:      cfg,
		n:        n,
		members:  gfirst(n),
		suspects: map[[2]core.NodeID]int{},
		failed:   map[[2]core.NodeID][]time.Duration{},
		recov:    map[[2]core.NodeID]int{},
		total:    map[string]int{},
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for range n {
		g, err := NewGossip(cfg, gw.members)
		if err != nil {
			t.Fatal(err)
		}
		gw.w.AddAt(time.Duration(rng.Int64N(int64(simSpread))), g)
	}
	gw.w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
		switch e := e.(type) {
		case core.Suspected:
			gw.suspects[[2]core.NodeID{node, e.Node}]++
			gw.total["suspected"]++
		case core.Unsuspected:
			gw.total["unsuspected"]++
		case core.Failed:
			k := [2]core.NodeID{node, e.Node}
			gw.failed[k] = append(gw.failed[k], at)
			gw.total["failed"]++
		case core.Recovered:
			gw.recov[[2]core.NodeID{node, e.Node}]++
			gw.total["recovered"]++
		}
	})
	return gw
}

func (gw *gossipWorld) live() []core.NodeID {
	var out []core.NodeID
	for _, id := range gw.members {
		if gw.w.Alive(id) {
			out = append(out, id)
		}
	}
	return out
}

// install gives every live node the view members (epoch), as a membership
// layer would after a failure.
func (gw *gossipWorld) install(epoch uint64, members []core.NodeID) {
	gw.members = members
	for _, id := range members {
		if gw.w.Alive(id) {
			gw.w.Node(id).Handle(core.MembersChanged{Epoch: epoch, Members: members})
		}
	}
}

// noFaultSize is the world of the no-fault runs: 1,024 nodes for 10
// simulated minutes in the default test run (about 4 s of CPU per schedule),
// the same for BRR and DBRR under -race, 128 nodes for 5 minutes for RR and
// random under -race (the race detector slows the simulation about
// tenfold), 256 nodes for 2 minutes with -short.
func noFaultSize(s topo.Schedule) (n int, d time.Duration) {
	switch {
	case gossipRace && (s == topo.BinaryRoundRobin || s == topo.DoubleBinaryRoundRobin):
		// The full-size run, kept in CI (-race):
		// about 30 s of CPU each.
		return 1024, 10 * time.Minute
	case gossipRace:
		return 128, 5 * time.Minute
	case testing.Short():
		return 256, 2 * time.Minute
	}
	return 1024, 10 * time.Minute
}

// TestGossipSimNoFalseSuspicion runs every schedule at its default settings
// (P2P-MPI §5.2: T_gossip 0.5 s and the T_cleanup of GossipConfig.Cleanup)
// with no fault: nobody may be suspected. For RR, BRR and DBRR this is the
// condition c ≥ P+1 of the package documentation; for Random (which has no
// deterministic bound, §5.1) it is a measurement: with 3⌈log2 n⌉ rounds at
// n = 1,024 a table that has not been refreshed for 30 rounds is too
// unlikely to show up — see TestGossipSimRandomSmallFalseSuspicion for the
// small-n case where it does.
func TestGossipSimNoFalseSuspicion(t *testing.T) {
	for _, s := range topo.Schedules {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			n, d := noFaultSize(s)
			cfg := SimGossipConfig()
			cfg.Schedule = s
			gw := newGossipWorld(t, cfg, n, simSeed(t, 11))
			gw.w.RunUntil(d)
			st := gw.w.Stats()
			t.Logf("%v n=%d for %v: %d events, %d messages, %.0f bytes/message, T_cleanup %v",
				s, n, d, st.Events, st.Messages, float64(st.Bytes)/float64(st.Sent), cfg.CleanupTime(n))
			if len(gw.total) != 0 {
				t.Fatalf("events in a fault-free run: %v", gw.total)
			}
			// Every table was exchanged: each node sent one per round.
			if rounds := uint64(d / cfg.GossipInterval); st.Sent < uint64(n)*rounds {
				t.Fatalf("sent %d tables, want at least %d", st.Sent, uint64(n)*rounds)
			}
		})
	}
}

// TestGossipSimRandomSmallFalseSuspicion shows the weakness of random
// gossip that P2P-MPI §5.1 points out: "it is possible that a node receives
// no gossip message for a period long enough to cause a false failure
// detection". Over 8 nodes, T_cleanup = 3⌈log2 8⌉ = 9 rounds, and a node's
// heartbeat sometimes reaches another one only after more than 9 rounds: it
// is suspected. The consensus ping (§5.3) then clears every such suspicion,
// so no live node is ever declared failed.
func TestGossipSimRandomSmallFalseSuspicion(t *testing.T) {
	cfg := SimGossipConfig()
	cfg.Schedule = topo.Random
	gw := newGossipWorld(t, cfg, 8, simSeed(t, 5))
	gw.w.RunUntil(time.Hour)
	t.Logf("random n=8, one hour: %v", gw.total)
	if gw.total["suspected"] == 0 {
		t.Fatal("no false suspicion with random gossip over 8 nodes in an hour; the test no longer shows §5.1's point")
	}
	if gw.total["failed"] != 0 || gw.total["unsuspected"] != gw.total["suspected"] {
		t.Fatalf("consensus did not clear every false suspicion: %v", gw.total)
	}
	// The deterministic schedules, same world: no suspicion at all.
	for _, s := range []topo.Schedule{topo.BinaryRoundRobin, topo.DoubleBinaryRoundRobin} {
		cfg.Schedule = s
		gw := newGossipWorld(t, cfg, 8, 5)
		gw.w.RunUntil(time.Hour)
		if len(gw.total) != 0 {
			t.Fatalf("%v n=8: %v", s, gw.total)
		}
	}
}

// TestGossipSimDetectionWithinBound crashes nodes one at a time and checks
// completeness (every live node declares every crashed node failed, once),
// accuracy (no live node is suspected) and that every detection time lies
// within DetectionBoundSpread for the network of the test (and so within
// the looser DetectionBound). After every live node has declared the crash,
// the test installs a view without the crashed node, as the membership
// layer would, so each crash happens in a stable view (the bound's
// assumption A1).
func TestGossipSimDetectionWithinBound(t *testing.T) {
	type tc struct {
		s       topo.Schedule
		n       int
		crashes int
	}
	cases := []tc{
		{topo.DoubleBinaryRoundRobin, 256, 6},
		{topo.BinaryRoundRobin, 256, 6},
		{topo.RoundRobin, 48, 6},
		{topo.DoubleBinaryRoundRobin, 13, 8},
		{topo.BinaryRoundRobin, 9, 6},
	}
	if gossipRace || testing.Short() {
		cases[0].n, cases[1].n = 64, 64
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/n=%d", c.s, c.n), func(t *testing.T) {
			t.Parallel()
			seed := simSeed(t, 23)
			cfg := SimGossipConfig()
			cfg.Schedule = c.s
			gw := newGossipWorld(t, cfg, c.n, seed)
			rng := rand.New(rand.NewPCG(seed, 2))
			now := 30 * time.Second // settle well past every grace period
			var worstLo, worstHi time.Duration = 1 << 62, 0
			minSlack := time.Duration(1 << 62) // least hi − detection time
			for k := range c.crashes {
				n := len(gw.members)
				lo, hi, err := DetectionBoundSpread(cfg, n, simMaxLatency, simSpread)
				if err != nil {
					t.Fatal(err)
				}
				looseLo, looseHi, err := DetectionBound(cfg, n, simMaxLatency)
				if err != nil {
					t.Fatal(err)
				}
				if looseLo > lo || looseHi < hi {
					t.Fatalf("DetectionBound [%v,%v] is tighter than DetectionBoundSpread [%v,%v]", looseLo, looseHi, lo, hi)
				}
				victim := gw.members[rng.IntN(n)]
				tc := now + time.Duration(rng.Int64N(int64(cfg.GossipInterval)))
				gw.w.CrashAt(tc, victim)
				gw.w.RunUntil(tc + hi + cfg.GossipInterval)
				for _, obs := range gw.live() {
					times := gw.failed[[2]core.NodeID{obs, victim}]
					if len(times) != 1 {
						t.Fatalf("crash %d: %v declared %v failed %d times, want once (completeness)", k, obs, victim, len(times))
					}
					d := times[0] - tc
					if d < lo || d > hi {
						t.Errorf("crash %d of %v at %v: %v detected it after %v, outside [%v, %v]", k, victim, tc, obs, d, lo, hi)
					}
					worstLo, worstHi = min(worstLo, d), max(worstHi, d)
					minSlack = min(minSlack, hi-d)
				}
				members := slices.DeleteFunc(slices.Clone(gw.members), func(id core.NodeID) bool { return id == victim })
				gw.install(uint64(k+1), members)
				now = gw.w.Now() + 10*cfg.GossipInterval
			}
			for k, times := range gw.failed {
				if gw.w.Alive(k[1]) {
					t.Fatalf("%v declared live %v failed at %v", k[0], k[1], times)
				}
			}
			for k := range gw.suspects {
				if gw.w.Alive(k[1]) {
					t.Fatalf("%v suspected live %v (accuracy)", k[0], k[1])
				}
			}
			t.Logf("%d crashes: detection times in [%v, %v]; closest to the upper bound: %v below it", c.crashes, worstLo, worstHi, minSlack)
			// For BRR and DBRR the bound is not vacuous: some detection
			// comes within two rounds plus the phase spread of it (a crash
			// late in j's period, a slow path, a late-phased observer).
			// RR's worst path exists for few of its n-1 start rounds, so a
			// handful of crashes rarely meets it.
			if c.s != topo.RoundRobin && minSlack > 2*cfg.GossipInterval+simSpread {
				t.Errorf("slowest detection is %v below the upper bound: the bound is loose or detection got faster than the derivation allows", minSlack)
			}
		})
	}
}

// TestGossipSimConcurrentCrashes crashes 5% of a DBRR group at once, with no
// view change: every live node must still declare every crashed node failed
// (completeness) and nobody live (accuracy). The single-failure bound does
// not apply here; the test reports the slowest detection.
func TestGossipSimConcurrentCrashes(t *testing.T) {
	n := 256
	if gossipRace || testing.Short() {
		n = 64
	}
	seed := simSeed(t, 31)
	cfg := SimGossipConfig()
	gw := newGossipWorld(t, cfg, n, seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	var victims []core.NodeID // distinct, in drawing order
	for len(victims) < n/20 {
		if v := core.NodeID(rng.IntN(n)); !slices.Contains(victims, v) {
			victims = append(victims, v)
		}
	}
	crashAt := 20 * time.Second
	for _, v := range victims {
		gw.w.CrashAt(crashAt, v)
	}
	gw.w.RunUntil(crashAt + 3*cfg.CleanupTime(n))
	var slowest time.Duration
	for _, obs := range gw.live() {
		for _, v := range victims {
			times := gw.failed[[2]core.NodeID{obs, v}]
			if len(times) != 1 {
				t.Fatalf("%v declared %v failed %d times, want once", obs, v, len(times))
			}
			slowest = max(slowest, times[0]-crashAt)
		}
	}
	if got, want := gw.total["failed"], len(gw.live())*len(victims); got != want {
		t.Fatalf("%d failure declarations, want %d (a live node was declared failed?)", got, want)
	}
	_, hi, _ := DetectionBound(cfg, n, simMaxLatency)
	t.Logf("%d simultaneous crashes among %d: slowest detection %v (single-failure bound %v)", len(victims), n, slowest, hi)
}

// TestGossipSimRecovery: a crashed node that restarts (a fresh machine, its
// counters at zero) adjusts its heartbeat above its old incarnation's and
// every node that had declared it failed emits core.Recovered.
func TestGossipSimRecovery(t *testing.T) {
	n := 32
	seed := simSeed(t, 41)
	cfg := SimGossipConfig()
	gw := newGossipWorld(t, cfg, n, seed)
	victim := core.NodeID(7)
	gw.w.CrashAt(20*time.Second, victim)
	gw.w.RunUntil(20*time.Second + 2*cfg.CleanupTime(n))
	for _, obs := range gw.live() {
		if len(gw.failed[[2]core.NodeID{obs, victim}]) != 1 {
			t.Fatalf("%v did not declare %v failed", obs, victim)
		}
	}
	g, err := NewGossip(cfg, gw.members)
	if err != nil {
		t.Fatal(err)
	}
	gw.w.Recover(victim, g)
	gw.w.RunFor(2 * cfg.CleanupTime(n))
	for _, obs := range gw.live() {
		if obs != victim && gw.recov[[2]core.NodeID{obs, victim}] != 1 {
			t.Fatalf("%v emitted Recovered(%v) %d times, want once", obs, victim, gw.recov[[2]core.NodeID{obs, victim}])
		}
	}
	if gw.total["suspected"] != (n-1) || gw.total["failed"] != n-1 {
		t.Fatalf("events %v: the restarted node was suspected by someone, or someone else was", gw.total)
	}
}

// TestGossipSimDeterministic: the same seed gives the same trace hash, a
// different seed a different one.
func TestGossipSimDeterministic(t *testing.T) {
	run := func(seed uint64) uint64 {
		cfg := SimGossipConfig()
		cfg.Schedule = topo.Random // exercises the per-node random sources too
		gw := newGossipWorld(t, cfg, 64, seed)
		gw.w.CrashAt(10*time.Second, 5)
		gw.w.RunUntil(time.Minute)
		return gw.w.TraceHash()
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Fatalf("same seed, different trace hashes: %x, %x", a, b)
	}
	if a == c {
		t.Fatalf("seeds 7 and 8 gave the same trace hash %x", a)
	}
}

// TestGossipSimNodeCrash crashes a block of consecutive ranks at once, as
// when a compute node dies with every rank it ran, and lets the detector
// alone deal with it (no view change follows). Every live node must
// declare every crashed one failed, once, with no Recovered afterwards, and
// no live node may be declared failed. For BRR at n = 8 with ranks 4-7
// dead, rank 3's three targets (4, 5, 7) are all dead, and rank 0's three
// senders (7, 6, 4) too: the first T_cleanup after the crash finds live
// nodes suspected beside the dead ones (rank 0 has heard from nobody), and
// only the consensus ping clears them; no rule that acts on suspicion can
// avoid that. What the doubted-target rule (Gossip.sendRound) must
// guarantee is that it does not happen again: once the crash has been
// declared, live heartbeats spread through the replacement targets and no
// live node is suspected over the next several T_cleanup. Without that
// rule the survivors would suspect rank 3 every T_cleanup. The other
// cases: the targets only partly dead (rank 3 keeps 7), BRR at n = 16
// with half the ranks dead (some ranks lose all their targets again), and
// DBRR and RR, whose schedules reach back and never suspect a live node
// here.
func TestGossipSimNodeCrash(t *testing.T) {
	type tc struct {
		s          topo.Schedule
		n          int
		dead       []core.NodeID // crashed at once
		anySuspect bool          // the first T_cleanup may suspect live nodes
	}
	block := func(from, to int) []core.NodeID {
		var out []core.NodeID
		for i := from; i < to; i++ {
			out = append(out, core.NodeID(i))
		}
		return out
	}
	cases := []tc{
		{topo.BinaryRoundRobin, 8, block(4, 8), true},
		{topo.BinaryRoundRobin, 8, block(4, 6), false},
		{topo.BinaryRoundRobin, 8, block(5, 8), true},
		{topo.BinaryRoundRobin, 16, block(8, 16), true},
		{topo.DoubleBinaryRoundRobin, 8, block(4, 8), false},
		{topo.DoubleBinaryRoundRobin, 16, block(8, 16), false},
		{topo.RoundRobin, 8, block(4, 8), false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/n=%d/dead=%v", c.s, c.n, c.dead), func(t *testing.T) {
			t.Parallel()
			seed := simSeed(t, 43)
			cfg := SimGossipConfig()
			cfg.Schedule = c.s
			c0 := cfg.CleanupTime(c.n)
			// The crash falls at three phases of the schedule's cycle and
			// at different points of a round.
			for k := range 6 {
				gw := newGossipWorld(t, cfg, c.n, seed+uint64(k))
				crash := 20*time.Second + time.Duration(k)*(cfg.GossipInterval+cfg.GossipInterval/7)
				dead := func(id core.NodeID) bool { return slices.Contains(c.dead, id) }
				var declared time.Duration // the last Failed of a crashed node
				var liveSuspects []string
				gw.w.OnEmit(func(at time.Duration, obs core.NodeID, e core.Event) {
					switch e := e.(type) {
					case core.Suspected:
						if !dead(e.Node) {
							liveSuspects = append(liveSuspects, fmt.Sprintf("%v suspected %v at crash+%v", obs, e.Node, at-crash))
						}
					case core.Failed:
						if dead(e.Node) {
							declared = max(declared, at)
						}
					}
				})
				for _, v := range c.dead {
					gw.w.CrashAt(crash, v)
				}
				gw.w.RunUntil(crash + 2*c0)
				firstWave := len(liveSuspects)
				if !c.anySuspect && firstWave > 0 {
					t.Fatalf("crash %d at %v: %v", k, crash, liveSuspects)
				}
				if declared == 0 || declared > crash+2*c0 {
					t.Fatalf("crash %d at %v: the crash was not declared within 2·T_cleanup (last at %v)", k, crash, declared-crash)
				}
				gw.w.RunUntil(crash + 6*c0)
				if later := liveSuspects[firstWave:]; len(later) > 0 {
					t.Fatalf("crash %d at %v, declared by crash+%v: live nodes suspected again: %v", k, crash, declared-crash, later)
				}
				for _, obs := range gw.live() {
					for _, v := range c.dead {
						if got := len(gw.failed[[2]core.NodeID{obs, v}]); got != 1 {
							t.Fatalf("crash %d: %v declared %v failed %d times, want once", k, obs, v, got)
						}
						if gw.recov[[2]core.NodeID{obs, v}] != 0 {
							t.Fatalf("crash %d: %v emitted Recovered(%v) for a crashed node", k, obs, v)
						}
					}
				}
				if got, want := gw.total["failed"], len(gw.live())*len(c.dead); got != want {
					t.Fatalf("crash %d: %d failure declarations, want %d (a live node was declared failed)", k, got, want)
				}
				if k == 0 {
					t.Logf("crash declared by crash+%v; %d suspicions of live nodes in the first 2·T_cleanup", declared-crash, firstWave)
				}
			}
		})
	}
}
