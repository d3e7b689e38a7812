package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// TestHeartbeatSimStandingPairCut: the path between a node and its first
// monitor cut for a minute (both ways, or only the node's messages to the
// monitor), while both reach the 14 others. Each side whose own timeout
// fires accuses the other once: a helper proves it alive and it is
// counted unreachable, and its later silences are rechecked through
// helpers, which nobody else hears of, rather than suspected again. So
// per cut direction: one accusation and at most 16 suspicions (one per
// member that hears of it), no failure, no suspicion after the heal, and
// probe requests bounded by IndirectProbes per T_interval + T_timeout
// after the first probe's two waves. The paper's detector (no indirect
// probes) is logged beside it: it suspects the cut peer again every
// T_interval + T_timeout.
func TestHeartbeatSimStandingPairCut(t *testing.T) {
	const n = 16
	cut, heal, end := 5*time.Second, 65*time.Second, 95*time.Second
	for _, seed := range simtest.Seeds(t, 5) {
		for _, oneway := range []bool{false, true} {
			for _, probes := range []int{3, 0} {
				cfg := LANHeartbeatConfig()
				cfg.IndirectProbes = probes
				w := hbWorld(t, seed, n, cfg, nil)
				w.SetReplay("go test ./fd -run TestHeartbeatSimStandingPairCut -seed=%d")
				a, b := core.NodeID(0), core.None
				w.At(cut, func() {
					b = hbOf(w, a).Monitors()[0]
					if oneway {
						w.CutOneWay(a, b)
					} else {
						w.Cut(a, b)
					}
				})
				w.At(heal, func() { w.Heal(a, b) })
				suspicions, afterHeal := 0, 0
				f := countFailures(w, core.None)
				w.OnEmit(func(at time.Duration, _ core.NodeID, e core.Event) {
					if _, ok := e.(core.Suspected); ok {
						suspicions++
						if at >= heal {
							afterHeal++
						}
					}
				})
				w.RunUntil(end)
				var st HeartbeatStats
				for i := range n {
					s := hbOf(w, core.NodeID(i)).Stats()
					st.Accusations += s.Accusations
					st.ProbeRequests += s.ProbeRequests
					st.Rechecks += s.Rechecks
					st.Rechecked += s.Rechecked
					st.NoticesSent += s.NoticesSent + s.NoticesResent
				}
				t.Logf("seed %d, cut %v↔%v oneway=%v probes=%d: %d accusations, %d suspicions (%d after the heal), %d failures, %d notices, %d probe requests, %d rechecks (%d answered)",
					seed, a, b, oneway, probes, st.Accusations, suspicions, afterHeal, f.n, st.NoticesSent, st.ProbeRequests, st.Rechecks, st.Rechecked)
				if probes == 0 {
					continue
				}
				dirs := uint64(2)
				if oneway {
					dirs = 1
				}
				rounds := uint64((heal - cut) / (cfg.Interval + cfg.Timeout))
				maxProbes := dirs * uint64(probes) * (1 + hbSecondWave + rounds)
				if st.Accusations > dirs || suspicions > int(dirs)*n || afterHeal != 0 || f.n != 0 || st.ProbeRequests > maxProbes {
					t.Errorf("seed %d, oneway=%v: %d accusations, %d suspicions (%d after the heal), %d failures, %d probe requests; want at most %d accusations and %d suspicions, none after the heal, no failure, at most %d probe requests",
						seed, oneway, st.Accusations, suspicions, afterHeal, f.n, st.ProbeRequests, dirs, int(dirs)*n, maxProbes)
				}
			}
		}
	}
}
