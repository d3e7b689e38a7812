package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// clusterHeartbeatConfig is the heartbeat detector as `cohort cluster`
// runs it: T_interval 100 ms, T_timeout 200 ms, T_broken 100 ms, no
// full mesh.
func clusterHeartbeatConfig() HeartbeatConfig {
	cfg := AggressiveHeartbeatConfig()
	cfg.Timeout = 200 * time.Millisecond
	cfg.FullMeshMax = 0
	return cfg
}

// A process starved for a second right after the detectors started (128
// processes starting on 2 cores: the first view finds some of them still
// busy starting) is not declared failed, although no stall has been seen
// yet that the stall memory could have learnt: a suspicion that begins
// less than SettleIntervals T_interval after the detector began to watch
// waits twice the longest stall the memory can hold (stallCap) more
// before the verdict. A peer cut off at
// the same moment (a whole host gone: no refused connection) is declared
// by every member within the bound plus that margin.
func TestHeartbeatSimStartupStall(t *testing.T) {
	const n, victim = 32, core.NodeID(13)
	cfg := clusterHeartbeatConfig()
	at := 300 * time.Millisecond
	h := time.Duration(1 + cfg.LocalHealthMax)
	stallCap := h * (cfg.Timeout + cfg.Broken)
	bound := cfg.Interval + h*(cfg.Timeout+cfg.Broken) + 2*stallCap + floodBound(n) + hbMaxLatency
	for _, seed := range simtest.Seeds(t, 5) {
		w := hbWorld(t, seed, n, cfg, nil)
		f := countFailures(w, victim)
		w.At(at, func() { w.Pause(victim, time.Second) })
		w.RunUntil(at + 5*time.Second)
		if f.n != 0 {
			t.Errorf("seed %d: %v starved for 1 s at %v declared failed %d times, the first at %v; want none", seed, victim, at, f.n, f.first)
		}

		w = hbWorld(t, seed, n, cfg, nil)
		f = countFailures(w, victim)
		w.At(at, func() {
			for i := range n {
				if id := core.NodeID(i); id != victim {
					w.Cut(victim, id)
				}
			}
		})
		w.RunUntil(at + 3*bound)
		if f.n != n-1 || f.last-at > bound {
			t.Errorf("seed %d: %v cut off at %v declared by %d of %d members, the last %v later; want all within %v", seed, victim, at, f.n, n-1, f.last-at, bound)
		}
		t.Logf("seed %d: cut off at %v, first verdict %v later, last %v later (bound %v)", seed, at, f.first-at, f.last-at, bound)
	}
}
