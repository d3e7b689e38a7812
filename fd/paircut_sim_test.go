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
// helpers, which nobody else hears of, rather than suspected again. At
// the heal a side may accuse once more: it still waited for heartbeats
// that the other stopped sending during the cut (a demoted monitor, a
// closed link), and the accused tells it to expect nothing. So per cut
// direction at most two accusations and 32 suspicions, none from 2 s
// after the heal, no failure, and probe requests bounded by
// IndirectProbes per T_interval + T_timeout after the first probe's two
// waves. The paper's detector (no indirect probes) is logged beside it:
// it suspects the cut peer again every T_interval + T_timeout.
func TestHeartbeatSimStandingPairCut(t *testing.T) {
	const n = 16
	cut, heal, end := 5*time.Second, 65*time.Second, 95*time.Second
	// The LAN preset (full mesh at 16), and the runtime's setting (no
	// full mesh: a demoted monitor's link closes during the cut, and
	// both the demotion and the closing may be lost on it).
	runtime := AggressiveHeartbeatConfig()
	runtime.Interval, runtime.Timeout, runtime.Broken = 105*time.Millisecond, 210*time.Millisecond, 105*time.Millisecond
	runtime.Insurance = 40 * runtime.Interval
	runtime.FullMeshMax = 0
	for _, seed := range simtest.Seeds(t, 5) {
		for _, oneway := range []bool{false, true} {
			for _, c := range []struct {
				name   string
				base   HeartbeatConfig
				probes int
			}{{"lan", LANHeartbeatConfig(), 3}, {"lan", LANHeartbeatConfig(), 0}, {"runtime", runtime, 3}} {
				probes := c.probes
				cfg := c.base
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
						if at >= heal+2*time.Second {
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
				t.Logf("seed %d, %s, cut %v↔%v oneway=%v probes=%d: %d accusations, %d suspicions (%d from 2 s after the heal), %d failures, %d notices, %d probe requests, %d rechecks (%d answered)",
					seed, c.name, a, b, oneway, probes, st.Accusations, suspicions, afterHeal, f.n, st.NoticesSent, st.ProbeRequests, st.Rechecks, st.Rechecked)
				if probes == 0 {
					continue
				}
				dirs := uint64(2)
				if oneway {
					dirs = 1
				}
				rounds := uint64((heal - cut) / (cfg.Interval + cfg.Timeout))
				maxProbes := dirs * uint64(probes) * (1 + hbSecondWave + rounds)
				if st.Accusations > 2*dirs || suspicions > 2*int(dirs)*n || afterHeal != 0 || f.n != 0 || st.ProbeRequests > maxProbes {
					t.Errorf("seed %d, %s, oneway=%v: %d accusations, %d suspicions (%d from 2 s after the heal), %d failures, %d probe requests; want at most %d accusations and %d suspicions, none from 2 s after the heal, no failure, at most %d probe requests",
						seed, c.name, oneway, st.Accusations, suspicions, afterHeal, f.n, st.ProbeRequests, 2*dirs, 2*int(dirs)*n, maxProbes)
				}
			}
		}
	}
}

// TestHeartbeatSimWholeHostOfRanks: ranks 4 to 7 of 8, consecutive in the
// member list (one host's ranks), stop together a moment after the start,
// before some of them may have announced anything, with the runtime's
// settings (aggressive timing, no full mesh). The middle ones (5, 6) have
// both ring neighbours on the dead host, and their monitors may all be
// there too; the view that drops the first ones declared makes live
// members their ring neighbours, which wait for their insurance. Some
// survivor declares each of the four (one declaration is enough for the
// membership).
func TestHeartbeatSimWholeHostOfRanks(t *testing.T) {
	const n = 8
	for _, seed := range simtest.Seeds(t, 20) {
		for _, stopAt := range []time.Duration{30 * time.Millisecond, 3 * time.Second} {
			cfg := AggressiveHeartbeatConfig()
			cfg.FullMeshMax = 0
			w := hbWorld(t, seed, n, cfg, nil)
			w.SetReplay("go test ./fd -run TestHeartbeatSimWholeHostOfRanks -seed=%d")
			dead := []core.NodeID{4, 5, 6, 7}
			w.At(stopAt, func() {
				for _, id := range dead {
					w.Crash(id)
				}
			})
			declared := map[[2]core.NodeID]bool{}
			w.OnEmit(func(_ time.Duration, node core.NodeID, e core.Event) {
				if f, ok := e.(core.Failed); ok {
					declared[[2]core.NodeID{node, f.Node}] = true
				}
			})
			// The membership, crudely: every second the survivors install
			// a view without the members any survivor declared.
			epoch := uint64(1)
			var view func()
			view = func() {
				var members []core.NodeID
				for i := range n {
					id := core.NodeID(i)
					gone := false
					for s := range core.NodeID(4) {
						gone = gone || declared[[2]core.NodeID{s, id}]
					}
					if !gone {
						members = append(members, id)
					}
				}
				epoch++
				for s := range core.NodeID(4) {
					w.Node(s).Handle(core.MembersChanged{Epoch: epoch, Members: members})
				}
				w.At(w.Now()+time.Second, view)
			}
			w.At(stopAt+time.Second, view)
			w.RunUntil(stopAt + 20*time.Second)
			for _, d := range dead {
				by := 0
				for s := range core.NodeID(4) {
					if declared[[2]core.NodeID{s, d}] {
						by++
					}
				}
				if by == 0 {
					t.Errorf("seed %d, stop at %v: no survivor declared n%d failed", seed, stopAt, d)
				}
			}
		}
	}
}
