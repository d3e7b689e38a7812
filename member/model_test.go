package member_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/topo"
)

// §4, Eq. (1)–(2): with a constant latency L and no computation cost, the
// stabilization time after a single failure is O_cm = 2·L·(H−1), H the
// height of the (new) tree: FAILED_NODE goes down H−1 levels, FAILURE_ACK
// comes back up. The simulated T_s must equal the model exactly.
func TestStabilizationTimeModel(t *testing.T) {
	const latency = time.Millisecond
	for _, fanout := range []int{2, 4, 8} {
		for _, n := range []int{2, 7, 64, 300} {
			cfg := member.DefaultConfig()
			cfg.Fanout = fanout
			h := membertest.NewHarness(1, sim.Constant(latency), cfg, 5*time.Millisecond)
			h.AddInitial(n)
			var ts []time.Duration
			h.W.OnEmit(func(_ time.Duration, _ core.NodeID, e core.Event) {
				if s, ok := e.(member.Stabilized); ok {
					ts = append(ts, s.At-s.Began)
				}
			})
			victim := core.NodeID(n - 1) // a leaf: the tree keeps its shape
			h.W.CrashAt(10*time.Millisecond, victim)
			if err := h.W.RunChecked(time.Second); err != nil {
				t.Fatal(err)
			}
			tree, _ := topo.NewRadix(n-1, fanout)
			want := 2 * latency * time.Duration(tree.Height()-1)
			if len(ts) != 1 || ts[0] != want {
				t.Errorf("a=%d n=%d: T_s = %v, want 2·L·(H−1) = %v (H = %d)", fanout, n, ts, want, tree.Height())
			}
		}
	}
}

// BenchmarkSingleFailure measures the simulation of one failure handled by
// n members (every node detects it; one view change).
func BenchmarkSingleFailure(b *testing.B) {
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for range b.N {
				cfg := member.DefaultConfig()
				h := membertest.NewHarnessSim(sim.Config{Seed: 1, Network: sim.Constant(100 * time.Microsecond), NoTrace: true}, cfg, time.Millisecond)
				h.Quiet = true
				h.AddInitial(n)
				h.W.CrashAt(time.Millisecond, core.NodeID(n/2))
				if err := h.W.RunChecked(time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
