package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// overheadDetectors are the configurations, "off" first (the reference).
var overheadDetectors = []string{"off", "heartbeat-paper", "heartbeat"}

// overheadLabel names a detector in the table.
func overheadLabel(d string) string {
	switch d {
	case "heartbeat-paper":
		return "heartbeat 5 s (paper)"
	case "heartbeat":
		return "heartbeat 100 ms"
	}
	return d
}

// nqueensTime reads the program's own time and checks the count.
var nqueensTime = regexp.MustCompile(`solutions in ([0-9.]+)s \(known \d+\): CORRECT`)

// OverheadConfig describes a run of the overhead benchmark (Phoenix §6.1,
// Table 2): the N-Queens program run on each process count with the
// failure detector off and on, configurations alternated.
type OverheadConfig struct {
	Program  string    // path of the N-Queens executable (examples/nqueens, built)
	N        int       // board size
	Mode     string    // N-Queens -mode: steal or master
	Procs    []int     // process counts
	Reps     int       // repetitions of each configuration, at least 2
	Progress io.Writer // one line per run, and every false exclusion
	// Idle, if positive, adds the idle job (overhead_idle.go): ranks that
	// wait Idle, whose processor time with the detector on beyond off is
	// the detector's alone.
	Idle time.Duration
}

// RunOverhead runs the benchmark and writes its table to w, one block of
// rows per process count as soon as it is measured.
func RunOverhead(ctx context.Context, cfg OverheadConfig, w io.Writer) error {
	if cfg.Reps < 2 {
		return fmt.Errorf("bench overhead: %d repetitions; want at least 2 (for a confidence interval)", cfg.Reps)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	start := time.Now()
	fmt.Fprintf(w, "overhead of failure detection (Phoenix §6.1, Table 2): N-Queens n = %d, -mode %s, %d repetitions, configurations alternated\n",
		cfg.N, cfg.Mode, cfg.Reps)
	fmt.Fprintf(w, "load average at start: %s\n", loadavg())
	fmt.Fprintf(w, "%5s  %-22s  %9s  %9s  %24s  %9s  %24s  %9s  %s\n", "procs", "detector",
		"wall", "cpu", "wall on/off [95% CI]", "wall", "cpu on/off [95% CI]", "cpu", "false exclusions")
	for _, p := range cfg.Procs {
		runs := map[string][]queensResult{}
		excluded := map[string]int{}
		for rep := range cfg.Reps {
			order := slices.Clone(overheadDetectors)
			if rep%2 == 1 {
				slices.Reverse(order)
			}
			for _, d := range order {
				r, err := overheadRun(ctx, cfg.Program, p, d, cfg.N, cfg.Mode)
				if r.falsePositive != "" {
					excluded[d]++
					fmt.Fprintf(cfg.Progress, "bench overhead: %d procs, %s, rep %d: exact count, but %s\n", p, d, rep+1, r.falsePositive)
				}
				if err != nil {
					return fmt.Errorf("%d processes, detector %s, repetition %d: %w", p, d, rep+1, err)
				}
				fmt.Fprintf(cfg.Progress, "bench overhead: %d procs, %-15s rep %d: %.3f s, cpu %.3f s\n", p, d, rep+1, r.secs, r.cpu)
				runs[d] = append(runs[d], r)
			}
		}
		off := runs["off"]
		wallOf := func(r queensResult) float64 { return r.secs }
		cpuOf := func(r queensResult) float64 { return r.cpu }
		fmt.Fprintf(w, "%5d  %-22s  %8.3fs  %8.3fs  %24s  %9s  %24s  %9s  %d\n", p, overheadLabel("off"),
			medianOf(off, wallOf), medianOf(off, cpuOf), "", "", "", "", excluded["off"])
		for _, d := range overheadDetectors[1:] {
			on := runs[d]
			wr, wo := onOff(on, off, wallOf)
			cr, co := onOff(on, off, cpuOf)
			fmt.Fprintf(w, "%5d  %-22s  %8.3fs  %8.3fs  %24s  %9s  %24s  %9s  %d\n", p, overheadLabel(d),
				medianOf(on, wallOf), medianOf(on, cpuOf), wr, wo, cr, co, excluded[d])
		}
	}
	if cfg.Idle > 0 {
		if err := idleOverhead(ctx, w, cfg.Progress, cfg.Procs, cfg.Idle, cfg.Reps); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "load average at end: %s; %.0f s in all\n", loadavg(), time.Since(start).Seconds())
	fmt.Fprintln(w, "wall = the program's own time, computation only; cpu = processor time (user + system) of all its ranks, from start to exit, as the kernel accounted it")
	fmt.Fprintln(w, "on/off = mean of per-repetition ratios; paper: at most about 1% of wall time (Table 2)")
	fmt.Fprintln(w, "false exclusions = runs with the exact count in which a live rank was excluded (its detector's false suspicion) and exited non-zero")
	return nil
}

// medianOf is the median of f over runs.
func medianOf(runs []queensResult, f func(queensResult) float64) float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return medianF(xs)
}

// onOff returns the mean of the per-repetition ratios f(on)/f(off) with
// its 95% confidence interval, and the overhead it means, as table cells.
func onOff(on, off []queensResult, f func(queensResult) float64) (ratio, overhead string) {
	ratios := make([]float64, len(off))
	for i := range off {
		if f(off[i]) == 0 {
			return "too short to measure", "-"
		}
		ratios[i] = f(on[i]) / f(off[i])
	}
	mean, half := meanCI(ratios)
	return fmt.Sprintf("%.4f [%.4f, %.4f]", mean, mean-half, mean+half), fmt.Sprintf("%+.2f%%", (mean-1)*100)
}

// queensResult is one N-Queens run: the program's own time and the
// processor time of its ranks, in seconds, and, for a run with the exact
// count in which a rank exited non-zero, what happened.
type queensResult struct {
	secs, cpu     float64
	falsePositive string
}

// overheadRun runs the N-Queens job once (see queensRun).
func overheadRun(ctx context.Context, path string, procs int, detector string, n int, mode string) (queensResult, error) {
	return queensRun(ctx, launch.Config{N: procs, Program: path, Detector: detector, Args: []string{"-n", strconv.Itoa(n), "-mode", mode}})
}

// queensRun runs the N-Queens job of cfg (its N, Program, Args, Detector,
// Replicas) once. A run that does not print the exact count is an error.
// A run with the exact count in which some rank exited non-zero (a live
// rank falsely suspected and excluded, which an aggressive detector does
// on an overloaded machine) is counted, and falsePositive says what
// happened.
func queensRun(ctx context.Context, cfg launch.Config) (queensResult, error) {
	var out, errb bytes.Buffer
	cfg.Stdout, cfg.Stderr, cfg.Prefix, cfg.Timeout = &out, &errb, true, time.Hour
	job, err := launch.Start(ctx, cfg)
	if err != nil {
		return queensResult{}, err
	}
	exits, werr := job.Wait()
	m := nqueensTime.FindStringSubmatch(out.String())
	if m == nil {
		if ctx.Err() != nil {
			return queensResult{}, ctx.Err()
		}
		return queensResult{}, fmt.Errorf("no exact count (%v):\n%s%s", werr, out.String(), tail(errb.String(), 20))
	}
	var r queensResult
	if werr != nil {
		r.falsePositive = fmt.Sprintf("%v: %s", werr, strings.TrimSpace(tail(errb.String(), 1)))
	}
	for _, x := range exits {
		r.cpu += x.CPU.Seconds()
	}
	r.secs, err = strconv.ParseFloat(m[1], 64)
	return r, err
}

// tail returns the last k lines of s.
func tail(s string, k int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	return strings.Join(lines, "")
}

func medianF(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// meanCI returns the mean of xs and the half-width of its 95% confidence
// interval (Student's t, [StudentT95]).
func meanCI(xs []float64) (mean, half float64) {
	k := len(xs)
	for _, x := range xs {
		mean += x
	}
	mean /= float64(k)
	if k < 2 {
		return mean, math.NaN()
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / float64(k-1))
	return mean, StudentT95(k-1) * sd / math.Sqrt(float64(k))
}

// loadavg returns the first three fields of /proc/loadavg ("n/a" where
// there is none).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "n/a"
}
