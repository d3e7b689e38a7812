package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/experiment"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/topo"
)

func init() {
	register(&command{
		name:     "demo",
		synopsis: "[--n N] [--procs P] [--kill K] [--seed S] [--quiet] | --sim [flags]",
		summary:  "count N-Queens on 8 processes while two are killed, and watch them recover",
		help: `Demo builds examples/nqueens and runs it on --procs local processes (package
launch, no daemon): the fault-tolerant N-Queens count with random work
stealing (Phoenix §5.2.2), first without failures, then again while --kill
ranks (never rank 0, where the search starts) are killed with SIGKILL at
random moments of the search. It prints, live, what every survivor's failure
detector says (suspicions, failures), every membership view the survivors
install (epoch, members), the work the survivors take back, and at the end
the count beside the published one, the time lost to recovery (the search
time with kills minus the failure-free one) and, for each kill, when it was
first suspected, declared and excluded from every survivor's view. It exits
with status 0 only if the count is the published one and every survivor
exited with status 0. The same --seed gives the same victims, killed at the
same fractions (10-80 %) of the failure-free run's search.

--sim runs the earlier demo instead: a simulated 1,024-node cluster where 5
nodes crash and BRR gossip detects them (see cohort demo --sim -h); its
--trace-only prints the run's trace hash, which CI compares between runs.

Examples:
  cohort demo
  cohort demo --n 14 --kill 3 --seed 7
  cohort demo --quiet
  cohort demo --sim -n 128 --seed 11 --trace-only`,
		run: runDemoCommand,
	})
}

// simDemoCommand describes `cohort demo --sim` for its usage message.
var simDemoCommand = &command{
	name:     "demo",
	synopsis: "--sim [flags]",
	help: `Demo --sim simulates a cluster of nodes running the P2P-MPI gossip failure
detector (binary round-robin, a gossip every 0.5 s) over a network with 1-10 ms
latency. A few nodes crash at random times; the demo prints who detected what
and when, a summary per crash, a histogram of all detection times, and writes
a plot of them. It exits with status 0 only if every crash was detected by
every live node and no live node was ever declared failed.

The same seed gives the same run, event for event; --trace-only prints just
the run's trace hash (the CI compares two runs with it).

Examples:
  cohort demo --sim
  cohort demo --sim --seed 7 --crashes 10
  cohort demo --sim -n 4096 --schedule dbrr --out /tmp/demo
  cohort demo --sim -n 128 --seed 11 --trace-only`,
}

// runDemoCommand runs the live demo, or the simulated one with --sim.
func runDemoCommand(ctx context.Context, c *call) error {
	for _, a := range c.args {
		if a == "--" {
			break
		}
		if name, val, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "sim" && val != "false" {
			sc := *c
			sc.cmd = simDemoCommand
			return runSimDemo(ctx, &sc)
		}
	}
	return runLiveDemo(ctx, c)
}

// demoConfig is what the demo's flags set.
type demoConfig struct {
	n         int
	crashes   int
	seed      uint64
	schedule  topo.Schedule
	out       string // directory of the plot; "" writes none
	traceOnly bool
}

// Demo timing: crashes happen uniformly in [demoFirstCrash, demoFirstCrash
// + demoCrashWindow); messages take 1–10 ms; nodes start within 200 ms.
const (
	demoFirstCrash  = 10 * time.Second
	demoCrashWindow = 30 * time.Second
	demoMinLatency  = time.Millisecond
	demoMaxLatency  = 10 * time.Millisecond
	demoSpread      = 200 * time.Millisecond
)

func runSimDemo(ctx context.Context, c *call) error {
	fs := c.newFlags()
	cfg := demoConfig{schedule: topo.BinaryRoundRobin}
	fs.Bool("sim", true, "run this simulated demo (without it: the live N-Queens demo)")
	fs.IntVar(&cfg.n, "n", 1024, "number of simulated `nodes`")
	fs.IntVar(&cfg.crashes, "crashes", 5, "how many `nodes` crash")
	fs.Uint64Var(&cfg.seed, "seed", 1, "`seed` of the run (crash times, victims, network)")
	fs.TextVar(&cfg.schedule, "schedule", topo.BinaryRoundRobin, "gossip `schedule`: brr, dbrr, rr or random")
	fs.StringVar(&cfg.out, "out", filepath.Join("out", "demo"), "`directory` for the plot of detection times")
	fs.BoolVar(&cfg.traceOnly, "trace-only", false, "print only the run's trace hash")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	switch {
	case cfg.n < 4 || cfg.n > 1<<14:
		return usagef("-n %d: want 4 to 16384 nodes", cfg.n)
	case cfg.crashes < 1 || cfg.crashes > cfg.n/2:
		return usagef("--crashes %d: want 1 to n/2 = %d", cfg.crashes, cfg.n/2)
	}
	if cfg.traceOnly {
		cfg.out = ""
		res, err := runDemo(ctx, cfg, io.Discard)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%016x\n", res.traceHash)
		return nil
	}
	res, err := runDemo(ctx, cfg, c.stdout)
	if err != nil {
		return err
	}
	if !res.ok {
		return errors.New(res.verdict)
	}
	return nil
}

// demoResult is the outcome of a demo run.
type demoResult struct {
	ok        bool   // every crash detected by every live node, no false detection
	verdict   string // one line saying why not, when !ok
	traceHash uint64
	crashes   []*experiment.Crash
	plot      string // path of the PNG, "" if none
}

// runDemo simulates the cluster and writes the demo's report to w.
func runDemo(ctx context.Context, cfg demoConfig, w io.Writer) (demoResult, error) {
	gcfg := fd.SimGossipConfig()
	gcfg.Schedule = cfg.schedule
	cl, err := experiment.NewGossipCluster(cfg.seed, cfg.n, gcfg, demoMinLatency, demoMaxLatency, demoSpread)
	if err != nil {
		return demoResult{}, err
	}
	lo, hi, boundErr := fd.DetectionBoundSpread(gcfg, cfg.n, demoMaxLatency, demoSpread)

	// Victims and crash times from the seed (not from the world's own
	// sources, so that they do not depend on the network's draws).
	rng := rand.New(rand.NewPCG(cfg.seed, 0x64656d6f)) // "demo"
	victims := rng.Perm(cfg.n)[:cfg.crashes]
	times := make([]time.Duration, cfg.crashes)
	for i := range times {
		times[i] = demoFirstCrash + time.Duration(rng.Int64N(int64(demoCrashWindow)))
	}
	slices.Sort(times)
	for i, v := range victims {
		if err := cl.CrashAt(times[i], core.NodeID(v)); err != nil {
			return demoResult{}, err
		}
	}

	p := &printer{w: w}
	p.f("cohort demo: %s simulated nodes gossiping with %s every %v (seed %d)\n",
		commas(cfg.n), strings.ToUpper(cfg.schedule.String()), gcfg.GossipInterval, cfg.seed)
	p.f("  suspect after T_cleanup = %v of silence, then ping (timeout %v); messages take %v–%v\n",
		gcfg.CleanupTime(cfg.n), gcfg.PingTimeout, demoMinLatency, demoMaxLatency)
	if boundErr == nil {
		p.f("  a lone crash is declared by every live node within %s–%s s (fd.DetectionBound)\n", secs(lo), secs(hi))
	}
	p.f("  %d crashes at random times between %v and %v\n\n", cfg.crashes, demoFirstCrash, demoFirstCrash+demoCrashWindow)
	p.f("  %9s  %s\n", "time", "event")
	live := cfg.n
	cl.OnProgress = func(e experiment.Progress) {
		switch e.Kind {
		case experiment.CrashHappened:
			live--
			p.f("  %8ss  ✗ %v crashed\n", secs(e.At), e.Crash.Node)
		case experiment.FirstDetected:
			p.f("  %8ss  ● %v declared failed by %v, the first to know (+%ss)\n", secs(e.At), e.Crash.Node, e.By, secs(e.At-e.Crash.At))
		case experiment.AllDetected:
			p.f("  %8ss  ✔ %v known failed by all %s live nodes (+%ss)\n", secs(e.At), e.Crash.Node, commas(live), secs(e.At-e.Crash.At))
		case experiment.FalseFailure:
			p.f("  %8ss  ! %v wrongly declared %v failed\n", secs(e.At), e.By, e.Victim)
		}
	}
	deadline := times[len(times)-1] + gcfg.CleanupTime(cfg.n) + 20*time.Duration(topo.CeilLog2(cfg.n))*gcfg.GossipInterval
	if boundErr == nil {
		deadline = times[len(times)-1] + hi + 10*gcfg.GossipInterval
	}
	if err := cl.Run(ctx, deadline); err != nil {
		return demoResult{}, err
	}

	res := demoResult{ok: true, traceHash: cl.World.TraceHash(), crashes: cl.Crashes()}
	p.f("\nDetection times, in seconds after each crash, over the %s nodes alive at the end:\n", commas(live))
	p.f("  %-7s %9s %7s %7s %7s %7s %10s\n", "crash", "at", "first", "median", "p90", "last", "all knew")
	var all []float64
	var missing int
	for _, cr := range cl.Crashes() {
		d := cr.Delays(cl.World)
		var ds []float64
		for _, x := range d {
			ds = append(ds, x.Seconds())
		}
		all = append(all, ds...)
		m := len(cr.Missing(cl.World))
		missing += m
		sum := experiment.Summarize(ds)
		knew := "never"
		if cr.CompleteAt >= 0 {
			knew = secs(cr.CompleteAt) + "s"
		}
		if len(ds) == 0 {
			p.f("  %-7v %8ss %7s %7s %7s %7s %10s\n", cr.Node, secs(cr.At), "—", "—", "—", "—", knew)
		} else {
			p.f("  %-7v %8ss %7.2f %7.2f %7.2f %7.2f %10s\n", cr.Node, secs(cr.At), sum.Min, sum.P50, sum.P90, sum.Max, knew)
		}
		if m > 0 {
			p.f("          %d live nodes never declared it\n", m)
		}
	}
	if len(all) > 0 {
		p.f("\nAll %s detections:\n", commas(len(all)))
		histogram(p, all, 0.5, 40)
	}

	falses := cl.FalseFailures()
	outside := 0
	if boundErr == nil {
		for _, x := range all {
			if x < lo.Seconds() || x > hi.Seconds() {
				outside++
			}
		}
	}
	p.f("\n")
	switch {
	case missing > 0:
		res.ok = false
		res.verdict = fmt.Sprintf("%d detections missing: not every live node declared every crash", missing)
	case len(falses) > 0:
		res.ok = false
		res.verdict = fmt.Sprintf("%d false detections (live nodes declared failed), the first: %v by %v at %ss",
			len(falses), falses[0].Victim, falses[0].By, secs(falses[0].At))
	}
	if res.ok {
		within := ""
		if boundErr == nil {
			within = fmt.Sprintf(", %s of %s detections within the lone-crash bound", commas(len(all)-outside), commas(len(all)))
			if outside > 0 {
				within += " (concurrent crashes lengthen the gossip paths)"
			}
		}
		p.f("✔ %d crashes, each declared by all %s live nodes; no false detection%s; %s suspicions cleared by a ping\n",
			cfg.crashes, commas(live), within, commas(cl.FalseSuspicions()))
	} else {
		p.f("✗ %s\n", res.verdict)
	}

	if cfg.out != "" {
		path, err := demoPlot(cfg, cl, lo, hi, boundErr == nil)
		if err != nil {
			return res, err
		}
		res.plot = path
		p.f("plot: %s\n", path)
	}
	return res, p.err
}

// demoPlot writes detections.png (and .svg): for each crash, the fraction
// of live nodes that had declared it against the time since the crash.
func demoPlot(cfg demoConfig, cl *experiment.GossipCluster, lo, hi time.Duration, bounded bool) (string, error) {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	f := experiment.Figure{
		Name:   "detections",
		Title:  fmt.Sprintf("Who knew when: %d crashes among %s nodes (%s, seed %d)", cfg.crashes, commas(cfg.n), strings.ToUpper(cfg.schedule.String()), cfg.seed),
		XLabel: "time since the crash (s)", YLabel: "live nodes that declared it failed (%)",
		YRange: [2]float64{0, 105},
	}
	for _, cr := range cl.Crashes() {
		d := cr.Delays(cl.World)
		slices.Sort(d)
		live := len(d) + len(cr.Missing(cl.World))
		pts := []experiment.Point{}
		for i, x := range d {
			pts = append(pts, experiment.Point{X: x.Seconds(), Y: 100 * float64(i+1) / float64(live)})
		}
		f.Series = append(f.Series, experiment.Series{Label: fmt.Sprintf("%v crashed at %ss", cr.Node, secs(cr.At)), Points: pts, Style: experiment.Lines})
	}
	if bounded {
		boundColor := len(f.Series) + 1
		f.Series = append(f.Series,
			experiment.Series{Label: "fd.DetectionBound for a lone crash", Points: []experiment.Point{{X: lo.Seconds(), Y: 0}, {X: lo.Seconds(), Y: 100}}, Style: experiment.Lines, Dashed: true, Color: boundColor},
			experiment.Series{Points: []experiment.Point{{X: hi.Seconds(), Y: 0}, {X: hi.Seconds(), Y: 100}}, Style: experiment.Lines, Dashed: true, Color: boundColor})
	}
	f.Legend = experiment.TopLeft
	path := filepath.Join(cfg.out, f.Name)
	if err := f.Save(path); err != nil {
		return "", err
	}
	return path + ".png", nil
}

// histogram prints a bar per bin of width binSec seconds.
func histogram(p *printer, xs []float64, binSec float64, width int) {
	lo, hi := slices.Min(xs), slices.Max(xs)
	first := int(lo / binSec)
	bins := make([]int, int(hi/binSec)-first+1)
	for _, x := range xs {
		bins[int(x/binSec)-first]++
	}
	top := slices.Max(bins)
	for i, c := range bins {
		from := float64(first+i) * binSec
		n := (c*width + top - 1) / top
		bar := strings.Repeat("█", n) + strings.Repeat(" ", width-n)
		p.f("  %5.1f–%-5.1f s │%s %s\n", from, from+binSec, bar, commas(c))
	}
}

// printer writes formatted text and remembers the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// secs formats a duration as seconds with three decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// commas formats n with thousands separators.
func commas(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
