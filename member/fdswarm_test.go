package member_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/member/membertest"
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
		if err := detectorSwarm(t, seed, "TestSwarmGossipDetector", 0, lanGossip); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSwarmGossipDetectorRefused is TestSwarmGossipDetector on hosts
// that refuse connections to a crashed process's port
// (sim.Config.RefuseDead), as real ones do: the gossip detector then
// starts its consensus at once and holds no verdict for stalls, so
// crashed members, roots among them, are declared sooner than by their
// heartbeats' age.
func TestSwarmGossipDetectorRefused(t *testing.T) {
	for _, seed := range simtest.Seeds(t, 100) {
		if err := detectorSwarm(t, seed, "TestSwarmGossipDetectorRefused", time.Millisecond, lanGossip); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSwarmHeartbeatDetector is TestSwarmGossipDetector over the Phoenix
// heartbeat detector (LAN timing). A message to a crashed node makes the
// world hand its sender the refusal a host gives a connection to a closed
// port (sim.Config.RefuseDead): the heartbeat detector waits for a peer
// only once the peer has announced an interval, so a joiner, or a restarted
// process re-admitted under its id, that dies before announcing one is
// found that way, as on real hosts.
func TestSwarmHeartbeatDetector(t *testing.T) {
	for _, seed := range simtest.Seeds(t, 100) {
		if err := detectorSwarm(t, seed, "TestSwarmHeartbeatDetector", time.Millisecond, lanHeartbeat); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSwarmHeartbeatRegressionSeeds replays heartbeat-detector swarm
// seeds that failed before their fix. 3069082926, 4268708341 and
// 1033563450: after a partition healed, members of the excluded side still
// held members of the other side failed (their detectors had declared
// them during the partition), and the other side, which no longer held
// them members, neither answered their heartbeats nor sent any; every
// proposal to merge the sides was aborted by their reports, for ever. A
// failed connection is now pinged with its insurance heartbeats, and any
// process answers a ping. 3381810774: two members of one view, each in a
// minority, held each other failed after a partition healed, and heard
// from each other only 38 s later, at the next insurance heartbeat: a
// failed connection now gets a heartbeat and a ping every Interval.
func TestSwarmHeartbeatRegressionSeeds(t *testing.T) {
	for _, seed := range []uint64{3069082926, 4268708341, 1033563450, 3381810774} {
		if err := detectorSwarm(t, seed, "TestSwarmHeartbeatDetector", time.Millisecond, lanHeartbeat); err != nil {
			t.Error(err)
		}
	}
}

// TestSwarmGossipRegressionSeeds replays gossip-detector swarm seeds that
// never converged after a healed partition: members of the excluded side,
// taken back by a proposal of the other side, reported that side's members
// failed (their detectors had declared them during the partition, and the
// other side, which excluded them, sent them no tables any more), so every
// proposal to merge aborted, and the root, believing its own members
// failed, could find itself in a minority. A node that a proposal takes
// back no longer reports them, and its detector watches them afresh once
// it installs the merged view (Member.staleVerdicts). And 2704121030: a
// lone member, in a minority, held the proposal of a root it knew dead,
// whose epoch was above the other side's newer view, and so ignored that
// view's notices for ever (Member.onNotice); 1964465853, 2448806439,
// 4045234554, 2288924964 and 2960592067, the same when that proposal also
// held the member that sent the notices. And 3338917836, a safety case: a
// member installed a view while it held a sibling of it (a proposal of
// another root, newer, which it had adopted from a refusal), proposed on
// that sibling as the next root, and the installed views forked under
// PartitionMajority (follows).
func TestSwarmGossipRegressionSeeds(t *testing.T) {
	for _, seed := range []uint64{1736134863, 2847148383, 1913862296, 2522622187, 2784989688, 1637977950, 2704121030,
		1964465853, 2448806439, 4045234554, 2288924964, 2960592067, 3338917836} {
		if err := detectorSwarm(t, seed, "TestSwarmGossipDetector", 0, lanGossip); err != nil {
			t.Error(err)
		}
	}
}

// lanGossip is the gossip detector of the swarms, with LAN timing.
func lanGossip(initial []core.NodeID) (core.Machine, error) {
	return fd.NewGossip(fd.LANGossipConfig(), initial)
}

// lanHeartbeat is the heartbeat detector of the swarms, with LAN timing.
func lanHeartbeat(initial []core.NodeID) (core.Machine, error) {
	return fd.NewHeartbeat(fd.LANHeartbeatConfig(), initial)
}

// detectorSwarm runs one seed of a swarm of membership machines over the
// detector det makes; refuse is the world's sim.Config.RefuseDead.
func detectorSwarm(t *testing.T, seed uint64, test string, refuse time.Duration, det func(initial []core.NodeID) (core.Machine, error)) (err error) {
	r := rand.New(rand.NewPCG(seed, 0xfd))
	cfg := membertest.DetectorSwarmConfig(r)
	h := membertest.NewHarnessSim(sim.Config{Seed: seed, Network: sim.Uniform(200*time.Microsecond, 2*time.Millisecond), RefuseDead: refuse}, cfg, 0)
	h.Detector = func(initial []core.NodeID) core.Machine {
		d, err := det(initial)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	h.W.SetReplay("go test ./member -run " + test + " -seed=%d")
	n := 3 + r.IntN(8)
	h.AddInitial(n)
	s := &membertest.SwarmRun{Seed: seed, H: h, R: r, N: n}
	horizon := 10 * time.Second
	var plan sim.Plan
	for range 1 + r.IntN(4) {
		at := time.Duration(1000+r.IntN(8000)) * time.Millisecond
		switch r.IntN(6) {
		case 0, 1:
			s.CrashAt(at, "random node", func() []core.NodeID { return s.Pick(1) })
		case 2:
			s.CrashAt(at, "root", func() []core.NodeID { return s.Roots(1 + h.W.Rand().IntN(2)) })
		case 3:
			h.AddJoiner(at, slices.Clone(h.All))
		case 4:
			h.W.At(at, func() {
				for _, id := range h.All {
					if _, ok := h.Started[id]; ok && !h.W.Alive(id) {
						h.W.Recover(id, h.Restart(id))
						return
					}
				}
			})
		case 5:
			var g []core.NodeID
			for _, id := range h.All {
				if r.IntN(2) == 0 {
					g = append(g, id)
				}
			}
			plan = append(plan, sim.Partition{Groups: [][]core.NodeID{g}, At: at, Until: at + time.Duration(1+r.IntN(3))*time.Second})
		}
	}
	plan = append(plan, sim.HealAll{At: horizon})
	if err := plan.Apply(h.W, nil); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("seed %d: panic: %v\n%s", seed, r, h.Dump())
		}
	}()
	if err := h.W.RunChecked(horizon + 40*time.Second); err != nil {
		return fmt.Errorf("%w\n%s", err, h.Dump())
	}
	t.Logf("seed %d: n=%d %v, %d views installed, %d events, %d messages", seed, n, cfg.Partition, h.Installs, h.W.Stats().Events, h.W.Stats().Messages)
	s.Plan = plan
	return s.Judge("40s")
}
