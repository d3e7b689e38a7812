package experiment

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/model"
	"github.com/cohort-mp/cohort/topo"
	"gonum.org/v1/plot/vg"
)

func init() {
	Register(Spec{
		Name:    "fd-detect",
		Summary: "P2P-MPI Fig. 13: gossip detection time against n for BRR and DBRR (random and RR for comparison)",
		New:     func() Experiment { return &fdDetect{} },
	})
}

// fdDetect reproduces the detection-time experiment of P2P-MPI §5.3
// (Fig. 13): n nodes gossip every T_gossip = 0.5 s; after a warm-up one
// random node crashes; every live node's core.Failed is timed from the
// crash.
type fdDetect struct {
	seeds      int
	maxN       int
	warmup     time.Duration
	minLatency time.Duration
	maxLatency time.Duration
	spread     time.Duration
	schedules  string
}

func (e *fdDetect) Flags(fs *flag.FlagSet) {
	fs.IntVar(&e.seeds, "seeds", 0, "crashes (simulations) per point (0: 5, or 3 with --quick)")
	fs.IntVar(&e.maxN, "max-n", 0, "largest `n`, a power of two ≥ 8 (0: 4096, or 512 with --quick)")
	fs.DurationVar(&e.warmup, "warmup", 20*time.Second, "simulated `time` before the crash (the paper: 20 s)")
	fs.DurationVar(&e.minLatency, "min-latency", time.Millisecond, "shortest one-way message `time`")
	fs.DurationVar(&e.maxLatency, "max-latency", 10*time.Millisecond, "longest one-way message `time`")
	fs.DurationVar(&e.spread, "spread", 200*time.Millisecond, "nodes start within this `time` of each other")
	fs.StringVar(&e.schedules, "schedules", "brr,dbrr,rr,random", "comma-separated `list` of gossip schedules")
}

// detectRun is one simulation: one crash in a cluster of n.
type detectRun struct {
	schedule topo.Schedule
	n        int
}

// detectResult is what one simulation measured.
type detectResult struct {
	victim    core.NodeID
	crashAt   time.Duration
	delays    []float64 // seconds, one per live node that declared the crash
	missing   int       // live nodes that never declared it
	falseFail int
	falseSusp int
	complete  float64 // seconds from the crash until every live node knew; -1 if never
	messages  uint64
	bytes     uint64
	table     int // bytes of detector state per node
}

func (e *fdDetect) gossipConfig(s topo.Schedule) fd.GossipConfig {
	cfg := fd.SimGossipConfig()
	cfg.Schedule = s
	return cfg
}

func (e *fdDetect) runOne(ctx context.Context, seed uint64, r detectRun) (detectResult, error) {
	cfg := e.gossipConfig(r.schedule)
	c, err := NewGossipCluster(seed, r.n, cfg, e.minLatency, e.maxLatency, e.spread)
	if err != nil {
		return detectResult{}, err
	}
	pick := rand.New(rand.NewPCG(seed, 0x6372617368)) // "crash"
	victim := core.NodeID(pick.IntN(r.n))
	crashAt := e.warmup + time.Duration(pick.Int64N(int64(cfg.GossipInterval)))
	if err := c.CrashAt(crashAt, victim); err != nil {
		return detectResult{}, err
	}
	// Far beyond any bound: RR over 4096 nodes cleans up after 91 s.
	deadline := crashAt + cfg.CleanupTime(r.n) + 10*time.Duration(topo.CeilLog2(r.n))*cfg.GossipInterval + 10*cfg.ConsensusTime()
	if err := c.Run(ctx, deadline); err != nil {
		return detectResult{}, err
	}
	cr := c.Crashes()[0]
	res := detectResult{
		victim: victim, crashAt: crashAt, missing: len(cr.Missing(c.World)),
		falseFail: len(c.FalseFailures()), falseSusp: c.FalseSuspicions(), complete: -1,
		messages: c.World.Stats().Messages, bytes: c.World.Stats().Bytes,
	}
	for _, d := range cr.Delays(c.World) {
		res.delays = append(res.delays, d.Seconds())
	}
	if cr.CompleteAt >= 0 {
		res.complete = (cr.CompleteAt - crashAt).Seconds()
	}
	if g, ok := c.World.Node(0).(*fd.Gossip); ok {
		res.table = g.TableBytes()
	}
	return res, nil
}

// detectPoint aggregates the runs of one (schedule, n).
type detectPoint struct {
	schedule        topo.Schedule
	n               int
	runs            []detectResult
	all             Summary // over every delay of every run
	meanOfMeans     float64
	cleanup         time.Duration // the detector's T_cleanup
	theory          time.Duration // model.DefaultCleanup: the paper's "theoretical" curve; 0 if none
	minCleanup      time.Duration // model.MinCleanup; 0 if none
	lo, hi          time.Duration // fd.DetectionBoundSpread; 0 if none
	boundErr        error
	outside         int
	missing         int
	falseFail       int
	falseSusp       int
	messagesPerNode float64
}

func (e *fdDetect) Run(ctx context.Context, s *Session) error {
	if e.seeds == 0 {
		e.seeds = 5
		if s.Quick() {
			e.seeds = 3
		}
	}
	if e.maxN == 0 {
		e.maxN = 4096
		if s.Quick() {
			e.maxN = 512
		}
	}
	var scheds []topo.Schedule
	for _, name := range strings.Split(e.schedules, ",") {
		sch, err := topo.ParseSchedule(strings.TrimSpace(name))
		if err != nil {
			return fmt.Errorf("%w: --schedules: %v", ErrBadOption, err)
		}
		scheds = append(scheds, sch)
	}
	cfg0 := e.gossipConfig(topo.BinaryRoundRobin)
	switch {
	case e.seeds < 1:
		return fmt.Errorf("%w: --seeds %d", ErrBadOption, e.seeds)
	case e.maxN < 8 || e.maxN&(e.maxN-1) != 0 || e.maxN > 1<<14:
		return fmt.Errorf("%w: --max-n %d is not a power of two in [8, 16384]", ErrBadOption, e.maxN)
	case e.warmup < 0:
		return fmt.Errorf("%w: --warmup %v", ErrBadOption, e.warmup)
	case e.minLatency < 0 || e.maxLatency < e.minLatency || e.spread < 0 || e.maxLatency+e.spread >= cfg0.GossipInterval:
		return fmt.Errorf("%w: latency [%v, %v] and spread %v: need 0 ≤ min ≤ max and max + spread < T_gossip (%v)",
			ErrBadOption, e.minLatency, e.maxLatency, e.spread, cfg0.GossipInterval)
	}
	var ns []int
	for n := 8; n <= e.maxN; n *= 2 {
		ns = append(ns, n)
	}
	s.Logf("fd-detect: T_gossip = %v, ping timeout %v × %d, latency %v–%v, start spread %v, crash after %v + U[0, T_gossip); n = %d…%d; %d crashes per point",
		cfg0.GossipInterval, cfg0.PingTimeout, cfg0.PingAttempts, e.minLatency, e.maxLatency, e.spread, e.warmup, ns[0], ns[len(ns)-1], e.seeds)

	var points []*detectPoint
	for _, sch := range scheds {
		for _, n := range ns {
			points = append(points, &detectPoint{schedule: sch, n: n})
		}
	}
	runs, err := runSamples(ctx, s, "simulations", points, e.seeds,
		func(p *detectPoint) string { return fmt.Sprintf("%v/n=%d", p.schedule, p.n) },
		func(p *detectPoint) float64 {
			// ~ n² table merging per round × simulated rounds.
			cfg := e.gossipConfig(p.schedule)
			rounds := e.warmup.Seconds()/cfg.GossipInterval.Seconds() + float64(cfg.CleanupRounds(p.n))
			return float64(p.n) * float64(p.n) * rounds
		},
		func(ctx context.Context, seed uint64, p *detectPoint) (detectResult, error) {
			return e.runOne(ctx, seed, detectRun{schedule: p.schedule, n: p.n})
		})
	if err != nil {
		return err
	}
	for i, p := range points {
		p.runs = runs[i]
	}
	simulations := len(points) * e.seeds

	// Aggregate, with the theory of model and the bound of fd.
	var runRows [][]string
	for _, p := range points {
		cfg := e.gossipConfig(p.schedule)
		p.cleanup = cfg.CleanupTime(p.n)
		if t, err := model.DefaultCleanup(p.schedule, p.n, cfg.GossipInterval); err == nil {
			p.theory = t
		}
		if t, err := model.MinCleanup(p.schedule, p.n, cfg.GossipInterval); err == nil {
			p.minCleanup = t
		}
		p.lo, p.hi, p.boundErr = fd.DetectionBoundSpread(cfg, p.n, e.maxLatency, e.spread)
		var all, means []float64
		var msgs float64
		for i, r := range p.runs {
			all = append(all, r.delays...)
			rs := Summarize(r.delays)
			means = append(means, rs.Mean)
			p.missing += r.missing
			p.falseFail += r.falseFail
			p.falseSusp += r.falseSusp
			msgs += float64(r.messages) / float64(p.n)
			if p.boundErr == nil {
				for _, d := range r.delays {
					if d < p.lo.Seconds() || d > p.hi.Seconds() {
						p.outside++
					}
				}
			}
			runRows = append(runRows, []string{p.schedule.String(), fmt.Sprint(p.n), fmt.Sprint(i), fmt.Sprint(uint32(r.victim)),
				F(r.crashAt.Seconds()), fmt.Sprint(len(r.delays)), fmt.Sprint(r.missing), F(rs.Mean), F(rs.Min), F(rs.Max), F(r.complete),
				fmt.Sprint(r.falseFail), fmt.Sprint(r.falseSusp), fmt.Sprint(r.messages), fmt.Sprint(r.bytes), fmt.Sprint(r.table)})
		}
		p.all = Summarize(all)
		p.meanOfMeans = Summarize(means).Mean
		p.messagesPerNode = msgs / float64(len(p.runs))
	}
	if err := s.WriteCSV("detect-runs.csv", []string{"schedule", "n", "crash", "victim", "crash_s", "detectors", "missing",
		"mean_s", "min_s", "max_s", "all_knew_s", "false_failures", "false_suspicions", "messages", "bytes", "table_bytes_per_node"}, runRows); err != nil {
		return err
	}
	var sumRows [][]string
	for _, p := range points {
		lo, hi := "", ""
		if p.boundErr == nil {
			lo, hi = F(p.lo.Seconds()), F(p.hi.Seconds())
		}
		th := ""
		if p.theory > 0 {
			th = F(p.theory.Seconds())
		}
		sumRows = append(sumRows, []string{p.schedule.String(), fmt.Sprint(p.n), fmt.Sprint(len(p.runs)), F(p.meanOfMeans), F(p.all.Min),
			F(p.all.Max), F(p.all.P50), F(p.cleanup.Seconds()), th, lo, hi, fmt.Sprint(p.outside), fmt.Sprint(p.missing),
			fmt.Sprint(p.falseFail), F(p.messagesPerNode)})
	}
	if err := s.WriteCSV("detect.csv", []string{"schedule", "n", "crashes", "mean_s", "min_s", "max_s", "median_s", "t_cleanup_s",
		"paper_theory_s", "bound_lo_s", "bound_hi_s", "outside_bound", "missing", "false_failures", "messages_per_node"}, sumRows); err != nil {
		return err
	}

	// Figures.
	xt := make([]float64, len(ns))
	for i, n := range ns {
		xt[i] = float64(n)
	}
	seriesOf := func(sch topo.Schedule) (meas, theory []Point) {
		for _, p := range points {
			if p.schedule != sch {
				continue
			}
			meas = append(meas, Point{X: float64(p.n), Y: p.meanOfMeans, Lo: p.all.Min, Hi: p.all.Max})
			if p.theory > 0 {
				theory = append(theory, Point{X: float64(p.n), Y: p.theory.Seconds()})
			}
		}
		return
	}
	var main, all []Series
	for si, sch := range scheds {
		meas, theory := seriesOf(sch)
		name := strings.ToUpper(sch.String())
		if sch == topo.Random {
			name = "random"
		}
		all = append(all, Series{Label: name + " (mean, min–max)", Points: meas, Color: si + 1})
		if sch == topo.BinaryRoundRobin || sch == topo.DoubleBinaryRoundRobin {
			main = append(main, Series{Label: name + " simulated (mean, min–max)", Points: meas, Color: si + 1})
			main = append(main, Series{Label: name + " theoretical T_cleanup", Points: theory, Style: Lines, Dashed: true, Color: si + 1})
		}
	}
	paper := "P2P-MPI §5.3, Fig. 13: time to detect a fault for BRR and DBRR with T_gossip = 0.5 s on Grid'5000 (three sites), " +
		"averaged over all nodes, beside the \"theoretical\" detection time T_cleanup (BRR 2⌈log2 n⌉·T_gossip as we read the " +
		"text, DBRR 3⌈log2 n⌉·T_gossip); up to 256 processes. The text: \"very similar to the theoretical predictions whatever the " +
		"number of processes … The difference comes from the time taken to check that a suspected host has really failed " +
		"through a ping\"; no false detection."
	if len(main) > 0 {
		if err := s.Figure(Figure{
			Name: "detect", Title: "Fault detection time, BRR and DBRR (T_gossip = 0.5 s)",
			XLabel: "nodes n", YLabel: "detection time after the crash (s)", LogX: true, XTicks: xt,
			Series: main, Height: 11 * vg.Centimeter,
		}, paper); err != nil {
			return err
		}
	}
	if err := s.Figure(Figure{
		Name: "detect-all", Title: "Fault detection time of the four gossip schedules (T_gossip = 0.5 s)",
		XLabel: "nodes n", YLabel: "detection time after the crash (s)", LogX: true, LogY: true, XTicks: xt,
		Series: all, Height: 11 * vg.Centimeter,
	}, "P2P-MPI §5.1 compares the schedules by their minimum cleanup time: random has no bound, RR ⌈(√(1+8n)−1)/2⌉ rounds, "+
		"BRR ⌈log2 n⌉, DBRR 2⌈log2 n⌉; only BRR and DBRR were measured (Fig. 13). Our T_cleanup: BRR 2⌈log2 n⌉, DBRR and random "+
		"3⌈log2 n⌉, RR twice its minimum (fd.GossipConfig)."); err != nil {
		return err
	}

	// Table.
	var trows [][]string
	for _, p := range points {
		bound := "—"
		if p.boundErr == nil {
			bound = fmt.Sprintf("[%s, %s]", Fp(p.lo.Seconds(), 4), Fp(p.hi.Seconds(), 4))
		}
		th := "—"
		if p.theory > 0 {
			th = Fp(p.theory.Seconds(), 4)
		}
		trows = append(trows, []string{p.schedule.String(), fmt.Sprint(p.n), fmt.Sprint(len(p.runs)), Fp(p.meanOfMeans, 4),
			fmt.Sprintf("%s–%s", Fp(p.all.Min, 4), Fp(p.all.Max, 4)), th, Fp(p.cleanup.Seconds(), 4), bound,
			fmt.Sprint(p.missing), fmt.Sprint(p.falseFail), Fp(p.messagesPerNode, 4)})
	}
	s.Text("Each point crashes one random node %d times (one simulation each) after a warm-up of %v plus a random fraction of "+
		"a round, and times every live node's core.Failed from the crash. Nodes start within %v of each other; messages take "+
		"%v–%v; the consensus phase pings once with a %v timeout (fd.SimGossipConfig). The bound is fd.DetectionBoundSpread "+
		"for that latency and spread.", e.seeds, e.warmup, e.spread, e.minLatency, e.maxLatency, cfg0.PingTimeout)
	s.Table([]string{"schedule", "n", "crashes", "mean (s)", "min–max (s)", "paper's T_cleanup (s)", "our T_cleanup (s)",
		"fd bound (s)", "missing", "false failures", "messages / node"}, trows)

	// Checks.
	var outside, missing, falseFail []string
	var widthBad, meanBad, aboveCeiling []string
	checkedBound, checkedMean := 0, 0
	for _, p := range points {
		if p.missing > 0 {
			missing = append(missing, fmt.Sprintf("%v n=%d: %d", p.schedule, p.n, p.missing))
		}
		if p.falseFail > 0 {
			falseFail = append(falseFail, fmt.Sprintf("%v n=%d: %d", p.schedule, p.n, p.falseFail))
		}
		if p.schedule != topo.BinaryRoundRobin && p.schedule != topo.DoubleBinaryRoundRobin {
			continue
		}
		if p.boundErr != nil {
			outside = append(outside, fmt.Sprintf("%v n=%d: no bound (%v)", p.schedule, p.n, p.boundErr))
			continue
		}
		checkedBound++
		if p.outside > 0 {
			outside = append(outside, fmt.Sprintf("%v n=%d: %d of %d outside [%.3f, %.3f] (min %.3f, max %.3f)",
				p.schedule, p.n, p.outside, p.all.N, p.lo.Seconds(), p.hi.Seconds(), p.all.Min, p.all.Max))
		}
		// The bound no wider than [T_cleanup − T_gossip, T_cleanup +
		// T_cleanup^min + one ping round trip].
		cfg := e.gossipConfig(p.schedule)
		wantLo := p.cleanup - cfg.GossipInterval
		wantHi := p.cleanup + p.minCleanup + 2*e.maxLatency // one ping round trip
		if p.lo < wantLo || p.hi > wantHi {
			widthBad = append(widthBad, fmt.Sprintf("%v n=%d: [%.3f, %.3f] vs [%.3f, %.3f]", p.schedule, p.n,
				p.lo.Seconds(), p.hi.Seconds(), wantLo.Seconds(), wantHi.Seconds()))
		}
		if p.all.Max > wantHi.Seconds() {
			aboveCeiling = append(aboveCeiling, fmt.Sprintf("%v n=%d: %.3f > %.3f", p.schedule, p.n, p.all.Max, wantHi.Seconds()))
		}
		// The paper: measured ≈ theoretical T_cleanup, the difference
		// being the ping.
		checkedMean++
		if d := p.meanOfMeans - p.theory.Seconds(); d < 0 || d > (p.minCleanup+cfg.ConsensusTime()).Seconds() {
			meanBad = append(meanBad, fmt.Sprintf("%v n=%d: mean %.3f s, theory %.3f s", p.schedule, p.n, p.meanOfMeans, p.theory.Seconds()))
		}
	}
	s.Check("every BRR and DBRR detection time lies inside fd.DetectionBound", len(outside) == 0 && checkedBound > 0,
		orJoin(outside, fmt.Sprintf("%d points, every node of every crash inside", checkedBound)))
	s.Check("every crash declared by every live node", len(missing) == 0, orJoin(missing, fmt.Sprintf("%d simulations", simulations)))
	s.Check("no false failure (a live node declared failed)", len(falseFail) == 0, orJoin(falseFail, fmt.Sprintf("%d simulations", simulations)))
	widthDetail := orJoin(widthBad, fmt.Sprintf("%d points", checkedBound))
	if len(aboveCeiling) > 0 {
		widthDetail += fmt.Sprintf(". Measured detection times exceed the upper end at %d of %d points (%s)",
			len(aboveCeiling), checkedBound, aboveCeiling[0])
	}
	s.Check("fd.DetectionBound no wider than [T_cleanup − T_gossip, T_cleanup + T_cleanup^min + one ping round trip (2 × max latency)]", len(widthBad) == 0 && checkedBound > 0,
		widthDetail)
	s.Check("BRR/DBRR mean detection time between the paper's T_cleanup and T_cleanup + T_cleanup^min + ping phase (Fig. 13: measured ≈ theoretical + ping)",
		len(meanBad) == 0 && checkedMean > 0, orJoin(meanBad, fmt.Sprintf("%d points", checkedMean)))
	return nil
}
