package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/sim/simtest"
)

// TestSwarmTraceDeterminism runs each seed's swarm plan twice and demands the
// same trace hash, statistics and fault log, and a different hash for
// another seed, over a latency-only network and the hop-by-hop random graph.
func TestSwarmTraceDeterminism(t *testing.T) {
	nets := map[string]func(seed uint64) Network{
		"uniform": func(uint64) Network { return Uniform(100*time.Microsecond, 2*ms) },
		"graph": func(seed uint64) Network {
			cfg := DefaultGraphConfig(16, seed)
			cfg.P = 0.2
			g, err := NewGraph(cfg)
			if err != nil {
				panic(err)
			}
			return g
		},
	}
	for _, name := range []string{"uniform", "graph"} {
		t.Run(name, func(t *testing.T) {
			r := defaultSwarmRun()
			r.net = nets[name]
			r.opts.MaxCrashFraction = 0.3
			for _, seed := range simtest.Seeds(t, 3) {
				a, errA := r.run(seed)
				b, errB := r.run(seed)
				c, _ := r.run(seed + 1)
				if errA != nil || errB != nil {
					t.Fatalf("seed %d: %v / %v", seed, errA, errB)
				}
				if a.TraceHash() != b.TraceHash() || a.Stats() != b.Stats() || !slices.Equal(a.FaultLog(), b.FaultLog()) {
					t.Fatalf("seed %d twice: hashes %x %x, stats %+v %+v", seed, a.TraceHash(), b.TraceHash(), a.Stats(), b.Stats())
				}
				if a.TraceHash() == c.TraceHash() {
					t.Fatalf("seeds %d and %d gave the same trace hash %x", seed, seed+1, a.TraceHash())
				}
				if a.Stats().Messages == 0 {
					t.Fatalf("seed %d: nothing was delivered", seed)
				}
			}
		})
	}
}
