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
	if !slices.Equal(v.members, ids(1, 3, 5, 7, 9)) || v.epoch != MakeEpoch(1, 1) {
		t.Fatalf("initial view %s %v", FormatEpoch(v.epoch), v.members)
	}
	w, err := v.apply(MakeEpoch(2, 1), ids(3), []Joiner{{2, 11}, {4, 12}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.members, ids(1, 5, 7, 9, 2, 4)) {
		t.Fatalf("members %v", w.members)
	}
	for i, id := range w.members {
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
	if _, err := v.apply(MakeEpoch(2, 1), ids(8), nil, 2); err == nil {
		t.Error("failing a non-member accepted")
	}
	if _, err := v.apply(MakeEpoch(2, 1), nil, []Joiner{{5, 0}}, 2); err == nil {
		t.Error("joining a member accepted")
	}
	if _, err := v.apply(MakeEpoch(2, 3), ids(7), nil, 2); err == nil {
		t.Error("a view whose root is not the epoch's root accepted")
	}
}

// A view's positions, against a linear search: member lists with a sorted
// prefix and an unsorted tail (joiners), and the duplicates newView must
// refuse (within the tail, and between the tail and the prefix).
func TestViewPositionsAndDuplicates(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("COHORT_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay: COHORT_SEED=%d go test ./member -run TestViewPositionsAndDuplicates)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for range 2000 {
		n := 1 + rng.IntN(40)
		members := make([]core.NodeID, 0, n)
		used := map[core.NodeID]bool{}
		for len(members) < n {
			id := core.NodeID(rng.IntN(3 * n))
			if !used[id] {
				used[id] = true
				members = append(members, id)
			}
		}
		// A sorted prefix of random length, the rest in random order.
		k := rng.IntN(n + 1)
		slices.Sort(members[:k])
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

// Paper footnote on re-joining under the original id with a new process:
// a member whose new incarnation joins leaves its position and is appended.
func TestViewRejoin(t *testing.T) {
	v, _ := initialView(ids(0, 1, 2), 4)
	w, err := v.apply(MakeEpoch(2, 0), ids(1), []Joiner{{1, 99}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.members, ids(0, 2, 1)) || w.inc(1) != 99 {
		t.Fatalf("rejoin gave %v inc %d", w.members, w.inc(1))
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
