package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// CrashDetected checks completeness of failure detection: every crashed node
// is reported [core.Failed] by every live node within Bound. Precisely, when
// node x crashes at t and is still down at the deadline max(t, After) +
// Bound, every node y ≠ x that is alive then, has been up since t or before
// (a node restarted after the crash knows nothing of it) and passes
// Observers must hold x failed: y emitted core.Failed{x} and no
// core.Recovered{x} since. A deadline after the end of the run is not
// checked: run until at least After + Bound past the last crash.
//
// Use one CrashDetected per World (it keeps state); build it with
// [NewCrashDetected].
type CrashDetected struct {
	// Bound is the detection time allowed.
	Bound time.Duration
	// After, if set, starts the clock no earlier than this (the liveness
	// phase, [Plan.HealedAt]): detection may legitimately wait for the
	// network to heal.
	After time.Duration
	// Observers, if set, limits the nodes that must report (the members of
	// a detector's view, say).
	Observers func(id core.NodeID) bool

	failed  map[core.NodeID]map[core.NodeID]bool // observer -> nodes it holds failed
	upSince map[core.NodeID]time.Duration        // nodes restarted: their restart time
	crashes map[core.NodeID]int                  // crash count, to tell a later crash from an earlier one
}

// NewCrashDetected returns a CrashDetected checker with the given bound.
func NewCrashDetected(bound time.Duration) *CrashDetected {
	return &CrashDetected{Bound: bound}
}

// Name implements Checker.
func (c *CrashDetected) Name() string { return "crash-detected" }

// Check implements Checker.
func (c *CrashDetected) Check(w *World, o Obs) error {
	if c.failed == nil {
		c.failed = map[core.NodeID]map[core.NodeID]bool{}
		c.upSince = map[core.NodeID]time.Duration{}
		c.crashes = map[core.NodeID]int{}
	}
	switch o.Kind {
	case ObsEmit:
		switch e := o.Event.(type) {
		case core.Failed:
			if c.failed[o.Node] == nil {
				c.failed[o.Node] = map[core.NodeID]bool{}
			}
			c.failed[o.Node][e.Node] = true
		case core.Recovered:
			delete(c.failed[o.Node], e.Node)
		}
	case ObsRecover:
		delete(c.failed, o.Node)
		c.upSince[o.Node] = o.At
	case ObsCrash:
		x, t := o.Node, o.At
		c.crashes[x]++
		gen := c.crashes[x]
		w.At(max(t, c.After)+c.Bound, func() {
			if w.Alive(x) || c.crashes[x] != gen {
				return
			}
			if err := c.deadline(w, x, t); err != nil {
				w.Violate(c.Name(), err)
			}
		})
	}
	return nil
}

func (c *CrashDetected) deadline(w *World, x core.NodeID, t time.Duration) error {
	var missing []core.NodeID
	for i := range w.Len() {
		y := core.NodeID(i)
		if y == x || !w.Alive(y) || c.upSince[y] > t || (c.Observers != nil && !c.Observers(y)) {
			continue
		}
		if !c.failed[y][x] {
			missing = append(missing, y)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return Violatef(missing[0], "%v crashed at %v but %d live node(s) %s had not reported it Failed %v later",
		x, t, len(missing), nodeSet(missing), w.now-t)
}

// NoFalseFailure checks accuracy of failure detection: no node reports a
// live, connected node [core.Failed]. A report by y of x at time t in
// [From, Until) (Until 0: no end) is a violation if x is alive, has been up
// for at least Grace (a report may concern the previous incarnation of a
// node that just restarted), and the world has no loss, no cut between x
// and y, and no partition between them at t. Set From after the last
// network fault plus the detector's timeout, or use it in a run without
// network faults; delay spikes are not disconnections, so runs with spikes
// larger than a detector's margin must exclude their windows too.
//
// Use one NoFalseFailure per World; build it with [NewNoFalseFailure].
type NoFalseFailure struct {
	From, Until time.Duration
	Grace       time.Duration

	upSince map[core.NodeID]time.Duration
}

// NewNoFalseFailure returns a NoFalseFailure checker for [from, until).
func NewNoFalseFailure(from, until, grace time.Duration) *NoFalseFailure {
	return &NoFalseFailure{From: from, Until: until, Grace: grace}
}

// Name implements Checker.
func (c *NoFalseFailure) Name() string { return "no-false-failure" }

// Check implements Checker.
func (c *NoFalseFailure) Check(w *World, o Obs) error {
	if c.upSince == nil {
		c.upSince = map[core.NodeID]time.Duration{}
	}
	switch o.Kind {
	case ObsRecover:
		c.upSince[o.Node] = o.At
	case ObsEmit:
		f, ok := o.Event.(core.Failed)
		if !ok || o.At < c.From || (c.Until != 0 && o.At >= c.Until) {
			return nil
		}
		x := f.Node
		if !w.Alive(x) || o.At-c.upSince[x] < c.Grace || !w.connected(o.Node, x) {
			return nil
		}
		return fmt.Errorf("reported %v Failed, but %v is alive (up since %v) and connected", x, x, c.upSince[x])
	}
	return nil
}

// connected reports whether a message from a to b (and back) can get
// through right now: no loss, no cut, same partition side. It draws nothing
// from the random sources.
func (w *World) connected(a, b core.NodeID) bool {
	if w.loss > 0 || w.cuts[pairKey(a, b)] || w.cuts[pairKey(b, a)] {
		return false
	}
	g := w.group
	return g == nil || int(a) >= len(g) || int(b) >= len(g) || g[a] == g[b]
}

// ReachableNotFailed checks that reachability is not taken for liveness:
// no live node x is reported [core.Failed] (or, with Excluded, excluded)
// by a live node y while the links that are not cut still connect them
// both ways, through any number of live intermediaries: a path y → … → x
// and a path x → … → y of directed links that no [Cut] (one-way or not)
// and no [Partition] drops. [NoFalseFailure] asks only for the direct
// link; a detector that probes through others must do better.
//
// A report at t is judged only if such paths existed all through
// [t − Settle, t] (the network changes only at the plan's fault times and
// at crashes and recoveries, where the checker looks at it), with no loss
// and x up since t − Settle or before. Settle is the detector's longest
// suspicion-to-verdict time: a suspicion begun while no path existed may
// end in a verdict after one came back. The checker reads the world's
// plan at each observation; faults applied to the world otherwise (Cut,
// Partition called directly) are seen only at the next crash, recovery or
// planned fault; a node counts from the first such moment after it
// started.
//
// Use one ReachableNotFailed per World; build it with
// [NewReachableNotFailed].
type ReachableNotFailed struct {
	Settle time.Duration
	// Excluded, if set, reads exclusions other than core.Failed from an
	// emitted event (a membership's new view that leaves members out):
	// the excluding node is the observation's node.
	Excluded func(e core.Event) []core.NodeID
	// Judged, if set, says whether a report by one node about another is
	// judged at all: a membership judges only reports between members of
	// one view, since a node outside the other's view (one the membership
	// excluded) excludes it from nothing. Outside counts those left out.
	Judged  func(by, about core.NodeID) bool
	Outside int
	// Relays, if set, says which nodes a path from or to the reporting
	// node by may pass through (the members of by's view: a process still
	// joining, or one by's view left out, is asked by nobody of by's
	// group to pass anything on). It is asked at the time of the report.
	Relays func(by, id core.NodeID) bool

	// Checked counts the reports of live nodes judged against the paths,
	// Skipped those that could not be (loss, or x restarted within
	// Settle).
	Checked, Skipped int

	started bool
	planned int // faults of the world's plan whose times are scheduled
	upSince map[core.NodeID]time.Duration
	states  []netState // the network at each change, in time order
}

// netState is the network from at on: directed cuts, partition groups,
// loss, and the nodes that are up and not paused.
type netState struct {
	at    time.Duration
	cuts  map[uint64]bool
	group []int32
	loss  float64
	up    []bool
}

// NewReachableNotFailed returns a ReachableNotFailed checker with the
// given settling time.
func NewReachableNotFailed(settle time.Duration) *ReachableNotFailed {
	return &ReachableNotFailed{Settle: settle}
}

// Name implements Checker.
func (c *ReachableNotFailed) Name() string { return "reachable-not-failed" }

// Check implements Checker.
func (c *ReachableNotFailed) Check(w *World, o Obs) error {
	if !c.started {
		c.attach(w)
	}
	if w.faults != nil && len(w.faults.plan) > c.planned {
		c.schedule(w)
	}
	switch o.Kind {
	case ObsRecover:
		c.upSince[o.Node] = o.At
		c.snap(w)
	case ObsCrash:
		c.snap(w)
	case ObsEmit:
		var xs []core.NodeID
		what := "reported %v Failed"
		if f, ok := o.Event.(core.Failed); ok {
			xs = []core.NodeID{f.Node}
		} else if c.Excluded != nil {
			xs = c.Excluded(o.Event)
			what = "excluded %v"
		}
		for _, x := range xs {
			if err := c.judge(w, o.Node, x, o.At, what); err != nil {
				return err
			}
		}
	}
	return nil
}

// attach records the network as it is when the checker is added.
func (c *ReachableNotFailed) attach(w *World) {
	c.started = true
	c.upSince = map[core.NodeID]time.Duration{}
	c.snap(w)
	if w.faults != nil {
		c.schedule(w)
	}
}

// schedule arranges to record the network at every time the faults of
// the plan applied since the last call change it.
func (c *ReachableNotFailed) schedule(w *World) {
	var times []time.Duration
	for _, f := range w.faults.plan[c.planned:] {
		times = append(times, f.Start())
		switch f := f.(type) {
		case Cut:
			times = append(times, f.Until)
		case Partition:
			times = append(times, f.Until)
		case Loss:
			times = append(times, f.Until)
		case Pause:
			times = append(times, f.At+f.For)
		}
	}
	c.planned = len(w.faults.plan)
	slices.Sort(times)
	missed := false
	for _, t := range slices.Compact(times) {
		if t >= w.now {
			w.At(t, func() { c.snap(w) })
		} else {
			missed = true
		}
	}
	if missed { // faults applied late, or not observed until now
		c.snap(w)
	}
}

func (c *ReachableNotFailed) snap(w *World) {
	s := netState{at: w.now, cuts: make(map[uint64]bool, len(w.cuts)), group: slices.Clone(w.group), loss: w.loss, up: make([]bool, len(w.nodes))}
	for k, v := range w.cuts {
		s.cuts[k] = v
	}
	for i := range w.nodes {
		s.up[i] = w.nodes[i].alive && w.nodes[i].started && !w.nodes[i].paused
	}
	if k := len(c.states); k > 0 && c.states[k-1].at == s.at {
		c.states[k-1] = s
		return
	}
	c.states = append(c.states, s)
}

func (c *ReachableNotFailed) judge(w *World, y, x core.NodeID, t time.Duration, what string) error {
	if x == y || !w.Alive(x) || !w.Alive(y) {
		return nil
	}
	if c.Judged != nil && !c.Judged(y, x) {
		c.Outside++
		return nil
	}
	if _, restarted := c.upSince[x]; restarted && t-c.upSince[x] < c.Settle {
		c.Skipped++
		return nil
	}
	var relays func(core.NodeID) bool
	if c.Relays != nil {
		relays = func(id core.NodeID) bool { return c.Relays(y, id) }
	}
	var there, back []core.NodeID
	for i := len(c.states) - 1; i >= 0; i-- {
		s := &c.states[i]
		if s.loss > 0 {
			c.Skipped++
			return nil
		}
		if i == len(c.states)-1 {
			c.Checked++
		}
		if there, back = s.path(y, x, relays), s.path(x, y, relays); there == nil || back == nil {
			return nil
		}
		if s.at <= t-c.Settle {
			break
		}
	}
	there, back = c.states[len(c.states)-1].path(y, x, relays), c.states[len(c.states)-1].path(x, y, relays)
	return fmt.Errorf(what+", but %v is alive and reachable: path %s there and %s back", x, x, nodePath(there), nodePath(back))
}

// path returns a shortest path of links that deliver from a to b through
// nodes up in s (and relays, if relays is set), a and b included, or nil.
func (s *netState) path(a, b core.NodeID, relays func(core.NodeID) bool) []core.NodeID {
	n := len(s.up)
	if int(a) >= n || int(b) >= n {
		return nil // added to the world after s was recorded
	}
	prev := make([]int32, n)
	for i := range prev {
		prev[i] = -1
	}
	prev[a] = int32(a)
	queue := []core.NodeID{a}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if u == b {
			var p []core.NodeID
			for v := b; ; v = core.NodeID(prev[v]) {
				p = append(p, v)
				if v == a {
					break
				}
			}
			slices.Reverse(p)
			return p
		}
		for i := range n {
			v := core.NodeID(i)
			if prev[v] >= 0 || !s.up[v] || !s.delivers(u, v) || v != b && relays != nil && !relays(v) {
				continue
			}
			prev[v] = int32(u)
			queue = append(queue, v)
		}
	}
	return nil
}

// delivers reports whether the link from a to b is neither cut nor across
// a partition in s (loss aside).
func (s *netState) delivers(a, b core.NodeID) bool {
	if s.cuts[pairKey(a, b)] {
		return false
	}
	g := s.group
	return g == nil || int(a) >= len(g) || int(b) >= len(g) || g[a] == g[b]
}

func nodePath(p []core.NodeID) string {
	ss := make([]string, len(p))
	for i, id := range p {
		ss[i] = id.String()
	}
	return strings.Join(ss, "→")
}
