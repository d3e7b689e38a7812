package stabletest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
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

// Name implements sim.Checker.
func (o *oracle) Name() string { return "oracle" }

// Check implements sim.Checker.
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
				w.Node(id).Handle(Fail{Node: dead})
			}
		})
	}
	o.epoch++
	o.members = slices.DeleteFunc(slices.Clone(o.members), func(id core.NodeID) bool { return id == dead || !w.Alive(id) })
	v := Install{Epoch: o.epoch, Members: o.members}
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

// RunSwarm runs one swarm of package stable's protocol p on n nodes fed
// by Feeders, under the faults sim.Swarm draws from seed (crashes,
// partitions, cuts, loss windows, delay spikes; message reordering if
// reorder), with an oracle membership that installs views without the
// crashed nodes; the Checker watches safety throughout and liveness
// (every live member finishes rounds) once the faults healed. Each call
// builds its own world: calls may run in parallel.
func RunSwarm(seed uint64, p stable.Protocol, n int, reorder bool) error {
	cfg := stable.Config{Protocol: p, Period: 20 * time.Millisecond, Resend: 15 * time.Millisecond}
	if n > 4 && seed%3 == 0 {
		cfg.Senders = n / 2
	}
	cfg.ExcludeFailed = seed%2 == 0 // the oracle's verdicts are never wrong
	w := sim.New(sim.Config{Seed: seed, Network: sim.Uniform(100*time.Microsecond, 3*time.Millisecond), Reorder: reorder})
	for range n {
		w.Add(core.NewStack(NewFeeder(cfg, ids(n), 2*time.Millisecond), stable.New(cfg, ids(n))))
	}
	horizon := 1500 * time.Millisecond
	opts := sim.DefaultSwarmOptions()
	opts.Start = 50 * time.Millisecond
	opts.MaxCrashFraction = 0.4
	opts.MaxSpike = 30 * time.Millisecond
	plan := sim.Swarm(seed, n, horizon, opts)
	if err := plan.Apply(w, nil); err != nil {
		return err
	}
	or := &oracle{detect: 40 * time.Millisecond, members: ids(n), rng: rand.New(rand.NewPCG(seed, 2))}
	w.AddChecker(or)
	chk := NewChecker(ids(n))
	chk.MinRounds = 3
	w.AddChecker(chk)
	w.SetReplay("go test ./stable -run TestSwarm -seed=%d")
	if err := w.RunChecked(horizon); err != nil {
		return err
	}
	// Liveness phase: everything healed, every view installed.
	chk.LiveAfter = max(horizon, or.lastAt) + 10*time.Millisecond
	if err := w.RunChecked(chk.LiveAfter + 500*time.Millisecond); err != nil {
		return err
	}
	if err := w.Finish(); err != nil {
		return fmt.Errorf("%v\nplan: %v", err, plan)
	}
	alive := 0
	for id := range n {
		if w.Alive(core.NodeID(id)) && chk.Stables(core.NodeID(id)) > 0 {
			alive++
		}
	}
	if alive == 0 {
		return fmt.Errorf("seed %d: no live node learned anything\nplan: %v", seed, plan)
	}
	return nil
}

// SwarmSeed draws a swarm from seed alone (the protocol is
// Protocols()[seed%4], then the size and the reordering from the seed's
// random source) and runs it: `go test ./stable -run TestSwarm -seed=N`
// replays it.
func SwarmSeed(seed uint64) error {
	p := stable.Protocols()[seed%4]
	r := rand.New(rand.NewPCG(seed, 1))
	n := 2 + r.IntN(11)
	if err := RunSwarm(seed, p, n, r.IntN(2) == 0); err != nil {
		return fmt.Errorf("%v, n=%d: %w", p, n, err)
	}
	return nil
}

// ids returns the node ids 0..n-1.
func ids(n int) []core.NodeID {
	out := make([]core.NodeID, n)
	for i := range out {
		out[i] = core.NodeID(i)
	}
	return out
}
