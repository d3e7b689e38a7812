// Package swarm runs the randomized simulation swarms of cohort's protocols
// over many seeds in parallel: the membership (package member's swarm, both
// partition policies), view-synchronous multicast (package vsync's, over the
// stand-in and the real stability detectors), stability detection (package
// stable's four protocols), transparent replication (package replica's)
// and the fault-tolerant agreement (package comm's random schedules). Each
// seed is one deterministic run in its own world (or set of in-process
// sessions); the swarm code is the one the packages' tests run
// (membertest, vsynctest, stabletest, replicatest, comm.AgreeSchedule), so
// a seed that fails here fails the same way under go test, with the replay
// command each failure carries.
//
// `cohort sim swarm` is the command over this package:
//
//	sum, err := swarm.Run(ctx, swarm.Options{Protocol: "member", Seeds: 100000, Workers: 2})
//
// With Options.Faults = FaultsPartial the member swarm runs the membership
// over the real heartbeat and gossip detectors under partial partitions
// and one-way cuts (membertest.PartialSwarm).
package swarm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/replica/replicatest"
	"github.com/cohort-mp/cohort/stable/stabletest"
	"github.com/cohort-mp/cohort/vsync/vsynctest"
)

// ErrOption is wrapped by the errors Run returns for bad options.
var ErrOption = errors.New("swarm: bad option")

// Outcome is how one seed ended.
type Outcome uint8

const (
	// Passed: every check held and the run converged.
	Passed Outcome = iota
	// Failed: a safety violation, a panic, or no convergence after the
	// faults healed.
	Failed
	// Stuck: the seed did not finish within the hard time limit (a
	// livelock or an endless loop: five times Options.SeedTimeout), or the
	// membership under the multicast stayed split (vsync).
	Stuck
)

func (o Outcome) String() string {
	switch o {
	case Passed:
		return "passed"
	case Failed:
		return "FAILED"
	case Stuck:
		return "STUCK"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Result is the outcome of one seed.
type Result struct {
	Seed    uint64
	Outcome Outcome
	// Variant names the run of the seed that failed (a partition policy,
	// a stability detector), "" if it passed.
	Variant string
	Err     error
	// Replay is the command that replays the failing run.
	Replay string
	// Minority counts runs (PartitionMajority) that rightly stayed in a
	// minority: no failure.
	Minority int
	Elapsed  time.Duration
	// Slow: the seed ran over Options.SeedTimeout of wall-clock time but
	// finished within the hard limit; Outcome is its own (a loaded or
	// paused machine, not a verdict).
	Slow bool
}

// variant is one run of a seed.
type variant struct {
	name   string
	run    func(seed uint64) ran
	replay func(seed uint64) string
}

// ran is what one run of a seed found.
type ran struct {
	err      error
	stuck    bool // the failure is a membership that stayed split
	minority bool // rightly stuck in a minority (no failure)
}

// Protocol is a swarm that can be run by name.
type Protocol struct {
	Name    string
	Summary string
	// Variants are the runs each seed makes; a seed fails if any fails.
	variants []variant
}

var protocols = []Protocol{
	{Name: "member", Summary: "radix-tree membership, oracle detector; each seed under both partition policies (paper, majority)",
		variants: []variant{memberVariant(member.PartitionPaper), memberVariant(member.PartitionMajority)}},
	{Name: "vsync", Summary: "view-synchronous multicast over gossip detector and membership; each seed over the stand-in and the real stability detectors",
		variants: []variant{vsyncVariant("stand-in stability", vsynctest.FakeStable), vsyncVariant("stable protocols", vsynctest.RealStable)}},
	{Name: "stable", Summary: "stability detection (Coord, FullDist, S_Coord, CubeFullDist by seed) under crashes, partitions, loss, reordering",
		variants: []variant{{
			name:   "stable",
			run:    func(seed uint64) ran { return ran{err: stabletest.SwarmSeed(seed)} },
			replay: func(seed uint64) string { return fmt.Sprintf("go test ./stable -run 'TestSwarm$' -seed=%d", seed) },
		}}},
	{Name: "replica", Summary: "transparent replication: 2–5 ranks × 1–4 replicas under crashes (invisible ones, and whole ranks), real membership",
		variants: []variant{{
			name:   "replica",
			run:    func(seed uint64) ran { return ran{err: replicatest.Swarm(seed)} },
			replay: func(seed uint64) string { return fmt.Sprintf("go test ./replica -run 'TestSwarm$' -seed=%d", seed) },
		}}},
	{Name: "agree", Summary: "fault-tolerant agreement (Agree) under random schedules with crashes in every phase",
		variants: []variant{{
			name: "agree",
			run:  func(seed uint64) ran { return ran{err: comm.AgreeSchedule(seed)} },
			replay: func(seed uint64) string {
				return fmt.Sprintf("go test ./comm -run TestAgreeRandomSchedules -agree.seed %d", seed)
			},
		}}},
}

// memberPartial is the member swarm under --faults partial: the
// membership over the real heartbeat and gossip detectors, under partial
// partitions and one-way cuts.
var memberPartial = Protocol{
	Name:     "member",
	Summary:  "membership over the heartbeat and the gossip detectors under partial partitions and one-way cuts; each seed over both detectors",
	variants: []variant{partialVariant(membertest.HeartbeatDetector), partialVariant(membertest.GossipDetector)},
}

func partialVariant(d membertest.Detector) variant {
	return variant{
		name: d.String() + " detector",
		run: func(seed uint64) ran {
			r := membertest.PartialSwarm(seed, d)
			return ran{err: r.Err, minority: r.Stuck}
		},
		replay: func(seed uint64) string { return membertest.PartialReplayCommand(seed, d) },
	}
}

// Faults are the fault sets a swarm can draw from (Options.Faults).
const (
	// FaultsDefault is each protocol's own fault set.
	FaultsDefault = ""
	// FaultsPartial is, for the member swarm, partial partitions (groups
	// of 1 to 3 nodes cut from each other, both still reaching the
	// rest) and one-way cuts besides crashes, joins, recoveries and
	// whole partitions, with the membership over the real detectors, and
	// a check that no member is declared failed while a path of uncut
	// links reaches it.
	FaultsPartial = "partial"
)

// lookupFaults returns the swarm named name with the fault set faults.
func lookupFaults(name, faults string) (Protocol, error) {
	p, ok := Lookup(name)
	if !ok {
		return Protocol{}, fmt.Errorf("%w: unknown protocol %q (want %s)", ErrOption, name, Names())
	}
	switch {
	case faults == FaultsDefault:
		return p, nil
	case faults == FaultsPartial && name == "member":
		return memberPartial, nil
	case faults == FaultsPartial:
		return Protocol{}, fmt.Errorf("%w: faults %q is for protocol member only, not %q", ErrOption, faults, name)
	}
	return Protocol{}, fmt.Errorf("%w: unknown faults %q (want %q or nothing)", ErrOption, faults, FaultsPartial)
}

// PartialSummary describes the member swarm under FaultsPartial.
func PartialSummary() string { return memberPartial.Summary }

func memberVariant(p member.PartitionPolicy) variant {
	return variant{
		name: "policy " + p.String(),
		run: func(seed uint64) ran {
			r := membertest.Swarm(seed, p)
			return ran{err: r.Err, minority: r.Stuck}
		},
		replay: func(seed uint64) string { return membertest.ReplayCommand(seed, p) },
	}
}

func vsyncVariant(name string, d vsynctest.Detector) variant {
	return variant{
		name: name,
		run: func(seed uint64) ran {
			err := vsynctest.Swarm(seed, d)
			return ran{err: err, stuck: errors.Is(err, vsynctest.ErrMembershipStuck)}
		},
		replay: func(seed uint64) string {
			if d == vsynctest.RealStable {
				return fmt.Sprintf("go test ./vsync -run 'TestSwarmStable$' -seed=%d", seed)
			}
			return fmt.Sprintf("go test ./vsync -run 'TestSwarm$' -seed=%d", seed)
		},
	}
}

// Protocols lists the swarms by name.
func Protocols() []Protocol { return slices.Clone(protocols) }

// Lookup returns the swarm named name.
func Lookup(name string) (Protocol, bool) {
	for _, p := range protocols {
		if p.Name == name {
			return p, true
		}
	}
	return Protocol{}, false
}

// Names returns the swarms' names joined by "|".
func Names() string {
	var ns []string
	for _, p := range protocols {
		ns = append(ns, p.Name)
	}
	return strings.Join(ns, "|")
}

// RunSeed runs every variant of one seed and returns the first failure (or
// a pass).
func (p Protocol) RunSeed(seed uint64) Result {
	res := Result{Seed: seed}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	for _, v := range p.variants {
		o := safeRun(v.run, seed)
		if o.minority {
			res.Minority++
		}
		if o.err != nil {
			res.Outcome = Failed
			if o.stuck {
				res.Outcome = Stuck
			}
			res.Variant, res.Err, res.Replay = v.name, o.err, v.replay(seed)
			return res
		}
	}
	return res
}

// safeRun turns a panic that escaped a swarm's own recovery into a failure.
func safeRun(run func(uint64) ran, seed uint64) (o ran) {
	defer func() {
		if r := recover(); r != nil {
			o = ran{err: fmt.Errorf("seed %d: panic: %v", seed, r)}
		}
	}()
	return run(seed)
}

// Options configure Run.
type Options struct {
	Protocol string
	// Faults chooses the fault set: FaultsDefault, or FaultsPartial (for
	// the member swarm).
	Faults string
	Seeds  int    // how many seeds: From, From+1, …
	From   uint64 // the first seed
	// Workers is how many seeds run at once (default: GOMAXPROCS).
	Workers int
	// SeedTimeout is the wall-clock time a seed is expected to take at
	// most (default 2 minutes). A seed over it is waited for up to five
	// times as long and then counts with its own outcome, marked Slow: a
	// busy or paused machine must not make a passing seed a failure. A
	// seed over five times SeedTimeout is reported Stuck; its goroutine
	// cannot be stopped and keeps running until the process exits.
	SeedTimeout time.Duration
	// OnResult, if set, is called with every result, in completion order,
	// from one goroutine.
	OnResult func(Result)
}

// Summary is what a swarm found.
type Summary struct {
	Protocol string
	Seeds    int // seeds completed (or given up as stuck)
	Passed   int
	Failed   int
	Stuck    int
	Minority int // PartitionMajority runs rightly stuck in a minority
	// Failures holds every failed or stuck seed, by seed.
	Failures []Result
	// Slow lists the seeds that went over SeedTimeout but finished, by
	// seed (replay them alone to time them).
	Slow    []uint64
	Elapsed time.Duration
}

// OK reports whether no seed failed or stuck.
func (s Summary) OK() bool { return s.Failed == 0 && s.Stuck == 0 }

// Run runs the swarm named by opts.Protocol on opts.Seeds seeds in parallel.
// It returns early, with what it has, if ctx is cancelled (then the error is
// ctx's).
func Run(ctx context.Context, opts Options) (Summary, error) {
	p, err := lookupFaults(opts.Protocol, opts.Faults)
	if err != nil {
		return Summary{}, err
	}
	if opts.Seeds < 1 {
		return Summary{}, fmt.Errorf("%w: seeds must be at least 1, got %d", ErrOption, opts.Seeds)
	}
	if opts.Workers < 0 {
		return Summary{}, fmt.Errorf("%w: workers must not be negative, got %d", ErrOption, opts.Workers)
	}
	return p.run(ctx, opts)
}

func (p Protocol) run(ctx context.Context, opts Options) (Summary, error) {
	workers := opts.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, opts.Seeds)
	timeout := opts.SeedTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	start := time.Now()
	seeds := make(chan uint64)
	results := make(chan Result)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				r := runWithin(ctx, p, seed, timeout)
				if ctx.Err() != nil {
					return
				}
				select {
				case results <- r:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(seeds)
		for i := range opts.Seeds {
			select {
			case seeds <- opts.From + uint64(i):
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	sum := Summary{Protocol: p.Name}
	for r := range results {
		sum.Seeds++
		sum.Minority += r.Minority
		switch r.Outcome {
		case Passed:
			sum.Passed++
		case Failed:
			sum.Failed++
		case Stuck:
			sum.Stuck++
		}
		if r.Outcome != Passed {
			sum.Failures = append(sum.Failures, r)
		}
		if r.Slow {
			sum.Slow = append(sum.Slow, r.Seed)
		}
		if opts.OnResult != nil {
			opts.OnResult(r)
		}
	}
	slices.SortFunc(sum.Failures, func(a, b Result) int {
		switch {
		case a.Seed < b.Seed:
			return -1
		case a.Seed > b.Seed:
			return 1
		}
		return 0
	})
	slices.Sort(sum.Slow)
	sum.Elapsed = time.Since(start)
	return sum, ctx.Err()
}

// runWithin runs one seed: past timeout it is marked slow and waited for
// up to five times timeout, then given up (Stuck).
func runWithin(ctx context.Context, p Protocol, seed uint64, timeout time.Duration) Result {
	done := make(chan Result, 1)
	go func() { done <- p.RunSeed(seed) }()
	soft := time.NewTimer(timeout)
	defer soft.Stop()
	hard := time.NewTimer(5 * timeout)
	defer hard.Stop()
	slow := false
	for {
		select {
		case r := <-done:
			r.Slow = slow
			return r
		case <-soft.C:
			slow = true
		case <-hard.C:
			v := p.variants[0]
			return Result{Seed: seed, Outcome: Stuck, Err: fmt.Errorf("seed %d did not finish within %v", seed, 5*timeout),
				Replay: v.replay(seed), Elapsed: 5 * timeout, Slow: true}
		case <-ctx.Done():
			return Result{Seed: seed, Outcome: Stuck, Err: ctx.Err()}
		}
	}
}
