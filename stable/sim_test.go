package stable_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/stable/stabletest"
)

// world builds n nodes, each a stack of a feeder and a detector.
func world(seed uint64, n int, cfg stable.Config, net sim.Network) (*sim.World, []*stable.Detector) {
	w := sim.New(sim.Config{Seed: seed, Network: net})
	var dets []*stable.Detector
	for range n {
		d := stable.New(cfg, ids(n))
		dets = append(dets, d)
		w.Add(core.NewStack(stabletest.NewFeeder(cfg, ids(n), 3*time.Millisecond), d))
	}
	return w, dets
}

// Every protocol, on a reliable network, finishes rounds at every member
// with safe, growing vectors, for complete and incomplete hypercube sizes.
func TestSimReliable(t *testing.T) {
	for _, p := range stable.Protocols() {
		for _, n := range []int{1, 2, 5, 7, 12, 16} {
			t.Run(fmt.Sprintf("%v/n=%d", p, n), func(t *testing.T) {
				cfg := stable.Config{Protocol: p, Period: 20 * time.Millisecond}
				w, _ := world(1, n, cfg, sim.Uniform(100*time.Microsecond, 2*time.Millisecond))
				chk := stabletest.NewChecker(ids(n))
				chk.MinRounds = 5
				w.AddChecker(chk)
				if err := w.RunChecked(300 * time.Millisecond); err != nil {
					t.Fatal(err)
				}
				if err := w.Finish(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}
