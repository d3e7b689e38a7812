package experiment

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/topo"
)

func init() {
	Register(Spec{
		Name:    "stability",
		Summary: "Friedman, Manor, Guo §4, Figs. 8–14: RTT, network load, queues, hops and messages of Coord, FullDist, S_Coord and CubeFullDist against n on random graphs, and CubeFullDist with 0–5 failures",
		New:     func() Experiment { return &stabilityExp{} },
	})
}

// stabilityExp reproduces the simulation study of the stability paper
// (§4): one protocol round of the real stable.Detector machines over a
// random graph network (sim.Graph), per protocol, system size and
// topology.
type stabilityExp struct {
	topologies  int
	sizes       string
	fullDistMax int
	faultSizes  string
	maxFaults   int
	recvOver    time.Duration
	sendOver    time.Duration
}

func (e *stabilityExp) Flags(fs *flag.FlagSet) {
	fs.IntVar(&e.topologies, "topologies", 0, "random topologies per point (0: 6, the paper's)")
	fs.StringVar(&e.sizes, "sizes", "", "comma-separated system `sizes` (default: 10 … 1900, or 10 … 1024 with --quick)")
	fs.IntVar(&e.fullDistMax, "fulldist-max", 0, "largest `n` FullDist is run at (0: 500, or 400 with --quick)")
	fs.StringVar(&e.faultSizes, "fault-sizes", "", "comma-separated `sizes` of the CubeFullDist failure runs (default: 100,256,512,1000,1900, or 128,512,1024 with --quick)")
	fs.IntVar(&e.maxFaults, "max-faults", 5, "largest `number` of failed hypercube neighbours of node 0 (the paper: 5)")
	fs.DurationVar(&e.recvOver, "recv-overhead", stabRecvOverhead, "CPU `time` a node spends on each message it receives (LogP o_r); messages queue at a busy node")
	fs.DurationVar(&e.sendOver, "send-overhead", 0, "CPU `time` a node spends on each message it sends (LogP o_s)")
}

// stabRecvOverhead is the default per-message receive cost. The paper's ns
// nodes queue the messages they receive ("a long message queue at the
// coordinator", §4.2.1); the only absolute figures its text gives,
// FullDist's first-node RTT of 16 ms at 150 nodes and 46 ms at 400, where
// every node receives n−1 rows, are n × 100 µs to within the propagation
// time. Sending costs no CPU by default: the paper's start and info
// messages are multicasts, sent once and replicated by the network, where
// our machines send n unicasts.
const stabRecvOverhead = 100 * time.Microsecond

// stabSenders is the paper's number of senders (§4.1): all nodes below 50.
const stabSenders = 50

// stabEdgeProb is the edge probability of the random graph for n nodes. The
// paper gives only the range, 0.01 to 0.04 (§4.1); we take p = 10/n clamped
// to that range: 0.04 up to n = 250 (the graph is sparse there, mean degree
// 0.36 at n = 10, and sim.NewGraph joins the components), a mean degree of
// 10 from 250 to 1,000 nodes, and 0.01 above (mean degree 10 to 19). Sizes
// that the paper pairs, (500, 512) and (1,000, 1,024), get graphs of the
// same mean degree.
func stabEdgeProb(n int) float64 { return min(0.04, max(0.01, 10/float64(n))) }

// stabRun is one simulation: one round of protocol p over n nodes on one
// topology, with some of node 0's hypercube neighbours failed.
type stabRun struct {
	p      stable.Protocol
	n      int
	topo   int
	faults int
}

// stabResult is what one round measured.
type stabResult struct {
	rttFirst, rttLast float64 // seconds, over the live nodes
	finished, live    int
	messages, hops    uint64
	maxQueue          int
	avgLoad           float64 // messages on links, time average over the round
	wrong             int     // nodes whose result differs from the true minimum
	added             int     // graph edges added to connect components
	failed            []int
}

func stabConfig(p stable.Protocol) stable.Config {
	cfg := stable.PaperConfig(p)
	cfg.Senders = stabSenders
	cfg.Period = time.Hour   // one round per run
	cfg.ExcludeFailed = true // §4.2.5: the failed nodes are known and not waited for
	return cfg
}

func (e *stabilityExp) runOne(ctx context.Context, seed uint64, r stabRun) (stabResult, error) {
	g, err := sim.NewGraph(sim.GraphConfig{
		Nodes: r.n, P: stabEdgeProb(r.n), BandwidthBits: 100e6, MaxDelay: time.Millisecond,
		Seed: seed ^ 0x746f706f, // the topology's own seed: shared by the protocols at one (n, topology)
	})
	if err != nil {
		return stabResult{}, err
	}
	w := sim.New(sim.Config{Seed: seed, Network: g, NoTrace: true, RecvOverhead: e.recvOver, SendOverhead: e.sendOver})
	members := make([]core.NodeID, r.n)
	for i := range members {
		members[i] = core.NodeID(i)
	}
	res := stabResult{added: g.AddedEdges()}
	// Failures: r.faults of node 0's hypercube neighbours, drawn at random.
	if r.faults > 0 {
		nb, err := topo.ZeroNeighbors(r.n)
		if err != nil {
			return res, err
		}
		if r.faults > len(nb) {
			return res, fmt.Errorf("%w: %d failures but node 0 has %d neighbours at n = %d", ErrBadOption, r.faults, len(nb), r.n)
		}
		pick := rand.New(rand.NewPCG(seed, 0x6661756c74))
		pick.Shuffle(len(nb), func(i, j int) { nb[i], nb[j] = nb[j], nb[i] })
		res.failed = slices.Sorted(slices.Values(nb[:r.faults]))
	}
	// Each node's received vector: a random count per sender; the true
	// stable vector is the minimum over the live nodes.
	vr := rand.New(rand.NewPCG(seed, 0x68617665))
	senders := min(stabSenders, r.n)
	truth := make([]uint64, senders)
	for i := range truth {
		truth[i] = math.MaxUint64
	}
	cfg := stabConfig(r.p)
	for i := range r.n {
		have := make([]uint64, senders)
		for j := range have {
			have[j] = 1000 + vr.Uint64N(1000)
		}
		d := stable.New(cfg, members)
		if err := d.Err(); err != nil {
			return res, err
		}
		d.Handle(stable.Progress{Epoch: 0, Have: have})
		for _, f := range res.failed {
			d.Handle(core.Failed{Node: core.NodeID(f)})
		}
		w.Add(d)
		if !slices.Contains(res.failed, i) {
			arrayMinInto(truth, have)
		}
	}
	for _, f := range res.failed {
		w.Crash(core.NodeID(f))
	}
	res.live = r.n - len(res.failed)
	first, last := time.Duration(-1), time.Duration(0)
	var atEnd sim.GraphStats
	w.OnEmit(func(at time.Duration, id core.NodeID, ev core.Event) {
		switch ev := ev.(type) {
		case stable.RoundDone:
			if ev.Round != 1 {
				return
			}
			res.finished++
			if first < 0 {
				first = at
			}
			last = max(last, at)
			if res.finished == res.live {
				atEnd = g.Stats()
			}
		case stable.Stable:
			if ev.Round == 1 && !slices.Equal(ev.Vector, truth) {
				res.wrong++
			}
		}
	})
	// Run in slices so that a cancelled context stops a long run.
	for t := time.Duration(0); t < time.Minute && res.finished < res.live; t += time.Second {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		w.RunUntil(t + time.Second)
	}
	w.RunUntil(w.Now() + time.Second) // the last messages of the round (CubeFullDist's final ones)
	end := g.Stats()
	res.messages, res.hops, res.maxQueue = end.Messages, end.Hops, end.MaxQueue
	res.rttFirst, res.rttLast = math.NaN(), math.NaN()
	if res.finished > 0 {
		res.rttFirst, res.rttLast = first.Seconds(), last.Seconds()
	}
	if res.finished == res.live {
		res.avgLoad = atEnd.AvgLoad()
	}
	return res, nil
}

func arrayMinInto(dst, v []uint64) {
	for i := range dst {
		dst[i] = min(dst[i], v[i])
	}
}

// stabPoint aggregates the topologies of one (protocol, n, failures).
type stabPoint struct {
	run                stabRun
	faultOnly          bool // only for the failure study (n not in --sizes)
	runs               []stabResult
	rttFirst, rttLast  Summary // ms
	load, queue        Summary
	messages, hops     Summary
	missing, wrong     int
	sensRTT, sensQueue float64 // best − worst over the topologies
}

func parseSizes(s string, def []int) ([]int, error) {
	if s == "" {
		return def, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 || n > 1<<16 {
			return nil, fmt.Errorf("%w: size %q (want an integer in [2, 65536])", ErrBadOption, f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (e *stabilityExp) Run(ctx context.Context, s *Session) error {
	quick := s.Quick()
	if e.topologies == 0 {
		e.topologies = 6
	}
	if e.fullDistMax == 0 {
		e.fullDistMax = 500
		if quick {
			e.fullDistMax = 400 // where the paper stopped
		}
	}
	defSizes := []int{10, 50, 100, 128, 150, 200, 256, 300, 400, 500, 512, 700, 1000, 1024, 1300, 1600, 1900}
	defFault := []int{100, 256, 512, 1000, 1900}
	if quick {
		defSizes = []int{10, 50, 100, 128, 150, 200, 256, 300, 400, 500, 512, 1000, 1024}
		defFault = []int{128, 512, 1024}
	}
	sizes, err := parseSizes(e.sizes, defSizes)
	if err != nil {
		return fmt.Errorf("--sizes: %w", err)
	}
	faultSizes, err := parseSizes(e.faultSizes, defFault)
	if err != nil {
		return fmt.Errorf("--fault-sizes: %w", err)
	}
	switch {
	case e.topologies < 1:
		return fmt.Errorf("%w: --topologies %d", ErrBadOption, e.topologies)
	case e.maxFaults < 0:
		return fmt.Errorf("%w: --max-faults %d", ErrBadOption, e.maxFaults)
	case e.recvOver < 0 || e.sendOver < 0:
		return fmt.Errorf("%w: --recv-overhead %v, --send-overhead %v", ErrBadOption, e.recvOver, e.sendOver)
	}
	for _, n := range faultSizes {
		if m := topo.CeilLog2(n); e.maxFaults >= m {
			return fmt.Errorf("%w: --max-faults %d leaves node 0 no live neighbour at n = %d (it has %d)", ErrBadOption, e.maxFaults, n, m)
		}
	}
	s.Logf("stability: sizes %v, %d topologies per point, FullDist up to n = %d, failures 0–%d at n = %v",
		sizes, e.topologies, e.fullDistMax, e.maxFaults, faultSizes)

	var points []*stabPoint
	var tasks []Task[stabResult]
	var owner []int
	add := func(r stabRun, faultOnly bool) {
		points = append(points, &stabPoint{run: r, faultOnly: faultOnly})
		for t := range e.topologies {
			rr := r
			rr.topo = t
			cost := float64(r.n) * math.Pow(math.Log2(float64(r.n)), 2)
			switch r.p {
			case stable.FullDist:
				cost = float64(r.n) * float64(r.n)
			case stable.Coord, stable.SCoord:
				cost = 3 * float64(r.n)
			}
			tasks = append(tasks, Task[stabResult]{
				// The key names the topology, not the protocol, for the
				// graph's seed: see stabTopoSeed.
				Key:  fmt.Sprintf("%v/n=%d/faults=%d/topology=%d", r.p, r.n, r.faults, t),
				Cost: cost,
				Run: func(ctx context.Context, seed uint64) (stabResult, error) {
					return e.runOne(ctx, stabTopoSeed(s.Seed(), rr.n, rr.topo), rr)
				},
			})
			owner = append(owner, len(points)-1)
		}
	}
	protos := stable.Protocols()
	for _, p := range protos {
		for _, n := range sizes {
			if p == stable.FullDist && n > e.fullDistMax {
				continue
			}
			add(stabRun{p: p, n: n}, false)
		}
	}
	for _, n := range faultSizes {
		for f := 0; f <= e.maxFaults; f++ {
			if f == 0 && slices.Contains(sizes, n) {
				continue // the main sweep's point
			}
			add(stabRun{p: stable.CubeFullDist, n: n, faults: f}, f == 0)
		}
	}
	res, err := RunAll(ctx, s, "rounds", tasks)
	if err != nil {
		return err
	}
	for i, r := range res {
		points[owner[i]].runs = append(points[owner[i]].runs, r)
	}
	var runRows [][]string
	for _, pt := range points {
		var f, l, ld, q, m, h []float64
		for ti, r := range pt.runs {
			pt.missing += r.live - r.finished
			pt.wrong += r.wrong
			if r.finished == r.live {
				f = append(f, 1000*r.rttFirst)
				l = append(l, 1000*r.rttLast)
				ld = append(ld, r.avgLoad)
			}
			q = append(q, float64(r.maxQueue))
			m = append(m, float64(r.messages))
			h = append(h, float64(r.hops))
			runRows = append(runRows, []string{pt.run.p.PaperName(), fmt.Sprint(pt.run.n), fmt.Sprint(pt.run.faults), fmt.Sprint(ti),
				F(stabEdgeProb(pt.run.n)), fmt.Sprint(r.added), stabInts(r.failed), fmt.Sprint(r.live), fmt.Sprint(r.finished),
				F(1000 * r.rttFirst), F(1000 * r.rttLast), F(r.avgLoad), fmt.Sprint(r.maxQueue), fmt.Sprint(r.messages), fmt.Sprint(r.hops), fmt.Sprint(r.wrong)})
		}
		pt.rttFirst, pt.rttLast, pt.load = Summarize(f), Summarize(l), Summarize(ld)
		pt.queue, pt.messages, pt.hops = Summarize(q), Summarize(m), Summarize(h)
		pt.sensRTT = pt.rttFirst.Max - pt.rttFirst.Min
		pt.sensQueue = pt.queue.Max - pt.queue.Min
	}
	if err := s.WriteCSV("stability-runs.csv", []string{"protocol", "n", "failures", "topology", "edge_p", "edges_added", "failed_nodes",
		"live", "finished", "rtt_first_ms", "rtt_last_ms", "avg_load", "max_queue", "messages", "hops", "wrong_results"}, runRows); err != nil {
		return err
	}
	var sumRows [][]string
	for _, pt := range points {
		sumRows = append(sumRows, []string{pt.run.p.PaperName(), fmt.Sprint(pt.run.n), fmt.Sprint(pt.run.faults), fmt.Sprint(len(pt.runs)),
			F(pt.rttFirst.Mean), F(pt.rttLast.Mean), F(pt.load.Mean), F(pt.queue.Mean), F(pt.messages.Mean), F(pt.hops.Mean),
			F(pt.sensRTT), F(pt.sensQueue), fmt.Sprint(pt.missing), fmt.Sprint(pt.wrong)})
	}
	if err := s.WriteCSV("stability.csv", []string{"protocol", "n", "failures", "topologies", "rtt_first_ms", "rtt_last_ms", "avg_load",
		"max_queue", "messages", "hops", "sensitivity_rtt_first_ms", "sensitivity_max_queue", "unfinished", "wrong_results"}, sumRows); err != nil {
		return err
	}
	return e.report(s, points, sizes, faultSizes, protos)
}

// stabTopoSeed is the seed of topology t at size n: the same graph (and the
// same received vectors) for every protocol, as in the paper, where the
// protocols are compared on the same generated networks.
func stabTopoSeed(base uint64, n, t int) uint64 {
	return DeriveSeed(base, fmt.Sprintf("stability/n=%d/topology=%d", n, t))
}

func stabInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, " ")
}

// stabSeries returns the points of protocol p without failures, with the
// value picked by y (and error bars from lo to hi when given).
func stabSeries(points []*stabPoint, p stable.Protocol, y func(*stabPoint) (float64, float64, float64)) []Point {
	var out []Point
	for _, pt := range points {
		if pt.run.p != p || pt.run.faults != 0 || pt.faultOnly {
			continue
		}
		v, lo, hi := y(pt)
		out = append(out, Point{X: float64(pt.run.n), Y: v, Lo: lo, Hi: hi})
	}
	return out
}
