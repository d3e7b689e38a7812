package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// bothWays runs, at each of the given times, a send from node 0 to node 1
// and one from 1 to 0 under plan, lets the world run long after the last,
// and reports which arrived each way, with the world.
func bothWays(t *testing.T, plan Plan, at ...time.Duration) (fwd, back []bool, w *World) {
	t.Helper()
	w, nodes := scripted(Constant(ms), 3)
	for i, x := range at {
		nodes[0].sends = append(nodes[0].sends, send{at: x, to: 1, seq: i})
		nodes[1].sends = append(nodes[1].sends, send{at: x, to: 0, seq: i})
	}
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(time.Second)
	fwd, back = make([]bool, len(at)), make([]bool, len(at))
	for _, a := range nodes[1].got {
		fwd[a.seq] = true
	}
	for _, a := range nodes[0].got {
		back[a.seq] = true
	}
	return fwd, back, w
}

// A one-way cut drops the messages from A to B sent while it holds — they
// never arrive, even long after the heal — and delivers B's to A
// throughout; after the heal both ways deliver.
func TestOneWayCut(t *testing.T) {
	plan := Plan{Cut{A: 0, B: 1, At: 10 * ms, Until: 30 * ms, OneWay: true}}
	fwd, back, w := bothWays(t, plan, 5*ms, 15*ms, 25*ms, 35*ms)
	if want := []bool{true, false, false, true}; !slices.Equal(fwd, want) {
		t.Errorf("n0->n1 delivered %v, want %v", fwd, want)
	}
	if want := []bool{true, true, true, true}; !slices.Equal(back, want) {
		t.Errorf("n1->n0 delivered %v, want %v", back, want)
	}
	if d := w.Stats().Dropped; d != 2 {
		t.Errorf("%d messages dropped, want the 2 sent across the cut", d)
	}
	if want := []string{"10ms: cut n0->n1", "30ms: heal n0->n1"}; !slices.Equal(w.FaultLog(), want) {
		t.Errorf("fault log %q, want %q", w.FaultLog(), want)
	}
}

// Cuts overlap per direction: a two-way cut and a one-way cut that
// outlasts it leave, in between, only the one-way direction cut; a Heal
// ends every cut between the pair, one-way ones included; so does HealAll.
func TestCutDirectionsOverlap(t *testing.T) {
	plan := Plan{
		Cut{A: 1, B: 0, At: 10 * ms, Until: 30 * ms},
		Cut{A: 0, B: 1, At: 20 * ms, Until: 40 * ms, OneWay: true},
		Cut{A: 1, B: 0, At: 50 * ms, OneWay: true},
		Heal{A: 0, B: 1, At: 60 * ms},
		Cut{A: 0, B: 1, At: 70 * ms, OneWay: true},
		HealAll{At: 80 * ms},
	}
	fwd, back, w := bothWays(t, plan, 5*ms, 15*ms, 25*ms, 35*ms, 45*ms, 55*ms, 65*ms, 75*ms, 85*ms)
	if want := []bool{true, false, false, false, true, true, true, false, true}; !slices.Equal(fwd, want) {
		t.Errorf("n0->n1 delivered %v, want %v", fwd, want)
	}
	if want := []bool{true, false, false, true, true, false, true, true, true}; !slices.Equal(back, want) {
		t.Errorf("n1->n0 delivered %v, want %v", back, want)
	}
	want := []string{
		"10ms: cut n1-n0", "20ms: cut n0->n1", "30ms: heal n1->n0", "40ms: heal n0->n1",
		"50ms: cut n1->n0", "60ms: heal n0-n1", "70ms: cut n0->n1", "80ms: heal all",
	}
	if !slices.Equal(w.FaultLog(), want) {
		t.Errorf("fault log\n%q\nwant\n%q", w.FaultLog(), want)
	}
	if len(w.cuts) != 0 || len(w.faults.cuts) != 0 {
		t.Errorf("cuts left after heal all: world %v, faults %v", w.cuts, w.faults.cuts)
	}
}

// A one-way cut is a broken connection for the failure checker: the two
// nodes are not connected while it holds, either way round.
func TestOneWayCutDisconnects(t *testing.T) {
	w, _ := scripted(Constant(ms), 3)
	if err := (Plan{Cut{A: 0, B: 1, At: 10 * ms, Until: 20 * ms, OneWay: true}}).Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	w.RunUntil(15 * ms)
	if w.connected(0, 1) || w.connected(1, 0) || !w.connected(0, 2) || !w.connected(2, 1) {
		t.Fatal("during n0->n1 cut: want n0, n1 disconnected both ways round and each connected to n2")
	}
	w.RunUntil(25 * ms)
	if !w.connected(0, 1) {
		t.Fatal("n0, n1 disconnected after the heal")
	}
}

// With the new kinds asked for, swarm plans hold one-way cuts and partial
// partitions — two disjoint groups of at most 3 cut from each other over
// one window, a third node left reaching both — every one healed by the
// horizon; without them (the default) no plan holds a one-way cut.
func TestSwarmOneWayAndPartialPartitions(t *testing.T) {
	const n = 16
	horizon := 4 * time.Second
	off := DefaultSwarmOptions()
	on := off
	// No plain pair cuts and one partial partition at most: every two-way
	// cut of a plan is then part of that partial partition.
	on.MaxCuts, on.MaxOneWayCuts, on.MaxPartialPartitions = 0, 3, 1
	oneWay, partial := 0, 0
	seeds := simtest.Seeds(t, 200)
	for _, seed := range seeds {
		for _, f := range Swarm(seed, n, horizon, off) {
			if c, ok := f.(Cut); ok && c.OneWay {
				t.Fatalf("seed %d: default options drew %v", seed, c)
			}
		}
		p := Swarm(seed, n, horizon, on)
		if p.String() != Swarm(seed, n, horizon, on).String() {
			t.Fatalf("seed %d: two different plans", seed)
		}
		w := New(Config{Seed: seed})
		for range n {
			w.Add(&script{})
		}
		if err := p.Apply(w, idle); err != nil {
			t.Fatalf("seed %d: generated plan rejected: %v\n%v", seed, err, p)
		}
		var cs []Cut
		for _, f := range p {
			c, ok := f.(Cut)
			if !ok {
				continue
			}
			if c.Until == 0 || c.Until > horizon || c.A == c.B {
				t.Fatalf("seed %d: %v", seed, c)
			}
			if c.OneWay {
				oneWay++
			} else {
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			continue
		}
		as, bs := map[core.NodeID]bool{}, map[core.NodeID]bool{}
		for _, c := range cs {
			as[c.A], bs[c.B] = true, true
			if c.At != cs[0].At || c.Until != cs[0].Until {
				t.Fatalf("seed %d: partial partition in several windows: %v", seed, cs)
			}
		}
		for a := range as {
			if bs[a] {
				t.Fatalf("seed %d: %v on both sides of a partial partition: %v", seed, a, cs)
			}
		}
		if len(as) > 3 || len(bs) > 3 || len(as)*len(bs) != len(cs) {
			t.Fatalf("seed %d: partial partition %v is not every pair of two groups of at most 3", seed, cs)
		}
		partial++
	}
	if oneWay == 0 || partial == 0 {
		t.Fatalf("%d seeds drew %d one-way cuts and %d partial partitions; want some of each", len(seeds), oneWay, partial)
	}
}

// Swarms with the new kinds replay exactly: the same seed gives the same
// trace hash, statistics and fault log, another seed another hash.
func TestSwarmOneWayDeterminism(t *testing.T) {
	r := defaultSwarmRun()
	r.opts.MaxOneWayCuts, r.opts.MaxPartialPartitions = 3, 2
	for _, seed := range simtest.Seeds(t, 3) {
		a, errA := r.run(seed)
		b, errB := r.run(seed)
		c, _ := r.run(seed + 1)
		if errA != nil || errB != nil {
			t.Fatalf("seed %d: %v / %v", seed, errA, errB)
		}
		if a.TraceHash() != b.TraceHash() || a.Stats() != b.Stats() || !slices.Equal(a.FaultLog(), b.FaultLog()) {
			t.Fatalf("seed %d twice: hashes %x %x, stats %+v %+v", seed, a.TraceHash(), b.TraceHash(), a.Stats(), b.Stats())
		}
		if a.TraceHash() == c.TraceHash() {
			t.Fatalf("seeds %d and %d gave the same trace hash %x", seed, seed+1, a.TraceHash())
		}
		if a.Stats().Dropped == 0 {
			t.Fatalf("seed %d: nothing was dropped\n%v", seed, fmt.Sprint(a.Plan()))
		}
	}
}
