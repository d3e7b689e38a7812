package vsynctest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/vsync"
)

// checker checks on every event (see the package documentation).
type vsKey struct {
	epoch  uint64
	sender core.NodeID
	seq    uint64
}

type nodeState struct {
	app      uint64                 // current application view
	next     map[core.NodeID]uint64 // next expected seq per sender in app
	progress map[uint64][]uint64    // newest Progress per epoch
	stable   map[uint64][]uint64    // newest Stable per epoch
	final    map[core.NodeID]uint64 // delivered counts in app
}

type checker struct {
	views  map[uint64][]core.NodeID
	nodes  map[core.NodeID]*nodeState
	sent   map[vsKey]uint64 // hash of the payload its sender delivered
	moves  map[[2]uint64]map[core.NodeID]uint64
	mover  map[[2]uint64]core.NodeID
	events uint64
}

func newChecker(initial []core.NodeID) *checker {
	return &checker{
		views: map[uint64][]core.NodeID{0: initial},
		nodes: map[core.NodeID]*nodeState{},
		sent:  map[vsKey]uint64{},
		moves: map[[2]uint64]map[core.NodeID]uint64{},
		mover: map[[2]uint64]core.NodeID{},
	}
}

// Name implements sim.Checker.
func (c *checker) Name() string { return "vsync" }

func (c *checker) node(id core.NodeID) *nodeState {
	s := c.nodes[id]
	if s == nil {
		s = &nodeState{next: map[core.NodeID]uint64{}, progress: map[uint64][]uint64{}, stable: map[uint64][]uint64{}}
		c.nodes[id] = s
	}
	return s
}

// Check implements sim.Checker.
func (c *checker) Check(w *sim.World, o sim.Obs) error {
	if o.Kind != sim.ObsEmit {
		return nil
	}
	s := c.node(o.Node)
	switch e := o.Event.(type) {
	case core.MembersChanged:
		if old, ok := c.views[e.Epoch]; ok && !slices.Equal(old, e.Members) {
			return fmt.Errorf("view %d installed as %v and %v", e.Epoch, old, e.Members)
		}
		c.views[e.Epoch] = e.Members
	case vsync.ViewChanged:
		if e.Epoch <= s.app {
			return fmt.Errorf("view e%d announced after e%d", e.Epoch, s.app)
		}
		if e.Previous != s.app {
			return fmt.Errorf("view e%d announced as coming from e%d, but the application was in e%d", e.Epoch, e.Previous, s.app)
		}
		var count uint64
		for _, k := range s.next {
			count += k - 1
		}
		if e.Count != count {
			return fmt.Errorf("view e%d: Count %d, but the node delivered %d messages in e%d", e.Epoch, e.Count, count, s.app)
		}
		if s.app != 0 {
			key := [2]uint64{s.app, e.Epoch}
			got := map[core.NodeID]uint64{}
			for snd, k := range s.next {
				if k > 1 {
					got[snd] = k - 1
				}
			}
			if want, ok := c.moves[key]; ok && !mapsEqual(want, got) {
				return fmt.Errorf("same-view delivery: moving e%d→e%d it delivered %v in e%d, but %v delivered %v", s.app, e.Epoch, fmtCounts(got), s.app, c.mover[key], fmtCounts(want))
			}
			c.moves[key], c.mover[key] = got, o.Node
		}
		s.app = e.Epoch
		s.next = map[core.NodeID]uint64{}
	case vsync.Delivered:
		if e.Epoch != s.app || s.app == 0 {
			return fmt.Errorf("delivered %v#%d of e%d in view e%d", e.Sender, e.Seq, e.Epoch, s.app)
		}
		want := max(s.next[e.Sender], 1)
		if e.Seq != want {
			return fmt.Errorf("FIFO/duplicate: delivered %v#%d in e%d, expected #%d", e.Sender, e.Seq, e.Epoch, want)
		}
		s.next[e.Sender] = e.Seq + 1
		h := vsync.MessageHash(e.Sender, e.Seq, e.Payload)
		k := vsKey{e.Epoch, e.Sender, e.Seq}
		if e.Sender == o.Node {
			c.sent[k] = h
		} else if sh, ok := c.sent[k]; !ok || sh != h {
			return fmt.Errorf("delivered %v#%d of e%d (%q), which its sender never sent", e.Sender, e.Seq, e.Epoch, e.Payload)
		}
		c.events++
	case stable.Progress:
		if old := s.progress[e.Epoch]; !grows(old, e.Have) {
			return fmt.Errorf("progress of e%d went from %v to %v", e.Epoch, old, e.Have)
		}
		s.progress[e.Epoch] = e.Have
	case stable.Stable:
		if old := s.stable[e.Epoch]; !grows(old, e.Vector) {
			return fmt.Errorf("stability vector of e%d went from %v to %v", e.Epoch, old, e.Vector)
		}
		s.stable[e.Epoch] = e.Vector
		members, ok := c.views[e.Epoch]
		if !ok {
			return fmt.Errorf("stability vector for unknown view e%d", e.Epoch)
		}
		for _, m := range members {
			if !w.Alive(m) {
				continue
			}
			have := c.node(m).progress[e.Epoch]
			for i, v := range e.Vector {
				if h := at(have, i); v > h {
					return fmt.Errorf("e%d: %v declared %d messages of sender %d stable, but live member %v holds %d (vector %v, its progress %v)", e.Epoch, o.Node, v, i, m, h, e.Vector, have)
				}
			}
		}
	}
	return nil
}

// converged checks the end of the liveness phase.
func (c *checker) converged(w *sim.World, all []core.NodeID, size int) error {
	var live []core.NodeID
	for _, id := range all {
		if w.Alive(id) {
			live = append(live, id)
		}
	}
	var epoch uint64
	var counts map[core.NodeID]uint64
	bound := (2*size + 1) * int(4*vsync.SimConfig().Window)
	for _, id := range live {
		l := LayerOf(w, id)
		e, flushing := l.View()
		if flushing || e == 0 {
			return fmt.Errorf("%v still flushing (view e%d)", id, e)
		}
		if epoch == 0 {
			epoch = e
		}
		if e != epoch {
			return fmt.Errorf("%v ended in e%d, %v in e%d", live[0], epoch, id, e)
		}
		if got := c.views[e]; !slices.Equal(sorted(got), live) {
			return fmt.Errorf("final view e%d is %v, live nodes %v", e, got, live)
		}
		s := c.nodes[id]
		if counts == nil {
			counts = s.next
		} else if !mapsEqual(counts, s.next) {
			return fmt.Errorf("final view e%d: %v delivered %v, %v delivered %v", e, live[0], fmtCounts(counts), id, fmtCounts(s.next))
		}
		st := l.Stats()
		if st.Buffered != 0 || st.Queued != 0 {
			return fmt.Errorf("%v still buffers %d messages (%d queued) after the liveness phase", id, st.Buffered, st.Queued)
		}
		if st.PeakBuffered > bound {
			return fmt.Errorf("%v buffered %d messages at its peak, bound %d", id, st.PeakBuffered, bound)
		}
	}
	return nil
}

func grows(old, cur []uint64) bool {
	for i, v := range old {
		if at(cur, i) < v {
			return false
		}
	}
	return true
}

func at(v []uint64, i int) uint64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

func mapsEqual(a, b map[core.NodeID]uint64) bool {
	for k, v := range a {
		if v > 1 && b[k] != v || v <= 1 && b[k] > 1 {
			return false
		}
	}
	for k, v := range b {
		if v > 1 && a[k] != v {
			return false
		}
	}
	return true
}

func fmtCounts(m map[core.NodeID]uint64) string {
	var ks []core.NodeID
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "%v:%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

func sorted(ids []core.NodeID) []core.NodeID {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}
