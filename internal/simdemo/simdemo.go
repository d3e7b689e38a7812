// Package simdemo is `cohort demo --sim`: a simulated cluster of nodes
// running the P2P-MPI gossip failure detector (package fd, binary
// round-robin by default) in package sim through experiment.GossipCluster;
// a few nodes crash at times drawn from the seed, and the report says who
// detected what and when, with a histogram and a plot of the detection
// times. The same seed gives the same run and the same trace hash.
package simdemo

import (
	"context"
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

// Config describes a run.
type Config struct {
	N        int // nodes
	Crashes  int // nodes that crash
	Seed     uint64
	Schedule topo.Schedule
	Out      string // directory of the plot; "" writes none
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

// legend explains the symbols of the event table, printed once before it.
const legend = "✗ a node crashed   ● the first live node declared it failed   ✔ every live node knows it failed   ! a live node declared failed by mistake"

// Result is the outcome of a run.
type Result struct {
	OK        bool   // every crash detected by every live node, no false detection
	Verdict   string // one line saying why not, when !OK
	TraceHash uint64
	Crashes   []*experiment.Crash
	Plot      string // path of the PNG, "" if none
}

// Run simulates the cluster and writes the demo's report to w.
func Run(ctx context.Context, cfg Config, w io.Writer) (Result, error) {
	gcfg := fd.SimGossipConfig()
	gcfg.Schedule = cfg.Schedule
	cl, err := experiment.NewGossipCluster(cfg.Seed, cfg.N, gcfg, demoMinLatency, demoMaxLatency, demoSpread)
	if err != nil {
		return Result{}, err
	}
	lo, hi, boundErr := fd.DetectionBoundSpread(gcfg, cfg.N, demoMaxLatency, demoSpread)

	// Victims and crash times from the seed (not from the world's own
	// sources, so that they do not depend on the network's draws).
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x64656d6f)) // "demo"
	victims := rng.Perm(cfg.N)[:cfg.Crashes]
	times := make([]time.Duration, cfg.Crashes)
	for i := range times {
		times[i] = demoFirstCrash + time.Duration(rng.Int64N(int64(demoCrashWindow)))
	}
	slices.Sort(times)
	for i, v := range victims {
		if err := cl.CrashAt(times[i], core.NodeID(v)); err != nil {
			return Result{}, err
		}
	}

	p := &printer{w: w}
	p.f("cohort demo: %s simulated nodes gossiping with %s every %v (seed %d)\n",
		commas(cfg.N), strings.ToUpper(cfg.Schedule.String()), gcfg.GossipInterval, cfg.Seed)
	p.f("  suspect after T_cleanup = %v of silence, then ping (timeout %v); messages take %v–%v\n",
		gcfg.CleanupTime(cfg.N), gcfg.PingTimeout, demoMinLatency, demoMaxLatency)
	if boundErr == nil {
		p.f("  a lone crash is declared by every live node within %s–%s s (fd.DetectionBound)\n", secs(lo), secs(hi))
	}
	p.f("  %d crashes at random times between %v and %v\n\n", cfg.Crashes, demoFirstCrash, demoFirstCrash+demoCrashWindow)
	p.f("  %s\n\n", legend)
	p.f("  %9s  %s\n", "time", "event")
	live := cfg.N
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
	deadline := times[len(times)-1] + gcfg.CleanupTime(cfg.N) + 20*time.Duration(topo.CeilLog2(cfg.N))*gcfg.GossipInterval
	if boundErr == nil {
		deadline = times[len(times)-1] + hi + 10*gcfg.GossipInterval
	}
	if err := cl.Run(ctx, deadline); err != nil {
		return Result{}, err
	}

	res := Result{OK: true, TraceHash: cl.World.TraceHash(), Crashes: cl.Crashes()}
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
		res.OK = false
		res.Verdict = fmt.Sprintf("%d detections missing: not every live node declared every crash", missing)
	case len(falses) > 0:
		res.OK = false
		res.Verdict = fmt.Sprintf("%d false detections (live nodes declared failed), the first: %v by %v at %ss",
			len(falses), falses[0].Victim, falses[0].By, secs(falses[0].At))
	}
	if res.OK {
		within := ""
		if boundErr == nil {
			within = fmt.Sprintf(", %s of %s detections within the lone-crash bound", commas(len(all)-outside), commas(len(all)))
			if outside > 0 {
				within += " (concurrent crashes lengthen the gossip paths)"
			}
		}
		p.f("✔ %d crashes, each declared by all %s live nodes; no false detection%s; %s suspicions cleared by a ping\n",
			cfg.Crashes, commas(live), within, commas(cl.FalseSuspicions()))
	} else {
		p.f("✗ %s\n", res.Verdict)
	}

	if cfg.Out != "" {
		path, err := demoPlot(cfg, cl, lo, hi, boundErr == nil)
		if err != nil {
			return res, err
		}
		res.Plot = path
		p.f("plot: %s\n", path)
	}
	return res, p.err
}

// demoPlot writes detections.png (and .svg): for each crash, the fraction
// of live nodes that had declared it against the time since the crash.
func demoPlot(cfg Config, cl *experiment.GossipCluster, lo, hi time.Duration, bounded bool) (string, error) {
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	f := experiment.Figure{
		Name:   "detections",
		Title:  fmt.Sprintf("Who knew when: %d crashes among %s nodes (%s, seed %d)", cfg.Crashes, commas(cfg.N), strings.ToUpper(cfg.Schedule.String()), cfg.Seed),
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
	path := filepath.Join(cfg.Out, f.Name)
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
