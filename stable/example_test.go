package stable_test

import (
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
)

// Five detectors run CubeFullDist in the simulator; each node's multicast
// layer (here a fixed Progress handed over before Start) holds some
// messages of the two senders, and every node learns the element-wise
// minimum.
func ExampleNew() {
	members := []core.NodeID{0, 1, 2, 3, 4}
	cfg := stable.DefaultConfig()
	cfg.Senders = 2
	held := [][]uint64{{7, 3}, {9, 3}, {7, 5}, {8, 4}, {6, 9}}
	w := sim.New(sim.Config{Seed: 1, Network: sim.Constant(time.Millisecond)})
	for i := range members {
		d := stable.New(cfg, members)
		d.Handle(stable.Progress{Epoch: 0, Have: held[i]})
		w.Add(d)
	}
	w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
		if s, ok := e.(stable.Stable); ok && node == 0 && s.Round == 1 {
			fmt.Printf("at %v node %v: view %d round %d: stable %v\n", at, node, s.Epoch, s.Round, s.Vector)
		}
	})
	w.RunUntil(50 * time.Millisecond)
	// Output:
	// at 2ms node n0: view 0 round 1: stable [6 3]
}
