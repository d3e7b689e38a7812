package experiment

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/model"
	"github.com/cohort-mp/cohort/sim"
	"gonum.org/v1/plot/vg"
)

func init() {
	Register(Spec{
		Name: "membership-ts",
		Summary: "Membership paper §7, Figs. 4–8: stabilization time T_s after one crash against n, fan-outs 2, 4, 8, " +
			"on the base, BlueGene/L torus and switch-contention networks, beside the models of §4 and §7",
		New: func() Experiment { return &membershipTS{} },
	})
}

// membershipTS reproduces the stabilization-time measurements of Varma,
// Wang, Mueller, Engelmann and Scott (ICS'06, §7, Figures 4–8): n member
// machines (package member) run in one simulated world, one non-root node
// crashes, an oracle tells the crashed node's parent (the node whose
// HOW_ARE_YOU or FAILED_NODE it would not answer) that it failed, and the
// root's member.Stabilized gives T_s = At − Began (root receiving the
// report → root holding every FAILURE_ACK). Each point is set beside the
// base model (§4, Eq. 2), the network's refined model (§7.1 distance, §7.2
// contention) and the exact critical path of the protocol under the
// simulator's per-message overhead (see logpStabilization).
type membershipTS struct {
	maxN      int
	samples   int
	fanouts   string
	networks  string
	latency   time.Duration // BG/L: base-bgl and per torus hop
	tcp       time.Duration // TCP: base-tcp and the switch's uncontended latency
	ocp       time.Duration
	perNode   time.Duration
	memBudget float64 // GiB per world
}

func (e *membershipTS) Flags(fs *flag.FlagSet) {
	fs.IntVar(&e.maxN, "max-n", 65536, "largest job size `n`, 4 to 65536")
	fs.IntVar(&e.samples, "samples", 0, "crashes (simulations, each of a random non-root node) per point (0: 3, or 1 with --quick)")
	fs.StringVar(&e.fanouts, "fanouts", "2,4,8", "comma-separated radix-tree `fan-outs` (powers of two)")
	fs.StringVar(&e.networks, "networks", "base-tcp,base-bgl,torus,switch", "comma-separated `list` of networks: base-tcp, base-bgl, torus, switch")
	fs.DurationVar(&e.latency, "latency", 4600*time.Nanosecond, "BG/L point-to-point latency `L`: of the base-bgl network and per torus hop (paper §7.1: 4.6µs)")
	fs.DurationVar(&e.tcp, "tcp-latency", sim.DefaultSwitchConfig().Base, "TCP point-to-point latency `L`: of the base-tcp network and of the switch without contention (paper §7.2: 118µs)")
	fs.DurationVar(&e.ocp, "ocp", 2*time.Microsecond, "computation overhead `O_cp`, charged per received message (sim RecvOverhead; paper: 2µs)")
	fs.DurationVar(&e.perNode, "switch-per-node", sim.DefaultSwitchConfig().PerNode, "switch latency added per communicating node beyond the knee (`time`; an assumption, the paper gives only a plot)")
	fs.Float64Var(&e.memBudget, "mem-budget", 3, "largest heap one world may need, in `GiB`; a --max-n whose world would need more (measured at n = 1024, scaled linearly) is refused before anything runs")
}

// tsNet is one of the networks of the sweep.
type tsNet int

const (
	tsBaseTCP tsNet = iota // constant latency L = 118 µs (§4's base model with §7.2's TCP parameters)
	tsBaseBGL              // constant latency L = 4.6 µs (§4's base model with §7.1's BG/L parameters)
	tsTorus                // BlueGene/L 3D torus, L per hop (§7.1, distance model)
	tsSwitch               // one Gigabit switch with contention (§7.2, contention model)
)

var tsNets = []tsNet{tsBaseTCP, tsBaseBGL, tsTorus, tsSwitch}

func (n tsNet) String() string {
	switch n {
	case tsBaseTCP:
		return "base-tcp"
	case tsBaseBGL:
		return "base-bgl"
	case tsTorus:
		return "torus"
	case tsSwitch:
		return "switch"
	}
	return fmt.Sprintf("tsNet(%d)", int(n))
}

func parseTSNet(s string) (tsNet, error) {
	for _, n := range tsNets {
		if s == n.String() {
			return n, nil
		}
	}
	return 0, fmt.Errorf("unknown network %q (want base-tcp, base-bgl, torus or switch)", s)
}

// tsFailAt is when the victim crashes and its parent's oracle declares it
// failed (virtual time; every member has started and installed the initial
// view at time 0, without messages, §3.2).
const tsFailAt = time.Millisecond

// tsMemberConfig is member.DefaultConfig with fan-out a and timeouts far
// beyond any stabilization of the sweep (the longest, a binary tree of
// 65,535 survivors behind the contended switch, takes about 1 s),
// so that no live node is ever taken for failed; no probes (nothing is
// excluded that could come back).
func tsMemberConfig(a int) member.Config {
	cfg := member.DefaultConfig()
	cfg.Fanout = a
	cfg.AckTimeout = time.Minute
	cfg.ReportRetry = time.Hour
	cfg.JoinRetry = time.Hour
	cfg.CommitTimeout = time.Hour
	cfg.ProbeInterval = 0
	return cfg
}

// tsSizes returns the job sizes of the sweep for fan-out a: every power of
// two and three times a power of two from 4 to maxN, and around every
// height change of the survivors' tree the last size of the lower tree and
// the first of the higher one. A tree of m = n−1 survivors has height H as
// long as m ≤ P_H = (a^H − 1)/(a − 1), so the pairs are n = P_H + 1 and
// P_H + 2.
func tsSizes(a, maxN int) []int {
	var ns []int
	for n := 4; n <= maxN; n *= 2 {
		ns = append(ns, n)
		if 3*n/2 > 4 && 3*n/2 <= maxN {
			ns = append(ns, 3*n/2)
		}
	}
	for p := 1; p+1 <= maxN; p = p*a + 1 {
		for _, n := range []int{p + 1, p + 2} {
			if n >= 4 && n <= maxN {
				ns = append(ns, n)
			}
		}
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

// tsPoint aggregates the samples of one (network, a, n).
type tsPoint struct {
	net      tsNet
	a, n     int
	height   int
	runs     []tsResult
	ts       Summary // µs
	installs Summary // µs, commit included
	base     float64 // µs, paper Eq. 2 with the network's base latency
	refined  float64 // µs, distance (torus, mean over samples) or contention (switch) model; NaN for base
	critical Summary // µs, logpStabilization (base, torus)
	ackTerm  float64 // µs, a·(H−1)·O_cp: what per-message overhead adds at most on the ACK wave
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func (e *membershipTS) Run(ctx context.Context, s *Session) error {
	if e.samples == 0 {
		e.samples = 3
		if s.Quick() {
			e.samples = 1
		}
	}
	var fanouts []int
	for _, f := range strings.Split(e.fanouts, ",") {
		a, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || tsMemberConfig(a).Validate() != nil || a > 1024 {
			return fmt.Errorf("%w: --fanouts: %q is not a power of two from 2 to 1024", ErrBadOption, f)
		}
		if !slices.Contains(fanouts, a) {
			fanouts = append(fanouts, a)
		}
	}
	var nets []tsNet
	for _, f := range strings.Split(e.networks, ",") {
		n, err := parseTSNet(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%w: --networks: %v", ErrBadOption, err)
		}
		if !slices.Contains(nets, n) {
			nets = append(nets, n)
		}
	}
	switch {
	case e.maxN < 4 || e.maxN > 65536:
		return fmt.Errorf("%w: --max-n %d is outside [4, 65536]", ErrBadOption, e.maxN)
	case e.samples < 1:
		return fmt.Errorf("%w: --samples %d", ErrBadOption, e.samples)
	case e.latency <= 0 || e.tcp <= 0 || e.ocp < 0 || e.perNode < 0:
		return fmt.Errorf("%w: --latency %v, --tcp-latency %v, --ocp %v, --switch-per-node %v: want latencies > 0, O_cp ≥ 0, per node ≥ 0",
			ErrBadOption, e.latency, e.tcp, e.ocp, e.perNode)
	case !(e.memBudget > 0):
		return fmt.Errorf("%w: --mem-budget %v GiB", ErrBadOption, e.memBudget)
	}
	swcfg := e.switchConfig()
	if err := swcfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadOption, err)
	}

	// Memory: the machines of a world share their views (package member),
	// so a world holds O(n) bytes. Measure a small one, refuse what would
	// not fit, then measure the report's sizes.
	calN := min(e.maxN, 1024)
	cal, err := e.tsWorldHeap(ctx, tsRun{net: tsBaseTCP, a: fanouts[0], n: calN})
	if err != nil {
		return err
	}
	perMember := max(cal.started, cal.after) / float64(calN)
	if need := perMember * float64(e.maxN); need > e.memBudget*(1<<30) {
		return fmt.Errorf("%w: --max-n %d would need about %.2f GiB per world (%.0f bytes per member, measured at n = %d), over --mem-budget %.2f GiB",
			ErrBadOption, e.maxN, need/(1<<30), perMember, calN, e.memBudget)
	}
	var heaps []tsHeap
	for _, n := range []int{4096, 16384, 65536} {
		if n > e.maxN {
			break
		}
		h, err := e.tsWorldHeap(ctx, tsRun{net: tsBaseTCP, a: 2, n: n})
		if err != nil {
			return err
		}
		heaps = append(heaps, h)
		s.Logf("membership-ts: a world of %d members holds %.1f MB started, %.1f MB after the crash is handled (%.0f bytes per member)",
			n, h.started/1e6, h.after/1e6, h.after/float64(n))
	}

	sizes := map[int][]int{}
	for _, a := range fanouts {
		sizes[a] = tsSizes(a, e.maxN)
	}
	s.Logf("membership-ts: n = 4…%d, a = %v, networks %v, %d crash(es) per point; L = %v (BG/L), %v (TCP), O_cp = %v; switch +%v per node beyond %d",
		e.maxN, fanouts, nets, e.samples, e.latency, e.tcp, e.ocp, swcfg.PerNode, swcfg.Knee)

	var points []*tsPoint
	for _, nt := range nets {
		for _, a := range fanouts {
			for _, n := range sizes[a] {
				points = append(points, &tsPoint{net: nt, a: a, n: n})
			}
		}
	}
	runs, err := runSamples(ctx, s, "simulations", points, e.samples,
		func(p *tsPoint) string { return fmt.Sprintf("%v/a=%d/n=%d", p.net, p.a, p.n) },
		func(p *tsPoint) float64 { return float64(p.n) }, // events and heap grow as n
		func(ctx context.Context, seed uint64, p *tsPoint) (tsResult, error) {
			return e.runOne(ctx, seed, tsRun{net: p.net, a: p.a, n: p.n})
		})
	if err != nil {
		return err
	}
	simulations := 0
	for i, p := range points {
		p.runs = runs[i]
		simulations += len(p.runs)
	}

	// Aggregate beside the models.
	var runRows [][]string
	for _, p := range points {
		m := p.n - 1
		h, err := model.TreeHeight(m, p.a)
		if err != nil {
			return err
		}
		p.height = h
		b, err := model.StabilizationTime(e.baseLatency(p.net), e.ocp, h)
		if err != nil {
			return err
		}
		p.base = us(b)
		p.ackTerm = us(time.Duration(p.a*(h-1)) * e.ocp)
		p.refined = math.NaN()
		if p.net == tsSwitch {
			c, err := model.ContentionStabilizationTime(swcfg.Latency, e.ocp, m, p.a)
			if err != nil {
				return err
			}
			p.refined = us(c)
		}
		var ts, inst, crit, dist []float64
		for i, r := range p.runs {
			if r.ts >= 0 {
				ts = append(ts, us(r.ts))
			}
			if r.installed >= 0 {
				inst = append(inst, us(r.installed))
			}
			if r.critical >= 0 {
				crit = append(crit, us(r.critical))
			}
			if p.net == tsTorus {
				dist = append(dist, us(r.distance))
			}
			cr, dm := "", ""
			if r.critical >= 0 {
				cr = F(us(r.critical))
			}
			if p.net == tsTorus {
				dm = F(us(r.distance))
			}
			runRows = append(runRows, []string{p.net.String(), fmt.Sprint(p.a), fmt.Sprint(p.n), fmt.Sprint(i),
				fmt.Sprint(uint32(r.victim)), fmt.Sprint(uint32(r.reporter)), fmt.Sprint(r.height), r.torus,
				F(us(r.ts)), F(us(r.began)), F(us(r.installed)), fmt.Sprint(r.installs), fmt.Sprint(r.starts), fmt.Sprint(r.aborts),
				fmt.Sprint(r.prepares), fmt.Sprint(r.acks), fmt.Sprint(r.commits), fmt.Sprint(r.reports), fmt.Sprint(r.reportAcks),
				fmt.Sprint(r.other), cr, dm, fmt.Sprint(r.maxHops), fmt.Sprint(r.maxContention), fmt.Sprint(r.events)})
		}
		p.ts, p.installs, p.critical = Summarize(ts), Summarize(inst), Summarize(crit)
		if p.net == tsTorus {
			p.refined = Summarize(dist).Mean
		}
	}
	if err := s.WriteCSV("ts-runs.csv", []string{"network", "a", "n", "crash", "victim", "reporter", "height", "torus",
		"ts_us", "began_us", "all_installed_us", "installs", "stabilizations", "aborts", "prepares", "acks", "commits",
		"reports", "report_acks", "other_msgs", "critical_path_us", "distance_model_us", "max_hops", "max_contention", "events"}, runRows); err != nil {
		return err
	}
	var sumRows [][]string
	for _, p := range points {
		sumRows = append(sumRows, []string{p.net.String(), fmt.Sprint(p.a), fmt.Sprint(p.n), F(math.Log2(float64(p.n))),
			fmt.Sprint(p.height), fmt.Sprint(p.ts.N), F(p.ts.Mean), F(p.ts.Min), F(p.ts.Max), F(p.installs.Mean),
			F(p.base), nanEmpty(p.refined), nanEmpty(p.critical.Mean)})
	}
	if err := s.WriteCSV("ts.csv", []string{"network", "a", "n", "log2_n", "height", "crashes", "ts_mean_us", "ts_min_us",
		"ts_max_us", "all_installed_mean_us", "base_model_us", "network_model_us", "critical_path_us"}, sumRows); err != nil {
		return err
	}

	s.Text("Every simulation runs n member machines (package member, the radix-tree protocol of §3) in one world. All "+
		"members install the initial view at time 0 without messages (§3.2); at %v a random non-root node crashes and "+
		"an oracle failure detector on its parent (the node that talks to it in the tree) emits core.Failed, which the "+
		"member turns into NODE_FAILURE to the root (Figure 3(a)). T_s is the root's member.Stabilized: At − Began, "+
		"from the root receiving the report to the root holding every FAILURE_ACK (§3.4). The survivors' tree has "+
		"m = n − 1 members; H and every model below are computed for it. Each message costs its receiver O_cp = %v of "+
		"CPU (sim RecvOverhead, one message at a time); sends cost nothing. %d crash(es) per point, each a separate "+
		"world; the member timeouts are far beyond every T_s, so no live node is ever suspected.",
		tsFailAt, e.ocp, e.samples)
	s.Text("Networks: **base-tcp** and **base-bgl**, every message takes L (§4's base model), with the paper's two "+
		"parameter sets: L = %v (TCP on Gigabit Ethernet, §7.2) and L = %v (MPI on BG/L, §7.1); **torus**, the "+
		"BlueGene/L distance model of §7.1, L = %v per hop on a 3D torus with ranks placed x fastest: the 8×8×8 "+
		"midplane of the paper up to 512 nodes, then the BG/L partition of 2, 4, … midplanes that holds n (16×8×8, "+
		"16×16×8, 16×16×16, …, up to 64×32×32, the 65,536-node machine); **switch**, the contention model of §7.2 as "+
		"a mechanism: one Gigabit switch whose latency is %v plus %v per communicating node beyond %d, the nodes "+
		"counted dynamically (those with a message in the switch), one message at a time per output port. The "+
		"paper's contention model instead substitutes L_c(N) for every message of a run of N nodes (§7.2); we plot "+
		"that model, with L_c(n − 1), beside the simulation. The slope per node is an assumption: the paper gives it "+
		"only as a plot (Fig. 7).",
		e.tcp, e.latency, e.latency, swcfg.Base, swcfg.PerNode, swcfg.Knee)
	s.Text("The member protocol adds a second phase to the paper's (member package doc: a node installs a view only " +
		"on VIEW_COMMIT, which the root sends after the last FAILURE_ACK). The commit lies outside T_s, which is " +
		"measured exactly as the paper defines it, so no model needs an extra phase; the time until every survivor " +
		"installed the view (T_s plus the commit wave) is in the table and ts.csv. What does differ from Eq. 2 is the " +
		"per-message overhead: the paper charges O_cp once per level (the tree update), the simulator on every " +
		"received message, so a parent spends O_cp on each of its a children's ACKs in turn. The \"critical path\" " +
		"curve is Eq. 2 with that one refinement, computed event by event for the exact tree and victim; for a " +
		"complete tree it is 2·L·(H−1) + O_cp·(H−1)·(1 + a), against Eq. 2's 2·L·(H−1) + O_cp·H. The refinement " +
		"also changes the shape. A new level starts with one leaf, whose ACK reaches its grandparent 2L + 2·O_cp " +
		"after its siblings'; that grandparent was busy for a·O_cp with a full set of ACKs anyway, and every level " +
		"above absorbs (a − 1)·O_cp more, so the step at a height change shrinks to about " +
		"max(0, 2L + 3·O_cp − a·O_cp − (H − 2)·(a − 1)·O_cp), and T_s instead climbs as the last level fills (the " +
		"full subtrees' ACKs queue at their parents). With TCP's L = 118 µs the steps stay (2L ≫ a·O_cp); with " +
		"BG/L's L = 4.6 µs and O_cp = 2 µs they melt into a ramp — for a = 8 there is no step at all. This is the " +
		"paper's own observation for TCP (Fig. 6: T_s \"increases linearly between any power-of-two node counts\"), " +
		"there attributed to the switch.")
	if e.maxN < 65536 {
		s.Text("Sizes stop at n = %d (--max-n); the default sweep goes to the 65,536 nodes of the full BlueGene/L.", e.maxN)
	}
	if len(heaps) > 0 {
		var rows [][]string
		for _, h := range heaps {
			rows = append(rows, []string{fmt.Sprint(h.n), fmt.Sprintf("%.1f", h.started/1e6), fmt.Sprintf("%.1f", h.after/1e6),
				fmt.Sprintf("%.0f", h.after/float64(h.n))})
		}
		s.Text("Memory. The n member machines of a world share their views (package member: one immutable initial view " +
			"per job, built by member.NewGroup; the root's next view is built once and installed by every survivor), so a " +
			"world holds O(n) bytes: each machine keeps only its own state. Heap in use per world (base-tcp, a = 2, " +
			"runtime.MemStats.HeapAlloc after a collection, the world still referenced): started, when every member has " +
			"installed the initial view; after, when every survivor has installed the view without the crashed node. " +
			"Before the views were shared every machine held its own copies of the list, 8.7 bytes per n² (2.3 GB at " +
			"n = 16,384, 37 GB at 65,536).")
		s.Table([]string{"n", "heap started (MB)", "heap after the crash (MB)", "bytes per member"}, rows)
	}
	if len(heaps) > 1 {
		lo, hi := heaps[0], heaps[len(heaps)-1]
		ratio := (hi.after / float64(hi.n)) / (lo.after / float64(lo.n))
		s.Check(fmt.Sprintf("a world holds O(n) bytes: heap per member at n = %d within 1.5× of n = %d (a world of private member lists grows 16× per member over that range)", hi.n, lo.n),
			ratio <= 1.5, fmt.Sprintf("%.0f and %.0f bytes per member after the crash, ratio %.2f", lo.after/float64(lo.n), hi.after/float64(hi.n), ratio))
	}

	// Figures, one per network and fan-out, as the paper's Figures 4–8.
	xt := []float64{}
	for n := 4; n <= e.maxN; n *= 2 {
		xt = append(xt, float64(n))
	}
	var overview []Series
	for ni, nt := range nets {
		for ai, a := range fanouts {
			var meas, base, refined, crit []Point
			for _, p := range points {
				if p.net != nt || p.a != a {
					continue
				}
				x := float64(p.n)
				meas = append(meas, Point{X: x, Y: p.ts.Mean, Lo: p.ts.Min, Hi: p.ts.Max})
				base = append(base, Point{X: x, Y: p.base})
				if !math.IsNaN(p.refined) {
					refined = append(refined, Point{X: x, Y: p.refined})
				}
				if p.critical.N > 0 {
					crit = append(crit, Point{X: x, Y: p.critical.Mean})
				}
			}
			series := []Series{{Label: "simulated T_s (mean, min–max)", Points: meas, Color: 1}}
			if len(crit) > 0 {
				series = append(series, Series{Label: "base model + per-message O_cp (critical path)", Points: crit, Style: Lines, Dashed: true, Color: 4})
			}
			switch nt {
			case tsTorus:
				series = append(series, Series{Label: "distance model (§7.1)", Points: refined, Style: Lines, Dashed: true, Color: 3})
			case tsSwitch:
				series = append(series, Series{Label: "contention model (§7.2), L_c(n−1)", Points: refined, Style: Lines, Dashed: true, Color: 3})
			}
			bl := "base model (§4, Eq. 2)"
			if nt == tsSwitch {
				bl = fmt.Sprintf("base model (§4, Eq. 2), L = %v", swcfg.Base)
			}
			series = append(series, Series{Label: bl, Points: base, Style: Lines, Dashed: true, Color: 2})
			overview = append(overview, Series{Label: fmt.Sprintf("%v, a = %d", nt, a), Points: meas, Color: 1 + ni*len(fanouts) + ai})
			title, paper := e.figureText(nt, a)
			fig := Figure{
				Name: fmt.Sprintf("ts-%v-a%d", nt, a), Title: title,
				XLabel: "nodes n (log2 scale)", YLabel: "stabilization time T_s (µs)", LogX: true, XTicks: xt,
				Series: series, Height: 11 * vg.Centimeter, Width: 17 * vg.Centimeter,
			}
			if nt == tsSwitch {
				fig.LogY = true
				fig.YLabel = "stabilization time T_s (µs, log scale)"
			}
			if err := s.Figure(fig, paper); err != nil {
				return err
			}
		}
	}
	if err := s.Figure(Figure{
		Name: "ts-all", Title: "Simulated T_s after one crash, every network and fan-out",
		XLabel: "nodes n (log2 scale)", YLabel: "T_s (µs, log scale)", LogX: true, LogY: true, XTicks: xt,
		Series: overview, Height: 12 * vg.Centimeter, Width: 17 * vg.Centimeter,
	}, "The paper has no such overview; Figures 4–5 (BG/L) and 6, 8 (TCP) each show one fan-out."); err != nil {
		return err
	}

	// Tables: a few sizes per network and fan-out.
	var trows [][]string
	for _, p := range points {
		if !tsShown(p.n, e.maxN) {
			continue
		}
		ref, cr := "—", "—"
		if !math.IsNaN(p.refined) {
			ref = fmtUS(p.refined)
		}
		if p.critical.N > 0 {
			cr = fmtUS(p.critical.Mean)
		}
		trows = append(trows, []string{p.net.String(), fmt.Sprint(p.a), fmt.Sprint(p.n), fmt.Sprint(p.height),
			fmt.Sprintf("%s (%s–%s)", fmtUS(p.ts.Mean), fmtUS(p.ts.Min), fmtUS(p.ts.Max)), fmtUS(p.base), ref, cr,
			fmtUS(p.installs.Mean)})
	}
	s.Text("T_s at a few sizes (µs; every size is in ts.csv). \"network model\" is the distance model (torus) or the " +
		"contention model (switch); \"installed\" is T_s plus the commit wave, until the last survivor installed the view.")
	s.Table([]string{"network", "a", "n", "H", "T_s simulated: mean (min–max)", "base model", "network model",
		"critical path", "installed"}, trows)

	e.checks(s, points, nets, fanouts, simulations)
	return nil
}
