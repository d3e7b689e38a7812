package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cohort-mp/cohort/experiment"
	"github.com/cohort-mp/cohort/launch"
)

// The replication benchmark is P2P-MPI's Figure 9: a ping-pong at each
// size, with each of the two ranks run as r replicas, r = 1 … MaxReplicas,
// in one invocation.
//
// On a machine with fewer cores than processes, r replicas of a pair run
// 2r busy processes on the same cores, so part of the overhead over r = 1
// is only the sharing of the cores. Each degree r ≥ 2 is therefore also
// measured against its floor: the unreplicated pair's ping-pong while r − 1
// other unreplicated pairs ping-pong beside it (2r busy processes, the
// same loops). The goals are on the ratio latency(r)/floor(r), at every
// size from 8 B to 64 KiB.
//
// A shared machine's load moves by more than the goals' margins within
// seconds, so the benchmark decides from many short repetitions rather
// than a few long ones: each repetition runs r = 1 and, for every degree,
// its floor and itself, one right after the other, in an order reversed
// from one repetition to the next (A B, B A, …), so that a drift in the
// load falls on both sides of a pair alike. Every figure is the median of
// the repetitions' paired ratios, with the sign test's distribution-free
// 95% interval ([MedianCI95]); a goal is met when the interval's top is
// within it at every size, not met when the interval's bottom is above it
// at some size, and undecided otherwise.

// ReplicationConfig configures the benchmark.
type ReplicationConfig struct {
	MaxReplicas int // degrees 1 … MaxReplicas
	MaxSize     int // the largest message (bytes)
	Trips       int // round trips per size and repetition
	Reps        int // repetitions: the pairs the intervals come from (6 at least for an interval)
	// TCP runs the ranks over loopback TCP with the frames in
	// authenticated records, the path between hosts, instead of the
	// same-host path (shared memory set up on Unix sockets).
	TCP bool
	// Netns runs every process on a host of its own, network namespaces
	// on a bridge of this machine (needs root), over TCP with
	// authenticated records: the path between machines, links included
	// (replication_netns.go).
	Netns bool
	// Queens, if not empty, is the N-Queens executable (examples/nqueens,
	// built): each repetition also runs it at r = 1 and r = 2 on
	// QueensProcs ranks with board QueensN, for the cost of replication on
	// a real program.
	Queens      string
	QueensN     int
	QueensProcs int
	Progress    io.Writer
}

// ReplicationResult holds the one-way latencies (µs) measured, by degree
// (index r−1), repetition and size; Lat[r-1][rep] and Floor[r-1][rep]
// were measured next to each other.
type ReplicationResult struct {
	Cfg   ReplicationConfig
	Sizes []int
	Lat   [][]map[int]float64 // [r-1][rep][size]
	// Floor[r-1][rep][size] is the floor of degree r ≥ 2 (Floor[0] is
	// empty): rank 0's pair unreplicated, beside r − 1 other pairs.
	Floor [][]map[int]float64
	// Queens[r-1][rep] is the N-Queens program's own time (s) at r = 1, 2.
	Queens [2][]float64
	// Retried counts the ping-pong runs that failed and were run again.
	Retried int

	netns *netnsRig // with Cfg.Netns, while RunReplication runs
}

// ReplicationGoals are the goals of latency(r)/floor(r), at every size
// from ReplicationGoalMin to ReplicationGoalMax bytes.
var ReplicationGoals = []struct {
	R   int
	Max float64 // ratio over the floor
}{{2, 1.5}, {3, 2}}

// The sizes the goals hold at.
const (
	ReplicationGoalMin = 8
	ReplicationGoalMax = 64 << 10
)

// RunReplication measures every degree, alternating them within each
// repetition.
func RunReplication(ctx context.Context, cfg ReplicationConfig) (*ReplicationResult, error) {
	if cfg.MaxReplicas < 1 || cfg.Trips < 1 || cfg.Reps < 1 || cfg.MaxSize < 1 {
		return nil, fmt.Errorf("bench: replication: bad configuration %+v", cfg)
	}
	if cfg.TCP && cfg.Netns {
		return nil, fmt.Errorf("bench: replication: TCP and Netns are two paths: choose one")
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	res := &ReplicationResult{Cfg: cfg, Lat: make([][]map[int]float64, cfg.MaxReplicas), Floor: make([][]map[int]float64, cfg.MaxReplicas)}
	if cfg.Netns {
		fmt.Fprintf(cfg.Progress, "bench: replication: starting %d namespace hosts with a daemon each…\n", netnsHosts(cfg.MaxReplicas))
		rig, err := startNetns(ctx, cfg)
		if err != nil {
			return nil, err
		}
		res.netns = rig
		defer func() {
			if err := rig.close(); err != nil {
				fmt.Fprintf(cfg.Progress, "bench: replication: tearing the namespace hosts down: %v\n", err)
			}
			res.netns = nil
		}()
	}
	// One repetition's runs: r = 1, then each degree's floor and itself.
	type run struct {
		r     int
		floor bool
	}
	runs := []run{{r: 1}}
	for r := 2; r <= cfg.MaxReplicas; r++ {
		runs = append(runs, run{r, true}, run{r, false})
	}
	for rep := range cfg.Reps {
		order := slices.Clone(runs)
		if rep%2 == 1 {
			slices.Reverse(order) // B A after A B: a drift falls on both alike
		}
		for _, x := range order {
			if x.floor {
				fmt.Fprintf(cfg.Progress, "bench: replication floor of r=%d (%d unreplicated pairs), repetition %d of %d…\n", x.r, x.r, rep+1, cfg.Reps)
				floor, err := res.pingPong(ctx, 2*x.r, 1)
				if err != nil {
					return nil, fmt.Errorf("floor of r=%d: %w", x.r, err)
				}
				res.Floor[x.r-1] = append(res.Floor[x.r-1], floor)
				continue
			}
			fmt.Fprintf(cfg.Progress, "bench: replication r=%d, repetition %d of %d…\n", x.r, rep+1, cfg.Reps)
			lat, err := res.pingPong(ctx, 2, x.r)
			if err != nil {
				return nil, fmt.Errorf("r=%d: %w", x.r, err)
			}
			res.Lat[x.r-1] = append(res.Lat[x.r-1], lat)
		}
		if cfg.Queens == "" {
			continue
		}
		for i := range 2 {
			r := 1 + (i+rep)%2 // alternate the order
			fmt.Fprintf(cfg.Progress, "bench: replication, N-Queens n=%d on %d ranks, r=%d, repetition %d of %d…\n", cfg.QueensN, cfg.QueensProcs, r, rep+1, cfg.Reps)
			run, err := queensRun(ctx, launch.Config{N: cfg.QueensProcs, Replicas: r, Program: cfg.Queens, Args: []string{"-n", strconv.Itoa(cfg.QueensN)}})
			if err != nil {
				return nil, fmt.Errorf("N-Queens r=%d: %w", r, err)
			}
			res.Queens[r-1] = append(res.Queens[r-1], run.secs)
		}
	}
	return res, nil
}

// replicationRetries is how many times a failed run is run again before
// the benchmark gives up: at the load of a shared machine a job's failure
// detector may exclude a live rank now and then, which says nothing of
// the latency the run was to measure.
const replicationRetries = 2

// pingPong runs one ping-pong job of ranks ranks (pairs 2k, 2k+1; rank
// 0's pair measured), each run as replicas processes, and returns rank
// 0's one-way latencies by size. A run that fails is run again, up to
// replicationRetries times, and counted in res.Retried.
func (res *ReplicationResult) pingPong(ctx context.Context, ranks, replicas int) (map[int]float64, error) {
	cfg := res.Cfg
	b := OSULatency()
	b.Ranks = ranks
	b.MaxSize, b.Loop, b.LoopL, b.Skip, b.SkipL = cfg.MaxSize, cfg.Trips, cfg.Trips, 10, 10
	b.Impls, b.Replicas, b.Progress = []string{res.impl()}, replicas, cfg.Progress
	res.Sizes = b.Sizes()
	measure := func() (map[int]float64, error) {
		if res.netns != nil {
			return res.netns.run(ctx, b)
		}
		out, err := b.Measure(ctx)
		if err != nil {
			return nil, err
		}
		return out[0].Figures, nil
	}
	for try := 0; ; try++ {
		figs, err := measure()
		if err == nil {
			return figs, nil
		}
		if try == replicationRetries || ctx.Err() != nil {
			return nil, err
		}
		res.Retried++
		fmt.Fprintf(cfg.Progress, "bench: replication: the run failed (%v); running it again\n", err)
	}
}

// impl is the OSU implementation the runs use.
func (res *ReplicationResult) impl() string {
	if res.Cfg.TCP {
		return "ours-mac"
	}
	return "ours"
}

// Overhead returns degree r's overhead at size over degree 1 (a
// fraction): the median of the repetitions' paired ratios less one, with
// its 95% interval.
func (res *ReplicationResult) Overhead(r, size int) (med, lo, hi float64) {
	med, lo, hi = pairedRatio(res.Lat[r-1], res.Lat[0], size)
	return med - 1, lo - 1, hi - 1
}

// OverFloor returns degree r's latency at size over its floor (r ≥ 2):
// the median of the repetitions' paired ratios, with its 95% interval.
func (res *ReplicationResult) OverFloor(r, size int) (med, lo, hi float64) {
	return pairedRatio(res.Lat[r-1], res.Floor[r-1], size)
}

// pairedRatio is the median over the repetitions of xs[rep][size] /
// base[rep][size], with its 95% interval ([MedianCI95]); NaN without a
// pair.
func pairedRatio(xs, base []map[int]float64, size int) (med, lo, hi float64) {
	var ratios []float64
	for rep := range min(len(xs), len(base)) {
		if b := base[rep][size]; b > 0 {
			ratios = append(ratios, xs[rep][size]/b)
		}
	}
	return MedianCI95(ratios)
}

// medianAt is the median over the repetitions of ms[rep][size].
func medianAt(ms []map[int]float64, size int) float64 {
	var xs []float64
	for _, m := range ms {
		xs = append(xs, m[size])
	}
	med, _, _ := MedianCI95(xs)
	return med
}

// interval renders [lo, hi] with prec decimals, "[?]" when unbounded.
func interval(lo, hi float64, prec int) string {
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || math.IsNaN(lo) || math.IsNaN(hi) {
		return "[?]"
	}
	return fmt.Sprintf("[%.*f, %.*f]", prec, lo, prec, hi)
}

// GoalVerdict judges goal g (r = g.R at most g.Max × its floor at every
// size from ReplicationGoalMin to ReplicationGoalMax measured): met when
// every size's interval is within it, not met when some size's interval
// is wholly above it. It returns the size that decides: the first not
// met, else the one nearest to missing (highest interval top).
func (res *ReplicationResult) GoalVerdict(r int, bound float64) (v Verdict, at int) {
	v, top := Met, math.Inf(-1)
	for _, size := range res.goalSizes() {
		_, lo, hi := res.OverFloor(r, size)
		switch verdictOf(lo, hi, bound) {
		case NotMet:
			return NotMet, size
		case Undecided:
			v = Undecided
		}
		if hi > top || at == 0 {
			top, at = hi, size
		}
	}
	return v, at
}

// goalSizes are the measured sizes the goals hold at.
func (res *ReplicationResult) goalSizes() []int {
	var out []int
	for _, size := range res.Sizes {
		if size >= ReplicationGoalMin && size <= ReplicationGoalMax {
			out = append(out, size)
		}
	}
	return out
}

// WriteTable prints the median latencies, the overheads, the ratios over
// the floors and the goals' verdicts.
func (res *ReplicationResult) WriteTable(w io.Writer) {
	cfg := res.Cfg
	path := "one host (shared memory)"
	switch {
	case cfg.TCP:
		path = "loopback TCP with authenticated records, as between hosts"
	case cfg.Netns:
		path = fmt.Sprintf("TCP with authenticated records across %d network-namespace hosts (a process on each)", netnsHosts(cfg.MaxReplicas))
	}
	fmt.Fprintf(w, "# ping-pong under replication (P2P-MPI Fig. 9) over %s: one-way latency in µs, median of %d repetitions of %d round trips; "+
		"overhead over r = 1 and ratio over the floor (r = 1 with r − 1 other unreplicated pairs beside it: as many busy processes), "+
		"each the median of the repetitions' paired ratios with its 95%% sign-test interval; %d cores\n",
		path, cfg.Reps, cfg.Trips, runtime.NumCPU())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "size (B)\t")
	for r := 1; r <= cfg.MaxReplicas; r++ {
		fmt.Fprintf(tw, "r=%d µs\t", r)
		if r > 1 {
			fmt.Fprintf(tw, "r=%d overhead\tr=%d floor µs\tr=%d ÷ floor\t", r, r, r)
		}
	}
	fmt.Fprintln(tw)
	for _, size := range res.Sizes {
		fmt.Fprintf(tw, "%d\t", size)
		for r := 1; r <= cfg.MaxReplicas; r++ {
			fmt.Fprintf(tw, "%.2f\t", medianAt(res.Lat[r-1], size))
			if r > 1 {
				o, olo, ohi := res.Overhead(r, size)
				f, flo, fhi := res.OverFloor(r, size)
				fmt.Fprintf(tw, "%+.0f%% %s\t%.2f\t%.2f %s\t", 100*o, interval(100*olo, 100*ohi, 0), medianAt(res.Floor[r-1], size), f, interval(flo, fhi, 2))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if res.Retried > 0 {
		fmt.Fprintf(w, "# %d runs failed (a rank excluded under load) and were run again\n", res.Retried)
	}
	if q := res.Queens; len(q[0]) > 0 && len(q[0]) == len(q[1]) && !slices.Contains(q[0], 0) {
		ratios := make([]float64, len(q[0]))
		for i := range ratios {
			ratios[i] = q[1][i] / q[0][i]
		}
		m, lo, hi := MedianCI95(ratios)
		t1, _, _ := MedianCI95(q[0])
		t2, _, _ := MedianCI95(q[1])
		fmt.Fprintf(w, "# N-Queens n=%d on %d ranks (the program's own time, median of %d): r=1 %.3f s, r=2 %.3f s (%d processes on %d cores): ratio %.2f %s\n",
			cfg.QueensN, cfg.QueensProcs, len(q[0]), t1, t2, 2*cfg.QueensProcs, runtime.NumCPU(), m, interval(lo, hi, 2))
	}
	goalSizes := res.goalSizes()
	if len(goalSizes) == 0 {
		return
	}
	fmt.Fprintf(w, "# goals over the floor, at every size from %d B to %d B measured: met if every size's interval is within the goal, "+
		"NOT met if some size's interval is wholly above it, else undecided\n", ReplicationGoalMin, goalSizes[len(goalSizes)-1])
	if cfg.Reps < 6 {
		fmt.Fprintf(w, "  (%d repetitions give no 95%% interval of a median: 6 at least decide)\n", cfg.Reps)
	}
	for _, g := range ReplicationGoals {
		if g.R > cfg.MaxReplicas {
			continue
		}
		v, at := res.GoalVerdict(g.R, g.Max)
		f, lo, hi := res.OverFloor(g.R, at)
		what := "the nearest to missing"
		if v == NotMet {
			what = "missed"
		}
		fmt.Fprintf(w, "  r = %d ≤ %.1f× the floor: %s (%s at %d B: %.2f %s)\n", g.R, g.Max, v, what, at, f, interval(lo, hi, 2))
	}
}

// WriteFiles writes replication.csv (one row per degree and size: median
// latency, overhead over r = 1 and ratio over the floor with their 95%
// intervals) and the figure replication.png/.svg (overhead against size,
// one curve per degree ≥ 2, with the paper's values at 64 KiB) into dir,
// and returns the figure's path.
func (res *ReplicationResult) WriteFiles(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	var b strings.Builder
	b.WriteString("replicas,size_bytes,latency_us,overhead_pct,overhead_lo_pct,overhead_hi_pct,floor_us,over_floor,over_floor_lo,over_floor_hi,repetitions\n")
	fig := experiment.Figure{
		Name:   "replication",
		Title:  fmt.Sprintf("Ping-pong under replication (P2P-MPI Fig. 9), %d round trips, %d repetitions", res.Cfg.Trips, res.Cfg.Reps),
		XLabel: "message size (bytes)", YLabel: "overhead over r = 1 (%, median, 95% interval)",
		LogX: true, Legend: experiment.TopRight,
	}
	finite := func(x, or float64) float64 {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return or
		}
		return x
	}
	for r := 1; r <= res.Cfg.MaxReplicas; r++ {
		var pts []experiment.Point
		for _, size := range res.Sizes {
			lat := medianAt(res.Lat[r-1], size)
			o, olo, ohi, floor, f, flo, fhi := 0.0, 0.0, 0.0, lat, 1.0, 1.0, 1.0
			if r > 1 {
				o, olo, ohi = res.Overhead(r, size)
				floor = medianAt(res.Floor[r-1], size)
				f, flo, fhi = res.OverFloor(r, size)
			}
			fmt.Fprintf(&b, "%d,%d,%.3f,%.2f,%.2f,%.2f,%.3f,%.3f,%.3f,%.3f,%d\n", r, size, lat, 100*o, 100*olo, 100*ohi, floor, f, flo, fhi, len(res.Lat[r-1]))
			if r > 1 && size > 0 {
				pts = append(pts, experiment.Point{X: float64(size), Y: 100 * o, Lo: 100 * finite(olo, o), Hi: 100 * finite(ohi, o)})
			}
		}
		if r > 1 {
			fig.Series = append(fig.Series, experiment.Series{Label: fmt.Sprintf("cohort, r = %d", r), Points: pts, Color: r - 1})
		}
	}
	paper := map[int]float64{2: 0, 3: 17}
	for r := 2; r <= min(res.Cfg.MaxReplicas, 3); r++ {
		fig.Series = append(fig.Series, experiment.Series{Label: fmt.Sprintf("the paper at 64 KiB, r = %d", r),
			Points: []experiment.Point{{X: 64 << 10, Y: paper[r]}}, Style: experiment.Points, Color: r - 1})
	}
	if err := os.WriteFile(filepath.Join(dir, "replication.csv"), []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	path := filepath.Join(dir, fig.Name)
	if err := fig.Save(path); err != nil {
		return "", err
	}
	return path + ".png", nil
}
