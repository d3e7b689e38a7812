package member

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// TestSwarmGossipDetector runs the membership service over the real gossip
// failure detector of package fd (P2P-MPI §5, LAN timing) instead of the
// oracle: crashes (of roots too, several at once), joins, recoveries and
// short partitions, then a liveness phase in which every live node must
// install the same view, which excludes every crashed node. The detector
// follows the views (core.MembersChanged), so nodes excluded by a partition
// are found again by the member probes, not by the detector.
func TestSwarmGossipDetector(t *testing.T) {
	for _, seed := range simtest.Seeds(t, 100) {
		if err := gossipSwarm(t, seed); err != nil {
			t.Fatal(err)
		}
	}
}

func gossipSwarm(t *testing.T, seed uint64) (err error) {
	r := rand.New(rand.NewPCG(seed, 0xfd))
	cfg := DefaultConfig()
	cfg.Fanout = []int{2, 4}[r.IntN(2)]
	cfg.AckTimeout = 50 * time.Millisecond
	cfg.ReportRetry = 300 * time.Millisecond
	cfg.JoinRetry = 500 * time.Millisecond
	cfg.CommitTimeout = 300 * time.Millisecond
	cfg.ProbeInterval = 500 * time.Millisecond
	cfg.NoticeInterval = 100 * time.Millisecond
	if r.IntN(2) == 0 {
		cfg.Partition = PartitionMajority
	}
	gcfg := fd.LANGossipConfig()
	h := newHarness(t, seed, sim.Uniform(200*time.Microsecond, 2*time.Millisecond), cfg, 0)
	h.detector = func(initial []core.NodeID) core.Machine {
		g, err := fd.NewGossip(gcfg, initial)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	h.w.SetReplay("go test ./member -run TestSwarmGossipDetector -seed=%d")
	n := 3 + r.IntN(8)
	h.addInitial(n)
	s := &swarmRun{seed: seed, h: h, r: r, n: n}
	horizon := 10 * time.Second
	var plan sim.Plan
	for range 1 + r.IntN(4) {
		at := time.Duration(1000+r.IntN(8000)) * time.Millisecond
		switch r.IntN(6) {
		case 0, 1:
			s.crashAt(at, "random node", func() []core.NodeID { return s.pick(1) })
		case 2:
			s.crashAt(at, "root", func() []core.NodeID { return s.roots(1 + h.w.Rand().IntN(2)) })
		case 3:
			contacts := slices.Clone(h.all)
			h.addJoiner(at, contacts)
		case 4:
			h.w.At(at, func() {
				for _, id := range h.all {
					if _, ok := h.started[id]; ok && !h.w.Alive(id) {
						h.w.Recover(id, h.restart(id))
						return
					}
				}
			})
		case 5:
			var g []core.NodeID
			for _, id := range h.all {
				if r.IntN(2) == 0 {
					g = append(g, id)
				}
			}
			plan = append(plan, sim.Partition{Groups: [][]core.NodeID{g}, At: at, Until: at + time.Duration(1+r.IntN(3))*time.Second})
		}
	}
	plan = append(plan, sim.HealAll{At: horizon})
	if err := plan.Apply(h.w, nil); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("seed %d: panic: %v\n%s", seed, r, h.dump())
		}
	}()
	if err := h.w.RunChecked(horizon + 40*time.Second); err != nil {
		return fmt.Errorf("%w\n%s", err, h.dump())
	}
	if cfg.Partition == PartitionMajority {
		if err := s.checkChain(); err != nil {
			return fmt.Errorf("seed %d: %w\n%s", seed, err, h.dump())
		}
	}
	t.Logf("seed %d: n=%d %v, %d views installed, %d events, %d messages", seed, n, cfg.Partition, h.installs, h.w.Stats().Events, h.w.Stats().Messages)
	if d := h.converged(); d != "" {
		if cfg.Partition == PartitionMajority && s.noMajority() {
			return nil
		}
		return fmt.Errorf("seed %d: no convergence 40s after healing: %s\nplan:\n%v\n%s", seed, d, plan, h.dump())
	}
	return nil
}
