package member

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
)

// sameArray reports whether two non-empty slices start at the same element
// of one backing array (the views' ownership rule: shared, never copied).
func sameArray(a, b []core.NodeID) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}

// shareWorld runs §3.2 (every initial member computes the default view
// alone) and §3.4 (one non-root crash, its parent reports it, the root
// recomputes the tree and stabilizes) over n members built either one by
// one with New or from one Group, and returns the world, the members and
// every ViewInstalled.
func shareWorld(t *testing.T, n int, group bool) (*sim.World, []*Member, map[core.NodeID][]ViewInstalled) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Fanout = 4
	cfg.ProbeInterval = 0
	ids := make([]core.NodeID, n)
	for i := range ids {
		ids[n-1-i] = core.NodeID(i) // unsorted on purpose: the view sorts
	}
	var g *Group
	if group {
		var err error
		if g, err = NewGroup(cfg, ids); err != nil {
			t.Fatal(err)
		}
	}
	w := sim.New(sim.Config{Seed: 5, Network: sim.Constant(100 * time.Microsecond)})
	installed := map[core.NodeID][]ViewInstalled{}
	w.OnEmit(func(_ time.Duration, id core.NodeID, e core.Event) {
		if v, ok := e.(ViewInstalled); ok {
			installed[id] = append(installed[id], v)
		}
	})
	var ms []*Member
	for range n {
		var m *Member
		if group {
			m = g.New()
		} else {
			var err error
			if m, err = New(cfg, ids); err != nil {
				t.Fatal(err)
			}
		}
		ms = append(ms, m)
		w.Add(m)
	}
	const victim = 9
	w.CrashAt(time.Millisecond, victim)
	w.At(time.Millisecond, func() { ms[(victim-1)/4].Handle(core.Failed{Node: victim}) })
	w.RunUntil(time.Second)
	return w, ms, installed
}

// §3.2: the machines of one Group share the default view: every node's
// installed view, its first ViewInstalled (Members and Joined) and the
// Group's list are one array; after §3.4's recalculation every survivor
// holds the one view the root derived (copy-on-write), and the run is
// event for event the run of machines built one by one with New.
func TestGroupSharesViews(t *testing.T) {
	const n = 64
	w, ms, installed := shareWorld(t, n, true)
	first := installed[0][0].Members
	for i, m := range ms {
		id := core.NodeID(i)
		vs := installed[id]
		if i == 9 {
			continue // crashed before the change
		}
		if len(vs) != 2 {
			t.Fatalf("n%d installed %d views, want 2 (initial, after the crash)", i, len(vs))
		}
		if !sameArray(vs[0].Members, first) || !sameArray(vs[0].Joined, first) {
			t.Errorf("n%d: first view's Members/Joined are a copy, not the Group's list", i)
		}
		if cur := m.View().Members; !sameArray(cur, vs[1].Members) || !sameArray(cur, ms[0].View().Members) {
			t.Errorf("n%d: the new view is not the root's one", i)
		}
	}
	if len(first) != n || !slices.IsSorted(first) {
		t.Fatalf("initial view %v", first)
	}
	if got := ms[0].View().Members; len(got) != n-1 || slices.Contains(got, 9) || sameArray(got, first) {
		t.Errorf("view after the crash %v (shares the initial array: %v)", got, sameArray(got, first))
	}
	if !slices.Contains(first, 9) {
		t.Error("deriving the new view modified the initial one")
	}

	w2, ms2, _ := shareWorld(t, n, false)
	if w.TraceHash() != w2.TraceHash() {
		t.Errorf("trace hash %x with a Group, %x with New: the protocol changed", w.TraceHash(), w2.TraceHash())
	}
	if a, b := ms[0].View(), ms2[0].View(); a.Epoch != b.Epoch || !slices.Equal(a.Members, b.Members) {
		t.Errorf("Group machines installed %s %v, New machines %s %v", FormatEpoch(a.Epoch), a.Members, FormatEpoch(b.Epoch), b.Members)
	}
}

// NewGroup checks its inputs like New: a bad config or list is an error.
func TestNewGroupRejects(t *testing.T) {
	cfg := DefaultConfig()
	for _, l := range [][]core.NodeID{nil, {3, 1, 3}, {core.None, 2}} {
		if _, err := NewGroup(cfg, l); !errors.Is(err, ErrNoMembers) && !errors.Is(err, ErrBadMember) {
			t.Errorf("NewGroup(%v) = %v, want ErrNoMembers or ErrBadMember", l, err)
		}
	}
	cfg.Fanout = 3
	if _, err := NewGroup(cfg, []core.NodeID{1, 2}); !errors.Is(err, ErrConfig) {
		t.Errorf("fan-out 3: %v, want ErrConfig", err)
	}
	g, err := NewGroup(DefaultConfig(), []core.NodeID{5, 2, 9})
	if err != nil || !slices.Equal(g.Members(), []core.NodeID{2, 5, 9}) {
		t.Errorf("Members() = %v, %v; want [2 5 9]", g.Members(), err)
	}
}
