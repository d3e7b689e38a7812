package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// reachWorld runs the direct-link heartbeat detector (50 ms period, 200 ms
// timeout) over 4 nodes under plan, with a ReachableNotFailed of settle.
func reachWorld(t *testing.T, plan Plan, settle time.Duration) (*ReachableNotFailed, error) {
	t.Helper()
	w := New(Config{Seed: 7, Network: Uniform(100*time.Microsecond, 2*ms)})
	for range 4 {
		w.Add(newHeartbeat(4, 50*ms, 200*ms))
	}
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	c := NewReachableNotFailed(settle)
	w.AddChecker(c)
	w.SetReplay("go test ./sim -run TestReachableNotFailed -seed=%d")
	return c, w.RunChecked(3 * time.Second)
}

// TestReachableNotFailed: a detector that trusts the direct link alone
// declares a node failed across a cut (both ways or one way) although a
// path through a third node remains: a violation that names both paths.
// Cut off from everyone, or reported less than Settle after a path came
// back, the node may be declared.
func TestReachableNotFailed(t *testing.T) {
	for _, c := range []struct {
		name      string
		plan      Plan
		settle    time.Duration
		violation bool
	}{
		{"cut both ways", Plan{Cut{A: 0, B: 1, At: time.Second}}, 100 * ms, true},
		{"cut one way", Plan{Cut{A: 1, B: 0, At: time.Second, OneWay: true}}, 100 * ms, true},
		{"every link of n1 cut", Plan{Cut{A: 0, B: 1, At: time.Second}, Cut{A: 2, B: 1, At: time.Second}, Cut{A: 3, B: 1, At: time.Second}}, 100 * ms, false},
		{"no way in to n1", Plan{Cut{A: 0, B: 1, At: time.Second, OneWay: true}, Cut{A: 2, B: 1, At: time.Second, OneWay: true}, Cut{A: 3, B: 1, At: time.Second, OneWay: true}}, 100 * ms, false},
		{"partition", Plan{Partition{Groups: [][]core.NodeID{{0, 1}}, At: time.Second}}, 100 * ms, false},
	} {
		chk, err := reachWorld(t, c.plan, c.settle)
		if c.violation {
			if !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), "reachable-not-failed") || !strings.Contains(err.Error(), "path") {
				t.Errorf("%s: err = %v, want a reachable-not-failed violation naming the paths", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if chk.Checked == 0 {
			t.Errorf("%s: no report checked", c.name)
		}
	}
}

// TestReachableNotFailedSettle: a report made less than Settle after a
// path came back is not judged against it; Settle after, it is.
func TestReachableNotFailedSettle(t *testing.T) {
	for _, c := range []struct {
		settle    time.Duration
		violation bool
	}{{time.Second, false}, {40 * ms, true}} {
		w := New(Config{Seed: 1, Network: Constant(ms)})
		for range 4 {
			w.Add(nop{})
		}
		if err := cutOff(time.Second, 1100*ms).Apply(w, nil); err != nil {
			t.Fatal(err)
		}
		chk := NewReachableNotFailed(c.settle)
		w.AddChecker(chk)
		w.At(1150*ms, func() { w.observe(Obs{Kind: ObsEmit, At: w.Now(), Node: 0, Event: core.Failed{Node: 1}}) })
		w.RunUntil(2 * time.Second)
		if err := w.Err(); (err != nil) != c.violation || chk.Checked != 1 {
			t.Errorf("settle %v: err = %v, %d checked; want violation %v, 1 checked", c.settle, err, chk.Checked, c.violation)
		}
	}
}

// TestReachableNotFailedJudged: a report Judged turns away is counted in
// Outside, not judged.
func TestReachableNotFailedJudged(t *testing.T) {
	w := New(Config{Seed: 7, Network: Uniform(100*time.Microsecond, 2*ms)})
	for range 4 {
		w.Add(newHeartbeat(4, 50*ms, 200*ms))
	}
	if err := (Plan{Cut{A: 0, B: 1, At: time.Second}}).Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	c := NewReachableNotFailed(100 * ms)
	c.Judged = func(by, about core.NodeID) bool { return !(by == 0 && about == 1 || by == 1 && about == 0) }
	w.AddChecker(c)
	if err := w.RunChecked(3 * time.Second); err != nil || c.Outside != 2 || c.Checked != 0 {
		t.Fatalf("err = %v, %d outside, %d checked; want no violation, the 2 reports outside", err, c.Outside, c.Checked)
	}
}

// TestReachableNotFailedRelays: a path through a node Relays refuses does
// not count.
func TestReachableNotFailedRelays(t *testing.T) {
	for _, c := range []struct {
		relays    func(by, id core.NodeID) bool
		violation bool
	}{{nil, true}, {func(_, id core.NodeID) bool { return id == 0 || id == 1 }, false}} {
		w := New(Config{Seed: 7, Network: Uniform(100*time.Microsecond, 2*ms)})
		for range 4 {
			w.Add(newHeartbeat(4, 50*ms, 200*ms))
		}
		if err := (Plan{Cut{A: 0, B: 1, At: time.Second}}).Apply(w, nil); err != nil {
			t.Fatal(err)
		}
		chk := NewReachableNotFailed(100 * ms)
		chk.Relays = c.relays
		w.AddChecker(chk)
		if err := w.RunChecked(3 * time.Second); (err != nil) != c.violation {
			t.Errorf("relays %v: err = %v, want violation %v", c.relays != nil, err, c.violation)
		}
	}
}

// TestReachableNotFailedLateNode: a node added after the checker has no
// path in the network recorded before it came.
func TestReachableNotFailedLateNode(t *testing.T) {
	w := New(Config{Seed: 1, Network: Constant(ms)})
	for range 3 {
		w.Add(nop{})
	}
	c := NewReachableNotFailed(time.Second)
	w.AddChecker(c)
	w.AddAt(10*ms, nop{})
	w.At(20*ms, func() { w.observe(Obs{Kind: ObsEmit, At: w.Now(), Node: 0, Event: core.Failed{Node: 3}}) })
	w.RunUntil(30 * ms)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
}

// cutOff cuts every link of n1 in [from, until).
func cutOff(from, until time.Duration) Plan {
	return Plan{Cut{A: 0, B: 1, At: from, Until: until}, Cut{A: 2, B: 1, At: from, Until: until}, Cut{A: 3, B: 1, At: from, Until: until}}
}

// TestReachableNotFailedExcluded: exclusions read from other events are
// judged like failures.
func TestReachableNotFailedExcluded(t *testing.T) {
	w := New(Config{Seed: 1, Network: Constant(ms)})
	for range 3 {
		w.Add(nop{})
	}
	c := NewReachableNotFailed(0)
	c.Excluded = func(e core.Event) []core.NodeID {
		if e, ok := e.(core.Suspected); ok {
			return []core.NodeID{e.Node}
		}
		return nil
	}
	w.AddChecker(c)
	if err := (Plan{Cut{A: 0, B: 2, At: 10 * ms, OneWay: true}}).Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.At(20*ms, func() { w.observe(Obs{Kind: ObsEmit, At: w.Now(), Node: 0, Event: core.Suspected{Node: 2}}) })
	w.RunUntil(30 * ms)
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "excluded n2") || !strings.Contains(err.Error(), "n0→n1→n2") {
		t.Fatalf("err = %v, want an exclusion of n2 with path n0→n1→n2", err)
	}
}
