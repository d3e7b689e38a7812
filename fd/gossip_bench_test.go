package fd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/sim"
)

// BenchmarkGossipSim runs the default (DBRR) gossip detector in the
// simulator: n nodes, one simulated minute per iteration, no fault. It
// reports
//
//   - events/s: simulator events (deliveries and timers) per second of
//     wall time;
//   - table-B/node: the detector's own per-member state (TableBytes): 4
//     bytes and one bit per member;
//   - heap-B/node: the Go heap in use after a GC at the end of the run,
//     divided by n — tables, the shared member list, the simulator's
//     per-node state and the tables in flight;
//   - nmax-4GiB: the largest n whose live heap, extrapolated as
//     (heap-B/node / n)·n², fits in 4 GiB. The Go GC needs headroom on top
//     (GOGC=100 doubles the peak; set GOMEMLIMIT to run close to it).
//
// Nodes start at random phases over one period, as independent processes
// would, so that about n·latency/T_gossip tables are in flight at any time
// (nodes started together would all send at the same instant, holding n
// tables in flight, 4n bytes each, for the latency).
//
// Run with: go test ./fd -run '^$' -bench GossipSim -benchtime 1x
func BenchmarkGossipSim(b *testing.B) {
	for _, n := range []int{64, 256, 1024, 4096} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			members := gfirst(n)
			cfg := SimGossipConfig()
			var events uint64
			var heapPerNode, tablePerNode float64
			for b.Loop() {
				w := sim.New(sim.Config{Seed: 1, Network: sim.Uniform(simMinLatency, simMaxLatency)})
				rng := rand.New(rand.NewPCG(1, 1))
				var g0 *Gossip
				for range n {
					g, err := NewGossip(cfg, members)
					if err != nil {
						b.Fatal(err)
					}
					if g0 == nil {
						g0 = g
					}
					w.AddAt(time.Duration(rng.Int64N(int64(cfg.GossipInterval))), g)
				}
				w.RunUntil(time.Minute)
				events += w.Stats().Events
				b.StopTimer()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heapPerNode = float64(ms.HeapInuse) / float64(n)
				tablePerNode = float64(g0.TableBytes())
				runtime.KeepAlive(w)
				b.StartTimer()
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(tablePerNode, "table-B/node")
			b.ReportMetric(heapPerNode, "heap-B/node")
			// heap ≈ k·n² with k = heapPerNode/n.
			k := heapPerNode / float64(n)
			b.ReportMetric(math.Floor(math.Sqrt(4*(1<<30)/k)), "nmax-4GiB")
		})
	}
}

// BenchmarkGossipSim100k runs 100,000 simulated gossip nodes in one world,
// one simulated minute, as P2P-MPI deploys its detector: one gossip group
// per application (§5: "at startup, all FDs are instructed with which
// protocol they should monitor a given application"), here 98 applications
// of 1,024 processes and one of 352, all on one simulated network. One
// group of 100,000 would need n² = 41 GB of heartbeat tables — the
// protocol's own cost, whatever the simulator — so this is the scale at
// which the gossip detector is meant to run. It reports events/s and the
// Go heap per node after a GC.
//
// Run with: go test ./fd -run '^$' -bench GossipSim100k -benchtime 1x
func BenchmarkGossipSim100k(b *testing.B) {
	const total, group = 100_000, 1024
	cfg := SimGossipConfig()
	var events uint64
	var heapPerNode float64
	for b.Loop() {
		w := sim.New(sim.Config{Seed: 1, Network: sim.Uniform(simMinLatency, simMaxLatency)})
		rng := rand.New(rand.NewPCG(1, 1))
		for first := 0; first < total; first += group {
			members := make([]core.NodeID, min(group, total-first))
			for i := range members {
				members[i] = core.NodeID(first + i)
			}
			for range members {
				g, err := NewGossip(cfg, members)
				if err != nil {
					b.Fatal(err)
				}
				w.AddAt(time.Duration(rng.Int64N(int64(cfg.GossipInterval))), g)
			}
		}
		w.RunUntil(time.Minute)
		events += w.Stats().Events
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heapPerNode = float64(ms.HeapInuse) / total
		runtime.KeepAlive(w)
		b.StartTimer()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(heapPerNode, "heap-B/node")
	b.ReportMetric(heapPerNode*total/(1<<30), "heap-GiB")
}

// BenchmarkGossipMerge measures one received table merged into a node's
// table (the hot loop of the simulation), for a table in the same view.
func BenchmarkGossipMerge(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			members := gfirst(n)
			g, err := NewGossip(SimGossipConfig(), members)
			if err != nil {
				b.Fatal(err)
			}
			env := coretest.NewEnv(0, 1)
			g.Start(env)
			msgs := make([]*GossipMsg, 16)
			for k := range msgs {
				beats := make([]uint32, n)
				for i := range beats {
					beats[i] = uint32(k + i%3)
				}
				msgs[k], _ = NewGossipMsg(0, members, beats)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				g.Receive(1, msgs[i%len(msgs)])
			}
		})
	}
}
