package fd

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
	"github.com/cohort-mp/cohort/topo"
)

// An overloaded host: more runnable processes than cores, so every
// process's loop stalls in turn. The heartbeat detector with the settings
// of a job on one machine (T_interval 100 ms, T_timeout 200 ms, T_broken
// 100 ms), 32 nodes, every node but node 0 stalling for 20..350 ms about
// every 300 ms (away about 40% of the time), for 8 s; node 0 crashes at
// 5 s. No node that has found itself late declares a live node failed,
// and every live node declares the crash within the bound plus the margin
// its stalls allow (health.go: twice the longest stall it saw lately, its
// own, a refuted suspicion's or a false verdict's, on both the suspicion
// and the verdict). Without the margin, the timeouts, capped at
// (1 + LocalHealthMax) times the configured ones, are shorter than the
// stalls, and a stalled node's refutation comes too late. A node that has
// never been late yet (only at the start of a run) keeps the configured
// timeouts and may still declare a peer stalled longer than them failed,
// as the bound requires of it: the test logs those.
//
//	COHORT_LOAD_SEEDS=200 go test ./fd -run TestHeartbeatSimOverloaded -v
func TestHeartbeatSimOverloaded(t *testing.T) {
	const n = 32
	cfg := AggressiveHeartbeatConfig()
	cfg.Timeout = 200 * time.Millisecond
	m := loadModel{loaded: n - 1, every: 300 * time.Millisecond, minPause: 20 * time.Millisecond, maxPause: 350 * time.Millisecond, until: 8 * time.Second,
		own: cfg.Interval, noticed: cfg.lateTolerance() + cfg.Interval}
	crash := 5 * time.Second
	h := time.Duration(1 + cfg.LocalHealthMax)
	// Own lateness is at most maxPause, and a refuted suspicion (or a
	// false verdict) counts for at most (1 + H)·(T_timeout + T_broken),
	// so the margin is at most twice the larger, on the suspicion and on
	// the verdict.
	margin := 2 * max(m.maxPause+hbMaxLatency, h*(cfg.Timeout+cfg.Broken))
	restart := cfg.Interval + h*(cfg.Timeout+cfg.Broken) + 2*margin + floodBound(n)
	bound := restart + m.maxPause + hbMaxLatency
	end := crash + 2*bound // a stall in the window moves a node's deadline past the bound
	var total loadCounts
	totalByLate := 0
	seeds := loadSeeds(t, 20)
	for _, seed := range seeds {
		w := hbWorld(t, seed, n, cfg, nil)
		debug := os.Getenv("COHORT_LOAD_DEBUG") != ""
		byLate := 0
		w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
			if f, ok := e.(core.Failed); ok && (f.Node != 0 || at < crash) && hbOf(w, node).Health().Late > 0 {
				byLate++
			}
		})
		c := countLoaded(t, w, m, 0, crash, bound, restart, end, func(id core.NodeID) uint64 { return hbOf(w, id).Stats().Accusations },
			func(id core.NodeID) HealthStats { return hbOf(w, id).Health() }, debug)
		if byLate != 0 || c.undetected != 0 {
			t.Errorf("seed %d: %v, %d false failures by a node that had been late; want none, and the crash detected by all within %v", seed, c, byLate, bound)
		}
		total.add(c)
		totalByLate += byLate
	}
	t.Logf("%d seeds: %v, of which by a node that had been late %d (bound %v)", len(seeds), total, totalByLate, bound)
}

// gossipLocalConfig is the gossip detector as cohort runs it on one
// machine: BRR, a round every 100 ms, pings of 250 ms, two attempts.
func gossipLocalConfig() GossipConfig {
	cfg := LANGossipConfig()
	cfg.Schedule = topo.BinaryRoundRobin
	cfg.PingTimeout = 250 * time.Millisecond
	cfg.PingAttempts = 2
	return cfg
}

// gossipLoadWorld is a world of n gossip detectors on the simulations'
// network (0.2 to 2 ms), started within spread of each other.
func gossipLoadWorld(t testing.TB, seed uint64, n int, cfg GossipConfig, spread time.Duration) *sim.World {
	t.Helper()
	return gossipLoadWorldIn(t, sim.Config{Seed: seed, Network: hbNet}, n, cfg, spread)
}

// gossipLoadWorldIn is gossipLoadWorld in a world of configuration wc.
func gossipLoadWorldIn(t testing.TB, wc sim.Config, n int, cfg GossipConfig, spread time.Duration) *sim.World {
	t.Helper()
	seed := wc.Seed
	w := sim.New(wc)
	r := rand.New(rand.NewPCG(seed, 2))
	for range n {
		g, err := NewGossip(cfg, ids(n))
		if err != nil {
			t.Fatal(err)
		}
		var at time.Duration
		if spread > 0 {
			at = time.Duration(r.Int64N(int64(spread)))
		}
		w.AddAt(at, g)
	}
	return w
}

// gossipLoadRun runs w (its detectors configured with cfg) with the load
// model m and a crash of node 0 at crash, until crash + 4·bound, where
// bound is the node's LoadedDetectionBound for no stall: it counts as
// countLoaded does, and checks that every live node declared the crash
// within its own bound, LoadedDetectionBound for the largest stall it
// remembered and whether it took an input gap for isolation, or that
// long after the end of its last stall that overlaps the window.
func gossipLoadRun(t *testing.T, w *sim.World, n int, cfg GossipConfig, m loadModel, crash time.Duration) (c loadCounts, late, byLate int) {
	t.Helper()
	gossip := func(id core.NodeID) *Gossip { return w.Node(id).(*Gossip) }
	failedAt := map[core.NodeID]time.Duration{}
	w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
		f, ok := e.(core.Failed)
		switch {
		case !ok:
		case f.Node == 0 && at >= crash:
			if _, ok := failedAt[node]; !ok {
				failedAt[node] = at
			}
		case gossip(node).Health().Late > 0:
			byLate++
			t.Logf("%v declared live %v failed at %v with %+v, %+v", node, f.Node, at, gossip(node).StallStats(), gossip(node).Health())
		}
	})
	worst, err := LoadedDetectionBound(cfg, n, hbMaxLatency, cfg.StallCap(n), true)
	if err != nil {
		t.Fatal(err)
	}
	c = countLoaded(t, w, m, 0, crash, worst, worst, crash+worst+m.maxPause,
		func(core.NodeID) uint64 { return ^uint64(0) }, // every suspicion is the node's own
		func(id core.NodeID) HealthStats { return gossip(id).Health() }, false)
	plan := w.Plan()
	for i := 1; i < n; i++ {
		id := core.NodeID(i)
		st := gossip(id).StallStats()
		bound, err := LoadedDetectionBound(cfg, n, hbMaxLatency, st.MaxStall, st.Isolated+st.Alone > 0)
		if err != nil {
			t.Fatal(err)
		}
		deadline := crash + bound
		for moved := true; moved; {
			moved = false
			for _, f := range plan {
				if p, ok := f.(sim.Pause); ok && p.Node == id && p.At < deadline && p.At+p.For > crash && p.At+p.For+bound > deadline {
					deadline, moved = p.At+p.For+bound, true
				}
			}
		}
		if at, ok := failedAt[id]; !ok || at > deadline {
			late++
			t.Logf("%v declared the crash at %v (declared: %v), its bound %v (stalls %+v)", id, at-crash, ok, deadline-crash, st)
		}
	}
	return c, late, byLate
}

// The gossip detector as cohort runs it on one machine (BRR, T_gossip
// 100 ms, pings of 250 ms), 16 nodes, every node but node 0 stalling for
// 100 ms to 2 s about every 1.5 s for 8 s, as processes starved by a
// host that runs ten times more of them than it has cores: peers silent
// for longer than T_cleanup + T_consensus (1.3 s) are not dead. Node 0
// crashes at 5 s. No node that has found itself late declares a live
// node failed, and every live node declares the crash within
// LoadedDetectionBound for the stall it remembered (alone if its inputs
// all stopped at some point), or as long after the end of its last
// stall in the window. A node that has never been late yet (node 0,
// which never stalls, and the others at the start of a run) keeps the
// configured timeouts until a suspect proves them short, and may still
// declare a peer stalled longer than them failed, as the bound requires
// of it: the test counts those.
//
//	COHORT_LOAD_SEEDS=100 go test ./fd -run TestGossipSimOverloaded -v
func TestGossipSimOverloaded(t *testing.T) {
	const n = 16
	cfg := gossipLocalConfig()
	m := loadModel{loaded: n - 1, every: 1500 * time.Millisecond, minPause: 100 * time.Millisecond, maxPause: 2 * time.Second, until: 8 * time.Second,
		own: cfg.GossipInterval, noticed: cfg.lateTolerance() + cfg.GossipInterval}
	crash := 5 * time.Second
	var total loadCounts
	late, byLate, isolated, held, rescued := 0, 0, uint64(0), uint64(0), uint64(0)
	seeds := loadSeeds(t, 4)
	for _, seed := range seeds {
		w := gossipLoadWorld(t, seed, n, cfg, 0)
		c, l, b := gossipLoadRun(t, w, n, cfg, m, crash)
		if b != 0 || l != 0 {
			t.Errorf("seed %d: %v, %d false failures by a node that had been late, %d live nodes late to declare the crash; want none", seed, c, b, l)
		}
		byLate += b
		for i := 1; i < n; i++ {
			st := w.Node(core.NodeID(i)).(*Gossip).StallStats()
			isolated += st.Isolated
			held += st.Held
			rescued += st.Rescued
		}
		total.add(c)
		late += l
	}
	t.Logf("%d seeds: %v, of which by a node that had been late %d; %d late to declare the crash; inputs taken for isolation %d, verdicts held %d, of which answered %d", len(seeds), total, byLate, late, isolated, held, rescued)
}

// TestGossipSimOverloadedRefused is TestGossipSimOverloaded on hosts
// that refuse a connection to a crashed process's port, as real ones do
// (sim.Config.RefuseDead): the members whose schedule names the crashed
// node 0 (15, 14, 12 and 8 under BRR over 16) are refused when their
// next table goes to it, and declare it within a refused suspicion's
// bound, the ping consensus (at most (1 + H)·T_consensus) or
// ProbeTimeout after the refusal, whatever stalls they remember, where
// the stall memory holds a verdict up to 2M more. On a host running
// more processes than cores that memory grows to seconds, and the
// membership waits for a verdict on a silent root; a starved process
// still listens, so no live one is refused, and none is declared
// failed by a node that has been late.
//
//	COHORT_LOAD_SEEDS=100 go test ./fd -run TestGossipSimOverloadedRefused -v
func TestGossipSimOverloadedRefused(t *testing.T) {
	const n = 16
	const refuseAfter = time.Millisecond
	cfg := gossipLocalConfig()
	m := loadModel{loaded: n - 1, every: 1500 * time.Millisecond, minPause: 100 * time.Millisecond, maxPause: 2 * time.Second, until: 8 * time.Second,
		own: cfg.GossipInterval, noticed: cfg.lateTolerance() + cfg.GossipInterval}
	crash := 5 * time.Second
	senders := sendersOf(t, cfg.Schedule, 0, n)
	// A sender's next table to 0 leaves within a cycle of its schedule and
	// a round (its phase), is refused, and the consensus or the probe
	// then runs its course, each ping timing out at (1 + H)·PingTimeout.
	consensus := max(time.Duration(1+cfg.LocalHealthMax)*time.Duration(cfg.PingAttempts)*cfg.PingTimeout, cfg.probeTimeout())
	bound := time.Duration(cfg.Schedule.CycleLength(n)+1)*cfg.GossipInterval + 2*hbMaxLatency + refuseAfter + consensus
	var total loadCounts
	slow, held := 0, uint64(0)
	for _, seed := range loadSeeds(t, 4) {
		w := gossipLoadWorldIn(t, sim.Config{Seed: seed, Network: hbNet, RefuseDead: refuseAfter}, n, cfg, 0)
		failedAt := map[core.NodeID]time.Duration{}
		w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
			if f, ok := e.(core.Failed); ok && f.Node == 0 && at >= crash {
				if _, ok := failedAt[node]; !ok {
					failedAt[node] = at
				}
			}
		})
		c, l, b := gossipLoadRun(t, w, n, cfg, m, crash)
		if b != 0 || l != 0 {
			t.Errorf("seed %d: %v, %d false failures by a node that had been late, %d live nodes late to declare the crash; want none", seed, c, b, l)
		}
		total.add(c)
		plan := w.Plan()
		for _, id := range senders {
			// A stall of the sender's own loop in the window postpones
			// all of it: the bound counts from the end of the stall.
			deadline := crash + bound
			for moved := true; moved; {
				moved = false
				for _, f := range plan {
					if p, ok := f.(sim.Pause); ok && p.Node == id && p.At < deadline && p.At+p.For > crash && p.At+p.For+bound > deadline {
						deadline, moved = p.At+p.For+bound, true
					}
				}
			}
			st := w.Node(id).(*Gossip).StallStats()
			held += st.Held
			if at, ok := failedAt[id]; !ok || at > deadline {
				slow++
				t.Errorf("seed %d: %v declared the crash %v after it (declared: %v), want within %v (stall memory %v)", seed, id, at-crash, ok, deadline-crash, st.MaxStall)
			}
		}
	}
	t.Logf("%v; senders of the crashed node late to declare it: %d; verdicts held for stalls by them: %d", total, slow, held)
}

// sendersOf returns the members whose schedule ever names x (BRR over n:
// x−1, x−2, x−4, …): the only members x hears from, round after round.
func sendersOf(t *testing.T, s topo.Schedule, x, n int) []core.NodeID {
	t.Helper()
	var out []core.NodeID
	for i := range n {
		for r := 1; r <= s.CycleLength(n); r++ {
			if to, err := s.Target(i, r, n); err != nil {
				t.Fatal(err)
			} else if to == x && i != x {
				out = append(out, core.NodeID(i))
				break
			}
		}
	}
	return out
}

// A node whose inputs all stop: every member that sends to node 8 under
// BRR over 16 (7, 6, 4 and 0) stalls for 1.1 s at once, or crashes. Node
// 8 then hears from nobody and every entry it holds ages together; it
// cannot tell the two cases apart from what it receives, only from its
// own lateness:
//
//   - starved itself (its loop stalled 100 ms a second before), it takes
//     the gap for its own isolation: while its senders stall it suspects
//     nobody, where the paper's detector suspects all 15;
//   - starved, its senders crashed: it declares them failed within
//     LoadedDetectionBound for the stall it remembers and one input gap;
//   - on time, senders stalled: it suspects live members besides its
//     senders, as the paper's detector does, and the pongs clear them;
//   - on time, senders crashed: it declares them within the same bound
//     with no input gap taken.
//
// In no case is a live member declared failed.
func TestGossipSimIsolation(t *testing.T) {
	const n, x = 16, core.NodeID(8)
	cfg := gossipLocalConfig()
	senders := sendersOf(t, cfg.Schedule, int(x), n)
	if len(senders) != 4 {
		t.Fatalf("senders of %v under %v over %d: %v, want 4", x, cfg.Schedule, n, senders)
	}
	const gap = 3 * time.Second
	type result struct {
		suspected, liveFailed int
		declared              map[core.NodeID]time.Duration // node → last verdict on a sender
		stalls                map[core.NodeID]GossipStallStats
	}
	run := func(seed uint64, starved, crash bool) result {
		w := gossipLoadWorld(t, seed, n, cfg, 50*time.Millisecond)
		var plan sim.Plan
		if starved {
			plan = append(plan, sim.Pause{Node: x, At: gap - time.Second, For: 100 * time.Millisecond})
		}
		for _, s := range senders {
			if crash {
				plan = append(plan, sim.Crash{Node: s, At: gap})
			} else {
				plan = append(plan, sim.Pause{Node: s, At: gap, For: 1100 * time.Millisecond})
			}
		}
		if err := plan.Apply(w, nil); err != nil {
			t.Fatal(err)
		}
		r := result{declared: map[core.NodeID]time.Duration{}, stalls: map[core.NodeID]GossipStallStats{}}
		w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
			switch e := e.(type) {
			case core.Suspected:
				if node == x && at >= gap {
					r.suspected++
				}
			case core.Failed:
				if !crash || !slices.Contains(senders, e.Node) {
					r.liveFailed++
					t.Logf("seed %d: %v declared live %v failed at %v", seed, node, e.Node, at)
				} else {
					r.declared[node] = max(r.declared[node], at-gap)
				}
			}
		})
		w.RunUntil(gap + 12*time.Second)
		for i := range n {
			if id := core.NodeID(i); w.Alive(id) {
				r.stalls[id] = w.Node(id).(*Gossip).StallStats()
			}
		}
		return r
	}
	for _, seed := range simtest.Seeds(t, 4) {
		for _, c := range []struct {
			name           string
			starved, crash bool
		}{{"starved, senders stalled", true, false}, {"starved, senders crashed", true, true}, {"on time, senders stalled", false, false}, {"on time, senders crashed", false, true}} {
			r := run(seed, c.starved, c.crash)
			iso := r.stalls[x].Isolated
			if r.liveFailed != 0 {
				t.Errorf("seed %d, %s: %d live members declared failed", seed, c.name, r.liveFailed)
			}
			switch {
			case c.starved && (iso != 1 || !c.crash && r.suspected != 0):
				t.Errorf("seed %d, %s: node %v took %d input gaps for isolation and suspected %d members; want 1 gap and, senders live, no suspicion", seed, c.name, x, iso, r.suspected)
			case !c.starved && (iso != 0 || !c.crash && r.suspected <= len(senders)):
				t.Errorf("seed %d, %s: node %v took %d input gaps for isolation and suspected %d members; want none and, senders live, live others besides the %d senders", seed, c.name, x, iso, r.suspected, len(senders))
			}
			if !c.crash {
				continue
			}
			for id, st := range r.stalls {
				bound, err := LoadedDetectionBound(cfg, n, hbMaxLatency, st.MaxStall, st.Isolated+st.Alone > 0)
				if err != nil {
					t.Fatal(err)
				}
				if at, ok := r.declared[id]; !ok || at > bound {
					t.Errorf("seed %d, %s: %v declared the last sender failed %v after the crash (declared: %v), bound %v (%+v)", seed, c.name, id, at, ok, bound, st)
				}
			}
			if testing.Verbose() {
				t.Logf("seed %d, %s: node %v declared the senders %v after the crash (%+v); node %v suspected %d", seed, c.name, x, r.declared[x], r.stalls[x], x, r.suspected)
			}
		}
	}
}
