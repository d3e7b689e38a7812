package experiment

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/model"
	"github.com/cohort-mp/cohort/topo"
)

func init() {
	Register(Spec{
		Name:    "fd-reliability",
		Summary: "P2P-MPI Fig. 12: probability that node failures break BRR / DBRR gossip detection, against n",
		New:     func() Experiment { return &fdReliability{} },
	})
}

// fdReliability is a Monte-Carlo over failure patterns (P2P-MPI §5.2,
// Fig. 12): every node fails independently with the Weibull probability
// f = 1 − exp(−(λt)^δ); the detector fails when the live nodes do not form
// a strongly connected subgraph of the schedule's cycle graph (some live
// node stops hearing about another live node and will declare it failed).
// BRR and DBRR are judged on the same draws, so that DBRR's edge set
// containing BRR's can be checked trial by trial.
type fdReliability struct {
	maxTrials   int64 // BRR
	dbrrTrials  int64
	minFailures int64
	lambda      float64
	t           time.Duration
	delta       float64
	maxN        int
}

func (e *fdReliability) Flags(fs *flag.FlagSet) {
	fs.Int64Var(&e.maxTrials, "max-trials", 0, "most BRR `trials` per n (0: 2^25, or 2^20 with --quick)")
	fs.Int64Var(&e.dbrrTrials, "dbrr-trials", 0, "most DBRR `trials` per n, at most --max-trials (0: 2^23, or 2^20 with --quick)")
	fs.Int64Var(&e.minFailures, "min-failures", 0, "stop a schedule at n once it has this many `failures` (0: 1000, or 200 with --quick)")
	fs.Float64Var(&e.lambda, "lambda", 1e-3, "Weibull failure `rate` λ per second")
	fs.DurationVar(&e.t, "t", 100*time.Second, "`time` over which a node may fail")
	fs.Float64Var(&e.delta, "delta", 1, "Weibull `shape` δ")
	fs.IntVar(&e.maxN, "max-n", 0, "largest `n` of the sweep, a power of two ≥ 4 (0: 1024, or 256 with --quick)")
}

const (
	relChunk      = 1 << 14 // trials per task
	relFirstRound = 4       // chunks per n in the first round
	relExactMaxN  = 16      // exact enumeration up to this n (2^n patterns)
	// paperTrials is the number of trials per point of the paper's Fig. 12.
	paperTrials = 5.8e9
)

// relSchedules are the schedules of Fig. 12.
var relSchedules = []topo.Schedule{topo.BinaryRoundRobin, topo.DoubleBinaryRoundRobin}

// relCounts are the tallies of one schedule over some trials.
type relCounts struct {
	trials       int64
	disconnected int64 // live subgraph not strongly connected
	isolated     int64 // some live node with no live source
}

func (c *relCounts) add(o relCounts) {
	c.trials += o.trials
	c.disconnected += o.disconnected
	c.isolated += o.isolated
}

// relChunkResult is the result of one task: counts per schedule (index as
// relSchedules) and the number of draws on which DBRR failed while BRR did
// not (impossible, since DBRR's cycle graph contains BRR's).
type relChunkResult struct {
	counts     [2]relCounts
	both       int64 // draws judged under both schedules
	violations int64
}

func (e *fdReliability) Run(ctx context.Context, s *Session) error {
	if e.maxTrials == 0 {
		e.maxTrials = 1 << 25
		if s.Quick() {
			e.maxTrials = 1 << 20
		}
	}
	if e.dbrrTrials == 0 {
		e.dbrrTrials = min(e.maxTrials, 1<<23)
		if s.Quick() {
			e.dbrrTrials = min(e.maxTrials, 1<<20)
		}
	}
	if e.minFailures == 0 {
		e.minFailures = 1000
		if s.Quick() {
			e.minFailures = 200
		}
	}
	if e.maxN == 0 {
		e.maxN = 1024
		if s.Quick() {
			e.maxN = 256
		}
	}
	switch {
	case e.maxTrials < relChunk || e.dbrrTrials < relChunk:
		return fmt.Errorf("%w: --max-trials %d and --dbrr-trials %d must be at least one chunk (%d)", ErrBadOption, e.maxTrials, e.dbrrTrials, relChunk)
	case e.dbrrTrials > e.maxTrials:
		return fmt.Errorf("%w: --dbrr-trials %d exceeds --max-trials %d", ErrBadOption, e.dbrrTrials, e.maxTrials)
	case e.minFailures < 1:
		return fmt.Errorf("%w: --min-failures %d", ErrBadOption, e.minFailures)
	case e.maxN < 4 || e.maxN&(e.maxN-1) != 0 || e.maxN > 1<<16:
		return fmt.Errorf("%w: --max-n %d is not a power of two in [4, 65536]", ErrBadOption, e.maxN)
	}
	f, err := model.WeibullFailure(e.lambda, e.delta, e.t)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadOption, err)
	}
	var ns []int
	for n := 4; n <= e.maxN; n *= 2 {
		ns = append(ns, n)
	}
	graphs := make(map[int][2]*gossipGraph, len(ns))
	for _, n := range ns {
		var gs [2]*gossipGraph
		for i, sch := range relSchedules {
			if gs[i], err = newGossipGraph(sch, n); err != nil {
				return err
			}
		}
		graphs[n] = gs
	}
	mask := newBernoulliMask(f)
	s.Logf("fd-reliability: node failure probability f = 1 − exp(−(λt)^δ) = %.6g (λ = %g/s, t = %v, δ = %g); n = %d…%d; up to %d BRR and %d DBRR trials per n",
		f, e.lambda, e.t, e.delta, ns[0], ns[len(ns)-1], e.maxTrials, e.dbrrTrials)

	// Adaptive rounds: every n starts with a few chunks; a schedule stays
	// active at n until it has minFailures failures or its trial budget is
	// spent, and each round doubles the chunks of n. The decisions depend
	// only on completed rounds, so the result is the same for any number of
	// workers. Chunk c of n has the same draws for both schedules.
	total := make(map[int]*relChunkResult, len(ns))
	chunks := make(map[int]int, len(ns))
	for _, n := range ns {
		total[n] = &relChunkResult{}
	}
	budget := [2]int{int(e.maxTrials / relChunk), int(e.dbrrTrials / relChunk)}
	for round := 0; ; round++ {
		var tasks []Task[relChunkResult]
		var owners []int
		for _, n := range ns {
			from := chunks[n]
			var active [2]bool
			limit := 0
			for i := range active {
				active[i] = from < budget[i] && (from == 0 || total[n].counts[i].disconnected < e.minFailures)
				if active[i] {
					limit = max(limit, budget[i])
				}
			}
			if limit == 0 {
				continue
			}
			to := min(limit, max(relFirstRound, 2*from))
			for c := from; c < to; c++ {
				g := graphs[n]
				act := [2]bool{active[0] && c < budget[0], active[1] && c < budget[1]}
				tasks = append(tasks, Task[relChunkResult]{
					Key:  fmt.Sprintf("n=%d/chunk=%d", n, c),
					Cost: float64(n) * float64(topo.CeilLog2(n)),
					Run: func(ctx context.Context, seed uint64) (relChunkResult, error) {
						return relTrials(ctx, g, act, mask, seed, relChunk)
					},
				})
				owners = append(owners, n)
			}
			chunks[n] = to
		}
		if len(tasks) == 0 {
			break
		}
		res, err := RunAll(ctx, s, fmt.Sprintf("round %d", round+1), tasks)
		if err != nil {
			return err
		}
		for i, r := range res {
			t := total[owners[i]]
			t.counts[0].add(r.counts[0])
			t.counts[1].add(r.counts[1])
			t.both += r.both
			t.violations += r.violations
		}
	}

	// Exact probabilities for small n, by enumerating every failure
	// pattern with the naive reference.
	type exactKey struct {
		sch topo.Schedule
		n   int
	}
	var exactTasks []Task[[2]float64]
	var exactKeys []exactKey
	for _, n := range ns {
		if n > relExactMaxN {
			continue
		}
		for _, sch := range relSchedules {
			g := graphs[n][scheduleIndex(sch)]
			exactTasks = append(exactTasks, Task[[2]float64]{
				Key:  fmt.Sprintf("exact/%v/n=%d", sch, n),
				Cost: float64(uint64(1) << n),
				Run: func(ctx context.Context, _ uint64) ([2]float64, error) {
					return exactFailureProb(ctx, g.out, mask.prob())
				},
			})
			exactKeys = append(exactKeys, exactKey{sch, n})
		}
	}
	exactRes, err := RunAll(ctx, s, "exact", exactTasks)
	if err != nil {
		return err
	}
	exact := map[exactKey][2]float64{}
	for i, k := range exactKeys {
		exact[k] = exactRes[i]
	}

	// CSV.
	header := []string{"schedule", "n", "trials", "failures", "p_failure", "wilson95_lo", "wilson95_hi", "upper95_if_none", "isolated", "p_isolated", "exact_p_failure", "exact_p_isolated", "node_failure_prob"}
	var rows [][]string
	for _, sch := range relSchedules {
		for _, n := range ns {
			c := total[n].counts[scheduleIndex(sch)]
			lo, hi := Wilson(c.disconnected, c.trials, Z95)
			upper := ""
			if c.disconnected == 0 {
				upper = F(RuleOfThree(c.trials))
			}
			ex, exIso := "", ""
			if v, ok := exact[exactKey{sch, n}]; ok {
				ex, exIso = F(v[0]), F(v[1])
			}
			rows = append(rows, []string{sch.String(), fmt.Sprint(n), fmt.Sprint(c.trials), fmt.Sprint(c.disconnected),
				F(ratio(c.disconnected, c.trials)), F(lo), F(hi), upper, fmt.Sprint(c.isolated), F(ratio(c.isolated, c.trials)), ex, exIso, F(mask.prob())})
		}
	}
	if err := s.WriteCSV("reliability.csv", header, rows); err != nil {
		return err
	}

	// Figure.
	xt := make([]float64, len(ns))
	for i, n := range ns {
		xt[i] = float64(n)
	}
	fig := Figure{
		Name: "reliability", Title: fmt.Sprintf("Gossip FD failure probability (δ = %g, λt = %g)", e.delta, e.lambda*e.t.Seconds()),
		XLabel: "nodes n", YLabel: "P(FD failure)", LogX: true, LogY: true, XTicks: xt, Legend: BottomLeft,
	}
	var exactPts []Point
	for i, sch := range relSchedules {
		var seen, none []Point
		for _, n := range ns {
			c := total[n].counts[i]
			if c.disconnected > 0 {
				lo, hi := Wilson(c.disconnected, c.trials, Z95)
				seen = append(seen, Point{X: float64(n), Y: ratio(c.disconnected, c.trials), Lo: lo, Hi: hi})
			} else {
				none = append(none, Point{X: float64(n), Y: RuleOfThree(c.trials)})
			}
		}
		name := strings.ToUpper(sch.String())
		fig.Series = append(fig.Series, Series{Label: name + " (Monte-Carlo, 95% Wilson)", Points: seen})
		if len(none) > 0 {
			fig.Series = append(fig.Series, Series{Label: name + ": no failure seen, bound 3/trials", Points: none, Style: Points})
		}
		if sch == topo.BinaryRoundRobin {
			for _, n := range ns {
				if v, ok := exact[exactKey{sch, n}]; ok {
					exactPts = append(exactPts, Point{X: float64(n), Y: v[0]})
				}
			}
		}
	}
	fig.Series = append(fig.Series, Series{Label: "BRR exact (all 2^n patterns, n ≤ 16)", Points: exactPts, Style: Lines, Dashed: true})
	var paperPts []Point
	for _, n := range ns {
		if n > 64 {
			paperPts = append(paperPts, Point{X: float64(n), Y: 3 / paperTrials})
		}
	}
	if len(paperPts) > 0 {
		fig.Series = append(fig.Series, Series{Label: "paper: DBRR, no failure in 5.8e9 trials (3/trials)", Points: paperPts, Style: Lines, Dashed: true})
	}
	paper := "P2P-MPI (Genaud & Rattanapoka) §5.2, Fig. 12: failure probabilities of the FD system using BRR and DBRR " +
		"(δ = 1, λ = 10⁻³ s⁻¹, t = 10² s), from 5.8·10⁹ simulated failure patterns per point. The text gives no values " +
		"for BRR beyond its being \"relatively fragile … especially with a small number of nodes\"; for DBRR it reports " +
		"no FD failure at all for n > 64, i.e. a probability below about 3/5.8·10⁹ ≈ 5.2·10⁻¹⁰."
	if err := s.Figure(fig, paper); err != nil {
		return err
	}

	// Table.
	var trows [][]string
	for _, n := range ns {
		row := []string{fmt.Sprint(n)}
		for i, sch := range relSchedules {
			c := total[n].counts[i]
			row = append(row, fmt.Sprint(c.trials), fmt.Sprint(c.disconnected), probCell(c))
			if v, ok := exact[exactKey{sch, n}]; ok {
				row = append(row, Fp(v[0], 4))
			} else {
				row = append(row, "")
			}
		}
		trows = append(trows, row)
	}
	s.Text("Each trial fails every node independently with probability f = 1 − exp(−(λt)^δ) = %s and asks whether "+
		"the live nodes still form a strongly connected subgraph of the schedule's cycle graph (edge s→d when s gossips "+
		"to d in some round of a cycle); if not, some live node stops hearing about another live node and will declare it "+
		"failed. BRR and DBRR are judged on the same draws. A point runs in chunks of %d trials until it has %d "+
		"failures or its budget of trials (%d for BRR, %d for DBRR). Exact values enumerate all 2^n failure patterns with an "+
		"independent breadth-first search.",
		Fp(mask.prob(), 6), relChunk, e.minFailures, e.maxTrials, e.dbrrTrials)
	s.Table([]string{"n", "BRR trials", "BRR failures", "BRR P (95% CI)", "BRR exact", "DBRR trials", "DBRR failures", "DBRR P (95% CI)", "DBRR exact"}, trows)

	// Checks.
	// 1. The sampler and the bitset judge agree with exact enumeration.
	var bad []string
	checked := 0
	for _, k := range exactKeys {
		c := total[k.n].counts[scheduleIndex(k.sch)]
		lo, hi := Wilson(c.disconnected, c.trials, 3.2905) // 99.9%
		v := exact[k][0]
		checked++
		if v < lo || v > hi {
			bad = append(bad, fmt.Sprintf("%v n=%d: exact %.4g outside [%.4g, %.4g]", k.sch, k.n, v, lo, hi))
		}
	}
	s.Check("Monte-Carlo estimates agree with exact enumeration (n ≤ 16, 99.9% Wilson interval)", len(bad) == 0 && checked > 0,
		orJoin(bad, fmt.Sprintf("%d of %d points inside", checked-len(bad), checked)))
	// 2. DBRR's cycle graph contains BRR's: DBRR never fails without BRR.
	var viol, both int64
	for _, n := range ns {
		viol += total[n].violations
		both += total[n].both
	}
	s.Check("every DBRR failure is also a BRR failure on the same draw (DBRR's edges contain BRR's)", viol == 0 && both > 0,
		fmt.Sprintf("%d violations in %d draws judged under both", viol, both))
	// 3. BRR gets more reliable as n grows (Fig. 12's BRR curve falls).
	var rises []string
	for i := 1; i < len(ns); i++ {
		a, b := total[ns[i-1]].counts[0], total[ns[i]].counts[0]
		_, hiB := Wilson(b.disconnected, b.trials, Z95)
		loA, _ := Wilson(a.disconnected, a.trials, Z95)
		if a.disconnected >= 10 && hiB > loA && ratio(b.disconnected, b.trials) > ratio(a.disconnected, a.trials) {
			rises = append(rises, fmt.Sprintf("n=%d→%d", ns[i-1], ns[i]))
		}
	}
	s.Check("BRR failure probability decreases with n", len(rises) == 0, orJoin(rises, "no significant rise between consecutive n"))
	// 4. Our DBRR data does not contradict the paper's zero failures for
	// n > 64 in 5.8·10⁹ trials.
	var contra []string
	var dbrrTrials []string
	for _, n := range ns {
		c := total[n].counts[1]
		if n > 64 {
			lo, _ := Wilson(c.disconnected, c.trials, Z95)
			if lo > 3/paperTrials {
				contra = append(contra, fmt.Sprintf("n=%d: %d failures in %d trials", n, c.disconnected, c.trials))
			}
			dbrrTrials = append(dbrrTrials, fmt.Sprintf("n=%d: %d failures in %d trials", n, c.disconnected, c.trials))
		}
	}
	if len(dbrrTrials) > 0 {
		s.Check("DBRR for n > 64 agrees with the paper (no failure in 5.8·10⁹ trials)", len(contra) == 0,
			orJoin(contra, strings.Join(dbrrTrials, "; ")))
	}
	return nil
}

func scheduleIndex(s topo.Schedule) int {
	if s == topo.BinaryRoundRobin {
		return 0
	}
	return 1
}

func ratio(k, n int64) float64 {
	if n == 0 {
		return math.NaN()
	}
	return float64(k) / float64(n)
}

func probCell(c relCounts) string {
	if c.disconnected == 0 {
		return fmt.Sprintf("0 (< %s)", Fp(RuleOfThree(c.trials), 2))
	}
	lo, hi := Wilson(c.disconnected, c.trials, Z95)
	return fmt.Sprintf("%s [%s, %s]", Fp(ratio(c.disconnected, c.trials), 3), Fp(lo, 3), Fp(hi, 3))
}

func orJoin(items []string, otherwise string) string {
	if len(items) == 0 {
		return otherwise
	}
	return strings.Join(items, "; ")
}

// relTrials runs trials failure patterns over graph pair g (BRR, DBRR),
// judging the schedules marked active. It allocates only its scratch space.
func relTrials(ctx context.Context, g [2]*gossipGraph, active [2]bool, dead bernoulliMask, seed uint64, trials int) (relChunkResult, error) {
	var r relChunkResult
	src := &wyrand{s: seed}
	sc := g[0].newScratch()
	for t := range trials {
		if t%4096 == 0 && ctx.Err() != nil {
			return r, ctx.Err()
		}
		g[0].drawLive(sc, dead, src)
		var v [2]verdict
		for i := range g {
			if !active[i] {
				continue
			}
			v[i] = g[i].judge(sc)
			r.counts[i].trials++
			if v[i].disconnected {
				r.counts[i].disconnected++
			}
			if v[i].isolated {
				r.counts[i].isolated++
			}
		}
		if active[0] && active[1] {
			r.both++
			if v[1].disconnected && !v[0].disconnected {
				r.violations++
			}
		}
	}
	return r, nil
}

// referenceVerdict decides a failure pattern the plain way, independently
// of the bitset code: out[s] lists the targets of s over a cycle; live[v]
// says whether v survived. It is the reference for the exact enumeration
// and for the tests of the fast judge.
func referenceVerdict(out [][]int, live []bool) verdict {
	n := len(out)
	var v verdict
	alive := []int{}
	for i := range n {
		if live[i] {
			alive = append(alive, i)
		}
	}
	if len(alive) <= 1 {
		return v
	}
	hasSource := make([]bool, n)
	for s := range n {
		if !live[s] {
			continue
		}
		for _, d := range out[s] {
			if d != s {
				hasSource[d] = true
			}
		}
	}
	for _, d := range alive {
		if !hasSource[d] {
			v.isolated = true
		}
	}
	// Strongly connected iff the first live node reaches every live node
	// and every live node reaches it (a search over the reversed edges).
	in := make([][]int, n)
	for x := range n {
		for _, y := range out[x] {
			in[y] = append(in[y], x)
		}
	}
	for _, adj := range [][][]int{out, in} {
		seen := make([]bool, n)
		seen[alive[0]] = true
		queue := []int{alive[0]}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			for _, y := range adj[x] {
				if live[y] && !seen[y] {
					seen[y] = true
					queue = append(queue, y)
				}
			}
		}
		for _, y := range alive {
			if !seen[y] {
				v.disconnected = true
				return v
			}
		}
	}
	return v
}

// exactFailureProb returns the probabilities of (disconnected, isolated)
// over all 2^n failure patterns, each node dead with probability p, using
// referenceVerdict. For n ≤ 20.
func exactFailureProb(ctx context.Context, out32 [][]int32, p float64) ([2]float64, error) {
	n := len(out32)
	if n > 20 {
		return [2]float64{}, fmt.Errorf("experiment: exact enumeration over %d nodes is too large", n)
	}
	out := make([][]int, n)
	for i, l := range out32 {
		for _, d := range l {
			out[i] = append(out[i], int(d))
		}
	}
	var res [2]float64
	live := make([]bool, n)
	for mask := uint32(0); mask < 1<<n; mask++ {
		if mask%4096 == 0 && ctx.Err() != nil {
			return res, ctx.Err()
		}
		deadCount := 0
		for v := range n {
			live[v] = mask&(1<<v) == 0
			if !live[v] {
				deadCount++
			}
		}
		v := referenceVerdict(out, live)
		if !v.disconnected && !v.isolated {
			continue
		}
		w := math.Pow(p, float64(deadCount)) * math.Pow(1-p, float64(n-deadCount))
		if v.disconnected {
			res[0] += w
		}
		if v.isolated {
			res[1] += w
		}
	}
	return res, nil
}
