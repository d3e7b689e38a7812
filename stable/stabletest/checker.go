// Package stabletest holds the simulator checker of package stable's
// guarantees, for the swarm tests of stable and of the layers built on it
// (vsync). It is not a protocol package: it imports sim.
//
// Register one [Checker] per world:
//
//	chk := stabletest.NewChecker(initialMembers)
//	chk.LiveAfter, chk.MinRounds = plan.HealedAt(), 2
//	w.AddChecker(chk)
//	… w.RunChecked(horizon); w.Finish()
//
// It learns everything from what the nodes emit: [stable.Progress] (each
// node's received vector), [core.MembersChanged] (the views; view 0 is the
// list given to NewChecker), [core.Failed] (the members a node's detector
// stopped waiting for), [stable.Stable] and [stable.RoundDone].
package stabletest

import (
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
)

// Checker checks, for every [stable.Stable]{Epoch e, Vector v} a node x
// emits:
//
//   - safety: for every member y of view e that is alive and that x has not
//     been told failed (a core.Failed{y} emitted at x since x's view e), and
//     every sender i, v[i] ≤ y's Have[i] as y last reported it for view e
//     (0 if y never reported one): no message is declared stable while a
//     live member of the view lacks it;
//   - monotony: within view e, x's vectors only grow element-wise and its
//     rounds only increase;
//
// and at the end of the run (World.Finish), liveness: every live node that
// is a member of the last view it installed emitted at least MinRounds
// RoundDone events of that view ending after LiveAfter.
type Checker struct {
	// LiveAfter is when the liveness phase starts (the plan's heal time).
	LiveAfter time.Duration
	// MinRounds is the number of rounds every live member must finish after
	// LiveAfter; 0 disables the liveness check.
	MinRounds int

	views map[uint64][]core.NodeID
	nodes map[core.NodeID]*nodeState
}

type nodeState struct {
	epoch     uint64              // the view the node installed last
	have      map[uint64][]uint64 // last Progress, per view
	failed    map[core.NodeID]bool
	lastVec   []uint64
	lastRound uint64
	vecEpoch  uint64
	doneAfter int // RoundDone of epoch after LiveAfter
	stables   int
}

// NewChecker returns a checker whose view 0 is members.
func NewChecker(members []core.NodeID) *Checker {
	return &Checker{
		views: map[uint64][]core.NodeID{0: slices.Clone(members)},
		nodes: map[core.NodeID]*nodeState{},
	}
}

// Name implements sim.Checker.
func (c *Checker) Name() string { return "stable" }

func (c *Checker) node(id core.NodeID) *nodeState {
	s := c.nodes[id]
	if s == nil {
		s = &nodeState{failed: map[core.NodeID]bool{}, have: map[uint64][]uint64{}}
		c.nodes[id] = s
	}
	return s
}

// Stables returns how many Stable events node id emitted.
func (c *Checker) Stables(id core.NodeID) int { return c.node(id).stables }

// Check implements sim.Checker.
func (c *Checker) Check(w *sim.World, o sim.Obs) error {
	switch o.Kind {
	case sim.ObsEnd:
		return c.end(w)
	case sim.ObsRecover:
		// A restarted node starts from nothing.
		delete(c.nodes, o.Node)
		return nil
	case sim.ObsEmit:
	default:
		return nil
	}
	x := c.node(o.Node)
	switch e := o.Event.(type) {
	case core.MembersChanged:
		if old, ok := c.views[e.Epoch]; ok && !slices.Equal(old, e.Members) {
			return sim.Violatef(o.Node, "view %d installed as %v here, %v elsewhere", e.Epoch, e.Members, old)
		}
		c.views[e.Epoch] = slices.Clone(e.Members)
		if e.Epoch != x.epoch {
			x.failed = map[core.NodeID]bool{}
			x.doneAfter = 0
		}
		x.epoch = e.Epoch
	case core.Failed:
		x.failed[e.Node] = true
	case stable.Progress:
		old := x.have[e.Epoch]
		for i := range min(len(e.Have), len(old)) {
			if e.Have[i] < old[i] {
				return sim.Violatef(o.Node, "Progress of view %d went down at sender %d: %d after %d (the multicast layer broke its contract)", e.Epoch, i, e.Have[i], old[i])
			}
		}
		x.have[e.Epoch] = slices.Clone(e.Have)
	case stable.Stable:
		x.stables++
		members, ok := c.views[e.Epoch]
		if !ok {
			return sim.Violatef(o.Node, "Stable for view %d, which nobody installed", e.Epoch)
		}
		for _, y := range members {
			if !w.Alive(y) || x.failed[y] {
				continue
			}
			ys := c.nodes[y]
			for i, v := range e.Vector {
				var h uint64
				if ys != nil && i < len(ys.have[e.Epoch]) {
					h = ys.have[e.Epoch][i]
				}
				if v > h {
					return sim.Violatef(o.Node, "round %d of view %d declares %d messages of sender %d stable, but live member %v holds only %d", e.Round, e.Epoch, v, i, y, h)
				}
			}
		}
		if x.lastVec != nil && x.vecEpoch == e.Epoch {
			if e.Round <= x.lastRound {
				return sim.Violatef(o.Node, "view %d: round %d reported after round %d", e.Epoch, e.Round, x.lastRound)
			}
			for i := range min(len(e.Vector), len(x.lastVec)) {
				if e.Vector[i] < x.lastVec[i] {
					return sim.Violatef(o.Node, "view %d round %d: stable vector went down at sender %d: %d after %d", e.Epoch, e.Round, i, e.Vector[i], x.lastVec[i])
				}
			}
		}
		x.lastVec, x.lastRound, x.vecEpoch = slices.Clone(e.Vector), e.Round, e.Epoch
	case stable.RoundDone:
		if e.Epoch == x.epoch && e.At > c.LiveAfter {
			x.doneAfter++
		}
	}
	return nil
}

func (c *Checker) end(w *sim.World) error {
	if c.MinRounds <= 0 {
		return nil
	}
	for id := range w.Len() {
		nid := core.NodeID(id)
		if !w.Alive(nid) {
			continue
		}
		x := c.node(nid)
		if !slices.Contains(c.views[x.epoch], nid) {
			continue
		}
		if x.doneAfter < c.MinRounds {
			return sim.Violatef(nid, "liveness: finished %d rounds of view %d after %v, want at least %d", x.doneAfter, x.epoch, c.LiveAfter, c.MinRounds)
		}
	}
	return nil
}

// String describes the checker's state briefly (for test logs).
func (c *Checker) String() string {
	return fmt.Sprintf("stable checker: %d views, %d nodes", len(c.views), len(c.nodes))
}
