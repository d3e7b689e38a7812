package chaos

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// The time to recover runs from each kill to the last survivor's view
// without the victim: never before the kill, so never negative, whatever
// the run's result time against the baseline.
func TestRecoveryTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ids := func(ns ...core.NodeID) []core.NodeID { return ns }
	views := map[core.NodeID][]viewAt{
		0: {{ids(0, 1, 2, 3), at(0)}, {ids(0, 2, 3), at(40)}, {ids(0, 3), at(90)}},
		2: {{ids(0, 1, 2, 3), at(0)}, {ids(0, 2, 3), at(55)}},
		3: {{ids(0, 1, 2, 3), at(0)}, {ids(0, 2, 3), at(50)}, {ids(0, 3), at(95)}},
	}
	cases := []struct {
		name     string
		killedAt map[int]time.Time
		want     time.Duration
		ok       bool
	}{
		{"one kill", map[int]time.Time{1: at(10)}, 45 * time.Millisecond, true},
		// Rank 2 is a victim too: it has no say on rank 1's exclusion.
		{"two kills, the longest", map[int]time.Time{1: at(10), 2: at(60)}, 40 * time.Millisecond, true},
		{"no survivor excluded the victim", map[int]time.Time{3: at(10)}, 0, false},
		{"no kill", nil, 0, false},
	}
	for _, c := range cases {
		got, ok := recoveryTime(views, c.killedAt, 4)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// The totals say that some kills did not happen only when some did not.
func TestPrintTotals(t *testing.T) {
	run := func(killed ...bool) Result {
		x := Result{Index: 1, Correct: true, Result: 90 * time.Millisecond, Cost: -5 * time.Millisecond,
			Recover: 120 * time.Millisecond, Recovered: true}
		for i, k := range killed {
			x.Planned = append(x.Planned, Kill{Rank: i + 1, At: time.Millisecond})
			x.Killed = append(x.Killed, k)
		}
		return x
	}
	for _, c := range []struct {
		runs []Result
		want string
	}{
		{[]Result{run(true, true), run(true)}, "3 kills planned, 3 ranks killed; time to recover: median 120 ms, max 120 ms; cost: median -5 ms\n"},
		{[]Result{run(true, false), run(true)}, "3 kills planned, 2 ranks killed (the other came after its rank had ended);"},
	} {
		var b bytes.Buffer
		Report{N: 4, Runs: c.runs}.Print(&b)
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("got\n%s\nwant %q in it", b.String(), c.want)
		}
	}
}

// A run with spares kills 1 to S distinct processes of the N+S, in time
// order, the same for the same seed.
func TestPlanSpares(t *testing.T) {
	const n, s, window = 8, 2, time.Second
	counts := map[int]bool{}
	for seed := uint64(1); seed <= 200; seed++ {
		kills := PlanSpares(seed, n, s, window)
		counts[len(kills)] = true
		if len(kills) < 1 || len(kills) > s {
			t.Fatalf("seed %d: %d kills, want 1 to %d", seed, len(kills), s)
		}
		seen := map[int]bool{}
		for i, k := range kills {
			if k.Rank < 0 || k.Rank >= n+s || seen[k.Rank] || k.At < 0 || k.At >= window || (i > 0 && k.At < kills[i-1].At) {
				t.Fatalf("seed %d: kills %v", seed, kills)
			}
			seen[k.Rank] = true
		}
		if again := PlanSpares(seed, n, s, window); !slices.Equal(again, kills) {
			t.Fatalf("seed %d: %v then %v", seed, kills, again)
		}
	}
	if !counts[1] || !counts[s] {
		t.Fatalf("kill counts drawn: %v, want 1 to %d", counts, s)
	}
}
