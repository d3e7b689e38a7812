package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

func init() {
	registerBench(&benchmark{
		name:    "overhead",
		summary: "the cost of failure detection: N-Queens with the detector off and on (Phoenix Table 2)",
		help: `Overhead measures what failure detection costs a computation, as the
Phoenix paper's §6.1 (Table 2) does: the fault-tolerant N-Queens of
examples/nqueens (random work stealing, -mode steal) runs on each process
count with the failure detector off (COHORT_DETECTOR=off: no detector layer,
no detector traffic; the "Normal" column) and on (the "FT" column): the
Phoenix heartbeat detector with k = 2 monitors, once with the paper's
intervals (heartbeat-paper: T_interval = T_timeout = T_broken = 5 s,
T_insurance = 200 s, Table 1) and once with an aggressive 100 ms interval
(heartbeat: 100 ms / 100 ms / 100 ms, T_insurance 4 s).

The configurations alternate within one invocation (each repetition runs
off, paper, 100 ms, the next one in the reverse order), so that a drift of
the machine's speed falls on all of them. The time of a run is the program's
own: from the start of its computation to the count (it excludes process
start-up, the rendezvous and the end of the job). Every run must print the
exact count (CORRECT), or the benchmark fails; a run with the exact count in
which a live rank was excluded (an aggressive detector's false suspicion
on an overloaded machine) counts, and the table says how many there were.

The table gives, per process count and detector, the median time of the
repetitions and the ratio on/off: the mean of the per-repetition ratios
(each "on" run over the "off" run of the same repetition) with a 95%
confidence interval (Student's t). The paper reports at most about 1%
(ratios down to 0.989); the goal here is under 0.5% at 100 ms. Note that
the N-Queens program keeps its fault-tolerance bookkeeping (what each rank
gave away) in both settings: the ratio is the detector's cost.

The full run (n = 17, 5 repetitions) takes tens of minutes on 2 cores;
--quick (n = 16, 3 repetitions) a few minutes (each job also spends about 2 s starting and ending).`,
		run: runOverheadBench,
	})
}

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

func runOverheadBench(ctx context.Context, c *call) error {
	fs := c.newFlags()
	n := fs.Int("n", 17, "board `size` (17: about a minute per run on 2 cores)")
	procs := intList{2, 4, 8, 16}
	fs.Var(&procs, "procs", "comma-separated process `counts`")
	reps := fs.Int("reps", 5, "`repetitions` of each configuration")
	quick := fs.Bool("quick", false, "a short version: n = 16, 3 repetitions (unless given)")
	program := fs.String("program", "github.com/cohort-mp/cohort/examples/nqueens", "the N-Queens `program` (a path, or a Go package built first)")
	mode := fs.String("mode", "steal", "N-Queens `mode`: steal or master")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["n"] {
			*n = 16
		}
		if !set["reps"] {
			*reps = 3
		}
	}
	switch {
	case *n < 8 || *n > 20:
		return usagef("--n %d: want 8 to 20", *n)
	case *reps < 2:
		return usagef("--reps %d: want at least 2 (for a confidence interval)", *reps)
	case *mode != "steal" && *mode != "master":
		return usagef("--mode %q: want steal or master", *mode)
	}
	for _, p := range procs {
		if p < 2 || p > maxRunRanks {
			return usagef("--procs %d: want 2 to %d", p, maxRunRanks)
		}
	}
	path, cleanup, err := resolveProgram(ctx, *program, c.stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	start := time.Now()
	fmt.Fprintf(c.stdout, "overhead of failure detection (Phoenix §6.1, Table 2): N-Queens n = %d, -mode %s, %d repetitions, configurations alternated\n",
		*n, *mode, *reps)
	fmt.Fprintf(c.stdout, "load average at start: %s\n", loadavg())
	fmt.Fprintf(c.stdout, "%5s  %-22s  %10s  %10s  %22s  %9s  %s\n", "procs", "detector", "median", "off", "ratio on/off [95% CI]", "overhead", "false exclusions")
	for _, p := range procs {
		times := map[string][]float64{}
		excluded := map[string]int{}
		for rep := range *reps {
			order := slices.Clone(overheadDetectors)
			if rep%2 == 1 {
				slices.Reverse(order)
			}
			for _, d := range order {
				t, falsePositive, err := overheadRun(ctx, path, p, d, *n, *mode)
				if falsePositive != "" {
					excluded[d]++
					fmt.Fprintf(c.stderr, "bench overhead: %d procs, %s, rep %d: exact count, but %s\n", p, d, rep+1, falsePositive)
				}
				if err != nil {
					return fmt.Errorf("%d processes, detector %s, repetition %d: %w", p, d, rep+1, err)
				}
				fmt.Fprintf(c.stderr, "bench overhead: %d procs, %-15s rep %d: %.3f s\n", p, d, rep+1, t)
				times[d] = append(times[d], t)
			}
		}
		off := times["off"]
		fmt.Fprintf(c.stdout, "%5d  %-22s  %9.3fs  %10s  %22s  %9s  %d\n", p, overheadLabel("off"), medianF(off), "", "", "", excluded["off"])
		for _, d := range overheadDetectors[1:] {
			ratios := make([]float64, len(off))
			for i := range off {
				ratios[i] = times[d][i] / off[i]
			}
			mean, half := meanCI(ratios)
			if slices.Contains(off, 0) {
				fmt.Fprintf(c.stdout, "%5d  %-22s  %9.3fs  %9.3fs  %22s  %9s  %d\n", p, overheadLabel(d), medianF(times[d]), medianF(off),
					"runs too short (1 ms)", "-", excluded[d])
				continue
			}
			fmt.Fprintf(c.stdout, "%5d  %-22s  %9.3fs  %9.3fs  %22s  %+8.2f%%  %d\n", p, overheadLabel(d), medianF(times[d]), medianF(off),
				fmt.Sprintf("%.4f [%.4f, %.4f]", mean, mean-half, mean+half), (mean-1)*100, excluded[d])
		}
	}
	fmt.Fprintf(c.stdout, "load average at end: %s; %.0f s in all\n", loadavg(), time.Since(start).Seconds())
	fmt.Fprintln(c.stdout, "time = the program's own, computation only; ratio = mean of per-repetition on/off ratios; paper: at most about 1% (Table 2)")
	fmt.Fprintln(c.stdout, "false exclusions = runs with the exact count in which a live rank was excluded (its detector's false suspicion) and exited non-zero")
	return nil
}

// overheadRun runs the N-Queens job once and returns its own time in
// seconds; a run that does not print the exact count is an error. A run
// with the exact count in which some rank exited non-zero (a live rank
// falsely suspected and excluded, which an aggressive detector does on an
// overloaded machine) is counted, and falsePositive says what happened.
func overheadRun(ctx context.Context, path string, procs int, detector string, n int, mode string) (secs float64, falsePositive string, err error) {
	var out, errb bytes.Buffer
	job, err := launch.Start(ctx, launch.Config{N: procs, Program: path, Detector: detector,
		Args:   []string{"-n", strconv.Itoa(n), "-mode", mode},
		Stdout: &out, Stderr: &errb, Prefix: true, Timeout: time.Hour})
	if err != nil {
		return 0, "", err
	}
	_, werr := job.Wait()
	m := nqueensTime.FindStringSubmatch(out.String())
	if m == nil {
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		return 0, "", fmt.Errorf("no exact count (%v):\n%s%s", werr, out.String(), tail(errb.String(), 20))
	}
	if werr != nil {
		falsePositive = fmt.Sprintf("%v: %s", werr, strings.TrimSpace(tail(errb.String(), 1)))
	}
	secs, err = strconv.ParseFloat(m[1], 64)
	return secs, falsePositive, err
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

// tQuantile975 is Student's t 0.975 quantile for 1 to 30 degrees of
// freedom.
var tQuantile975 = []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// meanCI returns the mean of xs and the half-width of its 95% confidence
// interval (Student's t; 1.96 beyond 30 degrees of freedom).
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
	t := 1.96
	if k-1 <= len(tQuantile975) {
		t = tQuantile975[k-2]
	}
	return mean, t * sd / math.Sqrt(float64(k))
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
