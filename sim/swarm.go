package sim

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// SwarmOptions bound what [Swarm] may draw. Each kind of fault is switched
// on or off by a coin flip per seed (swarm testing: a run that has only
// partitions finds different bugs from one that has everything), and when
// on, its count is drawn uniformly from 1 to its maximum.
type SwarmOptions struct {
	// Start is the earliest time of any fault (let the system settle).
	Start time.Duration
	// MaxCrashFraction caps the crashes: at most ⌊MaxCrashFraction·n⌋ crash
	// events in the whole plan (so never more nodes down at once).
	MaxCrashFraction float64
	// RecoverProb is the probability that a crashed node restarts (a
	// [Recover]) before the liveness phase; such plans need a factory.
	RecoverProb float64
	// MaxPartitions, MaxCuts, MaxLossWindows and MaxSpikes cap the windows
	// of each kind. Every window ends by the horizon.
	MaxPartitions, MaxCuts, MaxLossWindows, MaxSpikes int
	// MaxLoss caps the loss probability of a loss window.
	MaxLoss float64
	// MaxSpike caps the extra latency of a delay spike.
	MaxSpike time.Duration
	// MaxOneWayCuts caps the one-way cuts ([Cut] with OneWay): the
	// messages from one node to another dropped, the other way delivered.
	// Zero, the default, draws none and draws nothing from the seed, so
	// plans drawn without it are unchanged.
	MaxOneWayCuts int
	// MaxPartialPartitions caps the partial partitions: two disjoint groups
	// of 1 to 3 nodes cut from each other (a [Cut] for every pair across,
	// one window for all), both still reaching every other node, so a path
	// between them remains through a third. Zero, the default, draws none
	// and draws nothing from the seed.
	MaxPartialPartitions int
	// Protect lists nodes that are never crashed (a test driver, say). With
	// Protect set, crashes name their victims; otherwise some use
	// CrashRandom.
	Protect []core.NodeID
}

// DefaultSwarmOptions returns moderate bounds: up to 20% of the nodes
// crashed, no recoveries, up to 2 partitions, 3 cuts, 2 loss windows of up to
// 30% and 2 spikes of up to 100 ms, nothing before 1 s.
func DefaultSwarmOptions() SwarmOptions {
	return SwarmOptions{
		Start:            time.Second,
		MaxCrashFraction: 0.2,
		MaxPartitions:    2,
		MaxCuts:          3,
		MaxLossWindows:   2,
		MaxLoss:          0.3,
		MaxSpikes:        2,
		MaxSpike:         100 * time.Millisecond,
	}
}

// Swarm draws a random fault plan for n nodes from seed: crashes (at most
// the configured fraction), partitions, cuts, loss windows and delay spikes
// (and, when asked for, one-way cuts and partial partitions),
// all at times in [opts.Start, horizon) and all healed by horizon, and ends
// with a [HealAll] at horizon — after it comes the liveness phase, in which
// the caller demands convergence within a bound (as FoundationDB's and
// TigerBeetle's simulators do). The plan is sorted by start time. The same
// arguments always give the same plan; the plan does not draw from the
// world's sources, so applying it does not shift the protocol's randomness
// (only CrashRandom draws its victims at run time from [World.Rand]).
// Fractions and probabilities in opts are clamped to [0, 1] and negative
// counts mean none, so every plan Swarm returns is valid for n nodes.
func Swarm(seed uint64, n int, horizon time.Duration, opts SwarmOptions) Plan {
	r := rand.New(rand.NewPCG(seed, 0x737761726d))
	opts.MaxCrashFraction = min(max(opts.MaxCrashFraction, 0), 1)
	opts.RecoverProb = min(max(opts.RecoverProb, 0), 1)
	opts.MaxLoss = min(max(opts.MaxLoss, 0), 1)
	start := min(max(opts.Start, 0), horizon)
	at := func() time.Duration {
		if horizon <= start {
			return start
		}
		t := start + time.Duration(r.Int64N(int64(horizon-start)))
		if rt := roundTime(t, horizon); rt < horizon {
			return rt
		}
		return t
	}
	window := func() (time.Duration, time.Duration) {
		from := at()
		if horizon <= from {
			return from, from + 1
		}
		until := from + 1 + time.Duration(r.Int64N(int64(horizon-from)))
		return from, min(max(roundTime(until, horizon), from+1), horizon)
	}
	count := func(m int) int {
		if m <= 0 || r.IntN(2) == 0 {
			return 0
		}
		return 1 + r.IntN(m)
	}
	var p Plan
	if n < 1 {
		return Plan{HealAll{At: horizon}}
	}

	// Crashes.
	protected := map[core.NodeID]bool{}
	for _, id := range opts.Protect {
		protected[id] = true
	}
	var pool []core.NodeID
	for i := range n {
		if !protected[core.NodeID(i)] {
			pool = append(pool, core.NodeID(i))
		}
	}
	maxCrash := min(int(opts.MaxCrashFraction*float64(n)), len(pool))
	if crashes := count(maxCrash); crashes > 0 {
		random := 0
		if len(opts.Protect) == 0 && opts.RecoverProb == 0 && r.IntN(2) == 0 {
			random = r.IntN(crashes + 1)
		}
		if random > 0 {
			p = append(p, CrashRandom{K: random, At: at()})
		}
		for i := range crashes - random {
			j := i + r.IntN(len(pool)-i)
			pool[i], pool[j] = pool[j], pool[i]
			c := Crash{Node: pool[i], At: at()}
			p = append(p, c)
			if opts.RecoverProb > 0 && r.Float64() < opts.RecoverProb && c.At+1 < horizon {
				back := c.At + 1 + time.Duration(r.Int64N(int64(horizon-c.At-1)))
				p = append(p, Recover{Node: c.Node, At: roundTime(max(back, c.At+1), horizon)})
			}
		}
	}

	for range count(opts.MaxPartitions) {
		if n < 2 {
			break
		}
		size := 1 + r.IntN(n/2)
		perm := r.Perm(n)[:size]
		group := make([]core.NodeID, size)
		for i, v := range perm {
			group[i] = core.NodeID(v)
		}
		slices.Sort(group)
		from, until := window()
		p = append(p, Partition{Groups: [][]core.NodeID{group}, At: from, Until: until})
	}
	for range count(opts.MaxCuts) {
		if n < 2 {
			break
		}
		a := core.NodeID(r.IntN(n))
		b := core.NodeID(r.IntN(n - 1))
		if b >= a {
			b++
		}
		from, until := window()
		p = append(p, Cut{A: a, B: b, At: from, Until: until})
	}
	for range count(opts.MaxLossWindows) {
		from, until := window()
		p = append(p, Loss{P: roundProb(r.Float64() * opts.MaxLoss), From: from, Until: until})
	}
	for range count(opts.MaxSpikes) {
		from, until := window()
		s := DelaySpike{Extra: 1 + time.Duration(r.Int64N(int64(max(opts.MaxSpike, 1)))), From: from, Until: until}
		s.Extra = roundTime(s.Extra, opts.MaxSpike)
		switch r.IntN(3) {
		case 1: // a slow node
			s.A = []core.NodeID{core.NodeID(r.IntN(n))}
		case 2: // a slow pair
			a, b := core.NodeID(r.IntN(n)), core.NodeID(r.IntN(n))
			s.A, s.B = []core.NodeID{a}, []core.NodeID{b}
		}
		p = append(p, s)
	}
	// Kinds added later draw after all others, and nothing when off, so
	// every seed's plan without them stays what it was.
	for range count(opts.MaxOneWayCuts) {
		if n < 2 {
			break
		}
		a := core.NodeID(r.IntN(n))
		b := core.NodeID(r.IntN(n - 1))
		if b >= a {
			b++
		}
		from, until := window()
		p = append(p, Cut{A: a, B: b, At: from, Until: until, OneWay: true})
	}
	for range count(opts.MaxPartialPartitions) {
		if n < 3 {
			break // a partial partition leaves a third node reaching both sides
		}
		side := min(3, (n-1)/2)
		perm := r.Perm(n)
		ga, gb := perm[:1+r.IntN(side)], perm[side:]
		gb = gb[:1+r.IntN(side)]
		from, until := window()
		for _, a := range ga {
			for _, b := range gb {
				p = append(p, Cut{A: core.NodeID(a), B: core.NodeID(b), At: from, Until: until})
			}
		}
	}
	slices.SortStableFunc(p, func(a, b Fault) int { return cmpDuration(a.Start(), b.Start()) })
	return append(p, HealAll{At: horizon})
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// roundTime rounds t to a unit that keeps plans readable: a microsecond for
// horizons under a second, a millisecond otherwise. It never returns 0 for a
// positive t.
func roundTime(t, scale time.Duration) time.Duration {
	unit := time.Microsecond
	if scale >= time.Second {
		unit = time.Millisecond
	}
	if r := t.Round(unit); r > 0 || t <= 0 {
		return r
	}
	return t
}

// roundProb keeps three significant digits of a probability for printing.
func roundProb(p float64) float64 {
	return float64(int(p*1000+0.5)) / 1000
}
