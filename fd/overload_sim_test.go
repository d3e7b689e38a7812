package fd

import (
	"os"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
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
