package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// TestHeartbeatSimHeldVerdictProbesAgain: n6 is cut off from every other
// member while the group settles, so its suspicions of all seven are held
// (SettleIntervals: 2·stallCap more), and its indirect probes' requests
// are all lost. The partition heals 1.0 or 0.6 s before the held verdict
// would fall, but the link n6–n7 stays cut: every other member reaches
// both for that time. The held suspicion of n7 asks helpers again, drawn
// afresh (those heard lately first): a helper's answer, or the
// refutation the helper's notice prompts, ends it;
// without that, n6 pinged n7 only over the cut link and its notice,
// retransmitted with back-off, reached the others after the verdict.
// The same cut with n7 crashing at the heal: n6's verdict comes no later
// than the hold, whose end the probes do not move.
func TestHeartbeatSimHeldVerdictProbesAgain(t *testing.T) {
	const n = 8
	a, b := core.NodeID(6), core.NodeID(7)
	cutAt := 400 * time.Millisecond
	cfg := clusterHeartbeatConfig()
	cfg.Monitors = n - 1 // everyone watches everyone at T_interval
	h := time.Duration(1 + cfg.LocalHealthMax)
	stallCap := h * (cfg.Timeout + cfg.Broken)
	for _, seed := range simtest.Seeds(t, 5) {
		for _, crash := range []bool{false, true} {
			for _, healAt := range []time.Duration{2200 * time.Millisecond, 2600 * time.Millisecond} {
				w := hbWorld(t, seed, n, cfg, nil)
				w.SetReplay("go test ./fd -run TestHeartbeatSimHeldVerdictProbesAgain -seed=%d")
				w.At(cutAt, func() {
					for i := range core.NodeID(n) {
						if i != a {
							w.Cut(a, i)
						}
					}
				})
				w.At(healAt, func() {
					for i := range core.NodeID(n) {
						if i != a && i != b {
							w.Heal(a, i)
						}
					}
					if crash {
						w.Crash(b)
					}
				})
				ev := recordHB(w)
				w.RunUntil(healAt + 5*time.Second)
				ab := [2]core.NodeID{a, b}
				st := hbOf(w, a).Stats()
				if len(ev.suspected[ab]) == 0 {
					t.Fatalf("seed %d: n6 never suspected n7", seed)
				}
				mark := ev.suspected[ab][0]
				if !crash {
					for k, at := range ev.failed {
						t.Errorf("seed %d, heal at %v: n%d declared n%d failed at %v, a path to it existing since the heal", seed, healAt, k[0], k[1], at)
					}
					if st.Reprobes == 0 {
						t.Errorf("seed %d, heal at %v: n6 never probed again while its verdicts were held", seed, healAt)
					}
					t.Logf("seed %d, heal at %v: n6 suspected n7 at %v, probed again %d times, %d probe requests", seed, healAt, mark, st.Reprobes, st.ProbeRequests)
					continue
				}
				hold := mark + h*cfg.Broken + 2*stallCap + cfg.Interval
				if f := ev.failed[ab]; len(f) != 1 || f[0] > hold {
					t.Errorf("seed %d, heal at %v, n7 crashed: n6 declared it failed at %v; want once, by %v", seed, healAt, f, hold)
				} else {
					t.Logf("seed %d, heal at %v, n7 crashed: n6 suspected it at %v, declared it at %v (hold ends by %v)", seed, healAt, mark, f[0], hold)
				}
			}
		}
	}
}
