package member

import (
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/wire"
)

// The first phase of a view change builds no member list: every member
// holds the proposal as a lazy view of its installed one until the
// commit, which fills it. Messages go through the codec, as between
// hosts, so that no node gets the sender's view.
func TestFirstPhaseLeavesViewsLazy(t *testing.T) {
	const n = 40
	cfg := DefaultConfig()
	cfg.Fanout = 4
	all := make([]core.NodeID, n)
	for i := range all {
		all[i] = core.NodeID(i)
	}
	g, err := NewGroup(cfg, all)
	if err != nil {
		t.Fatal(err)
	}
	codec := wire.NewCodec()
	if err := RegisterCodecs(codec); err != nil {
		t.Fatal(err)
	}
	ms := make([]*Member, n)
	es := make([]*coretest.Env, n)
	for i := range ms {
		ms[i], es[i] = g.New(), coretest.NewEnv(core.NodeID(i), 1)
		ms[i].Start(es[i])
	}
	const victim = core.NodeID(21) // an inner node of the tree: its subtree moves
	var (
		enc      wire.Encoder
		dec      wire.Decoder
		stable   bool
		sawFirst bool
	)
	// deliver passes every message sent, until the root has every ACK
	// (first) or until nothing is left.
	deliver := func(first bool) {
		for progress := true; progress && !(first && stable); {
			progress = false
			for i, e := range es {
				for _, s := range e.TakeSent() {
					if s.To == victim {
						continue
					}
					enc.B = enc.B[:0]
					if err := codec.Encode(&enc, s.Msg); err != nil {
						t.Fatal(err)
					}
					m, err := codec.Decode(&dec, s.Msg.Kind(), slices.Clone(enc.B), nil)
					if err != nil {
						t.Fatal(err)
					}
					if p, ok := m.(*Prepare); ok && p.Epoch != 0 {
						sawFirst = true
					}
					ms[s.To].Receive(core.NodeID(i), m)
					progress = true
					for _, ev := range es[0].TakeEmitted() {
						if _, ok := ev.(Stabilized); ok {
							stable = true
						}
					}
					if first && stable {
						return // the commits are not sent yet
					}
				}
			}
		}
	}
	parent := ms[0].cur.parent(victim)
	ms[parent].Handle(core.Failed{Node: victim})
	deliver(true)
	if !stable || !sawFirst {
		t.Fatalf("no stabilization (proposal seen: %v)", sawFirst)
	}
	for i, m := range ms {
		if core.NodeID(i) == victim || core.NodeID(i) == 0 {
			continue
		}
		if m.accepted == nil || m.accepted.has(victim) || m.accepted.size() != n-1 {
			t.Fatalf("n%d holds %v after the first phase", i, m.accepted)
		}
		if m.accepted.src == nil {
			t.Errorf("n%d filled the proposal's list before the commit", i)
		}
	}
	deliver(false)
	want := slices.DeleteFunc(slices.Clone(all), func(id core.NodeID) bool { return id == victim })
	for i, m := range ms {
		if core.NodeID(i) == victim {
			continue
		}
		if got := m.View(); !slices.Equal(got.Members, want) {
			t.Fatalf("n%d installed %v, want %v", i, got.Members, want)
		}
		if m.cur.src != nil {
			t.Errorf("n%d installed a view it did not fill", i)
		}
	}
}
