package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/experiment"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/model"
)

// The resilience benchmark measures the three ways a stencil that needs
// its N ranks survives deaths, under one failure schedule: coordinated
// in-memory checkpoints every k iterations with spares (package resil,
// at several k), spares without checkpoints (a takeover restarts the
// stencil from its first iteration, without a relaunch), and replication
// r = 2 (a replica's death is invisible). Each repetition first runs the
// stencil failure-free without checkpoints (the work, T0) and with
// checkpoints at the smallest k (the stencil's -compare: the mean time of
// a checkpoint at rank 0, beside an Allgather of the same size), then
// draws the kill times from a Poisson process of mean MTBF over T0
// (seeded: Seed and the repetition), at most MaxKills, and runs every
// configuration with the same kills: kill i takes process i·⌊N/MaxKills⌋
// (that rank's process, or replica 0 of that rank), so that no two kills
// take a rank and its buddy (the next rank) and the state of a rank is
// never lost. Each run's final checksum must be the
// failure-free run's; the time to solution is the job's wall time,
// launch included. The model beside it is Young's first-order waste
// (package model) with the measured checkpoint cost and a given restart
// cost.

// ResilienceConfig configures the benchmark.
type ResilienceConfig struct {
	// Program is the Jacobi stencil's executable (examples/jacobi).
	Program string
	// Ranks is N; Size the plate's side; Iters the iterations; Pace the
	// pause between two iterations (it sets how long an iteration lasts).
	Ranks, Size, Iters int
	Pace               time.Duration
	// Intervals are the checkpoint intervals k (iterations) measured.
	Intervals []int
	// MTBF is the job's mean time between failures; MaxKills bounds the
	// kills of a run (and is the number of spares).
	MTBF     time.Duration
	MaxKills int
	// Restart is the model's cost of one failure beside the lost work.
	Restart time.Duration
	// Reps are the repetitions; Seed draws their kill times.
	Reps     int
	Seed     uint64
	Progress io.Writer
}

// resilienceSetup is one configuration of a run.
type resilienceSetup struct {
	label    string
	every    int // checkpoint interval; ≥ Iters: none
	spares   int
	replicas int
	kills    bool
	compare  bool // time each checkpoint against an Allgather (jacobi -compare)
}

// ResilienceRun is one run's outcome.
type ResilienceRun struct {
	Secs   float64 // wall time of the job
	Kills  int     // kills that happened
	OK     bool    // every process that was not killed exited 0
	Same   bool    // the checksum is the failure-free run's
	Detail string  // why it failed, if it did
}

// ResilienceResult holds the runs by configuration and repetition.
type ResilienceResult struct {
	Cfg    ResilienceConfig
	Setups []resilienceSetup
	Runs   [][]ResilienceRun // [setup][rep]
	// CkptCost is the measured time of one checkpoint at the smallest
	// interval, and Gather that of an Allgather of the same size, per
	// repetition (s; rank 0's means over the run).
	CkptCost, Gather []float64
	Schedule         [][]launch.Kill // [rep]
}

var (
	jacobiChecksum = regexp.MustCompile(`residual \S+, checksum ([0-9a-f]{16})`)
	jacobiCompare  = regexp.MustCompile(`checkpoint (\d+) µs, Allgather of the same size (\d+) µs`)
)

// RunResilience runs the benchmark.
func RunResilience(ctx context.Context, cfg ResilienceConfig) (*ResilienceResult, error) {
	switch {
	case cfg.Ranks < 2 || cfg.Size < cfg.Ranks || cfg.Iters < 1 || cfg.Pace < 0:
		return nil, fmt.Errorf("bench: resilience: %d ranks, plate %d, %d iterations, pace %v", cfg.Ranks, cfg.Size, cfg.Iters, cfg.Pace)
	case len(cfg.Intervals) == 0 || cfg.MTBF <= 0 || cfg.MaxKills < 1 || cfg.MaxKills > cfg.Ranks || cfg.Reps < 1 || cfg.Restart < 0:
		return nil, fmt.Errorf("bench: resilience: intervals %v, MTBF %v, %d kills for %d ranks, %d repetitions, restart %v", cfg.Intervals, cfg.MTBF, cfg.MaxKills, cfg.Ranks, cfg.Reps, cfg.Restart)
	}
	for _, k := range cfg.Intervals {
		if k < 1 || k >= cfg.Iters {
			return nil, fmt.Errorf("bench: resilience: checkpoint interval %d: want 1 to %d iterations", k, cfg.Iters-1)
		}
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	kmin := cfg.Intervals[0]
	for _, k := range cfg.Intervals {
		kmin = min(kmin, k)
	}
	none := cfg.Iters // an interval the stencil never reaches
	setups := []resilienceSetup{
		{label: "failure-free, no checkpoints", every: none, replicas: 1},
		{label: fmt.Sprintf("failure-free, checkpoints every %d, timed", kmin), every: kmin, replicas: 1, compare: true},
	}
	for _, k := range cfg.Intervals {
		setups = append(setups, resilienceSetup{label: fmt.Sprintf("checkpoints every %d, %d spares", k, cfg.MaxKills), every: k, spares: cfg.MaxKills, replicas: 1, kills: true})
	}
	setups = append(setups,
		resilienceSetup{label: fmt.Sprintf("no checkpoints, %d spares", cfg.MaxKills), every: none, spares: cfg.MaxKills, replicas: 1, kills: true},
		resilienceSetup{label: "replication r = 2", every: none, replicas: 2, kills: true})
	res := &ResilienceResult{Cfg: cfg, Setups: setups, Runs: make([][]ResilienceRun, len(setups))}
	for rep := range cfg.Reps {
		var want string
		var t0 float64
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(rep)))
		for i, s := range setups {
			var kills []launch.Kill
			if s.kills {
				kills = res.Schedule[rep]
			}
			run, sum, costs := resilienceRun(ctx, cfg, s, kills)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			switch i {
			case 0:
				if !run.OK || sum == "" {
					return nil, fmt.Errorf("bench: resilience: the failure-free run failed: %s", run.Detail)
				}
				want, t0 = sum, run.Secs
				res.Schedule = append(res.Schedule, killTimes(rng, cfg, time.Duration(t0*float64(time.Second))))
			case 1:
				if costs == nil {
					return nil, fmt.Errorf("bench: resilience: the stencil timed no checkpoint: %s", run.Detail)
				}
				res.CkptCost, res.Gather = append(res.CkptCost, costs[0]), append(res.Gather, costs[1])
			}
			run.Same = sum == want
			res.Runs[i] = append(res.Runs[i], run)
			fmt.Fprintf(cfg.Progress, "rep %d/%d %-36s %6.3f s, %d kills, ok %v, same checksum %v %s\n", rep+1, cfg.Reps, s.label, run.Secs, run.Kills, run.OK, run.Same, run.Detail)
		}
	}
	return res, nil
}

// killTimes draws the kill times of a repetition: a Poisson process of
// mean cfg.MTBF over horizon, at most cfg.MaxKills; kill i takes process
// i·⌊N/MaxKills⌋. The times count from the end of the rendezvous (launch.Kill).
func killTimes(rng *rand.Rand, cfg ResilienceConfig, horizon time.Duration) []launch.Kill {
	var kills []launch.Kill
	t := 0.0
	for len(kills) < cfg.MaxKills {
		t += rng.ExpFloat64() * cfg.MTBF.Seconds()
		at := time.Duration(t * float64(time.Second))
		if at >= horizon {
			break
		}
		kills = append(kills, launch.Kill{Rank: len(kills) * (cfg.Ranks / cfg.MaxKills), After: at.Round(time.Millisecond)})
	}
	return kills
}

// resilienceRun runs the stencil once and returns its outcome, checksum
// ("" if none was printed) and, with s.compare, the times (s) of one
// checkpoint and of one Allgather of its size (nil if not printed).
func resilienceRun(ctx context.Context, cfg ResilienceConfig, s resilienceSetup, kills []launch.Kill) (ResilienceRun, string, []float64) {
	var out, errb bytes.Buffer
	lc := launch.Config{N: cfg.Ranks, Spares: s.spares, Program: cfg.Program, Kills: kills, Stdout: &out, Stderr: &errb, Timeout: 10 * time.Minute,
		Args: []string{"-size", strconv.Itoa(cfg.Size), "-iters", strconv.Itoa(cfg.Iters), "-k", strconv.Itoa(s.every), "-pace", cfg.Pace.String()}}
	if s.replicas > 1 {
		lc.Replicas = s.replicas
	}
	if s.compare {
		lc.Args = append(lc.Args, "-compare")
	}
	start := time.Now()
	job, err := launch.Start(ctx, lc)
	if err != nil {
		return ResilienceRun{Detail: err.Error()}, "", nil
	}
	exits, werr := job.Wait()
	run := ResilienceRun{Secs: time.Since(start).Seconds(), Kills: len(kills) - len(job.MissedKills()), OK: true}
	var failed []string
	for _, x := range exits {
		if !x.OK() && !x.Killed {
			failed = append(failed, fmt.Sprintf("process %d: %s", x.Rank, x.How()))
		}
	}
	var fe *launch.FailedError
	if werr != nil && (!errors.As(werr, &fe) || fe.Cause != nil) {
		failed = append(failed, werr.Error())
	}
	if len(failed) > 0 {
		run.OK = false
		run.Detail = strings.Join(failed, "; ") + " " + strings.TrimSpace(tail(errb.String(), 2))
	}
	var costs []float64
	if c := jacobiCompare.FindStringSubmatch(out.String()); c != nil {
		ckpt, _ := strconv.ParseFloat(c[1], 64)
		gather, _ := strconv.ParseFloat(c[2], 64)
		costs = []float64{ckpt / 1e6, gather / 1e6}
	}
	m := jacobiChecksum.FindStringSubmatch(out.String())
	if m == nil {
		return run, "", costs
	}
	return run, m[1], costs
}

// iterSecs is the failure-free time of one iteration (s), from the
// failure-free runs.
func (res *ResilienceResult) iterSecs() float64 {
	t0, _ := res.secs(0)
	return t0 / float64(res.Cfg.Iters)
}

// secs returns the mean wall time of setup i's successful runs with the
// failure-free checksum, and the 95% half-interval.
func (res *ResilienceResult) secs(i int) (float64, float64) {
	var xs []float64
	for _, r := range res.Runs[i] {
		if r.OK && r.Same {
			xs = append(xs, r.Secs)
		}
	}
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return meanCI(xs)
}

// model returns Young's first-order expected time (s) of setup i, with
// checkpoints every its interval, the measured checkpoint cost and the
// configured restart cost; NaN for a setup without checkpoints and kills.
func (res *ResilienceResult) model(i int) float64 {
	s := res.Setups[i]
	if !s.kills || s.every >= res.Cfg.Iters || s.replicas > 1 {
		return math.NaN()
	}
	t0, _ := res.secs(0)
	c, _ := meanCI(res.CkptCost)
	d := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	e, err := model.CheckpointedTime(d(t0), d(float64(s.every)*res.iterSecs()), d(c), res.Cfg.Restart, res.Cfg.MTBF)
	if err != nil {
		return math.NaN()
	}
	return e.Seconds()
}

// WriteTable prints one row per configuration: processes, kills, runs
// bit-identical, time to solution with its interval, over the
// failure-free run, process-seconds and the model.
func (res *ResilienceResult) WriteTable(w io.Writer) {
	cfg := res.Cfg
	c, ch := meanCI(res.CkptCost)
	g, gh := meanCI(res.Gather)
	fmt.Fprintf(w, "Jacobi %d×%d, %d iterations of ~%.2f ms on %d ranks; job MTBF %v, at most %d kills a run; %d repetitions (seed %d)\n",
		cfg.Size, cfg.Size, cfg.Iters, 1000*res.iterSecs(), cfg.Ranks, cfg.MTBF, cfg.MaxKills, cfg.Reps, cfg.Seed)
	fmt.Fprintf(w, "one checkpoint: %.2f ±%.2f ms, an Allgather of its size %.2f ±%.2f ms (rank 0, failure-free, every %d); model restart cost %v; load average %s\n\n",
		1000*c, 1000*ch, 1000*g, 1000*gh, res.Setups[1].every, cfg.Restart, loadavg())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "configuration\tprocesses\tkills (mean)\tbit-identical\ttime to solution (s)\t× failure-free\tprocess-seconds\tmodel (s)\t")
	t0, _ := res.secs(0)
	for i, s := range res.Setups {
		m, h := res.secs(i)
		kills, same := 0, 0
		for _, r := range res.Runs[i] {
			kills += r.Kills
			if r.OK && r.Same {
				same++
			}
		}
		procs := cfg.Ranks*s.replicas + s.spares
		mod := "—"
		if x := res.model(i); !math.IsNaN(x) {
			mod = fmt.Sprintf("%.3f", x)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d/%d\t%.3f ±%.3f\t%.3f\t%.1f\t%s\t\n", s.label, procs, float64(kills)/float64(len(res.Runs[i])),
			same, len(res.Runs[i]), m, h, m/t0, m*float64(procs), mod)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nkill i takes process i·%d (that rank's, or replica 0 of it) at times drawn from a Poisson process over the failure-free run;\n", cfg.Ranks/cfg.MaxKills)
	fmt.Fprintf(w, "the runs stop at %d kills, the model does not (it overestimates the long intervals' loss when the run outlasts them);\n", cfg.MaxKills)
	fmt.Fprintln(w, "model: T0/(1 − waste), waste = C/(τ+C) + (R + (τ+C)/2)/MTBF (Young), τ = k iterations")
}

// WriteFiles writes resilience.csv (one row per configuration and
// repetition) and the figure resilience.png/.svg (time to solution
// against the checkpoint interval, measured and modelled, with the
// configurations without checkpoints as flat lines) into dir, and returns
// the figure's path without extension.
func (res *ResilienceResult) WriteFiles(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	var b strings.Builder
	b.WriteString("configuration,interval_iters,spares,replicas,rep,secs,kills,ok,same_checksum\n")
	for i, s := range res.Setups {
		for rep, r := range res.Runs[i] {
			fmt.Fprintf(&b, "%q,%d,%d,%d,%d,%.4f,%d,%v,%v\n", s.label, s.every, s.spares, s.replicas, rep, r.Secs, r.Kills, r.OK, r.Same)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "resilience.csv"), []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	fig := experiment.Figure{
		Name:   "resilience",
		Title:  fmt.Sprintf("Jacobi on %d ranks, a failure every %v: time to solution", res.Cfg.Ranks, res.Cfg.MTBF),
		XLabel: "checkpoint interval (iterations)", YLabel: "time to solution (s)",
		LogX: true, Legend: experiment.TopLeft,
	}
	var meas, mod experiment.Series
	meas.Label, mod.Label = fmt.Sprintf("checkpoints + %d spares, measured", res.Cfg.MaxKills), "checkpoints, Young's model"
	mod.Style, mod.Dashed, mod.Color = experiment.Lines, true, 1
	meas.Color = 1
	var lo, hi float64 = math.Inf(1), 0
	for i, s := range res.Setups {
		if !s.kills || s.every >= res.Cfg.Iters {
			continue
		}
		m, h := res.secs(i)
		x := float64(s.every)
		lo, hi = min(lo, x), max(hi, x)
		fig.XTicks = append(fig.XTicks, x)
		if !math.IsNaN(m) {
			meas.Points = append(meas.Points, experiment.Point{X: x, Y: m, Lo: m - h, Hi: m + h})
		}
		if y := res.model(i); !math.IsNaN(y) {
			mod.Points = append(mod.Points, experiment.Point{X: x, Y: y})
		}
	}
	fig.Series = append(fig.Series, meas, mod)
	for i, s := range res.Setups {
		if s.kills && s.every < res.Cfg.Iters || i == 1 {
			continue
		}
		m, _ := res.secs(i)
		if math.IsNaN(m) {
			continue
		}
		fig.Series = append(fig.Series, experiment.Series{Label: s.label, Style: experiment.Lines, Dashed: i == 0,
			Points: []experiment.Point{{X: lo, Y: m}, {X: hi, Y: m}}})
	}
	path := filepath.Join(dir, fig.Name)
	if err := fig.Save(path); err != nil {
		return "", err
	}
	return path, nil
}
