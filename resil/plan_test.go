package resil

import (
	"errors"
	"slices"
	"testing"
)

func TestRemap(t *testing.T) {
	cases := []struct {
		name       string
		old, live  []int
		want       []int
		wantOrphan []int
	}{
		{"no failure", []int{0, 1, 2}, []int{0, 1, 2, 3}, []int{0, 1, 2}, nil},
		{"rank 1 takes the spare", []int{0, 1, 2}, []int{0, 2, 3}, []int{0, 3, 2}, nil},
		{"failed ranks in rank order take spares in process order", []int{0, 1, 2, 3}, []int{1, 3, 5, 6}, []int{5, 1, 6, 3}, nil},
		{"a dead spare is skipped", []int{0, 1, 2}, []int{0, 1, 4}, []int{0, 1, 4}, nil},
		{"a second takeover", []int{0, 3, 2}, []int{0, 2, 4}, []int{0, 4, 2}, nil},
		{"no spare left", []int{0, 1, 2}, []int{0, 1}, nil, []int{2}},
		{"one spare for two", []int{0, 1, 2}, []int{0, 3}, nil, []int{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := remap(c.old, c.live)
			var ns *NoSpareError
			switch {
			case c.wantOrphan != nil:
				if !errors.As(err, &ns) || !slices.Equal(ns.Ranks, c.wantOrphan) || !errors.Is(err, ErrNoSpare) {
					t.Fatalf("got %v, %v; want NoSpareError for ranks %v", got, err, c.wantOrphan)
				}
			case err != nil || !slices.Equal(got, c.want):
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// With no process left for some ranks, the run that continues on fewer
// ranks keeps every takeover it can, drops the rest and numbers the
// others again in their order.
func TestAssignAndDropOrphans(t *testing.T) {
	cases := []struct {
		name                 string
		old, live            []int
		wantMap, wantNewRank []int
		wantOrphans          []int
	}{
		{"no failure", []int{0, 1, 2}, []int{0, 1, 2}, []int{0, 1, 2}, []int{0, 1, 2}, nil},
		{"the last rank dropped", []int{0, 1, 2}, []int{0, 1}, []int{0, 1}, []int{0, 1, -1}, []int{2}},
		{"a middle rank dropped", []int{0, 1, 2, 3}, []int{0, 2, 3}, []int{0, 2, 3}, []int{0, -1, 1, 2}, []int{1}},
		{"one spare for two: the lower rank takes it", []int{0, 1, 2, 3}, []int{0, 3, 4}, []int{0, 4, 3}, []int{0, 1, -1, 2}, []int{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next, orphans := assign(c.old, c.live)
			if !slices.Equal(orphans, c.wantOrphans) {
				t.Fatalf("orphans %v, want %v", orphans, c.wantOrphans)
			}
			m, nr := dropOrphans(next)
			if !slices.Equal(m, c.wantMap) || !slices.Equal(nr, c.wantNewRank) {
				t.Fatalf("map %v, new ranks %v; want %v, %v", m, nr, c.wantMap, c.wantNewRank)
			}
		})
	}
}

// A dropped rank's slot goes to the rank of the nearest slot below it that
// kept its rank, else above; the others follow their rank's new number.
func TestAdopt(t *testing.T) {
	cases := []struct {
		name            string
		holder, newRank []int
		want            []int
	}{
		{"nothing dropped", []int{0, 1, 2}, []int{0, 1, 2}, []int{0, 1, 2}},
		{"the middle rank", []int{0, 1, 2}, []int{0, -1, 1}, []int{0, 0, 1}},
		{"rank 0: the slot above", []int{0, 1, 2}, []int{-1, 0, 1}, []int{0, 0, 1}},
		{"two in a row", []int{0, 1, 2, 3}, []int{0, -1, -1, 1}, []int{0, 0, 0, 1}},
		// A second shrink of an epoch taken by 4 ranks, now held by 3
		// (rank 0 holds slots 0 and 1): rank 0 dropped, its slots go up.
		{"a held slot dropped again", []int{0, 0, 1, 2}, []int{-1, 0, 1}, []int{0, 0, 0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := adopt(c.holder, c.newRank); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

// After a shrink, a slot's keepers are the rank that restores it and that
// rank's buddies: rank 0 of 3, restoring slots 0 and 1 of 4, keeps both,
// and rank 1 (its buddy) keeps copies of both.
func TestSlotKeepers(t *testing.T) {
	keep, keptBy := slotKeepers(1, oneHost(3), []int{0, 0, 1, 2})
	want := [][]int{{0, 1}, {0, 1}, {1, 2}, {2, 0}}
	for x := range want {
		if !slices.Equal(keep[x], want[x]) {
			t.Errorf("slot %d: keepers %v, want %v", x, keep[x], want[x])
		}
	}
	if !slices.Equal(keptBy[1], []int{0, 1}) || !slices.Equal(keptBy[0], []int{3}) {
		t.Errorf("kept by: %v", keptBy)
	}
}

// inv builds an inventory of n ranks: epoch e holding ranks committed,
// pending epoch p holding ranks pending.
func inv(n, e int, committed []int, p int, pending []int) inventory {
	in := inventory{Epoch: e, Pending: p, committed: make([]bool, n), pending: make([]bool, n)}
	if e > 0 {
		in.Width = n
	}
	for _, x := range committed {
		in.committed[x] = true
	}
	for _, x := range pending {
		in.pending[x] = true
	}
	return in
}

func TestInventoryRoundTrip(t *testing.T) {
	in := inv(5, 7, []int{0, 4}, 8, []int{4, 3})
	in.Width = 4
	out, err := unmarshalInventory(in.marshal(5), 5)
	if err != nil || out.Epoch != 7 || out.Width != 4 || out.Pending != 8 || !slices.Equal(out.committed, in.committed) || !slices.Equal(out.pending, in.pending) {
		t.Fatalf("got %+v, %v; want %+v", out, err, in)
	}
	if _, err := unmarshalInventory(make([]byte, 20), 5); err == nil {
		t.Fatal("a short inventory decoded")
	}
}

func FuzzUnmarshalInventory(f *testing.F) {
	f.Add(inv(3, 1, []int{1}, 2, []int{0}).marshal(3), 3)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<12 {
			return
		}
		in, err := unmarshalInventory(b, n)
		if err == nil && string(in.marshal(n)[:16]) != string(b[:16]) {
			t.Fatalf("epochs do not round-trip")
		}
	})
}

// Four ranks, one buddy each (rank x's copy at x+1). Ranks 0..3 on
// processes 0..3; process 1 failed; a spare (survivor index 3, process 4)
// takes rank 1 and needs its own state (from rank 2, its buddy, index 1)
// and rank 0's copy (from rank 0 itself, index 0).
func TestPlanTakeover(t *testing.T) {
	const n, k, e = 4, 1, 3
	invs := []inventory{
		inv(n, e, []int{0, 3}, 0, nil), // process 0: rank 0 and rank 3's copy
		inv(n, e, []int{2, 1}, 0, nil), // process 2
		inv(n, e, []int{3, 2}, 0, nil), // process 3
		inv(n, 0, nil, 0, nil),         // process 4: the spare
	}
	procOf := []int{0, 3, 1, 2}
	keep, _ := keeperTable(k, oneHost(n))
	got, err := plan(invs, procOf, e, keep, keep)
	want := []transfer{{Rank: 0, From: 0, To: 3}, {Rank: 1, From: 1, To: 3}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
}

// A survivor that did not learn of the commit still holds the epoch as
// pending; the recovery goes to the newest committed epoch and finds it
// there.
func TestPlanPendingEpoch(t *testing.T) {
	const n, k = 2, 1
	invs := []inventory{
		inv(n, 5, []int{0, 1}, 0, nil),         // knows epoch 5 committed
		inv(n, 4, []int{0, 1}, 5, []int{0, 1}), // has 5 pending
	}
	if e, w := restoreEpoch(invs); e != 5 || w != n {
		t.Fatalf("restore epoch %d of %d ranks, want 5 of %d", e, w, n)
	}
	keep, _ := keeperTable(k, oneHost(n))
	got, err := plan(invs, []int{0, 1}, 5, keep, keep)
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v; want no transfer", got, err)
	}
}

// A rank and its only buddy lost at once: the state of rank 1 is held by
// no survivor.
func TestPlanStateLost(t *testing.T) {
	const n, k, e = 4, 1, 2
	invs := []inventory{
		inv(n, e, []int{0, 3}, 0, nil), // process 0
		inv(n, e, []int{3, 2}, 0, nil), // process 3
		inv(n, 0, nil, 0, nil),         // spare
		inv(n, 0, nil, 0, nil),         // spare
	}
	keep, _ := keeperTable(k, oneHost(n))
	_, err := plan(invs, []int{0, 2, 3, 1}, e, keep, keep)
	var lost *StateLostError
	if !errors.As(err, &lost) || lost.Rank != 1 || lost.Epoch != e || !slices.Equal(lost.Keepers, []int{1, 2}) || !errors.Is(err, ErrStateLost) {
		t.Fatalf("got %v, want the state of rank 1 at epoch 2 lost with ranks [1 2]", err)
	}
}

// Before any commit there is nothing to move.
func TestPlanEpochZero(t *testing.T) {
	keep, _ := keeperTable(1, oneHost(2))
	got, err := plan([]inventory{inv(2, 0, nil, 1, []int{0})}, []int{0, 0}, 0, keep, keep)
	if err != nil || got != nil {
		t.Fatalf("got %v, %v", got, err)
	}
}

func oneHost(n int) []string { return make([]string, n) }

// Buddies go first to hosts that hold no copy yet, then off the rank's
// host, then to the next ranks; on one host they are the next k ranks.
func TestKeepers(t *testing.T) {
	cases := []struct {
		name  string
		x, k  int
		hosts []string
		want  []int
	}{
		{"one host", 2, 2, oneHost(5), []int{2, 3, 4}},
		{"wraps around", 4, 2, oneHost(5), []int{4, 0, 1}},
		{"blocks of two per host: the same place on the next host", 1, 1, []string{"a", "a", "b", "b", "c", "c"}, []int{1, 3}},
		{"blocks: two buddies on two other hosts", 1, 2, []string{"a", "a", "b", "b", "c", "c"}, []int{1, 3, 4}},
		{"more buddies than hosts: off the rank's host first", 0, 3, []string{"a", "a", "b", "b"}, []int{0, 2, 3, 1}},
		{"round-robin placement", 0, 1, []string{"a", "b", "a", "b"}, []int{0, 3}},
		{"a spare on the rank's host after a takeover", 1, 1, []string{"a", "a", "a", "b"}, []int{1, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := keepers(c.x, c.k, c.hosts); !slices.Equal(got, c.want) {
				t.Fatalf("keepers(%d, %d, %v) = %v, want %v", c.x, c.k, c.hosts, got, c.want)
			}
		})
	}
	// Blocks and round-robin placements: every rank keeps one copy.
	for _, hosts := range [][]string{{"a", "a", "b", "b"}, {"a", "b", "a", "b"}, {"a", "a", "a", "b", "b", "b"}} {
		_, keptBy := keeperTable(1, hosts)
		for r, xs := range keptBy {
			if len(xs) != 1 {
				t.Errorf("hosts %v: rank %d keeps copies of %v, want one rank's", hosts, r, xs)
			}
		}
	}
}
