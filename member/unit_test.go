package member

import (
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), WANConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("preset invalid: %v", err)
		}
	}
	bad := []func(*Config){
		func(c *Config) { c.Fanout = 3 },
		func(c *Config) { c.Fanout = 1 },
		func(c *Config) { c.Fanout = 0 },
		func(c *Config) { c.AckTimeout = 0 },
		func(c *Config) { c.ReportRetry = -time.Second },
		func(c *Config) { c.JoinRetry = 0 },
		func(c *Config) { c.CommitTimeout = 0 },
		func(c *Config) { c.NoticeInterval = 0 },
		func(c *Config) { c.ProbeInterval = -1 },
		func(c *Config) { c.MaxProbes = -1 },
		func(c *Config) { c.Partition = 7 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d: Validate() = %v, want ErrConfig", i, err)
		}
		if _, err := New(c, ids(0, 1)); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d: New() = %v, want ErrConfig", i, err)
		}
	}
}

func TestConstructorsRejectBadLists(t *testing.T) {
	cfg := DefaultConfig()
	for _, l := range [][]core.NodeID{nil, {}, {1, 1}, {core.None}} {
		if _, err := New(cfg, l); err == nil {
			t.Errorf("New(%v) accepted", l)
		}
		if _, err := NewJoiner(cfg, JoinOptions{Contacts: l}); err == nil {
			t.Errorf("NewJoiner(%v) accepted", l)
		}
	}
}

func TestEpochPacking(t *testing.T) {
	e := MakeEpoch(7, 42)
	if EpochCounter(e) != 7 || EpochRoot(e) != 42 || FormatEpoch(e) != "7.n42" {
		t.Fatalf("epoch %x unpacks to %d, %v, %q", e, EpochCounter(e), EpochRoot(e), FormatEpoch(e))
	}
	// A higher counter wins whatever the roots; the root breaks ties.
	if !(MakeEpoch(8, 0) > MakeEpoch(7, 1<<31)) || !(MakeEpoch(7, 5) > MakeEpoch(7, 4)) {
		t.Fatal("epochs do not order by counter, then root")
	}
}

// §3.1, §3.4: the tree recalculation. The members in view order form an
// a-ary heap; removing a node lets the next ones move up; joiners are
// appended as leaves; positions are found in constant time.
func TestViewApply(t *testing.T) {
	v, err := initialView(ids(5, 3, 9, 1, 7), 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.list(), ids(1, 3, 5, 7, 9)) || v.epoch != MakeEpoch(1, 1) {
		t.Fatalf("initial view %s %v", FormatEpoch(v.epoch), v.list())
	}
	w, err := v.apply(MakeEpoch(2, 1), nil, ids(3), []Joiner{{2, 11}, {4, 12}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.list(), ids(1, 5, 7, 9, 2, 4)) {
		t.Fatalf("members %v", w.list())
	}
	for i, id := range w.list() {
		if w.pos(id) != i {
			t.Errorf("pos(%v) = %d, want %d", id, w.pos(id), i)
		}
	}
	if w.pos(3) != -1 || w.inc(4) != 12 || w.inc(1) != 0 {
		t.Error("lookups of a departed node or incarnations wrong")
	}
	// Tree of [n1 n5 n7 n9 n2 n4], a = 2: n1 → n5 n7; n5 → n9 n2; n7 → n4.
	if !slices.Equal(w.children(1), ids(5, 7)) || !slices.Equal(w.children(5), ids(9, 2)) ||
		!slices.Equal(w.children(7), ids(4)) || w.parent(4) != 7 || w.parent(1) != core.None {
		t.Error("tree wrong")
	}
	if w.levelsBelow(1) != 2 || w.levelsBelow(5) != 1 || w.levelsBelow(9) != 0 {
		t.Error("levels below wrong")
	}
	if !slices.Equal(w.ancestry, []uint64{v.epoch}) || !w.descends(v.epoch) {
		t.Error("ancestry wrong")
	}
	j, d := diff(v, w)
	if !slices.Equal(j, ids(2, 4)) || !slices.Equal(d, ids(3)) {
		t.Errorf("diff = +%v -%v", j, d)
	}
	if _, err := v.apply(MakeEpoch(2, 1), nil, ids(8), nil, 2); err == nil {
		t.Error("failing a non-member accepted")
	}
	if _, err := v.apply(MakeEpoch(2, 1), nil, nil, []Joiner{{5, 0}}, 2); err == nil {
		t.Error("joining a member accepted")
	}
	if _, err := v.apply(MakeEpoch(2, 3), nil, ids(7), nil, 2); err == nil {
		t.Error("a view whose root is not the epoch's root accepted")
	}
}

// A view's positions, against a linear search: member lists with a sorted
// prefix and an unsorted tail (joiners), and the duplicates newView must
// refuse (within the tail, and between the tail and the prefix).
func TestViewPositionsAndDuplicates(t *testing.T) {
	rng := seededRand(t, 7)
	for range 2000 {
		n := 1 + rng.IntN(40)
		members, _ := randomMembers(rng, n)
		dup := rng.IntN(4) == 0 && n > 1
		if dup {
			i, j := rng.IntN(n), rng.IntN(n)
			if i == j {
				j = (i + 1) % n
			}
			members[j] = members[i]
		}
		v, err := newView(MakeEpoch(1, members[0]), members, nil, nil, 2)
		if dup {
			if err == nil {
				t.Fatalf("members %v with a duplicate accepted", members)
			}
			continue
		}
		if err != nil {
			t.Fatalf("members %v: %v", members, err)
		}
		for id := core.NodeID(0); id < core.NodeID(3*n+2); id++ {
			if got, want := v.pos(id), slices.Index(members, id); got != want {
				t.Fatalf("members %v: pos(%v) = %d, want %d", members, id, got, want)
			}
		}
	}
}

// apply, against building the same view afresh (newViewAt): random views
// with a sorted prefix and a tail, incarnations or none, random departures
// (the root's too) and joiners (new ids, and departed ones re-joining),
// give the same members, incarnations, tree and index; the changes newView
// or the old apply refused (a failed non-member, a failure or a joiner
// listed twice, a joiner already a member, a wrong root) are refused.
func TestViewApplyMatchesRebuild(t *testing.T) {
	rng := seededRand(t, 11)
	for trial := range 5000 {
		n := 1 + rng.IntN(40)
		members, used := randomMembers(rng, n)
		var incs []uint64
		if rng.IntN(2) == 0 {
			incs = make([]uint64, n)
			for i := range incs {
				incs[i] = uint64(rng.IntN(3))
			}
		}
		base, err := newViewAt(MakeEpoch(1, members[0]), members, nil, incs, 2)
		if err != nil {
			t.Fatal(err)
		}
		// Departures and joiners.
		var failed []core.NodeID
		for _, id := range members {
			if rng.IntN(4) == 0 {
				failed = append(failed, id)
			}
		}
		rng.Shuffle(len(failed), func(i, j int) { failed[i], failed[j] = failed[j], failed[i] })
		var joined []Joiner
		for range rng.IntN(12) {
			id := core.NodeID(rng.IntN(4 * n))
			if len(failed) > 0 && rng.IntN(3) == 0 {
				id = failed[rng.IntN(len(failed))]
			}
			survivor := used[id] && !slices.Contains(failed, id)
			if !survivor && !slices.ContainsFunc(joined, func(j Joiner) bool { return j.ID == id }) {
				joined = append(joined, Joiner{ID: id, Inc: uint64(rng.IntN(3))})
			}
		}
		bad := ""
		switch rng.IntN(8) {
		case 0:
			failed = append(failed, core.NodeID(4*n+1))
			bad = "a failed non-member"
		case 1:
			if len(failed) > 0 {
				failed = append(failed, failed[0])
				bad = "a failure listed twice"
			}
		case 2:
			if len(joined) > 0 {
				joined = append(joined, joined[rng.IntN(len(joined))])
				bad = "a joiner listed twice"
			}
		case 3:
			for _, id := range members {
				if !slices.Contains(failed, id) && !slices.ContainsFunc(joined, func(j Joiner) bool { return j.ID == id }) {
					joined = append(joined, Joiner{ID: id})
					bad = "a joiner already a member"
					break
				}
			}
		}
		// What the view should hold.
		var want []core.NodeID
		var wantIncs []uint64
		anyInc := incs != nil || slices.ContainsFunc(joined, func(j Joiner) bool { return j.Inc != 0 })
		for i, id := range members {
			if !slices.Contains(failed, id) {
				want = append(want, id)
				if anyInc {
					inc := uint64(0)
					if incs != nil {
						inc = incs[i]
					}
					wantIncs = append(wantIncs, inc)
				}
			}
		}
		for _, j := range joined {
			want = append(want, j.ID)
			if anyInc {
				wantIncs = append(wantIncs, j.Inc)
			}
		}
		if len(want) == 0 && bad == "" {
			bad = "an empty view"
		}
		root := core.NodeID(0)
		if len(want) > 0 {
			root = want[0]
		}
		if bad == "" && rng.IntN(10) == 0 {
			root = want[0] + 1000
			bad = "a root that is not the first member"
		}
		got, err := base.apply(MakeEpoch(2, root), nil, failed, joined, 2)
		if bad != "" {
			if err == nil {
				t.Fatalf("trial %d: %s accepted: members %v failed %v joined %v", trial, bad, members, failed, joined)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: members %v failed %v joined %v: %v", trial, members, failed, joined, err)
		}
		ref, err := newViewAt(MakeEpoch(2, root), want, base.childAncestry(), wantIncs, 2)
		if err != nil {
			t.Fatalf("trial %d: the reference refused %v: %v", trial, want, err)
		}
		// Lazy, the view answers as the reference does, from its base.
		if got.src == nil {
			t.Fatalf("trial %d: apply filled the view", trial)
		}
		sameAnswers(t, trial, got, ref, append(slices.Clone(members), core.NodeID(4*n+5), core.NodeID(4*n+6)))
		if got.src == nil {
			t.Fatalf("trial %d: a lookup filled the view", trial)
		}
		sameChildren(t, trial, got, ref)
		got.fill()
		if got.src != nil || got.gone != nil {
			t.Fatalf("trial %d: a filled view keeps its base", trial)
		}
		sameAnswers(t, trial, got, ref, append(slices.Clone(members), core.NodeID(4*n+5), core.NodeID(4*n+6)))
		sameChildren(t, trial, got, ref)
		if !slices.Equal(got.mem, ref.mem) || !slices.Equal(got.incs, ref.incs) || (got.incs == nil) != (ref.incs == nil) ||
			got.sorted != ref.sorted || !slices.Equal(got.tail, ref.tail) || got.tree != ref.tree || !slices.Equal(got.ancestry, ref.ancestry) {
			t.Fatalf("trial %d: members %v incs %v, failed %v, joined %v:\n got members %v incs %v sorted %d tail %v\nwant members %v incs %v sorted %d tail %v",
				trial, members, incs, failed, joined, got.mem, got.incs, got.sorted, got.tail, ref.mem, ref.incs, ref.sorted, ref.tail)
		}
		if !got.delta || !slices.Equal(got.failed, failed) || !slices.Equal(got.joined, joined) {
			t.Fatalf("trial %d: the change is not recorded in the view", trial)
		}
	}
}

// sameAnswers checks that v answers the position lookups as ref does, for
// the positions of ref and the ids given (members or not).
func sameAnswers(t *testing.T, trial int, v, ref *view, ids []core.NodeID) {
	t.Helper()
	if v.size() != ref.size() || v.root() != ref.root() {
		t.Fatalf("trial %d: size %d root %v, want %d %v", trial, v.size(), v.root(), ref.size(), ref.root())
	}
	for p := range ref.size() {
		if v.at(p) != ref.at(p) || v.incAt(p) != ref.incAt(p) || v.parentAt(p) != ref.parentAt(p) || v.levelsBelowAt(p) != ref.levelsBelowAt(p) {
			t.Fatalf("trial %d: position %d: member %v inc %d parent %v, want %v %d %v", trial, p, v.at(p), v.incAt(p), v.parentAt(p), ref.at(p), ref.incAt(p), ref.parentAt(p))
		}
	}
	for _, id := range append(ids, ref.mem...) {
		if v.pos(id) != ref.pos(id) || v.has(id) != ref.has(id) || v.inc(id) != ref.inc(id) {
			t.Fatalf("trial %d: id %v: position %d inc %d, want %d %d", trial, id, v.pos(id), v.inc(id), ref.pos(id), ref.inc(id))
		}
	}
}

// sameChildren checks that v names the same children as ref everywhere.
func sameChildren(t *testing.T, trial int, v, ref *view) {
	t.Helper()
	for p := -1; p < ref.size(); p++ {
		if got, want := v.childrenAt(p), ref.childrenAt(p); !slices.Equal(got, want) {
			t.Fatalf("trial %d: children of position %d: %v, want %v", trial, p, got, want)
		}
	}
}

// seededRand returns a random source seeded from the clock, or from
// COHORT_SEED to replay a run; the test logs the seed.
func seededRand(t *testing.T, stream uint64) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("COHORT_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay: COHORT_SEED=%d go test ./member -run %s)", seed, seed, t.Name())
	return rand.New(rand.NewPCG(seed, stream))
}

// randomMembers returns n distinct ids below 3n, a sorted prefix of random
// length followed by the rest in random order (the joiners of a view), and
// the set of them.
func randomMembers(rng *rand.Rand, n int) ([]core.NodeID, map[core.NodeID]bool) {
	members := make([]core.NodeID, 0, n)
	used := map[core.NodeID]bool{}
	for len(members) < n {
		id := core.NodeID(rng.IntN(3 * n))
		if !used[id] {
			used[id] = true
			members = append(members, id)
		}
	}
	slices.Sort(members[:rng.IntN(n+1)])
	return members, used
}

// Paper footnote on re-joining under the original id with a new process:
// a member whose new incarnation joins leaves its position and is appended.
func TestViewRejoin(t *testing.T) {
	v, _ := initialView(ids(0, 1, 2), 4)
	w, err := v.apply(MakeEpoch(2, 0), nil, ids(1), []Joiner{{1, 99}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.list(), ids(0, 2, 1)) || w.inc(1) != 99 {
		t.Fatalf("rejoin gave %v inc %d", w.list(), w.inc(1))
	}
	j, d := diff(v, w)
	if !slices.Equal(j, ids(1)) || !slices.Equal(d, ids(1)) {
		t.Errorf("diff = +%v -%v", j, d)
	}
}

// A node started with an initial list that does not contain it joins
// through the list as a new node.
func TestOutsiderOfInitialListJoins(t *testing.T) {
	m, err := New(DefaultConfig(), ids(0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(5, 1)
	m.Start(env)
	if !m.Joining() || m.Incarnation() == 0 {
		t.Fatal("not joining")
	}
	sent := env.TakeSent()
	if len(sent) != 1 || sent[0].Msg.Kind() != KindNewNode || sent[0].To != 0 {
		t.Fatalf("sent %+v", sent)
	}
}

// The node's events: MembersChanged then ViewInstalled for the initial view.
func TestInitialEvents(t *testing.T) {
	m, _ := New(DefaultConfig(), ids(2, 0, 1))
	env := coretest.NewEnv(1, 1)
	m.Start(env)
	ev := env.TakeEmitted()
	if len(ev) != 2 {
		t.Fatalf("events %v", ev)
	}
	mc, ok1 := ev[0].(core.MembersChanged)
	vi, ok2 := ev[1].(ViewInstalled)
	if !ok1 || !ok2 || mc.Epoch != MakeEpoch(1, 0) || !slices.Equal(vi.Members, ids(0, 1, 2)) || !slices.Equal(vi.Joined, ids(0, 1, 2)) {
		t.Fatalf("events %+v", ev)
	}
	if m.IsRoot() {
		t.Fatal("n1 believes it is the root of a view rooted at n0")
	}
}
