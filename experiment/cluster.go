package experiment

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/sim"
)

// GossipCluster is a simulated cluster of n nodes, each running the P2P-MPI
// gossip detector (fd.Gossip) over the same member list, with crashes
// scheduled by the caller and every detection recorded. It is what the
// fd-detect experiment and the `cohort demo` command run.
//
// Nodes start at times drawn uniformly from [0, Spread) so that their
// rounds are not in step, as on real hosts. Messages take a time drawn
// uniformly from [MinLatency, MaxLatency].
//
// Use: NewGossipCluster, CrashAt for each crash, then Run; read Crashes.
// A GossipCluster is single-threaded, like the sim.World inside it.
type GossipCluster struct {
	// World is the simulation; its TraceHash identifies the run.
	World *sim.World
	// Config is the detectors' configuration.
	Config fd.GossipConfig
	// N is the number of nodes.
	N int
	// MaxLatency bounds a message's one-way time; Spread bounds the
	// differences between the nodes' start times. Both enter
	// fd.DetectionBoundSpread.
	MaxLatency, Spread time.Duration
	// OnProgress, if set, is called as crashes happen and are detected
	// (for live output); it must not change the cluster.
	OnProgress func(Progress)

	crashes   []*Crash
	byNode    map[core.NodeID]int // crashed node -> index in crashes
	alive     int
	falseFail []FalseDetection
	falseSusp int
	lastCrash time.Duration
}

// Crash is one scheduled crash and what the detectors made of it.
type Crash struct {
	// Node crashed at time At.
	Node core.NodeID
	At   time.Duration
	// DetectedAt[i] is when node i emitted core.Failed{Node}, or -1 if it
	// did not (yet).
	DetectedAt []time.Duration
	// First is the first node to declare the crash, at FirstAt (-1 when
	// nobody did).
	First   core.NodeID
	FirstAt time.Duration
	// CompleteAt is when every node alive at that moment had declared the
	// crash (-1 if that never happened).
	CompleteAt time.Duration

	happened bool
	pending  int // live nodes that have not declared it
}

// Delays returns the detection delays (DetectedAt − At) of the nodes that
// declared the crash and are alive at the end of the run, in node order.
func (c *Crash) Delays(w *sim.World) []time.Duration {
	var out []time.Duration
	for i, t := range c.DetectedAt {
		if t >= 0 && w.Alive(core.NodeID(i)) {
			out = append(out, t-c.At)
		}
	}
	return out
}

// Missing returns the nodes alive at the end of the run that never
// declared the crash.
func (c *Crash) Missing(w *sim.World) []core.NodeID {
	var out []core.NodeID
	for i, t := range c.DetectedAt {
		if t < 0 && core.NodeID(i) != c.Node && w.Alive(core.NodeID(i)) {
			out = append(out, core.NodeID(i))
		}
	}
	return out
}

// FalseDetection is a core.Failed about a node that had not crashed.
type FalseDetection struct {
	At         time.Duration
	By, Victim core.NodeID
}

// ProgressKind says what a Progress report is about.
type ProgressKind int

// The kinds of progress reports.
const (
	CrashHappened ProgressKind = iota // the node crashed
	FirstDetected                     // the first node declared it failed
	AllDetected                       // every live node had declared it
	FalseFailure                      // a live node was declared failed
)

// Progress is one report to GossipCluster.OnProgress.
type Progress struct {
	Kind  ProgressKind
	At    time.Duration
	Crash *Crash // nil for FalseFailure
	// By is the declaring node (FirstDetected, FalseFailure); Victim the
	// node declared (FalseFailure).
	By, Victim core.NodeID
}

// NewGossipCluster builds a cluster of n nodes running fd.Gossip with cfg,
// seeded by seed.
func NewGossipCluster(seed uint64, n int, cfg fd.GossipConfig, minLatency, maxLatency, spread time.Duration) (*GossipCluster, error) {
	if n < 2 {
		return nil, fmt.Errorf("%w: a cluster needs at least 2 nodes, got %d", ErrBadOption, n)
	}
	if minLatency < 0 || maxLatency < minLatency || spread < 0 {
		return nil, fmt.Errorf("%w: latency [%v, %v], spread %v", ErrBadOption, minLatency, maxLatency, spread)
	}
	c := &GossipCluster{
		World:      sim.New(sim.Config{Seed: seed, Network: sim.Uniform(minLatency, maxLatency)}),
		Config:     cfg,
		N:          n,
		MaxLatency: maxLatency,
		Spread:     spread,
		byNode:     map[core.NodeID]int{},
		alive:      n,
	}
	members := make([]core.NodeID, n)
	for i := range members {
		members[i] = core.NodeID(i)
	}
	starts := rand.New(rand.NewPCG(seed, 0x7374617274)) // "start"
	for range n {
		g, err := fd.NewGossip(cfg, members)
		if err != nil {
			return nil, err
		}
		var at time.Duration
		if spread > 0 {
			at = time.Duration(starts.Int64N(int64(spread)))
		}
		c.World.AddAt(at, g)
	}
	c.World.OnEmit(c.observe)
	return c, nil
}

// CrashAt schedules the crash of node id at time t. A node crashes at most
// once.
func (c *GossipCluster) CrashAt(t time.Duration, id core.NodeID) error {
	if int(id) >= c.N {
		return fmt.Errorf("%w: node %d of %d", ErrBadOption, id, c.N)
	}
	if _, dup := c.byNode[id]; dup {
		return fmt.Errorf("%w: node %d crashes twice", ErrBadOption, id)
	}
	cr := &Crash{Node: id, At: t, DetectedAt: make([]time.Duration, c.N), First: core.None, FirstAt: -1, CompleteAt: -1}
	for i := range cr.DetectedAt {
		cr.DetectedAt[i] = -1
	}
	c.byNode[id] = len(c.crashes)
	c.crashes = append(c.crashes, cr)
	c.lastCrash = max(c.lastCrash, t)
	c.World.At(t, func() { c.crash(cr) })
	return nil
}

// Crashes returns the crashes in the order they were scheduled.
func (c *GossipCluster) Crashes() []*Crash { return c.crashes }

// FalseFailures returns every core.Failed about a node that had not
// crashed, in time order.
func (c *GossipCluster) FalseFailures() []FalseDetection { return c.falseFail }

// FalseSuspicions counts core.Suspected about nodes that had not crashed
// (suspicions the consensus phase then cleared).
func (c *GossipCluster) FalseSuspicions() int { return c.falseSusp }

func (c *GossipCluster) crash(cr *Crash) {
	c.World.Crash(cr.Node)
	cr.happened = true
	c.alive--
	// The new crash must be declared by every live node; earlier crashes
	// no longer wait for this node.
	cr.pending = c.alive
	c.report(Progress{Kind: CrashHappened, At: cr.At, Crash: cr})
	for _, o := range c.crashes {
		if o != cr && o.happened && o.CompleteAt < 0 && o.DetectedAt[cr.Node] < 0 {
			o.pending--
			c.complete(o)
		}
	}
	c.complete(cr)
}

func (c *GossipCluster) complete(cr *Crash) {
	if cr.pending == 0 && cr.CompleteAt < 0 {
		cr.CompleteAt = c.World.Now()
		c.report(Progress{Kind: AllDetected, At: cr.CompleteAt, Crash: cr})
	}
}

func (c *GossipCluster) report(p Progress) {
	if c.OnProgress != nil {
		c.OnProgress(p)
	}
}

func (c *GossipCluster) observe(at time.Duration, by core.NodeID, e core.Event) {
	switch e := e.(type) {
	case core.Failed:
		k, ok := c.byNode[e.Node]
		if !ok || !c.crashes[k].happened {
			c.falseFail = append(c.falseFail, FalseDetection{At: at, By: by, Victim: e.Node})
			c.report(Progress{Kind: FalseFailure, At: at, By: by, Victim: e.Node})
			return
		}
		cr := c.crashes[k]
		if cr.DetectedAt[by] >= 0 {
			return
		}
		cr.DetectedAt[by] = at
		if cr.First == core.None {
			cr.First, cr.FirstAt = by, at
			c.report(Progress{Kind: FirstDetected, At: at, Crash: cr, By: by})
		}
		cr.pending--
		c.complete(cr)
	case core.Suspected:
		if k, ok := c.byNode[e.Node]; !ok || !c.crashes[k].happened {
			c.falseSusp++
		}
	}
}

// Done reports whether every scheduled crash has happened and been
// declared by every live node.
func (c *GossipCluster) Done() bool {
	for _, cr := range c.crashes {
		if cr.CompleteAt < 0 {
			return false
		}
	}
	return true
}

// Run runs the simulation until every crash is declared by every live node
// and one more gossip interval has passed (to catch late false
// detections), or until the simulated time deadline. It returns ctx.Err()
// if ctx is cancelled.
func (c *GossipCluster) Run(ctx context.Context, deadline time.Duration) error {
	step := 2 * c.Config.GossipInterval
	for c.World.Now() < deadline {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(c.crashes) > 0 && c.World.Now() >= c.lastCrash && c.Done() {
			done := slices.MaxFunc(c.crashes, func(a, b *Crash) int { return cmp.Compare(a.CompleteAt, b.CompleteAt) }).CompleteAt
			if c.World.Now() >= done+c.Config.GossipInterval {
				return nil
			}
		}
		c.World.RunUntil(min(deadline, c.World.Now()+step))
	}
	return nil
}
