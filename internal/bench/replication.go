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

// The replication benchmark is P2P-MPI's Figure 9: a ping-pong of 1,000
// round trips at each size, with each of the two ranks run as r replicas,
// r = 1 … MaxReplicas, in one invocation. Runs of the degrees alternate
// within each repetition; the overhead of degree r is the mean over the
// repetitions of latency(r)/latency(1) − 1, with a Student-t 95% interval.
//
// On a machine with fewer cores than processes, r replicas of a pair run
// 2r busy processes on the same cores, so part of the overhead over r = 1
// is only the sharing of the cores. Each degree r ≥ 2 is therefore also
// measured against its floor: the unreplicated pair's ping-pong while r − 1
// other unreplicated pairs ping-pong beside it (2r busy processes, the
// same loops), run next to the degree's own run. The goals are on the
// ratio latency(r)/floor(r), at every size from 8 B to 64 KiB.

// ReplicationConfig configures the benchmark.
type ReplicationConfig struct {
	MaxReplicas int // degrees 1 … MaxReplicas
	MaxSize     int // the largest message (bytes)
	Trips       int // round trips per size (the paper: 1,000)
	Reps        int // repetitions (for the intervals)
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
// (index r−1), repetition and size.
type ReplicationResult struct {
	Cfg   ReplicationConfig
	Sizes []int
	Lat   [][]map[int]float64 // [r-1][rep][size]
	// Floor[r-1][rep][size] is the floor of degree r ≥ 2 (Floor[0] is
	// empty): rank 0's pair unreplicated, beside r − 1 other pairs.
	Floor [][]map[int]float64
	// Queens[r-1][rep] is the N-Queens program's own time (s) at r = 1, 2.
	Queens [2][]float64
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
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	res := &ReplicationResult{Cfg: cfg, Lat: make([][]map[int]float64, cfg.MaxReplicas), Floor: make([][]map[int]float64, cfg.MaxReplicas)}
	for rep := range cfg.Reps {
		for i := range cfg.MaxReplicas {
			r := i + 1
			if rep%2 == 1 {
				r = cfg.MaxReplicas - i // alternate the order
			}
			if r > 1 {
				fmt.Fprintf(cfg.Progress, "bench: replication floor of r=%d (%d unreplicated pairs), repetition %d of %d…\n", r, r, rep+1, cfg.Reps)
				floor, err := res.pingPong(ctx, 2*r, 1)
				if err != nil {
					return nil, fmt.Errorf("floor of r=%d: %w", r, err)
				}
				res.Floor[r-1] = append(res.Floor[r-1], floor)
			}
			fmt.Fprintf(cfg.Progress, "bench: replication r=%d, repetition %d of %d…\n", r, rep+1, cfg.Reps)
			lat, err := res.pingPong(ctx, 2, r)
			if err != nil {
				return nil, fmt.Errorf("r=%d: %w", r, err)
			}
			res.Lat[r-1] = append(res.Lat[r-1], lat)
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

// pingPong runs one ping-pong job of ranks ranks (pairs 2k, 2k+1; rank
// 0's pair measured), each run as replicas processes, and returns rank
// 0's one-way latencies by size.
func (res *ReplicationResult) pingPong(ctx context.Context, ranks, replicas int) (map[int]float64, error) {
	cfg := res.Cfg
	b := OSULatency()
	b.Ranks = ranks
	b.MaxSize, b.Loop, b.LoopL, b.Skip, b.SkipL = cfg.MaxSize, cfg.Trips, cfg.Trips, 10, 10
	b.Impls, b.Replicas, b.Progress = []string{"ours"}, replicas, cfg.Progress
	res.Sizes = b.Sizes()
	out, err := b.Measure(ctx)
	if err != nil {
		return nil, err
	}
	return out[0].Figures, nil
}

// Overhead returns degree r's overhead at size over degree 1 (a fraction)
// with its 95% half-interval, from the repetitions' paired ratios.
func (res *ReplicationResult) Overhead(r, size int) (mean, half float64) {
	mean, half = pairedRatio(res.Lat[r-1], res.Lat[0], size)
	return mean - 1, half
}

// OverFloor returns degree r's latency at size over its floor (r ≥ 2)
// with its 95% half-interval, from the repetitions' paired ratios.
func (res *ReplicationResult) OverFloor(r, size int) (mean, half float64) {
	return pairedRatio(res.Lat[r-1], res.Floor[r-1], size)
}

// pairedRatio is the mean over the repetitions of xs[rep][size] /
// base[rep][size], with its 95% half-interval; NaN without a pair.
func pairedRatio(xs, base []map[int]float64, size int) (mean, half float64) {
	var ratios []float64
	for rep := range min(len(xs), len(base)) {
		if b := base[rep][size]; b > 0 {
			ratios = append(ratios, xs[rep][size]/b)
		}
	}
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	return meanCI(ratios)
}

// meanAt is the mean over the repetitions of ms[rep][size].
func meanAt(ms []map[int]float64, size int) float64 {
	var xs []float64
	for _, m := range ms {
		xs = append(xs, m[size])
	}
	m, _ := meanCI(xs)
	return m
}

// WriteTable prints the mean latencies, the overheads and the goals.
func (res *ReplicationResult) WriteTable(w io.Writer) {
	cfg := res.Cfg
	fmt.Fprintf(w, "# ping-pong under replication (P2P-MPI Fig. 9): one-way latency in µs, mean of %d repetitions of %d round trips; overhead over r = 1, "+
		"and ratio over the floor (r = 1 with r − 1 other unreplicated pairs beside it: as many busy processes), with their 95%% intervals; %d cores\n",
		cfg.Reps, cfg.Trips, runtime.NumCPU())
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
			fmt.Fprintf(tw, "%.2f\t", meanAt(res.Lat[r-1], size))
			if r > 1 {
				o, h := res.Overhead(r, size)
				f, fh := res.OverFloor(r, size)
				fmt.Fprintf(tw, "%+.1f%% ±%.1f\t%.2f\t%.2f ±%.2f\t", 100*o, 100*h, meanAt(res.Floor[r-1], size), f, fh)
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if q := res.Queens; len(q[0]) > 0 && len(q[0]) == len(q[1]) && !slices.Contains(q[0], 0) {
		ratios := make([]float64, len(q[0]))
		for i := range ratios {
			ratios[i] = q[1][i] / q[0][i]
		}
		m, h := meanCI(ratios)
		t1, _ := meanCI(q[0])
		t2, _ := meanCI(q[1])
		fmt.Fprintf(w, "# N-Queens n=%d on %d ranks (the program's own time, mean of %d): r=1 %.3f s, r=2 %.3f s (%d processes on %d cores): ratio %.2f ±%.2f\n",
			cfg.QueensN, cfg.QueensProcs, len(q[0]), t1, t2, 2*cfg.QueensProcs, runtime.NumCPU(), m, h)
	}
	var goalSizes []int
	for _, size := range res.Sizes {
		if size >= ReplicationGoalMin && size <= ReplicationGoalMax {
			goalSizes = append(goalSizes, size)
		}
	}
	if len(goalSizes) == 0 {
		return
	}
	fmt.Fprintf(w, "# goals over the floor, at every size from %d B to %d B measured (the worst size shown)\n", ReplicationGoalMin, goalSizes[len(goalSizes)-1])
	for _, g := range ReplicationGoals {
		if g.R > cfg.MaxReplicas {
			continue
		}
		worst, wh, at := math.Inf(-1), 0.0, 0
		for _, size := range goalSizes {
			if f, h := res.OverFloor(g.R, size); f > worst {
				worst, wh, at = f, h, size
			}
		}
		verdict := "met"
		if worst > g.Max {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  r = %d: at most %.2f ±%.2f × the floor (at %d B; goal ≤ %.1f×) %s\n", g.R, worst, wh, at, g.Max, verdict)
	}
}

// WriteFiles writes replication.csv (one row per degree and size: mean
// latency, overhead over r = 1 and its 95% half-interval) and the figure
// replication.png/.svg (overhead against size, one curve per degree ≥ 2,
// with the paper's values at 64 KiB) into dir, and returns the figure's
// path.
func (res *ReplicationResult) WriteFiles(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	var b strings.Builder
	b.WriteString("replicas,size_bytes,latency_us,overhead_pct,overhead_ci95_pct,floor_us,over_floor,over_floor_ci95,repetitions\n")
	fig := experiment.Figure{
		Name:   "replication",
		Title:  fmt.Sprintf("Ping-pong under replication (P2P-MPI Fig. 9), %d round trips, %d repetitions", res.Cfg.Trips, res.Cfg.Reps),
		XLabel: "message size (bytes)", YLabel: "overhead over r = 1 (%)",
		LogX: true, Legend: experiment.TopRight,
	}
	for r := 1; r <= res.Cfg.MaxReplicas; r++ {
		var pts []experiment.Point
		for _, size := range res.Sizes {
			var xs []float64
			for _, m := range res.Lat[r-1] {
				xs = append(xs, m[size])
			}
			lat, _ := meanCI(xs)
			o, h, floor, f, fh := 0.0, 0.0, lat, 1.0, 0.0
			if r > 1 {
				o, h = res.Overhead(r, size)
				floor = meanAt(res.Floor[r-1], size)
				f, fh = res.OverFloor(r, size)
			}
			fmt.Fprintf(&b, "%d,%d,%.3f,%.2f,%.2f,%.3f,%.3f,%.3f,%d\n", r, size, lat, 100*o, 100*h, floor, f, fh, len(xs))
			if r > 1 && size > 0 {
				pts = append(pts, experiment.Point{X: float64(size), Y: 100 * o, Lo: 100 * (o - h), Hi: 100 * (o + h)})
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
