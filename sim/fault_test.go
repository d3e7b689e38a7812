package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim/simtest"
)

const ms = time.Millisecond

func idle(core.NodeID) core.Machine { return &script{} }

func TestPlanApplyRejectsBadFaults(t *testing.T) {
	for _, f := range []Fault{
		Crash{Node: 5, At: ms},
		Crash{Node: 1, At: -ms},
		Recover{Node: 1, At: ms},
		CrashRandom{K: -1},
		Cut{A: 0, B: 9},
		Cut{A: 0, B: 1, At: 5 * ms, Until: 2 * ms},
		Partition{Groups: [][]core.NodeID{{0, 1}, {1, 2}}},
		Partition{Groups: [][]core.NodeID{{7}}},
		Loss{P: 1.5, From: 0, Until: ms},
		Loss{P: 0.5, From: ms, Until: 0},
		DelaySpike{Extra: -ms, Until: ms},
		DelaySpike{Extra: ms, Until: ms, B: []core.NodeID{1}},
		nil,
	} {
		w, _ := scripted(Constant(ms), 3)
		before := w.Pending()
		// Recover with no factory is bad; the others are bad with or without one.
		var factory Factory
		if _, ok := f.(Recover); !ok {
			factory = idle
		}
		err := Plan{Crash{Node: 0, At: ms}, f}.Apply(w, factory)
		if !errors.Is(err, ErrBadFault) {
			t.Errorf("Apply(%v) = %v, want ErrBadFault", f, err)
		}
		if w.Pending() != before || len(w.Plan()) != 0 {
			t.Errorf("Apply(%v) scheduled something despite the error", f)
		}
	}
}

func TestFaultStrings(t *testing.T) {
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Crash{Node: 3, At: 1500 * ms}, "crash n3 at 1.5s"},
		{Recover{Node: 3, At: 2 * time.Second}, "recover n3 at 2s"},
		{CrashRandom{K: 4, At: time.Second}, "crash 4 random at 1s"},
		{Cut{A: 1, B: 2, At: time.Second}, "cut n1-n2 at 1s"},
		{Cut{A: 1, B: 2, At: time.Second, Until: 3 * time.Second}, "cut n1-n2 in [1s,3s)"},
		{Cut{A: 2, B: 1, At: time.Second, OneWay: true}, "cut n2->n1 at 1s"},
		{Cut{A: 1, B: 2, At: time.Second, Until: 3 * time.Second, OneWay: true}, "cut n1->n2 in [1s,3s)"},
		{Heal{A: 1, B: 2, At: time.Second}, "heal n1-n2 at 1s"},
		{Partition{Groups: [][]core.NodeID{{4, 1, 2, 3, 9}}, At: time.Second, Until: 2 * time.Second}, "partition {n1-n4,n9 (5)}|rest in [1s,2s)"},
		{Loss{P: 0.25, From: 0, Until: time.Second}, "loss 25% in [0s,1s)"},
		{DelaySpike{Extra: 50 * ms, From: time.Second, Until: 2 * time.Second}, "delay +50ms in [1s,2s)"},
		{DelaySpike{Extra: ms, From: 0, Until: ms, A: []core.NodeID{2}}, "delay +1ms in [0s,1ms) around {n2 (1)}"},
		{HealAll{At: 10 * time.Second}, "heal all at 10s"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	var big []core.NodeID
	for i := range 100 {
		big = append(big, core.NodeID(2*i))
	}
	if s := nodeSet(big); len(s) > 120 || !strings.Contains(s, "(100)") || !strings.Contains(s, "…88 ranges…") {
		t.Errorf("long node set printed as %q", s)
	}
}

func TestCrashAndRecoverFaults(t *testing.T) {
	w, nodes := scripted(Constant(ms), 3)
	restarted := &script{}
	plan := Plan{
		Crash{Node: 1, At: 10 * ms},
		Recover{Node: 1, At: 20 * ms, Restart: func() core.Machine { return restarted }},
		Recover{Node: 2, At: 20 * ms}, // alive: left alone
		Crash{Node: 2, At: 30 * ms},
		Recover{Node: 2, At: 40 * ms}, // from the factory
	}
	var built []core.NodeID
	factory := func(id core.NodeID) core.Machine { built = append(built, id); return &script{} }
	if err := plan.Apply(w, factory); err != nil {
		t.Fatal(err)
	}
	alive := func() string { return fmt.Sprint(w.Alive(0), w.Alive(1), w.Alive(2)) }
	for _, step := range []struct {
		at   time.Duration
		want string
	}{{15 * ms, "true false true"}, {25 * ms, "true true true"}, {35 * ms, "true true false"}, {45 * ms, "true true true"}} {
		w.RunUntil(step.at)
		if got := alive(); got != step.want {
			t.Fatalf("at %v alive %s, want %s", step.at, got, step.want)
		}
	}
	if w.Node(1) != restarted || w.Node(2) == core.Machine(nodes[2]) || !slices.Equal(built, []core.NodeID{2}) {
		t.Fatalf("restart machines wrong: factory built %v", built)
	}
	want := []string{"10ms: crash n1", "20ms: recover n1", "20ms: recover n2: already alive", "30ms: crash n2", "40ms: recover n2"}
	if got := w.FaultLog(); !slices.Equal(got, want) {
		t.Fatalf("fault log %q, want %q", got, want)
	}
}

func TestCrashRandomDrawsFromWorld(t *testing.T) {
	victims := func(seed uint64, k int) []core.NodeID {
		w := New(Config{Seed: seed})
		for range 10 {
			w.Add(&script{})
		}
		if err := (Plan{Crash{Node: 0, At: ms}, CrashRandom{K: k, At: 2 * ms}}).Apply(w, nil); err != nil {
			t.Fatal(err)
		}
		w.RunUntil(time.Second)
		var dead []core.NodeID
		for i := range 10 {
			if !w.Alive(core.NodeID(i)) {
				dead = append(dead, core.NodeID(i))
			}
		}
		return dead
	}
	a, b := victims(7, 3), victims(7, 3)
	if len(a) != 4 || !slices.Equal(a, b) || a[0] != 0 {
		t.Fatalf("seed 7: crashed %v then %v, want n0 plus the same 3", a, b)
	}
	differ := false
	for s := uint64(8); s < 20 && !differ; s++ {
		differ = !slices.Equal(victims(s, 3), a)
	}
	if !differ {
		t.Fatal("12 other seeds all chose the same victims")
	}
	if all := victims(7, 50); len(all) != 10 {
		t.Fatalf("CrashRandom beyond the live count crashed %d of 10", len(all))
	}
}

// delivered runs sends from node 0 to node 1 at the given times and reports
// which arrived.
func delivered(t *testing.T, net Network, plan Plan, at ...time.Duration) []bool {
	t.Helper()
	w, nodes := scripted(net, 3)
	for i, x := range at {
		nodes[0].sends = append(nodes[0].sends, send{at: x, to: 1, seq: i})
	}
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(time.Second)
	got := make([]bool, len(at))
	for _, a := range nodes[1].got {
		got[a.seq] = true
	}
	return got
}

func TestPartitionWindowsCombine(t *testing.T) {
	plan := Plan{
		Partition{Groups: [][]core.NodeID{{0}}, At: 10 * ms, Until: 30 * ms},    // 0 | 1 2
		Partition{Groups: [][]core.NodeID{{0, 1}}, At: 20 * ms, Until: 40 * ms}, // 0 1 | 2
	}
	// Between 30 and 40 ms only the second holds, which keeps 0 and 1 together.
	got := delivered(t, Constant(ms), plan, 5*ms, 15*ms, 25*ms, 35*ms, 45*ms)
	if want := []bool{true, false, false, true, true}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	w, _ := scripted(Constant(ms), 3)
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(25 * ms)
	if w.connected(0, 1) || w.connected(1, 2) || w.connected(0, 2) {
		t.Fatal("at 25ms the meet of both partitions should isolate every node")
	}
	w.RunUntil(35 * ms)
	if !w.connected(0, 1) || w.connected(1, 2) {
		t.Fatal("at 35ms only the second partition should hold")
	}
	w.RunUntil(45 * ms)
	if w.group != nil {
		t.Fatal("partitions not removed after both ended")
	}
}

func TestCutWindowsAndHeal(t *testing.T) {
	plan := Plan{
		Cut{A: 0, B: 1, At: 10 * ms, Until: 30 * ms},
		Cut{A: 1, B: 0, At: 20 * ms, Until: 40 * ms},
		Cut{A: 0, B: 1, At: 50 * ms},
		Heal{A: 1, B: 0, At: 60 * ms},
	}
	got := delivered(t, Constant(ms), plan, 5*ms, 15*ms, 35*ms, 45*ms, 55*ms, 65*ms)
	if want := []bool{true, false, false, true, false, true}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

func TestLossWindows(t *testing.T) {
	plan := Plan{Loss{P: 1, From: 10 * ms, Until: 20 * ms}, Loss{P: 0, From: 15 * ms, Until: 30 * ms}}
	got := delivered(t, Constant(ms), plan, 5*ms, 12*ms, 17*ms, 25*ms)
	if want := []bool{true, false, false, true}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v (overlapping windows: the largest loss applies)", got, want)
	}
}

func TestDelaySpikeFaultAndHealAll(t *testing.T) {
	w, nodes := scripted(Constant(ms), 3)
	nodes[0].sends = []send{{at: 5 * ms, to: 1, seq: 1}, {at: 15 * ms, to: 1, seq: 2}, {at: 35 * ms, to: 1, seq: 3}, {at: 55 * ms, to: 1, seq: 4}}
	plan := Plan{
		DelaySpike{Extra: 10 * ms, From: 10 * ms, Until: 60 * ms},
		Partition{Groups: [][]core.NodeID{{2}}, At: 10 * ms},
		Cut{A: 0, B: 2, At: 10 * ms},
		Loss{P: 0.5, From: 20 * ms, Until: 100 * ms},
		HealAll{At: 30 * ms},
		DelaySpike{Extra: 20 * ms, From: 50 * ms, Until: 60 * ms},
	}
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(31 * ms)
	if w.group != nil || len(w.cuts) != 0 || w.loss != 0 {
		t.Fatalf("HealAll left partition %v cuts %v loss %v", w.group, w.cuts, w.loss)
	}
	w.RunUntil(time.Second)
	var got []string
	for _, a := range nodes[1].got {
		got = append(got, fmt.Sprintf("%d@%v", a.seq, a.at))
	}
	// 2 is slowed by the first spike; HealAll ends it at 30 ms; 4 meets only
	// the spike that starts after the heal.
	if want := []string{"1@6ms", "2@26ms", "3@36ms", "4@76ms"}; !slices.Equal(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	if healed := plan.HealedAt(); healed != 30*ms {
		t.Fatalf("HealedAt %v, want 30ms", healed)
	}
}

// TestSwarmPlans checks the generator: reproducible from the seed, within
// its bounds, healed by the horizon, and varied across seeds (swarm testing:
// every kind of fault shows up in some plans and not in others).
func TestSwarmPlans(t *testing.T) {
	const n = 50
	horizon := 20 * time.Second
	opts := DefaultSwarmOptions()
	opts.RecoverProb = 0.5
	opts.Protect = []core.NodeID{0}
	kinds := map[string]int{}
	seeds := simtest.Seeds(t, 200)
	for _, seed := range seeds {
		p := Swarm(seed, n, horizon, opts)
		if p.String() != Swarm(seed, n, horizon, opts).String() {
			t.Fatalf("seed %d: two different plans", seed)
		}
		if last, ok := p[len(p)-1].(HealAll); !ok || last.At != horizon || p.HealedAt() != horizon {
			t.Fatalf("seed %d: plan does not end with heal all at %v:\n%v", seed, horizon, p)
		}
		w := New(Config{Seed: seed})
		for range n {
			w.Add(&script{})
		}
		if err := p.Apply(w, idle); err != nil {
			t.Fatalf("seed %d: generated plan rejected: %v\n%v", seed, err, p)
		}
		crashes := 0
		seen := map[string]bool{}
		for i, f := range p {
			kind := fmt.Sprintf("%T", f)
			seen[kind] = true
			if s := f.Start(); s < opts.Start || s > horizon || (i > 0 && s < p[i-1].Start()) {
				t.Fatalf("seed %d: %v out of order or outside [%v,%v]", seed, f, opts.Start, horizon)
			}
			switch f := f.(type) {
			case Crash:
				crashes++
				if f.Node == 0 {
					t.Fatalf("seed %d: protected node crashed", seed)
				}
			case CrashRandom:
				crashes += f.K
			case Partition:
				if f.Until > horizon || f.Until == 0 {
					t.Fatalf("seed %d: %v not healed by the horizon", seed, f)
				}
			case Cut:
				if f.Until > horizon || f.Until == 0 {
					t.Fatalf("seed %d: %v not healed by the horizon", seed, f)
				}
			case Loss:
				if f.Until > horizon || f.P > opts.MaxLoss {
					t.Fatalf("seed %d: %v out of bounds", seed, f)
				}
			case DelaySpike:
				if f.Until > horizon || f.Extra > opts.MaxSpike || f.Extra <= 0 {
					t.Fatalf("seed %d: %v out of bounds", seed, f)
				}
			}
		}
		if crashes > int(opts.MaxCrashFraction*n) {
			t.Fatalf("seed %d: %d crashes, more than %v of %d", seed, crashes, opts.MaxCrashFraction, n)
		}
		for k := range seen {
			kinds[k]++
		}
	}
	for _, k := range []string{"sim.Crash", "sim.Recover", "sim.Partition", "sim.Cut", "sim.Loss", "sim.DelaySpike"} {
		if kinds[k] == 0 || kinds[k] == len(seeds) {
			t.Errorf("%s appears in %d of %d plans: want some but not all", k, kinds[k], len(seeds))
		}
	}
	opts.Protect = nil
	opts.RecoverProb = 0
	random := 0
	for seed := range uint64(100) {
		for _, f := range Swarm(seed, n, horizon, opts) {
			if _, ok := f.(CrashRandom); ok {
				random++
			}
		}
	}
	if random == 0 {
		t.Error("no plan of 100 used CrashRandom")
	}
}

// TestSwarmClampsOptions: out-of-range options still give valid plans, and
// tiny worlds work.
func TestSwarmClampsOptions(t *testing.T) {
	opts := SwarmOptions{MaxCrashFraction: 5, RecoverProb: -1, MaxLoss: 7, MaxPartitions: 3, MaxCuts: 3, MaxLossWindows: 3, MaxSpikes: 3, MaxSpike: ms}
	for n := 1; n <= 4; n++ {
		for seed := range uint64(30) {
			p := Swarm(seed, n, time.Second, opts)
			w := New(Config{Seed: seed})
			for range n {
				w.Add(&script{})
			}
			if err := p.Apply(w, nil); err != nil {
				t.Fatalf("n=%d seed %d: %v\n%v", n, seed, err, p)
			}
			w.RunUntil(2 * time.Second)
		}
	}
}
