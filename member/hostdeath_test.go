package member_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// TestHostDeathExcludesOnlyItsProcesses: a job of 8 members on two hosts
// of 4 (ranks 0–3 and 4–7, as srun places them by block) over the
// heartbeat detector, and the second host dies: its 4 processes crash at
// once. The detectors declare them one by one, so the first proposals
// drop only some of them and keep the others in the tree, where a live
// member is the parent of dead ones and cannot acknowledge until they
// are declared: that silence is its subtree's, and no view may leave a
// live member out. Every view a live member installs holds every live
// member, and the last holds exactly them.
func TestHostDeathExcludesOnlyItsProcesses(t *testing.T) {
	for _, seed := range simtest.Seeds(t, 100) {
		if err := hostDeath(t, seed); err != nil {
			t.Fatal(err)
		}
	}
}

// hostDeath runs one seed of TestHostDeathExcludesOnlyItsProcesses.
func hostDeath(t *testing.T, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 0xde4d))
	cfg := membertest.DetectorSwarmConfig(r)
	cfg.Partition = member.PartitionPaper
	h := membertest.NewHarnessSim(sim.Config{Seed: seed, Network: sim.Uniform(200*time.Microsecond, 2*time.Millisecond)}, cfg, 0)
	h.Detector = func(initial []core.NodeID) core.Machine {
		d, err := fd.NewHeartbeat(fd.LANHeartbeatConfig(), initial)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	replay := "go test ./member -run TestHostDeathExcludesOnlyItsProcesses -seed=%d"
	h.W.SetReplay(replay)
	ids := h.AddInitial(8)
	live, dead := ids[:4], ids[4:]
	at := time.Duration(1000+r.IntN(4000)) * time.Millisecond
	for _, id := range dead {
		h.W.CrashAt(at, id)
	}
	views := &liveViews{live: live}
	h.W.AddChecker(views)
	if err := h.W.RunChecked(at + 20*time.Second); err != nil {
		return fmt.Errorf("seed %d: %w\n%s", seed, err, h.Dump())
	}
	if msg := h.Converged(); msg != "" {
		return fmt.Errorf("seed %d (fan-out %d, host died at %v): not converged: %s\nreplay: %s\n%s", seed, cfg.Fanout, at, msg, fmt.Sprintf(replay, seed), h.Dump())
	}
	t.Logf("seed %d: fan-out %d, host died at %v, %d views installed", seed, cfg.Fanout, at, h.Installs)
	return nil
}

// liveViews is a sim.Checker: every view a member of live installs holds
// every member of live.
type liveViews struct{ live []core.NodeID }

func (c *liveViews) Name() string { return "live members kept" }

func (c *liveViews) Check(_ *sim.World, o sim.Obs) error {
	v, ok := o.Event.(member.ViewInstalled)
	if o.Kind != sim.ObsEmit || !ok || !slices.Contains(c.live, o.Node) {
		return nil
	}
	for _, id := range c.live {
		if !slices.Contains(v.Members, id) {
			return sim.Violatef(id, "live member %v left out of %s %v", id, member.FormatEpoch(v.Epoch), v.Members)
		}
	}
	return nil
}
