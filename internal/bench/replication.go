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
	// Queens[r-1][rep] is the N-Queens program's own time (s) at r = 1, 2.
	Queens [2][]float64
}

// ReplicationGoals are the goals of the overhead at 64 KiB.
var ReplicationGoals = []struct {
	R   int
	Max float64 // overhead, fraction
}{{2, 0.05}, {3, 0.15}}

// RunReplication measures every degree, alternating them within each
// repetition.
func RunReplication(ctx context.Context, cfg ReplicationConfig) (*ReplicationResult, error) {
	if cfg.MaxReplicas < 1 || cfg.Trips < 1 || cfg.Reps < 1 || cfg.MaxSize < 1 {
		return nil, fmt.Errorf("bench: replication: bad configuration %+v", cfg)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	res := &ReplicationResult{Cfg: cfg, Lat: make([][]map[int]float64, cfg.MaxReplicas)}
	for rep := range cfg.Reps {
		for i := range cfg.MaxReplicas {
			r := i + 1
			if rep%2 == 1 {
				r = cfg.MaxReplicas - i // alternate the order
			}
			b := OSULatency()
			b.MaxSize, b.Loop, b.LoopL, b.Skip, b.SkipL = cfg.MaxSize, cfg.Trips, cfg.Trips, 10, 10
			b.Impls, b.Replicas, b.Progress = []string{"ours"}, r, cfg.Progress
			res.Sizes = b.Sizes()
			fmt.Fprintf(cfg.Progress, "bench: replication r=%d, repetition %d of %d…\n", r, rep+1, cfg.Reps)
			out, err := b.Measure(ctx)
			if err != nil {
				return nil, fmt.Errorf("r=%d: %w", r, err)
			}
			res.Lat[r-1] = append(res.Lat[r-1], out[0].Figures)
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

// Overhead returns degree r's overhead at size over degree 1 (a fraction)
// with its 95% half-interval, from the repetitions' paired ratios.
func (res *ReplicationResult) Overhead(r, size int) (mean, half float64) {
	var ratios []float64
	for rep := range res.Lat[r-1] {
		base, x := res.Lat[0][rep][size], res.Lat[r-1][rep][size]
		if base > 0 {
			ratios = append(ratios, x/base-1)
		}
	}
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	return meanCI(ratios)
}

// WriteTable prints the mean latencies, the overheads and the goals.
func (res *ReplicationResult) WriteTable(w io.Writer) {
	cfg := res.Cfg
	fmt.Fprintf(w, "# ping-pong under replication (P2P-MPI Fig. 9): one-way latency in µs, mean of %d repetitions of %d round trips; overhead over r = 1 with its 95%% interval\n", cfg.Reps, cfg.Trips)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "size (B)\t")
	for r := 1; r <= cfg.MaxReplicas; r++ {
		fmt.Fprintf(tw, "r=%d µs\t", r)
		if r > 1 {
			fmt.Fprintf(tw, "r=%d overhead\t", r)
		}
	}
	fmt.Fprintln(tw)
	for _, size := range res.Sizes {
		fmt.Fprintf(tw, "%d\t", size)
		for r := 1; r <= cfg.MaxReplicas; r++ {
			var xs []float64
			for _, m := range res.Lat[r-1] {
				xs = append(xs, m[size])
			}
			m, _ := meanCI(xs)
			fmt.Fprintf(tw, "%.2f\t", m)
			if r > 1 {
				o, h := res.Overhead(r, size)
				fmt.Fprintf(tw, "%+.1f%% ±%.1f\t", 100*o, 100*h)
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
	goalSize := 64 << 10
	if !slices.Contains(res.Sizes, goalSize) {
		return
	}
	fmt.Fprintln(w, "# goals at 64 KiB (the paper: about 0% at r = 2, 17% at r = 3)")
	for _, g := range ReplicationGoals {
		if g.R > cfg.MaxReplicas {
			continue
		}
		o, h := res.Overhead(g.R, goalSize)
		verdict := "met"
		if o > g.Max {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  r = %d: overhead %+.1f%% ±%.1f (goal ≤ %.0f%%) %s\n", g.R, 100*o, 100*h, 100*g.Max, verdict)
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
	b.WriteString("replicas,size_bytes,latency_us,overhead_pct,overhead_ci95_pct,repetitions\n")
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
			o, h := 0.0, 0.0
			if r > 1 {
				o, h = res.Overhead(r, size)
			}
			fmt.Fprintf(&b, "%d,%d,%.3f,%.2f,%.2f,%d\n", r, size, lat, 100*o, 100*h, len(xs))
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
