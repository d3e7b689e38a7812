package membertest

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/sim"
)

// Detector names the real failure detector under the membership in a
// [PartialSwarm].
type Detector uint8

const (
	// HeartbeatDetector is package fd's Phoenix heartbeat detector, LAN
	// timing.
	HeartbeatDetector Detector = iota
	// GossipDetector is package fd's P2P-MPI gossip detector, LAN timing.
	GossipDetector
)

func (d Detector) String() string {
	switch d {
	case HeartbeatDetector:
		return "heartbeat"
	case GossipDetector:
		return "gossip"
	}
	return fmt.Sprintf("Detector(%d)", uint8(d))
}

// settle is the detector's longest time from a suspicion to its verdict
// (a suspicion only heard of waits (1 + H)·T_broken, or (1 + H)·
// T_consensus, and the indirect probe runs meanwhile), plus an interval:
// a verdict given later than that after the network last changed was
// suspected and probed on the network as it is.
func (d Detector) settle() time.Duration {
	if d == GossipDetector {
		c := fd.LANGossipConfig()
		return time.Duration(1+c.LocalHealthMax)*c.VerdictTime() + c.GossipInterval
	}
	c := fd.LANHeartbeatConfig()
	return time.Duration(1+c.LocalHealthMax)*max(c.Broken, c.ProbeTimeout) + c.Interval
}

// machine builds the detector, with indirect probes unless noProbes (the
// papers' detectors, to show what the swarm catches).
func (d Detector) machine(initial []core.NodeID, noProbes bool) core.Machine {
	var m core.Machine
	var err error
	if d == GossipDetector {
		c := fd.LANGossipConfig()
		if noProbes {
			c.IndirectProbes = 0
		}
		m, err = fd.NewGossip(c, initial)
	} else {
		c := fd.LANHeartbeatConfig()
		if noProbes {
			c.IndirectProbes = 0
		}
		m, err = fd.NewHeartbeat(c, initial)
	}
	if err != nil {
		panic(fmt.Sprintf("membertest: %v", err))
	}
	return m
}

// PartialReplayCommand is the command that replays one seed of
// [PartialSwarm].
func PartialReplayCommand(seed uint64, d Detector) string {
	return fmt.Sprintf("go test ./member/membertest -run 'TestPartialSwarm/%s$' -seed=%d", d, seed)
}

// PartialSwarm runs one seed of the membership over a real failure
// detector d (LAN timing) under partial partitions: for 10 simulated
// seconds, 1 to 4 of crashes, joins, recoveries and whole partitions as
// in package member's detector swarms, and, drawn by [sim.Swarm], up to 2
// partial partitions (groups of 1 to 3 nodes cut from each other, each
// still reaching the rest) and up to 3 one-way cuts; then everything
// heals and every live node must install the same view within 40 s. The
// partition policy is drawn from the seed. Besides the harness's safety
// checks, a [sim.ReachableNotFailed] fails the run if a live member is
// declared failed while the uncut links still connect it to the member
// that declared it, both holding views that contain each other (a node
// the membership excluded, whose view is its own, is counted in
// Result.Outside instead).
//
// Each call builds its own world: calls may run in parallel.
func PartialSwarm(seed uint64, d Detector) Result { return partialSwarm(seed, d, false) }

// DetectorSwarmConfig is the membership configuration of the swarms that
// run over a real failure detector: a fan-out of 2 or 4 and the paper's or
// the majority partition policy, drawn from r in that order, with timeouts
// short enough for a simulated LAN.
func DetectorSwarmConfig(r *rand.Rand) member.Config {
	cfg := member.DefaultConfig()
	cfg.Fanout = []int{2, 4}[r.IntN(2)]
	cfg.AckTimeout = 50 * time.Millisecond
	cfg.ReportRetry = 300 * time.Millisecond
	cfg.JoinRetry = 500 * time.Millisecond
	cfg.CommitTimeout = 300 * time.Millisecond
	cfg.ProbeInterval = 500 * time.Millisecond
	cfg.NoticeInterval = 100 * time.Millisecond
	if r.IntN(2) == 0 {
		cfg.Partition = member.PartitionMajority
	}
	return cfg
}

func partialSwarm(seed uint64, d Detector, noProbes bool) Result {
	r := rand.New(rand.NewPCG(seed, 0x9a27))
	cfg := DetectorSwarmConfig(r)
	var refuse time.Duration
	if d == HeartbeatDetector {
		refuse = time.Millisecond // see member's TestSwarmHeartbeatDetector
	}
	h := NewHarnessSim(sim.Config{Seed: seed, Network: sim.Uniform(200*time.Microsecond, 2*time.Millisecond), RefuseDead: refuse}, cfg, 0)
	h.Detector = func(initial []core.NodeID) core.Machine { return d.machine(initial, noProbes) }
	h.W.SetReplay(fmt.Sprintf("go test ./member/membertest -run 'TestPartialSwarm/%s$' -seed=%%d", d))
	n := 3 + r.IntN(8)
	h.AddInitial(n)
	s := &SwarmRun{Seed: seed, H: h, R: r, N: n, Horizon: 10 * time.Second, Bound: 40 * time.Second}
	reach := sim.NewReachableNotFailed(d.settle())
	// A verdict counts between members of one view: a node the membership
	// excluded (or that excluded the other) holds a view of its own, and
	// its verdict excludes the other from nothing it belongs to.
	reach.Judged = func(by, about core.NodeID) bool {
		return slices.Contains(h.Member(by).View().Members, about) && slices.Contains(h.Member(about).View().Members, by)
	}
	// Paths count through the members of the reporter's view only: a
	// process still joining is in nobody's view, one the view left out
	// is asked by none of its members, and nothing of the group goes
	// through either.
	reach.Relays = func(by, id core.NodeID) bool {
		return !h.Member(id).Joining() && slices.Contains(h.Member(by).View().Members, id)
	}
	h.W.AddChecker(reach)
	err := s.runPartial()
	return Result{Err: err, Stuck: s.Stuck, Installs: h.Installs, Events: h.W.Stats().Events, Judged: reach.Checked, Outside: reach.Outside}
}

func (s *SwarmRun) runPartial() (err error) {
	h, r := s.H, s.R
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("seed %d: panic: %v\n%s\n%s", s.Seed, p, debug.Stack(), h.Dump())
		}
	}()
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
			h.W.At(at, s.RecoverOne)
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
	partial := sim.Swarm(s.Seed, len(h.All), s.Horizon, sim.SwarmOptions{Start: time.Second, MaxOneWayCuts: 3, MaxPartialPartitions: 2})
	plan = append(plan, partial...) // ends with the HealAll at the horizon
	s.Plan = plan
	if err := plan.Apply(h.W, nil); err != nil {
		return err
	}
	if err := h.W.RunChecked(s.Horizon + s.Bound); err != nil {
		return fmt.Errorf("%w\n%s", err, h.Dump())
	}
	if err := h.W.Finish(); err != nil {
		return fmt.Errorf("%w\n%s", err, h.Dump())
	}
	return s.Judge(s.Bound.String())
}
