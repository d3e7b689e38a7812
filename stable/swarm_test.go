package stable_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/stable/stabletest"
)

// oracle plays a perfect failure detector and membership service: a crash
// is reported (core.Failed) to each live member after a random delay up to
// detect, and a new view without the crashed nodes is installed at each
// live member after a further random delay up to detect, members
// installing it at different times. It is a sim.Checker only to see the
// crashes; it never reports a violation.
type oracle struct {
	detect  time.Duration
	epoch   uint64
	members []core.NodeID
	rng     *rand.Rand
	lastAt  time.Duration // when the last view was installed everywhere
}

func (o *oracle) Name() string { return "oracle" }

func (o *oracle) Check(w *sim.World, ob sim.Obs) error {
	if ob.Kind != sim.ObsCrash {
		return nil
	}
	dead := ob.Node
	for _, id := range o.members {
		if id == dead {
			continue
		}
		at := ob.At + time.Duration(o.rng.Int64N(int64(o.detect)))
		w.At(at, func() {
			if w.Alive(id) {
				w.Node(id).Handle(fail{Node: dead})
			}
		})
	}
	o.epoch++
	o.members = slices.DeleteFunc(slices.Clone(o.members), func(id core.NodeID) bool { return id == dead || !w.Alive(id) })
	v := install{Epoch: o.epoch, Members: o.members}
	for _, id := range o.members {
		at := ob.At + o.detect + time.Duration(o.rng.Int64N(int64(o.detect)))
		o.lastAt = max(o.lastAt, at)
		w.At(at, func() {
			if w.Alive(id) {
				w.Node(id).Handle(v)
			}
		})
	}
	return nil
}

// The swarm (§3.5): every protocol under random crashes, partitions, cuts,
// loss windows, delay spikes and reordering, with view changes after the
// crashes. The stabletest checker demands that no vector ever exceeds what
// a live member of its view reported, that vectors only grow, and that every
// live member finishes rounds once the faults have healed.
func TestSwarm(t *testing.T) {
	seeds := simtest.Seeds(t, 24)
	for i, seed := range seeds {
		p := stable.Protocols()[i%4]
		r := rand.New(rand.NewPCG(seed, 1))
		n := 2 + r.IntN(11)
		t.Run(fmt.Sprintf("seed=%d/%v/n=%d", seed, p, n), func(t *testing.T) {
			swarmRun(t, seed, p, n, r.IntN(2) == 0)
		})
	}
}

func swarmRun(t *testing.T, seed uint64, p stable.Protocol, n int, reorder bool) {
	cfg := stable.Config{Protocol: p, Period: 20 * time.Millisecond, Resend: 15 * time.Millisecond}
	if n > 4 && seed%3 == 0 {
		cfg.Senders = n / 2
	}
	cfg.ExcludeFailed = seed%2 == 0 // the oracle's verdicts are never wrong
	w := sim.New(sim.Config{Seed: seed, Network: sim.Uniform(100*time.Microsecond, 3*time.Millisecond), Reorder: reorder})
	for range n {
		w.Add(core.NewStack(newFeeder(cfg, ids(n), 2*time.Millisecond), stable.New(cfg, ids(n))))
	}
	horizon := 1500 * time.Millisecond
	opts := sim.DefaultSwarmOptions()
	opts.Start = 50 * time.Millisecond
	opts.MaxCrashFraction = 0.4
	opts.MaxSpike = 30 * time.Millisecond
	plan := sim.Swarm(seed, n, horizon, opts)
	if err := plan.Apply(w, nil); err != nil {
		t.Fatal(err)
	}
	or := &oracle{detect: 40 * time.Millisecond, members: ids(n), rng: rand.New(rand.NewPCG(seed, 2))}
	w.AddChecker(or)
	chk := stabletest.NewChecker(ids(n))
	chk.MinRounds = 3
	w.AddChecker(chk)
	w.SetReplay("go test ./stable -run TestSwarm -seed=%d")
	if err := w.RunChecked(horizon); err != nil {
		t.Fatal(err)
	}
	// Liveness phase: everything healed, every view installed.
	chk.LiveAfter = max(horizon, or.lastAt) + 10*time.Millisecond
	if err := w.RunChecked(chk.LiveAfter + 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatalf("%v\nplan: %v", err, plan)
	}
	alive := 0
	for id := range n {
		if w.Alive(core.NodeID(id)) && chk.Stables(core.NodeID(id)) > 0 {
			alive++
		}
	}
	if alive == 0 {
		t.Fatal("no live node learned anything")
	}
}
