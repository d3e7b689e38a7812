package vsynctest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/topo"
	"github.com/cohort-mp/cohort/vsync"
)

// Config is one run's configuration.
type Config struct {
	Seed     uint64
	N        int           // initial members
	Horizon  time.Duration // faults and multicasts stop here (HealAll)
	Bound    time.Duration // liveness phase
	Interval time.Duration // mean time between two multicasts of a node
	Joins    int
	// Stable builds a node's stability detector from its initial view.
	Stable func(members []core.NodeID) core.Machine
	// Replay is the replay command, with %d for the seed.
	Replay string
	// Logf, if set, receives one line of statistics per run.
	Logf func(format string, args ...any)
}

// Detector is how a swarm's stability is detected.
type Detector uint8

const (
	// FakeStable is a stand-in stability detector (every member sends its
	// progress to every other member each period), so that the multicast
	// is tested on its own.
	FakeStable Detector = iota
	// RealStable is one of package stable's four protocols, drawn per seed.
	RealStable
)

// FakeConfig draws the configuration of a run over FakeStable from seed:
// 3–7 nodes, up to one joiner, a horizon of 0.5–1.2 s, a multicast every
// 12–42 ms per node.
func FakeConfig(seed uint64) Config {
	r := rand.New(rand.NewPCG(seed, 0x5a))
	return Config{
		Seed:     seed,
		N:        3 + r.IntN(5),
		Horizon:  time.Duration(500+r.IntN(700)) * time.Millisecond,
		Bound:    1500 * time.Millisecond,
		Interval: time.Duration(12+r.IntN(30)) * time.Millisecond,
		Joins:    max(0, r.IntN(4)-2),
		Stable:   func(members []core.NodeID) core.Machine { return newFakeStable(25 * time.Millisecond) },
		Replay:   "go test ./vsync -run 'TestSwarm$' -seed=%d",
	}
}

// StableConfig draws the configuration of a run over package stable from
// seed: as FakeConfig, with one of the four protocols of Friedman, Manor
// and Guo (with the §3.5 retransmissions). It returns the protocol too.
func StableConfig(seed uint64) (Config, stable.Protocol) {
	r := rand.New(rand.NewPCG(seed, 0x5b))
	scfg := stable.DefaultConfig()
	scfg.Protocol = stable.Protocols()[r.IntN(4)]
	scfg.Period = 20 * time.Millisecond
	scfg.Resend = 20 * time.Millisecond
	return Config{
		Seed:     seed,
		N:        3 + r.IntN(5),
		Horizon:  time.Duration(500+r.IntN(700)) * time.Millisecond,
		Bound:    1500 * time.Millisecond,
		Interval: time.Duration(12+r.IntN(30)) * time.Millisecond,
		Joins:    max(0, r.IntN(4)-2),
		Stable:   func(members []core.NodeID) core.Machine { return stable.New(scfg, members) },
		Replay:   "go test ./vsync -run 'TestSwarmStable$' -seed=%d",
	}, scfg.Protocol
}

// Swarm runs one seed of the swarm over the given stability detector. An
// error wrapping ErrMembershipStuck means the membership itself did not
// converge (a bug of package member); any other error is a violation, a
// panic or a multicast that did not converge. Each call builds its own
// world: calls may run in parallel.
func Swarm(seed uint64, d Detector) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("seed %d: panic: %v\n%s", seed, r, debug.Stack())
		}
	}()
	if d == RealStable {
		c, p := StableConfig(seed)
		if err := Run(c); err != nil && !errors.Is(err, ErrMembershipStuck) {
			return fmt.Errorf("%v protocol: %w", p, err)
		} else if err != nil {
			return err
		}
		return nil
	}
	return Run(FakeConfig(seed))
}

// gossipConfig is the gossip detector of P2P-MPI §5 (binary round-robin)
// at simulation speed: a round every 20 ms, a ping waits 20 ms. (The
// Phoenix heartbeat detector is not used here: other layers' traffic to a
// crashed node counts as heartbeats to it, and in the simulator, where a
// send to a dead node raises no transport hint, it is then never declared
// failed.)
func gossipConfig() fd.GossipConfig {
	c := fd.LANGossipConfig()
	c.Schedule = topo.BinaryRoundRobin
	c.GossipInterval = 20 * time.Millisecond
	c.PingTimeout = 20 * time.Millisecond
	return c
}

func memberConfig() member.Config { return membertest.SimConfig(2) }

// app multicasts a payload every interval (jittered) until stop.
type app struct {
	env      core.Env
	interval time.Duration
	stop     time.Duration
	k        int
}

func (a *app) Start(env core.Env) {
	a.env = env
	env.SetTimer(a.next(), 0)
}

func (a *app) next() time.Duration {
	return a.interval/2 + time.Duration(a.env.Rand().Int64N(int64(a.interval)))
}

func (a *app) Fire(core.Timer) {
	if a.env.Now() >= a.stop {
		return
	}
	a.k++
	a.env.Emit(vsync.Multicast{Payload: fmt.Appendf(nil, "%v:%d", a.env.Self(), a.k)})
	a.env.SetTimer(a.next(), 0)
}

func (a *app) Receive(core.NodeID, core.Msg) {}
func (a *app) Handle(core.Event)             {}

const (
	layerMember = 1 // position of the member layer in a node's stack
	layerVsync  = 3 // position of the vsync layer
)

// nodeStack builds a node; a joiner (self set) has no initial view, and
// its stability detector starts from a view of itself alone.
func nodeStack(c Config, m *member.Member, initial []core.NodeID, self core.NodeID) *core.Stack {
	det, err := fd.NewGossip(gossipConfig(), initial)
	if err != nil {
		panic(fmt.Sprintf("vsynctest: %v", err))
	}
	l, err := vsync.New(vsync.SimConfig())
	if err != nil {
		panic(fmt.Sprintf("vsynctest: %v", err))
	}
	sm := initial
	if self != core.None {
		sm = []core.NodeID{self}
	}
	return core.NewStack(det, m, vsync.HideFailures(c.Stable(sm)), l, &app{interval: c.Interval, stop: c.Horizon})
}

// LayerOf returns the vsync layer of node id in a swarm's world.
func LayerOf(w *sim.World, id core.NodeID) *vsync.Layer {
	return w.Node(id).(*core.Stack).Layer(layerVsync).(*vsync.Layer)
}

// Run runs the swarm described by c: real node stacks — the gossip failure
// detector (fd), the radix-tree membership (member), a stability detector
// and package vsync's layer, under an application that multicasts every few
// milliseconds — on the simulator, with crashes, joins, partitions, cut
// links, message loss and delay spikes drawn from the seed, checked on
// every event (see the package documentation), then a liveness phase.
func Run(c Config) error {
	w := sim.New(sim.Config{Seed: c.Seed, Network: sim.Uniform(200*time.Microsecond, 2*time.Millisecond)})
	initial := make([]core.NodeID, c.N)
	for i := range initial {
		initial[i] = core.NodeID(i)
	}
	mcfg := memberConfig()
	for range c.N {
		m, err := member.New(mcfg, initial)
		if err != nil {
			return err
		}
		w.Add(nodeStack(c, m, initial, core.None))
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x5e))
	all := slices.Clone(initial)
	for range c.Joins {
		contacts := slices.Clone(initial)
		m, err := member.NewJoiner(mcfg, member.JoinOptions{Contacts: contacts})
		if err != nil {
			return err
		}
		at := time.Duration(100+r.IntN(int(c.Horizon/time.Millisecond)-100)) * time.Millisecond
		self := core.NodeID(len(all)) // the id the world gives the next node
		if got := w.AddAt(at, nodeStack(c, m, nil, self)); got != self {
			return fmt.Errorf("vsynctest: joiner is %v, want %v", got, self)
		}
		all = append(all, self)
	}
	opts := sim.DefaultSwarmOptions()
	opts.Start = 100 * time.Millisecond
	opts.MaxCrashFraction = 0.34
	opts.MaxSpike = 50 * time.Millisecond
	plan := sim.Swarm(c.Seed, c.N, c.Horizon, opts)
	if err := plan.Apply(w, nil); err != nil {
		return err
	}
	ck := newChecker(initial)
	w.AddChecker(ck)
	replay := c.Replay
	if replay == "" {
		replay = "go test ./vsync -run 'TestSwarm' -seed=%d"
	}
	w.SetReplay(replay)
	if err := w.RunChecked(c.Horizon + c.Bound); err != nil {
		return err
	}
	var tot vsync.Stats
	for _, id := range all {
		if w.Node(id) == nil {
			continue
		}
		st := LayerOf(w, id).Stats()
		tot.Flushes += st.Flushes
		tot.Resent += st.Resent
		tot.Late += st.Late
		tot.Delivered += st.Delivered
		tot.Digests += st.Digests
	}
	logf := c.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	logf("seed %d: n=%d joins=%d: %d delivered, %d flushes, %d resent, %d late, %d digests", c.Seed, c.N, c.Joins, tot.Delivered, tot.Flushes, tot.Resent, tot.Late, tot.Digests)
	if err := membershipConverged(w, all); err != nil {
		return fmt.Errorf("seed %d: %w: %v (liveness of the multicast not checked)\nplan: %v\nreplay: %s", c.Seed, ErrMembershipStuck, err, plan, fmt.Sprintf(replay, c.Seed))
	}
	if err := ck.converged(w, all, c.N+c.Joins); err != nil {
		return fmt.Errorf("seed %d (n=%d, %d joins): %w\nplan: %v\nreplay: %s", c.Seed, c.N, c.Joins, err, plan, fmt.Sprintf(replay, c.Seed))
	}
	return w.Finish()
}

// ErrMembershipStuck: the membership layer itself did not converge after
// the faults healed (the live nodes do not share one view of exactly the
// live nodes), so the multicast's liveness cannot be judged. Safety was
// checked all the same. It is a bug of package member: swarms count it as
// a failure.
var ErrMembershipStuck = errors.New("membership did not converge")

func membershipConverged(w *sim.World, all []core.NodeID) error {
	var live []core.NodeID
	for _, id := range all {
		if w.Alive(id) {
			live = append(live, id)
		}
	}
	for _, id := range live {
		v := w.Node(id).(*core.Stack).Layer(layerMember).(*member.Member).View()
		if !slices.Equal(sorted(v.Members), live) {
			return fmt.Errorf("%v's membership view is e%d %v, live nodes %v", id, v.Epoch, v.Members, live)
		}
	}
	return nil
}
