package sim

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cohort-mp/cohort/core"
)

// BenchmarkGraphPing measures simulator throughput on the hop-by-hop random
// graph of the stability paper's §4.1 (P = 0.02, 100 Mbit/s, 0–1 ms links):
// every hop is an event, so events/s compares with BenchmarkPing while
// msgs/s says how many end-to-end messages that buys.
func BenchmarkGraphPing(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var events, msgs, hops uint64
			for b.Loop() {
				g, err := NewGraph(DefaultGraphConfig(n, 1))
				if err != nil {
					b.Fatal(err)
				}
				w := New(Config{Seed: 1, NoTrace: true, Network: g})
				for range n {
					w.Add(&ping{n: n, period: 10 * time.Millisecond})
				}
				w.RunUntil(time.Second)
				events += w.Stats().Events
				msgs += w.Stats().Messages
				hops += g.Stats().Hops
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(events)/s, "events/s")
			b.ReportMetric(float64(msgs)/s, "msgs/s")
			b.ReportMetric(float64(hops)/float64(msgs), "hops/msg")
		})
	}
}

// nop is the trivial machine: it does nothing and takes no memory of its
// own, so what a node costs is the kernel's overhead alone.
type nop struct{}

func (nop) Start(core.Env)                {}
func (nop) Receive(core.NodeID, core.Msg) {}
func (nop) Fire(core.Timer)               {}
func (nop) Handle(core.Event)             {}

// BenchmarkMemoryPerNode reports the kernel's heap per node at 100,000 nodes
// of a trivial machine, once the nodes have started (bytes/node), and the
// part that is the event queue's capacity left over from the start events
// (queue-bytes/node).
func BenchmarkMemoryPerNode(b *testing.B) {
	const n = 100_000
	var perNode, queue float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := New(Config{Seed: 1})
		for range n {
			w.Add(nop{})
		}
		w.RunUntil(0)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perNode = float64(after.HeapAlloc-before.HeapAlloc) / n
		queue = float64(cap(w.q.ev)) * float64(unsafe.Sizeof(event{})) / n
		runtime.KeepAlive(w)
	}
	b.ReportMetric(perNode, "bytes/node")
	b.ReportMetric(queue, "queue-bytes/node")
}
