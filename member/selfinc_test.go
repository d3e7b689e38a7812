package member

import (
	"math/rand/v2"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// selfInc answers what the view says of this node's incarnation, through
// a chain of views each derived from the last (departures, joiners, this
// node re-joining under a new incarnation), whichever view at was last
// asked about.
func TestSelfIncFollowsDerivedViews(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	const self = core.NodeID(5)
	members := make([]core.NodeID, 12)
	for i := range members {
		members[i] = core.NodeID(i)
	}
	v, err := newView(MakeEpoch(1, 0), members, nil, []Joiner{{self, 7}, {3, 9}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	other, err := newView(MakeEpoch(1, 0), members, nil, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	m := newMember(Config{Fanout: 4})
	m.self = self
	next := core.NodeID(100)
	for step := range 200 {
		// at remembers the last view asked about, v; ask about another
		// view sometimes, so that the next one is derived from a view it
		// does not remember.
		if rng.IntN(3) == 0 {
			m.selfInc(other)
		}
		var failed []core.NodeID
		var joined []Joiner
		list := v.list()
		switch rng.IntN(3) {
		case 0: // a member other than the root and self departs
			if f := list[1+rng.IntN(len(list)-1)]; f != self {
				failed = append(failed, f)
			}
		case 1: // this node re-joins under a new incarnation
			if v.has(self) && v.at(0) != self {
				failed = append(failed, self)
			}
			joined = append(joined, Joiner{self, uint64(1000 + step)})
		}
		if len(failed) == 0 || rng.IntN(2) == 0 {
			joined = append(joined, Joiner{next, uint64(step)})
			next++
		}
		if !v.has(self) && !containsJoiner(joined, self) {
			joined = append(joined, Joiner{self, uint64(2000 + step)})
		}
		if len(failed) == 0 && len(joined) == 0 {
			continue
		}
		nv, err := v.apply(MakeEpoch(uint32(step+2), 0), nil, failed, joined, 4)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		want := nv.incAt(nv.pos(self))
		if got := m.selfInc(nv); got != want {
			t.Fatalf("step %d (seed %d): selfInc %d, the view says %d", step, seed, got, want)
		}
		if rng.IntN(4) == 0 {
			nv.fill()
		}
		v = nv
	}
}

func containsJoiner(js []Joiner, id core.NodeID) bool {
	for _, j := range js {
		if j.ID == id {
			return true
		}
	}
	return false
}
