package place

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// site returns count hosts named site-i with the given capacity, their
// latencies base + i·step (step 0: ties, ranked by name).
func site(name string, count, capacity int, base, step time.Duration) []Host {
	hs := make([]Host, count)
	for i := range hs {
		hs[i] = Host{Name: fmt.Sprintf("%s-%02d", name, i), Latency: base + time.Duration(i)*step, Capacity: capacity}
	}
	return hs
}

// perSite counts processes per site prefix.
func perSite(p Placement) map[string]int {
	m := map[string]int{}
	for _, s := range p.Slots {
		m[s.Host[:strings.Index(s.Host, "-")]]++
	}
	return m
}

// grid is a miniature of the chapter's Grid'5000 experiment (§3.4): the
// submitter's site (near) with 6 hosts of 4 cores, and farther sites.
func grid() []Host {
	var hs []Host
	hs = append(hs, site("near", 6, 4, 100*time.Microsecond, time.Microsecond)...)
	hs = append(hs, site("mid", 4, 2, 10*time.Millisecond, 10*time.Microsecond)...)
	hs = append(hs, site("far", 4, 2, 17*time.Millisecond, 10*time.Microsecond)...)
	return hs
}

// Figure 4's logic: concentrate fills the closest hosts to capacity, and
// goes to the next site only when the closest one is full.
func TestConcentrateFigure4(t *testing.T) {
	hs := grid()
	for _, c := range []struct {
		n    int
		want map[string]int
	}{
		{8, map[string]int{"near": 8}},
		{24, map[string]int{"near": 24}},
		{27, map[string]int{"near": 24, "mid": 3}},
		{34, map[string]int{"near": 24, "mid": 8, "far": 2}},
	} {
		p, err := Place(hs, c.n, 1, Concentrate)
		if err != nil {
			t.Fatal(err)
		}
		if got := perSite(p); !maps.Equal(got, c.want) {
			t.Errorf("concentrate n=%d: per site %v, want %v", c.n, got, c.want)
		}
		for h, k := range p.PerHost() {
			if k > 4 {
				t.Errorf("host %s got %d processes, capacity 4", h, k)
			}
		}
		// The hosts used are a prefix of the latency ranking, each full
		// but the last.
		ranked := Rank(hs)
		used := p.PerHost()
		for i, h := range ranked[:len(p.Hosts())] {
			if used[h.Name] != h.Capacity && i != len(p.Hosts())-1 {
				t.Errorf("concentrate n=%d: host %s (rank %d) has %d of %d", c.n, h.Name, i, used[h.Name], h.Capacity)
			}
		}
	}
}

// Figure 5's logic: spread puts one process per host, closest first; once
// every host has one, a second round starts from the closest (the "stair"
// of Figure 5(b)), skipping hosts that are full.
func TestSpreadFigure5(t *testing.T) {
	hs := grid() // 14 hosts, 40 slots
	p, err := Place(hs, 10, 1, Spread)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := perSite(p), map[string]int{"near": 6, "mid": 4}; !maps.Equal(got, want) {
		t.Errorf("spread n=10: %v, want %v (one per host, closest first)", got, want)
	}
	for h, k := range p.PerHost() {
		if k != 1 {
			t.Errorf("spread n=10: host %s has %d processes", h, k)
		}
	}
	p, err = Place(hs, 17, 1, Spread)
	if err != nil {
		t.Fatal(err)
	}
	ranked := Rank(hs)
	for i, h := range ranked {
		want := 1
		if i < 3 {
			want = 2 // the second round starts at the closest hosts
		}
		if got := p.PerHost()[h.Name]; got != want {
			t.Errorf("spread n=17: %s (rank %d) has %d, want %d", h.Name, i, got, want)
		}
	}
	// 40 processes use every slot: near hosts 4 each, the others 2.
	p, err = Place(hs, 40, 1, Spread)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if got := p.PerHost()[h.Name]; got != h.Capacity {
			t.Errorf("spread n=40: %s has %d, capacity %d", h.Name, got, h.Capacity)
		}
	}
}

// Equal latencies are ranked by name: the placement does not depend on the
// order the hosts answered in.
func TestTiesAreDeterministic(t *testing.T) {
	hs := site("h", 5, 2, time.Millisecond, 0)
	rev := slices.Clone(hs)
	slices.Reverse(rev)
	for _, s := range []Strategy{Spread, Concentrate} {
		a, err1 := Place(hs, 7, 1, s)
		b, err2 := Place(rev, 7, 1, s)
		if err1 != nil || err2 != nil || !slices.Equal(a.Slots, b.Slots) {
			t.Errorf("%v: placements differ with the hosts' order: %v vs %v", s, a.Slots, b.Slots)
		}
		if a.Slots[0].Host != "h-00" {
			t.Errorf("%v: first process on %s, want h-00 (name order on ties)", s, a.Slots[0].Host)
		}
	}
}

func TestTooFewAndBadRequests(t *testing.T) {
	hs := grid()
	_, err := Place(hs, 41, 1, Spread)
	if !errors.Is(err, ErrTooFew) || !strings.Contains(err.Error(), "40 slots on 14 hosts") {
		t.Errorf("41 processes on 40 slots: %v", err)
	}
	if _, err := Place(hs, 20, 3, Concentrate); !errors.Is(err, ErrTooFew) {
		t.Errorf("60 processes (20×3) on 40 slots: %v", err)
	}
	if _, err := Place(nil, 1, 1, Spread); !errors.Is(err, ErrTooFew) {
		t.Errorf("no host: %v", err)
	}
	for _, c := range []struct {
		hosts []Host
		n, r  int
		s     Strategy
	}{
		{hs, 0, 1, Spread},
		{hs, 1, 0, Spread},
		{hs, 1, 1, 0},
		{[]Host{{Name: "a", Capacity: -1}}, 1, 1, Spread},
		{[]Host{{Name: "a", Capacity: 1}, {Name: "a", Capacity: 1}}, 1, 1, Spread},
	} {
		if _, err := Place(c.hosts, c.n, c.r, c.s); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Place(%v, %d, %d, %v): %v, want ErrBadRequest", c.hosts, c.n, c.r, c.s, err)
		}
	}
	if _, err := ParseStrategy("random"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("ParseStrategy(random): %v", err)
	}
}

// Replicas of one rank go to distinct hosts when the slots allow, under
// both strategies, and the placement says which ranks could not be
// separated.
func TestReplicasOnDistinctHosts(t *testing.T) {
	hs := grid()
	for _, s := range []Strategy{Spread, Concentrate} {
		p, err := Place(hs, 6, 2, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Shared) != 0 {
			t.Errorf("%v: ranks %v share a host though 14 hosts are free", s, p.Shared)
		}
		hostsOf := map[int][]string{}
		for _, sl := range p.Slots {
			if slices.Contains(hostsOf[sl.Rank], sl.Host) {
				t.Errorf("%v: rank %d has two replicas on %s", s, sl.Rank, sl.Host)
			}
			hostsOf[sl.Rank] = append(hostsOf[sl.Rank], sl.Host)
		}
	}
	// One host of 4 slots: 2 ranks × 2 replicas must share, and say so.
	p, err := Place([]Host{{Name: "only", Latency: time.Millisecond, Capacity: 4}}, 2, 2, Spread)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Shared, []int{0, 1}) {
		t.Errorf("one host: Shared = %v, want [0 1]", p.Shared)
	}
}

// Over random hosts, capacities, ranks and replicas, under both
// strategies: every process has a slot of a host that offered it, and
// the replicas of a rank share a host only when no placement could keep
// them apart (a host holds at most one replica of each rank:
// Σ min(capacity of h, n) < n·r); the placement of 3
// ranks × 2 replicas on 3 hosts of 2 slots is one that a greedy choice
// gets wrong.
func TestReplicasApartWhenPossible(t *testing.T) {
	p, err := Place([]Host{{Name: "a", Capacity: 2}, {Name: "b", Capacity: 2}, {Name: "c", Capacity: 2}}, 3, 2, Spread)
	if err != nil || len(p.Shared) != 0 {
		t.Fatalf("3 × 2 on 3 hosts of 2: %v, shared %v", err, p.Shared)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for trial := range 2000 {
		var hs []Host
		for h := range 1 + rng.IntN(6) {
			hs = append(hs, Host{Name: fmt.Sprintf("h%d", h), Latency: time.Duration(rng.IntN(5)), Capacity: rng.IntN(6)})
		}
		n, r := 1+rng.IntN(6), 1+rng.IntN(4)
		for _, s := range []Strategy{Spread, Concentrate} {
			p, err := Place(hs, n, r, s)
			if errors.Is(err, ErrTooFew) {
				continue
			}
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			capacity, room := map[string]int{}, 0
			for _, h := range hs {
				capacity[h.Name] = h.Capacity
				room += min(h.Capacity, n)
			}
			for h, c := range p.PerHost() {
				if c > capacity[h] {
					t.Fatalf("trial %d %v: %d processes on %s, its capacity %d", trial, s, c, h, capacity[h])
				}
			}
			hostsOf := map[int]map[string]bool{}
			sharing := map[int]bool{}
			seen := map[[2]int]bool{}
			for _, sl := range p.Slots {
				if seen[[2]int{sl.Rank, sl.Replica}] {
					t.Fatalf("trial %d: replica %d of rank %d placed twice", trial, sl.Replica, sl.Rank)
				}
				seen[[2]int{sl.Rank, sl.Replica}] = true
				if hostsOf[sl.Rank] == nil {
					hostsOf[sl.Rank] = map[string]bool{}
				}
				if hostsOf[sl.Rank][sl.Host] {
					sharing[sl.Rank] = true
				}
				hostsOf[sl.Rank][sl.Host] = true
			}
			if len(seen) != n*r {
				t.Fatalf("trial %d: %d processes placed, want %d", trial, len(seen), n*r)
			}
			if room >= n*r && len(p.Shared) > 0 {
				t.Fatalf("trial %d %v: hosts %v, %d × %d: ranks %v share a host though they need not", trial, s, hs, n, r, p.Shared)
			}
			for i := range n {
				if sharing[i] != slices.Contains(p.Shared, i) {
					t.Fatalf("trial %d: rank %d shares a host: %v, listed in Shared %v", trial, i, sharing[i], p.Shared)
				}
			}
		}
	}
}

// Overbooking asks for more hosts than needed, and Plan releases the
// tokens of the hosts the placement leaves unused.
func TestOverbookAndRelease(t *testing.T) {
	if got := Overbook(12, 4); got != 3+1 {
		t.Errorf("Overbook(12, 4) = %d, want 4", got)
	}
	if got := Overbook(40, 2); got != 20+10 {
		t.Errorf("Overbook(40, 2) = %d, want 30", got)
	}
	if got := Overbook(0, 2); got != 0 {
		t.Errorf("Overbook(0, 2) = %d", got)
	}
	p, release, err := Plan(grid(), 8, 1, Concentrate)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hosts()) != 2 || len(release) != 12 || !slices.Contains(release, "far-03") || slices.Contains(release, "near-00") {
		t.Errorf("concentrate 8: uses %v, releases %v", p.Hosts(), release)
	}
}
