package membertest

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/sim"
)

// SwarmRun is one randomized run of the membership swarm: a safety phase
// with faults drawn from the seed, then a liveness phase in which everything
// heals and every live node must install the same view of exactly the live
// nodes within Bound.
type SwarmRun struct {
	Seed    uint64
	H       *Harness
	R       *rand.Rand // the run's random source (the seed's; not the world's)
	N       int        // initial members
	Horizon time.Duration
	Bound   time.Duration
	Plan    sim.Plan
	// Stuck reports, after Run, that under PartitionMajority the live nodes
	// hold no majority (see NoMajority) and rightly did not converge.
	Stuck bool
}

// Result is the outcome of one seed of [Swarm].
type Result struct {
	Err      error // a safety violation, a panic, or no convergence
	Stuck    bool  // PartitionMajority: legitimately blocked in a minority
	Installs int   // views installed, over all nodes
	Lefts    int   // leavers reported in installed views, over all nodes
	Events   uint64
	// Judged counts the failure verdicts a PartialSwarm judged against
	// the paths of uncut links, Outside those it did not judge: made by or
	// about a node outside the other's view.
	Judged, Outside int
}

// Swarm runs the membership swarm on one seed under policy and reports the
// outcome. Each call builds its own world: calls may run in parallel.
func Swarm(seed uint64, policy member.PartitionPolicy) Result {
	s := NewSwarmRun(seed, policy)
	err := s.RunSafe()
	return Result{Err: err, Stuck: s.Stuck, Installs: s.H.Installs, Events: s.H.W.Stats().Events}
}

// ReplayCommand is the command that replays one seed of the swarm.
func ReplayCommand(seed uint64, policy member.PartitionPolicy) string {
	return fmt.Sprintf("go test ./member -run 'TestSwarm%s$' -seed=%d", policyTest(policy), seed)
}

func policyTest(p member.PartitionPolicy) string {
	if p == member.PartitionMajority {
		return "Majority"
	}
	return "Paper"
}

// SimConfig is the membership at simulation speed, with fan-out a, as the
// swarms (member's, vsync's, replica's) run it: acknowledgements wait 20
// ms per tree level, reports and commits 100 ms, joins 150 ms.
func SimConfig(a int) member.Config {
	cfg := member.DefaultConfig()
	cfg.Fanout = a
	cfg.AckTimeout = 20 * time.Millisecond
	cfg.ReportRetry = 100 * time.Millisecond
	cfg.JoinRetry = 150 * time.Millisecond
	cfg.CommitTimeout = 100 * time.Millisecond
	cfg.ProbeInterval = 100 * time.Millisecond
	cfg.NoticeInterval = 20 * time.Millisecond
	return cfg
}

// NewSwarmRun draws the run's configuration from the seed: 3–16 nodes, a
// fan-out of 2, 4 or 8, a uniform latency, an oracle detector with a delay,
// and timers at simulation speed.
func NewSwarmRun(seed uint64, policy member.PartitionPolicy) *SwarmRun {
	r := rand.New(rand.NewPCG(seed, 0x5157a4))
	cfg := SimConfig([]int{2, 4, 8}[r.IntN(3)])
	cfg.Partition = policy
	lo := time.Duration(100+r.IntN(400)) * time.Microsecond
	hi := lo + time.Duration(r.IntN(3000))*time.Microsecond
	delay := time.Duration(2+r.IntN(30)) * time.Millisecond
	s := &SwarmRun{
		Seed: seed, R: r,
		N:       3 + r.IntN(14),
		Horizon: time.Duration(300+r.IntN(1200)) * time.Millisecond,
		Bound:   3 * time.Second,
		H:       NewHarness(seed, sim.Uniform(lo, hi), cfg, delay),
	}
	s.H.WireTrip = r.IntN(4) == 0
	s.H.W.SetReplay(fmt.Sprintf("go test ./member -run 'TestSwarm%s$' -seed=%%d", policyTest(policy)))
	return s
}

// build adds the nodes and schedules the faults: up to 8 of crashes of
// random nodes, of the root, of chained roots, of several nodes, crashes
// during a stabilization, recoveries, joins, partitions, cut links and
// delay spikes, then a heal of everything at Horizon.
func (s *SwarmRun) build() error {
	h, r := s.H, s.R
	h.AddInitial(s.N)
	events := 1 + r.IntN(8)
	for range events {
		at := time.Duration(20+r.IntN(int(s.Horizon/time.Millisecond)-20)) * time.Millisecond
		switch k := r.IntN(11); k {
		case 0, 1:
			s.CrashAt(at, "random node", func() []core.NodeID { return s.Pick(1) })
		case 2:
			s.CrashAt(at, "root", func() []core.NodeID { return s.Roots(1) })
		case 3:
			s.CrashAt(at, "chained roots", func() []core.NodeID { return s.Roots(2 + s.H.W.Rand().IntN(2)) })
		case 4:
			s.CrashAt(at, "several nodes", func() []core.NodeID { return s.Pick(2 + s.H.W.Rand().IntN(2)) })
		case 5:
			// A crash during stabilization, shortly after another one.
			s.CrashAt(at, "random node", func() []core.NodeID { return s.Pick(1) })
			s.CrashAt(at+time.Duration(1+r.IntN(15))*time.Millisecond, "node during stabilization", s.duringStabilization)
		case 6:
			h.W.At(at, s.RecoverOne)
		case 7:
			contacts := slices.Clone(h.All)
			r.Shuffle(len(contacts), func(i, j int) { contacts[i], contacts[j] = contacts[j], contacts[i] })
			h.AddJoiner(at, contacts)
		case 8:
			until := at + time.Duration(30+r.IntN(400))*time.Millisecond
			var g []core.NodeID
			for _, id := range h.All {
				if r.IntN(2) == 0 {
					g = append(g, id)
				}
			}
			s.Plan = append(s.Plan, sim.Partition{Groups: [][]core.NodeID{g}, At: at, Until: until})
			h.outages = append(h.outages, outage{from: at, until: until, groups: [][]core.NodeID{g}})
			h.W.At(at, h.oracleSoon)
			h.W.At(until, h.oracleSoon)
		case 9:
			a, b := core.NodeID(r.IntN(len(h.All))), core.NodeID(r.IntN(len(h.All)))
			if a == b {
				continue
			}
			until := at + time.Duration(30+r.IntN(400))*time.Millisecond
			s.Plan = append(s.Plan, sim.Cut{A: a, B: b, At: at, Until: until})
			h.outages = append(h.outages, outage{from: at, until: until, a: a, b: b})
			h.W.At(at, h.oracleSoon)
			h.W.At(until, h.oracleSoon)
		case 10:
			until := at + time.Duration(10+r.IntN(200))*time.Millisecond
			s.Plan = append(s.Plan, sim.DelaySpike{Extra: time.Duration(1+r.IntN(60)) * time.Millisecond, From: at, Until: until})
		}
	}
	s.Plan = append(s.Plan, sim.HealAll{At: s.Horizon})
	h.healAt = s.Horizon
	h.W.At(s.Horizon, h.oracleSoon)
	return s.Plan.Apply(h.W, nil)
}

// RecoverOne restarts a random crashed node (NODE_ALIVE, with its epoch
// floor), if any.
func (s *SwarmRun) RecoverOne() {
	h := s.H
	var down []core.NodeID
	for _, id := range h.All {
		if _, ok := h.Started[id]; ok && !h.W.Alive(id) {
			down = append(down, id)
		}
	}
	if len(down) > 0 {
		id := down[h.W.Rand().IntN(len(down))]
		h.W.Recover(id, h.Restart(id))
	}
}

// CrashAt crashes the nodes victims returns at time at, as long as
// mayCrash allows.
func (s *SwarmRun) CrashAt(at time.Duration, what string, victims func() []core.NodeID) {
	s.H.W.At(at, func() {
		for _, v := range victims() {
			if !s.mayCrash() {
				return
			}
			s.H.logf("fault: crash %v (%s)", v, what)
			s.H.W.Crash(v)
		}
	})
}

// up returns the live, started nodes.
func (s *SwarmRun) up() []core.NodeID {
	var ids []core.NodeID
	for _, id := range s.H.All {
		if s.H.IsUp(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// mayCrash keeps at least one member alive, and under the majority policy a
// majority of the newest view alive (otherwise the survivors must stop).
func (s *SwarmRun) mayCrash() bool {
	members := 0
	for _, id := range s.up() {
		if !s.H.Member(id).Joining() {
			members++
		}
	}
	if members <= 1 {
		return false // a group needs a member left for joiners to join
	}
	if s.H.Cfg.Partition != member.PartitionMajority {
		return true
	}
	return 2*(s.tipAlive(nil)-1) > len(s.tip())
}

// tip returns the members of the installed view with the highest epoch.
func (s *SwarmRun) tip() []core.NodeID {
	var best uint64
	for e := range s.H.views {
		best = max(best, e)
	}
	return s.H.views[best]
}

// Pick returns up to k random live nodes.
func (s *SwarmRun) Pick(k int) []core.NodeID {
	up := s.up()
	w := s.H.W.Rand()
	w.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	return up[:min(k, len(up))]
}

// Roots returns the root of the newest view held by a live node and the k-1
// members after it.
func (s *SwarmRun) Roots(k int) []core.NodeID {
	var best member.View
	for _, id := range s.up() {
		if v := s.H.Member(id).View(); v.Epoch > best.Epoch {
			best = v
		}
	}
	return best.Members[:min(k, len(best.Members))]
}

// duringStabilization picks a member of a running proposal (or its root).
func (s *SwarmRun) duringStabilization() []core.NodeID {
	for _, id := range s.up() {
		in := s.H.Member(id).Inspect()
		if in.Driving {
			ms := in.Pending.Members
			return []core.NodeID{ms[s.H.W.Rand().IntN(len(ms))]}
		}
	}
	return s.Pick(1)
}

// Run executes the run and checks it; it returns an error describing a
// violation or a failure to converge.
func (s *SwarmRun) Run() error {
	if err := s.build(); err != nil {
		return err
	}
	h := s.H
	const maxEvents = 2_000_000 // a storm of messages is a bug too
	for t := time.Duration(0); t < s.Horizon+s.Bound; {
		t = min(t+5*time.Millisecond, s.Horizon+s.Bound)
		if err := h.W.RunChecked(t); err != nil {
			return fmt.Errorf("%w\n%s", err, h.Dump())
		}
		if ev := h.W.Stats().Events; ev > maxEvents {
			return fmt.Errorf("seed %d: %d events by %v: a message storm\nplan:\n%v\n%s", s.Seed, ev, h.W.Now(), s.Plan, h.Dump())
		}
	}
	return s.Judge("within " + s.Bound.String())
}

// Judge checks the end of a run: under PartitionMajority, that the
// installed views form one history; then that the live nodes converged,
// unless (PartitionMajority) they hold no majority, which sets Stuck.
func (s *SwarmRun) Judge(within string) error {
	h := s.H
	if h.Cfg.Partition == member.PartitionMajority {
		if err := s.CheckChain(); err != nil {
			return fmt.Errorf("seed %d: %w\n%s", s.Seed, err, h.Dump())
		}
	}
	if d := h.Converged(); d != "" {
		if h.Cfg.Partition == member.PartitionMajority && s.NoMajority() {
			s.Stuck = true
			return nil
		}
		return fmt.Errorf("seed %d: no convergence %s after healing: %s\nplan:\n%v\n%s", s.Seed, within, d, s.Plan, h.Dump())
	}
	return nil
}

// RunSafe is Run, with a panic turned into an error that names the seed.
func (s *SwarmRun) RunSafe() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("seed %d: panic: %v\n%s\n%s", s.Seed, r, debug.Stack(), s.H.Dump())
		}
	}()
	return s.Run()
}

// NoMajority reports whether the live nodes hold no majority of the newest
// installed view (counting only members that have not restarted since: a
// restarted process remembers nothing): under PartitionMajority they must
// then stay put.
//
// The protocol is stricter in one case, which this mirrors: a new view must
// also keep at least half of the members of a proposal that a dead root
// left uncommitted (it may have committed just before the root died, and a
// view descending from it may then exist among the dead). So the live nodes
// are also stuck when one of them holds such a proposal of which fewer than
// half of the members are alive.
func (s *SwarmRun) NoMajority() bool {
	h := s.H
	// The newest view a live node installed: a view installed only by
	// nodes that died since is unknown to the survivors (they may hold it
	// as an uncommitted proposal, see below).
	var best uint64
	for _, id := range s.up() {
		best = max(best, h.Member(id).View().Epoch)
	}
	alive := 0
	for _, id := range h.views[best] {
		if h.IsUp(id) && h.Member(id).Incarnation() == h.incs[best].Inc(id) {
			alive++
		}
	}
	if 2*alive <= len(h.views[best]) {
		return true
	}
	// Uncommitted proposals of dead roots held by live nodes: the protocol
	// cannot tell whether they committed.
	var pending []*member.ViewState
	for _, id := range s.up() {
		in := h.Member(id).Inspect()
		for _, a := range []*member.ViewState{in.Pending, in.Adopted} {
			if a == nil || a.Epoch <= best {
				continue
			}
			if r := member.EpochRoot(a.Epoch); h.IsUp(r) && h.Member(r).Incarnation() == a.Inc(r) {
				continue // its root lives (a restarted root is another process)
			}
			pending = append(pending, a)
			alive := 0
			for _, x := range a.Members {
				if h.IsUp(x) && h.Member(x).Incarnation() == a.Inc(x) {
					alive++
				}
			}
			if 2*alive < len(a.Members) {
				return true
			}
		}
	}
	// Two such proposals that do not descend from one another: at most one
	// of them committed, but only their dead members could tell which (the
	// blocking case of two-phase commit), so the live nodes must wait.
	for _, a := range pending {
		for _, b := range pending {
			if !a.Descends(b.Epoch) && !b.Descends(a.Epoch) && !member.Supersedes(a.Epoch, a.Ancestry, b.Epoch) && !member.Supersedes(b.Epoch, b.Ancestry, a.Epoch) {
				return true
			}
		}
	}
	return false
}

// tipAlive counts the members of the newest installed view that are up in
// the incarnation the view holds, not counting skip.
func (s *SwarmRun) tipAlive(skip []core.NodeID) int {
	h := s.H
	var best uint64
	for e := range h.views {
		best = max(best, e)
	}
	alive := 0
	for _, id := range h.views[best] {
		if h.IsUp(id) && !slices.Contains(skip, id) && h.Member(id).Incarnation() == h.incs[best].Inc(id) {
			alive++
		}
	}
	return alive
}

// CheckChain checks the primary-partition property of PartitionMajority:
// the installed views form one history. Ordered by epoch, every installed
// view descends from the one before it (that epoch is in its ancestry, when
// the ancestry reaches back that far).
func (s *SwarmRun) CheckChain() error {
	h := s.H
	epochs := make([]uint64, 0, len(h.views))
	for e := range h.views {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	for i := 1; i < len(epochs); i++ {
		prev, cur := epochs[i-1], epochs[i]
		a := h.ancestry[cur]
		if slices.Contains(a, prev) || (len(a) == member.MaxAncestry && a[len(a)-1] > prev) {
			continue
		}
		return fmt.Errorf("primary partition: view %s %v (ancestry %v) does not descend from view %s %v",
			member.FormatEpoch(cur), h.views[cur], formatEpochs(a), member.FormatEpoch(prev), h.views[prev])
	}
	return nil
}

func formatEpochs(es []uint64) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = member.FormatEpoch(e)
	}
	return out
}
