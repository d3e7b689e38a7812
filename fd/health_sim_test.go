package fd

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
	"github.com/cohort-mp/cohort/topo"
)

// Simulations of detectors on an overloaded host: some nodes' loops stall
// again and again (sim.Pause: a garbage-collection pause, a descheduled
// process), while one node really crashes. A stalled node must not be
// declared failed, must not accuse the others, and the crash must still be
// detected within the documented bound. The false suspicions are counted
// with and without lateness awareness (LocalHealthMax = 0 is the papers'
// fixed timeouts).

// loadModel describes the stalls of a run.
type loadModel struct {
	loaded   int           // nodes whose loops stall (ids 1..loaded; node 0 never stalls)
	every    time.Duration // mean time between two stalls of a loaded node
	minPause time.Duration
	maxPause time.Duration
	until    time.Duration // no stall starts after this
	// own is how long, beyond the stall's own length, an accusation that
	// follows the end of a stall is counted as the stall's doing: one
	// period (T_interval or T_gossip).
	own time.Duration
	// noticed is the shortest stall the detector surely notices (one of
	// its timers falls due early in it and fires late by more than the
	// tolerance): only such stalls are held against its accusations.
	noticed time.Duration
}

// plan draws the stalls of every loaded node from the world's source.
func (m loadModel) plan(w *sim.World) sim.Plan {
	var p sim.Plan
	r := w.Rand()
	for i := 1; i <= m.loaded; i++ {
		at := time.Duration(r.ExpFloat64() * float64(m.every))
		for at < m.until {
			d := m.minPause + time.Duration(r.Int64N(int64(m.maxPause-m.minPause)))
			p = append(p, sim.Pause{Node: core.NodeID(i), At: at, For: d})
			at += d + time.Duration(r.ExpFloat64()*float64(m.every))
		}
	}
	return p
}

// loadCounts is what a loaded run produced.
type loadCounts struct {
	falseAccusations int // suspicions of a live node that started at the suspecting node (its own timeout)
	byStalled        int // of which by a node right after one of its own stalls (within the stall's length plus a period), of a node that did not stall in the second before
	falseSuspicions  int // core.Suspected of a live node (accusations and the notices that spread them)
	falseFailures    int // core.Failed of a live node
	undetected       int // live nodes that did not declare the crashed node failed within the bound
	lastDetection    time.Duration
}

func (c loadCounts) String() string {
	return fmt.Sprintf("false accusations %d (%d by a node just after its own stall), false suspicions %d, false failures %d, crash undetected by %d, last detection %v after the crash",
		c.falseAccusations, c.byStalled, c.falseSuspicions, c.falseFailures, c.undetected, c.lastDetection)
}

func (c *loadCounts) add(d loadCounts) {
	c.falseAccusations += d.falseAccusations
	c.byStalled += d.byStalled
	c.falseSuspicions += d.falseSuspicions
	c.falseFailures += d.falseFailures
	c.undetected += d.undetected
	c.lastDetection = max(c.lastDetection, d.lastDetection)
}

// countLoaded runs w with the load model and a crash of victim at crash,
// until end, and counts. Every live node must declare the crash within
// bound, or within restart after the end of its last stall that overlaps
// that window (a node that stalls restarts its judgement clock). accusations(id) is node id's count of suspicions
// that started there: a core.Suspected emitted while it grew is one.
func countLoaded(t testing.TB, w *sim.World, m loadModel, victim core.NodeID, crash, bound, restart, end time.Duration, accusations func(core.NodeID) uint64, healthOf func(core.NodeID) HealthStats, debug bool) loadCounts {
	t.Helper()
	plan := append(m.plan(w), sim.Crash{Node: victim, At: crash})
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	stalls := map[core.NodeID][]sim.Pause{}
	for _, f := range plan {
		if p, ok := f.(sim.Pause); ok {
			stalls[p.Node] = append(stalls[p.Node], p)
		}
	}
	// An accusation is the accuser's own lateness speaking when it comes
	// at most the stall's length plus one period after the accuser
	// resumed, and the accused did not stall in the second before. Only
	// stalls longer than m.noticed count: a shorter one may leave no timer
	// late enough to be noticed (by design).
	justStalled := func(id, subject core.NodeID, at time.Duration) bool {
		for _, p := range stalls[subject] {
			if p.At < at && p.At+p.For > at-time.Second {
				return false
			}
		}
		for _, p := range stalls[id] {
			if r := p.At + p.For; p.For > m.noticed && at >= r && at < r+p.For+m.own {
				return true
			}
		}
		return false
	}
	var c loadCounts
	failedAt := map[core.NodeID]time.Duration{}
	seen := map[core.NodeID]uint64{}
	w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
		switch e := e.(type) {
		case core.Suspected:
			accused := false
			if a := accusations(node); a > seen[node] {
				seen[node]++
				accused = true
			}
			if e.Node != victim || at < crash {
				c.falseSuspicions++
				if accused {
					c.falseAccusations++
					if justStalled(node, e.Node, at) {
						c.byStalled++
						if debug {
							t.Logf("%v accused %v at %v; stalls of accuser %v, of subject %v", node, e.Node, at, stalls[node], stalls[e.Node])
						}
					}
				}
			}
		case core.Failed:
			if e.Node != victim || at < crash {
				c.falseFailures++
				t.Logf("%v declared live %v failed at %v", node, e.Node, at)
			} else if _, ok := failedAt[node]; !ok {
				failedAt[node] = at
			}
		}
	})
	w.RunUntil(end)
	for i := range w.Len() {
		id := core.NodeID(i)
		if id == victim {
			continue
		}
		// A stall during the detection window restarts the node's
		// judgement clock: its deadline moves to restart after the stall.
		deadline := crash + bound
		for moved := true; moved; {
			moved = false
			for _, p := range stalls[id] {
				if p.At < deadline && p.At+p.For > crash && p.At+p.For+restart > deadline {
					deadline, moved = p.At+p.For+restart, true
				}
			}
		}
		at, ok := failedAt[id]
		if !ok || at > deadline {
			c.undetected++
			if debug {
				t.Logf("%v declared the crash at %v (declared: %v), bound %v; its stalls %v; health %+v", id, at-crash, ok, bound, stalls[id], healthOf(id))
			}
			continue
		}
		c.lastDetection = max(c.lastDetection, at-crash)
	}
	return c
}

// loadSeeds is the number of seeds of the loaded runs: COHORT_LOAD_SEEDS
// raises it for the before/after measurement of the closing note.
func loadSeeds(t *testing.T, def int) []uint64 {
	if s := os.Getenv("COHORT_LOAD_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("COHORT_LOAD_SEEDS=%q: want a positive count", s)
		}
		def = n
	}
	return simtest.Seeds(t, def)
}

// The heartbeat detector (aggressive preset, 16 nodes) with 6 nodes whose
// loops stall for 20..150 ms about every 400 ms: no live node is declared
// failed, no node accuses anyone just after its own stall, and the crash
// of a node at 5 s is declared by every live node within the bound of
// [HeartbeatConfig.LocalHealthMax]; with LocalHealthMax = 0 the same runs
// have stalled nodes accusing others.
//
//	COHORT_LOAD_SEEDS=200 go test ./fd -run TestHeartbeatSimLoaded -v
//
// prints the totals the closing note reports.
func TestHeartbeatSimLoaded(t *testing.T) {
	const n = 16
	cfg0 := AggressiveHeartbeatConfig()
	m := loadModel{loaded: 6, every: 400 * time.Millisecond, minPause: 20 * time.Millisecond, maxPause: 150 * time.Millisecond, until: 8 * time.Second,
		own: cfg0.Interval, noticed: cfg0.Timeout/2 + 20*time.Millisecond}
	crash, end := 5*time.Second, 9*time.Second
	run := func(seed uint64, cfg HeartbeatConfig) loadCounts {
		w := hbWorld(t, seed, n, cfg, nil)
		h := time.Duration(1 + cfg.LocalHealthMax)
		// The documented worst case: a monitor suspects within T_interval
		// + (1+H)·T_timeout, the notice floods, everyone declares the
		// failure (1+H)·T_broken later; a node that was stalled adds its
		// stall.
		bound := cfg.Interval + h*(cfg.Timeout+cfg.Broken) + floodBound(n) + m.maxPause + hbMaxLatency
		victim := core.NodeID(n - 1) // never stalls
		// After a stall, a node waits for a fresh T_interval + T_timeout,
		// then T_broken, both scaled.
		restart := cfg.Interval + h*(cfg.Timeout+cfg.Broken) + floodBound(n)
		debug := os.Getenv("COHORT_LOAD_DEBUG") != "" && cfg.LocalHealthMax > 0
		return countLoaded(t, w, m, victim, crash, bound, restart, end, func(id core.NodeID) uint64 { return hbOf(w, id).Stats().Accusations },
			func(id core.NodeID) HealthStats { return hbOf(w, id).Health() }, debug)
	}
	var before, after loadCounts
	seeds := loadSeeds(t, 4)
	for _, seed := range seeds {
		off := AggressiveHeartbeatConfig()
		off.LocalHealthMax = 0
		b := run(seed, off)
		a := run(seed, AggressiveHeartbeatConfig())
		t.Logf("seed %d: fixed timeouts: %v", seed, b)
		t.Logf("seed %d: lateness aware: %v", seed, a)
		if a.falseFailures != 0 || a.byStalled != 0 || a.undetected != 0 {
			t.Errorf("seed %d: lateness aware: %v; want no false failure, no accusation by a node just after its stall, the crash detected by all", seed, a)
		}
		before.add(b)
		after.add(a)
	}
	t.Logf("%d seeds, fixed timeouts: %v", len(seeds), before)
	t.Logf("%d seeds, lateness aware: %v", len(seeds), after)
	if before.byStalled == 0 {
		t.Errorf("with fixed timeouts no stalled node accused anyone: the load model does not exercise the detector")
	}
	if after.falseAccusations >= before.falseAccusations {
		t.Errorf("lateness awareness did not reduce false accusations: %d, fixed timeouts %d", after.falseAccusations, before.falseAccusations)
	}
}

// The gossip detector (BRR, a round every 100 ms, 16 nodes) under load:
// 6 nodes stall about every 500 ms. Under the moderate model (stalls of
// 50..200 ms, no longer than T_consensus) no live
// node is declared failed, no node suspects anyone within T_cleanup after
// its own stall, and the crash of a node at 5 s is declared by every live
// node within (c·(1+H)+1)·T_gossip + (1+H)·T_consensus + Φ of it, or of
// the end of the node's last stall in that window. Under the heavy model
// (stalls of 100..400 ms: nodes away 40% of the time, heartbeats of
// others held up in them) lateness awareness cuts false failures by 3×
// and false suspicions by 2× at least, but does not remove them: a node
// away longer than its peers' consensus is declared failed.
//
//	COHORT_LOAD_SEEDS=200 go test ./fd -run TestGossipSimLoaded -v
func TestGossipSimLoaded(t *testing.T) {
	const n = 16
	cfg := LANGossipConfig()
	cfg.Schedule = topo.BinaryRoundRobin
	c := time.Duration(cfg.CleanupRounds(n))
	crash, end := 5*time.Second, 14*time.Second
	run := func(seed uint64, cfg GossipConfig, m loadModel) loadCounts {
		w := sim.New(sim.Config{Seed: seed, Network: hbNet})
		for range n {
			g, err := NewGossip(cfg, ids(n))
			if err != nil {
				t.Fatal(err)
			}
			w.Add(g)
		}
		h := time.Duration(1 + cfg.LocalHealthMax)
		tg := cfg.GossipInterval
		bound := (c*h+1)*tg + h*cfg.ConsensusTime() + tg + m.maxPause
		restart := (c*h+2)*tg + h*cfg.ConsensusTime()
		gossip := func(id core.NodeID) *Gossip { return w.Node(id).(*Gossip) }
		debug := os.Getenv("COHORT_LOAD_DEBUG") != "" && cfg.LocalHealthMax > 0
		return countLoaded(t, w, m, core.NodeID(n-1), crash, bound, restart, end,
			func(core.NodeID) uint64 { return ^uint64(0) }, // every suspicion is the node's own
			func(id core.NodeID) HealthStats { return gossip(id).Health() }, debug)
	}
	models := []struct {
		name  string
		m     loadModel
		exact bool // no false failure, no accusation by a just-stalled node
	}{
		{"moderate", loadModel{loaded: 6, every: 500 * time.Millisecond, minPause: 50 * time.Millisecond, maxPause: 200 * time.Millisecond, until: 8 * time.Second, own: cfg.GossipInterval, noticed: cfg.GossipInterval * 3 / 2}, true},
		{"heavy", loadModel{loaded: 6, every: 500 * time.Millisecond, minPause: 100 * time.Millisecond, maxPause: 400 * time.Millisecond, until: 8 * time.Second, own: cfg.GossipInterval, noticed: cfg.GossipInterval * 3 / 2}, false},
	}
	seeds := loadSeeds(t, 4)
	for _, md := range models {
		var before, after loadCounts
		for _, seed := range seeds {
			off := cfg
			off.LocalHealthMax = 0
			b := run(seed, off, md.m)
			a := run(seed, cfg, md.m)
			if a.undetected != 0 || md.exact && (a.falseFailures != 0 || a.byStalled != 0) {
				t.Errorf("%s load, seed %d: lateness aware: %v; want the crash detected by all in the bound, and under moderate load no false failure and no suspicion by a node just after its stall", md.name, seed, a)
			}
			before.add(b)
			after.add(a)
		}
		t.Logf("%s load, %d seeds, fixed timeouts: %v", md.name, len(seeds), before)
		t.Logf("%s load, %d seeds, lateness aware: %v", md.name, len(seeds), after)
		if after.falseAccusations > before.falseAccusations || after.falseFailures > before.falseFailures {
			t.Errorf("%s load: lateness awareness made things worse: false suspicions %d → %d, false failures %d → %d",
				md.name, before.falseAccusations, after.falseAccusations, before.falseFailures, after.falseFailures)
		}
		if md.exact {
			continue
		}
		if before.byStalled == 0 {
			t.Errorf("%s load: with fixed timeouts no stalled node suspected anyone: the load model does not exercise the detector", md.name)
		}
		if 2*after.falseAccusations > before.falseAccusations || after.falseFailures*3 > before.falseFailures {
			t.Errorf("%s load: lateness awareness cut false suspicions %d → %d and false failures %d → %d; want by 2× and 3× at least",
				md.name, before.falseAccusations, after.falseAccusations, before.falseFailures, after.falseFailures)
		}
	}
}

// One node's loop stalls once, for longer than T_interval + T_timeout of
// the heartbeat detector (aggressive preset) but shorter than the
// silence that declares a failure; it then finds every deadline it set
// long past and the messages that would have met them behind its timers.
// Lateness aware, it accuses nobody and nobody declares it failed; with
// fixed timeouts it accuses its peers as soon as it wakes.
func TestHeartbeatSimStalledNode(t *testing.T) {
	const n = 8
	const stalled = core.NodeID(3)
	run := func(seed uint64, cfg HeartbeatConfig) (accusations uint64, failures int) {
		w := hbWorld(t, seed, n, cfg, nil)
		w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
			if _, ok := e.(core.Failed); ok {
				failures++
				t.Logf("seed %d, LocalHealthMax %d: %v declared %v failed at %v", seed, cfg.LocalHealthMax, node, e.(core.Failed).Node, at)
			}
		})
		if err := (sim.Plan{sim.Pause{Node: stalled, At: 2 * time.Second, For: 190 * time.Millisecond}}).Apply(w, nil); err != nil {
			t.Fatal(err)
		}
		w.RunUntil(4 * time.Second)
		return hbOf(w, stalled).Stats().Accusations, failures
	}
	var fixedAccusations uint64
	for _, seed := range simtest.Seeds(t, 8) {
		a, f := run(seed, AggressiveHeartbeatConfig())
		if a != 0 || f != 0 {
			t.Errorf("seed %d: the stalled node accused %d peers and %d failures were declared; want none", seed, a, f)
		}
		off := AggressiveHeartbeatConfig()
		off.LocalHealthMax = 0
		a0, _ := run(seed, off)
		fixedAccusations += a0
	}
	if fixedAccusations == 0 {
		t.Errorf("with fixed timeouts the stalled node never accused anyone: the stall does not exercise the detector")
	}
	t.Logf("accusations by the stalled node over the seeds: %d with fixed timeouts, 0 lateness aware", fixedAccusations)
}
