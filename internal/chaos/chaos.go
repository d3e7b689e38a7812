// Package chaos runs a cohort program again and again while killing random
// ranks with SIGKILL at random moments, and checks that every run still
// produced its verified result: the engine of `cohort chaos`.
//
// A campaign ([Run]) first runs the program a few times without failures
// (the baseline), to learn how long its computation lasts: the time from
// the end of the rendezvous (every rank has registered; kills before it
// would only test the launcher's abort) to the first output line that
// matches Config.Expect. It then runs Config.Runs chaos runs. Run i has its
// own seed ([RunSeed] of the campaign's seed and i) from which [Plan]
// draws, alone, which ranks die and when: the number of victims is uniform
// from 1 to ⌊Fraction·N⌋ (at least 1, never every rank), the victims are
// distinct ranks (rank 0 only with KillRoot), and each dies at a uniform
// offset in [0, Window) after the rendezvous. The same seed, N, Fraction,
// KillRoot and Window give the same plan: a run is replayed with
// Config.RunSeeds = []uint64{seed} and the Window it printed.
//
//	rep, err := chaos.Run(ctx, chaos.Config{
//		Launch: launch.Config{N: 8, Program: "./nqueens", Args: []string{"-n", "16"}},
//		Runs: 20, Fraction: 0.25, Seed: 1, Expect: regexp.MustCompile(`CORRECT`),
//	})
//	rep.Print(os.Stdout)
//	if !rep.AllCorrect() { … }
//
// A run is correct when every rank that was not killed exited with status
// 0 and the ranks' standard output matched Expect. Its time to recover is
// measured on the ranks' event streams (launch.Config.EventsDir, written by
// package comm): from each kill to the moment every survivor had installed
// a view without the victim, the longest of the run. Its cost is its result
// time minus the median result time of the baseline (both from the
// rendezvous): what the failures cost the result, detection and redone
// work together. The cost is only an estimate: a kill that comes before
// its victim holds any work, or after its work is done, costs nothing, and
// the run then differs from the baseline by the baseline's own noise,
// either way.
package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// ErrConfig wraps every error of a bad [Config].
var ErrConfig = errors.New("chaos: bad campaign")

// Config describes a campaign.
type Config struct {
	// Launch is the job of every run: N, Program, Args, Detector, … Its
	// Stdout, Stderr, Kills, Prefix, Timeout and EventsDir are set by Run.
	Launch launch.Config
	// Runs is the number of chaos runs (ignored when RunSeeds is set).
	Runs int
	// Fraction is the largest fraction of the N ranks killed in one run,
	// in (0, 1]; at least one rank is killed and never all of them.
	Fraction float64
	// KillRoot lets rank 0 be a victim (by default it is spared: many
	// programs cannot survive its death; the N-Queens and EP examples can).
	KillRoot bool
	// Seed is the campaign's seed: run i's seed is RunSeed(Seed, i).
	Seed uint64
	// RunSeeds, if not empty, are the runs' seeds themselves (a replay).
	RunSeeds []uint64
	// Expect must match the ranks' standard output for a run to be
	// correct (the program's verified result line).
	Expect *regexp.Regexp
	// Baseline is the number of failure-free runs first (default 3).
	Baseline int
	// Window, if positive, is the span after the rendezvous in which kills
	// fall; 0 takes the baseline's median result time.
	Window time.Duration
	// RunTimeout bounds each run (0: 20 times the baseline's slowest run
	// plus 30 s).
	RunTimeout time.Duration
	// Progress, if not nil, receives one line per run as it ends.
	Progress io.Writer
}

// With replicated ranks (Launch.Replicas = R > 1) a run kills exactly one
// replica of every logical rank, each at its own random moment of the
// window: process j·N + r for a random replica j of rank r, rank 0
// included. Fraction and KillRoot do not apply: no rank may lose every
// replica, and the program (any deterministic one, not only a
// fault-tolerant one) must not notice.

// With spares (Launch.Spares = S > 0, a program under package resil) a
// run kills from 1 to S processes, any of the N+S (rank 0 and idle spares
// included), each at its own random moment: as many as the spares can
// replace, so the program must give its exact result every time.
// Fraction and KillRoot do not apply.

// Kill is one injected crash: SIGKILL to Rank At after the rendezvous.
type Kill struct {
	Rank int
	At   time.Duration
}

// Result is one run.
type Result struct {
	Index int    // 1-based; 0 for a baseline run
	Seed  uint64 // the run's seed (0 for a baseline run)
	// Planned are the kills drawn from Seed; Killed says, for each, whether
	// the rank was still running and died of it (a rank that had already
	// ended is left alone).
	Planned []Kill
	Killed  []bool
	Correct bool
	Why     string // why the run is not correct
	// Wall is the run's time from the start of the first process to the end
	// of the last; Result is from the rendezvous to the first output line
	// matching Expect (0 if none).
	Wall, Result time.Duration
	// Cost is Result minus the baseline's median Result (chaos runs with a
	// result): negative when the run happened to be faster.
	Cost time.Duration
	// Recover is the time from a kill to the moment every survivor had
	// installed a view without its victim, the longest of the run's kills;
	// Recovered says whether it was seen (some kill happened, and the
	// survivors excluded every victim before they ended).
	Recover   time.Duration
	Recovered bool
	Output    string // standard output and error of every rank, prefixed
}

// Report is a campaign's outcome.
type Report struct {
	N        int
	Window   time.Duration
	Baseline []Result
	Median   time.Duration // the baseline's median Result
	Runs     []Result
}

// AllCorrect reports whether every run (baseline and chaos) was correct.
func (r Report) AllCorrect() bool {
	for _, x := range slices.Concat(r.Baseline, r.Runs) {
		if !x.Correct {
			return false
		}
	}
	return len(r.Runs) > 0
}

// RunSeed is the seed of run i (1-based) of a campaign with the given seed.
func RunSeed(seed uint64, i int) uint64 {
	// splitmix64 of seed+i: distinct, well mixed, never 0 in practice.
	z := seed + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// MaxKills is the largest number of victims of a run of n ranks:
// ⌊fraction·n⌋, at least 1 and at most n−1 (one rank always survives;
// with rank 0 spared there are n−1 candidates anyway).
func MaxKills(n int, fraction float64) int {
	return max(1, min(int(fraction*float64(n)), n-1))
}

// Plan draws the kills of a run from its seed: how many (uniform from 1 to
// MaxKills), which distinct ranks (rank 0 only if killRoot) and when
// (uniform in [0, window)), in the order of their times.
func Plan(seed uint64, n int, fraction float64, killRoot bool, window time.Duration) []Kill {
	if n < 2 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	count := 1 + rng.IntN(MaxKills(n, fraction))
	first := 1
	if killRoot {
		first = 0
	}
	ranks := make([]int, 0, n)
	for r := first; r < n; r++ {
		ranks = append(ranks, r)
	}
	rng.Shuffle(len(ranks), func(i, j int) { ranks[i], ranks[j] = ranks[j], ranks[i] })
	kills := make([]Kill, count)
	for i := range kills {
		kills[i] = Kill{Rank: ranks[i], At: killTime(rng, window)}
	}
	slices.SortFunc(kills, func(a, b Kill) int { return int(a.At - b.At) })
	return kills
}

// killTime draws a kill's moment, uniform in [0, window).
func killTime(rng *rand.Rand, window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(window)))
}

// PlanReplicas draws the kills of a run of n logical ranks of r replicas
// each from its seed: one replica of every rank (process j·n + rank for a
// uniform j), each at a uniform time in [0, window), in time order.
func PlanReplicas(seed uint64, n, r int, window time.Duration) []Kill {
	if r < 2 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	kills := make([]Kill, n)
	for rank := range kills {
		kills[rank] = Kill{Rank: rng.IntN(r)*n + rank, At: killTime(rng, window)}
	}
	slices.SortFunc(kills, func(a, b Kill) int { return int(a.At - b.At) })
	return kills
}

// PlanSpares draws the kills of a run of n ranks and s spares from its
// seed: 1 to s distinct processes of the n+s, each at a uniform time in
// [0, window), in time order.
func PlanSpares(seed uint64, n, s int, window time.Duration) []Kill {
	if s < 1 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	count := 1 + rng.IntN(s)
	procs := rng.Perm(n + s)
	kills := make([]Kill, count)
	for i := range kills {
		kills[i] = Kill{Rank: procs[i], At: killTime(rng, window)}
	}
	slices.SortFunc(kills, func(a, b Kill) int { return int(a.At - b.At) })
	return kills
}

// plan is the run's kills under cfg.
func (c *Config) plan(seed uint64, window time.Duration) []Kill {
	if c.Launch.Replicas > 1 {
		return PlanReplicas(seed, c.Launch.N, c.Launch.Replicas, window)
	}
	if c.Launch.Spares > 0 {
		return PlanSpares(seed, c.Launch.N, c.Launch.Spares, window)
	}
	return Plan(seed, c.Launch.N, c.Fraction, c.KillRoot, window)
}

func (c *Config) check() error {
	switch {
	case c.Launch.N < 2 && c.Launch.Replicas < 2:
		return fmt.Errorf("%w: %d ranks: want at least 2 (one must survive)", ErrConfig, c.Launch.N)
	case c.Launch.N < 1:
		return fmt.Errorf("%w: %d ranks", ErrConfig, c.Launch.N)
	case c.Runs < 1 && len(c.RunSeeds) == 0:
		return fmt.Errorf("%w: %d runs", ErrConfig, c.Runs)
	case !(c.Fraction > 0 && c.Fraction <= 1):
		return fmt.Errorf("%w: kill fraction %v: want (0, 1]", ErrConfig, c.Fraction)
	case c.Expect == nil:
		return fmt.Errorf("%w: no expected output", ErrConfig)
	case c.Window < 0 || c.RunTimeout < 0 || c.Baseline < 0:
		return fmt.Errorf("%w: negative window, timeout or baseline", ErrConfig)
	}
	return nil
}

// Run runs the campaign: the baseline, then the chaos runs. It returns an
// error only when the campaign cannot go on (a bad Config, a program that
// cannot start, ctx ended); incorrect runs are in the Report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.check(); err != nil {
		return Report{}, err
	}
	if cfg.Baseline == 0 {
		cfg.Baseline = 3
	}
	seeds := cfg.RunSeeds
	if len(seeds) == 0 {
		for i := 1; i <= cfg.Runs; i++ {
			seeds = append(seeds, RunSeed(cfg.Seed, i))
		}
	}
	rep := Report{N: cfg.Launch.N}
	timeout := cfg.RunTimeout
	var slowest time.Duration
	for i := range cfg.Baseline {
		to := timeout
		if to == 0 {
			to = 10 * time.Minute
		}
		x, err := runOnce(ctx, cfg, Result{}, to)
		if err != nil {
			return rep, err
		}
		rep.Baseline = append(rep.Baseline, x)
		slowest = max(slowest, x.Wall)
		progress(cfg.Progress, "baseline %d/%d: %s", i+1, cfg.Baseline, x.line())
	}
	results := make([]time.Duration, 0, len(rep.Baseline))
	for _, x := range rep.Baseline {
		if x.Correct {
			results = append(results, x.Result)
		}
	}
	if len(results) == 0 {
		return rep, fmt.Errorf("chaos: no baseline run (without failures) was correct: %s", rep.Baseline[0].Why)
	}
	rep.Median = median(results)
	rep.Window = cfg.Window
	if rep.Window == 0 {
		rep.Window = rep.Median.Round(time.Millisecond)
	}
	if timeout == 0 {
		timeout = 20*slowest + 30*time.Second
	}
	for i, seed := range seeds {
		x := Result{Index: i + 1, Seed: seed,
			Planned: cfg.plan(seed, rep.Window)}
		x, err := runOnce(ctx, cfg, x, timeout)
		if err != nil {
			return rep, err
		}
		if x.Result > 0 {
			x.Cost = x.Result - rep.Median
		}
		rep.Runs = append(rep.Runs, x)
		progress(cfg.Progress, "run %d/%d: %s", i+1, len(seeds), x.line())
	}
	return rep, nil
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

func (x Result) line() string {
	s := fmt.Sprintf("kills %s, wall %s", x.kills(), ms(x.Wall))
	if x.Correct {
		return s + ", correct"
	}
	return s + ", NOT correct: " + x.Why
}

// watcher collects the job's output lines and notes when the first line
// matching the expected result arrived.
type watcher struct {
	mu     sync.Mutex
	re     *regexp.Regexp
	buf    bytes.Buffer
	stdout bytes.Buffer
	when   time.Time
	isOut  bool
	shared *watcher
}

func (w *watcher) Write(p []byte) (int, error) {
	s := w.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if w.isOut {
		s.stdout.Write(p)
		if s.when.IsZero() && s.re.Match(p) {
			s.when = time.Now()
		}
	}
	return len(p), nil
}

// runOnce runs the job once with x.Planned's kills and fills in x.
func runOnce(ctx context.Context, cfg Config, x Result, timeout time.Duration) (Result, error) {
	shared := &watcher{re: cfg.Expect}
	shared.shared = shared
	lc := cfg.Launch
	lc.Stdout = &watcher{shared: shared, isOut: true}
	lc.Stderr = &watcher{shared: shared}
	lc.Prefix = true
	lc.Kills = nil
	lc.Timeout = timeout
	events, err := os.MkdirTemp("", "cohort-chaos-")
	if err != nil {
		return x, err
	}
	defer os.RemoveAll(events)
	lc.EventsDir = events
	job, err := launch.Start(ctx, lc)
	if err != nil {
		return x, err
	}
	rzCtx, cancel := context.WithCancel(ctx)
	go func() { // the rendezvous never completes if the job ends first
		<-job.Done()
		cancel()
	}()
	_, rzErr := job.Addrs(rzCtx)
	cancel()
	rzAt := time.Now()
	var killMu sync.Mutex
	killedAt := map[int]time.Time{}
	var timers []*time.Timer
	if rzErr == nil {
		for _, k := range x.Planned {
			timers = append(timers, time.AfterFunc(time.Until(rzAt.Add(k.At)), func() {
				killMu.Lock()
				defer killMu.Unlock()
				at := time.Now() // before the signal: the survivors' views come after it
				if _, again := killedAt[k.Rank]; !again && job.Kill(k.Rank) == nil {
					killedAt[k.Rank] = at
				}
			}))
		}
	}
	exits, _ := job.Wait()
	for _, t := range timers {
		t.Stop()
	}
	killMu.Lock() // a kill under way ends before the map is read
	defer killMu.Unlock()
	end := time.Now()
	if err := ctx.Err(); err != nil {
		return x, err
	}
	shared.mu.Lock()
	x.Output = shared.buf.String()
	stdout := shared.stdout.String()
	when := shared.when
	shared.mu.Unlock()
	x.Wall = end.Sub(job.Started())
	if !when.IsZero() && rzErr == nil {
		x.Result = when.Sub(rzAt)
	}
	x.Killed = make([]bool, len(x.Planned))
	killed := map[int]bool{}
	for _, e := range exits {
		if e.Killed {
			killed[e.Rank] = true
		}
	}
	for i, k := range x.Planned {
		x.Killed[i] = killed[k.Rank]
	}
	for r := range killedAt {
		if !killed[r] { // the signal found it already ended
			delete(killedAt, r)
		}
	}
	x.Recover, x.Recovered = recoveryTime(readViews(events, len(exits)), killedAt, len(exits))
	var bad []launch.Exit
	for _, e := range exits {
		if !e.Killed && !e.OK() {
			bad = append(bad, e)
		}
	}
	switch {
	case rzErr != nil:
		x.Why = "the rendezvous did not complete: " + rzErr.Error()
	case len(bad) > 0:
		x.Why = "a surviving rank failed: " + launch.FormatExits(bad, launch.Exit.How)
	case !cfg.Expect.MatchString(stdout):
		x.Why = fmt.Sprintf("no output line matches %q", cfg.Expect.String())
	default:
		x.Correct = true
	}
	return x, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/1e6) }

// kills describes the planned kills: "3@120ms 5@410ms", a kill that found
// its rank already ended in parentheses.
func (x Result) kills() string {
	if len(x.Planned) == 0 {
		return "none"
	}
	parts := make([]string, len(x.Planned))
	for i, k := range x.Planned {
		s := fmt.Sprintf("%d@%dms", k.Rank, k.At.Milliseconds())
		if x.Killed != nil && !x.Killed[i] {
			s = "(" + s + ")"
		}
		parts[i] = s
	}
	return strings.Join(parts, " ")
}

// Print writes the table of the chaos runs and the totals.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "baseline: %d failure-free runs, median result time %s after the rendezvous; kills fall in [0, %s) after it\n",
		len(r.Baseline), ms(r.Median), ms(r.Window))
	fmt.Fprintf(w, "%4s  %-20s  %-28s  %-7s  %9s  %9s  %9s  %9s\n", "run", "seed", "kills (rank@time)", "correct", "wall", "result", "cost", "recover")
	var kills, died, correct int
	var rec, costs []time.Duration
	for _, x := range r.Runs {
		ok := "yes"
		if !x.Correct {
			ok = "NO"
		}
		result, cost, recover := "-", "-", "-"
		if x.Result > 0 {
			result, cost = ms(x.Result), fmt.Sprintf("%+.0f ms", float64(x.Cost)/1e6)
			costs = append(costs, x.Cost)
		}
		if x.Recovered {
			recover = ms(x.Recover)
			rec = append(rec, x.Recover)
		}
		fmt.Fprintf(w, "%4d  %-20d  %-28s  %-7s  %9s  %9s  %9s  %9s\n", x.Index, x.Seed, x.kills(), ok, ms(x.Wall), result, cost, recover)
		kills += len(x.Planned)
		for _, k := range x.Killed {
			if k {
				died++
			}
		}
		if x.Correct {
			correct++
		}
	}
	fmt.Fprintf(w, "total: %d runs, %d correct; %d kills planned, %d ranks killed", len(r.Runs), correct, kills, died)
	switch missed := kills - died; {
	case missed == 1:
		fmt.Fprint(w, " (the other came after its rank had ended)")
	case missed > 1:
		fmt.Fprintf(w, " (the other %d came after their ranks had ended)", missed)
	}
	if len(rec) > 0 {
		fmt.Fprintf(w, "; time to recover: median %s, max %s", ms(median(rec)), ms(slices.Max(rec)))
	}
	if len(costs) > 0 {
		fmt.Fprintf(w, "; cost: median %+.0f ms", float64(median(costs))/1e6)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "result = first line matching the expected output, from the rendezvous; cost = result − baseline median (the baseline's noise makes it negative at times);")
	fmt.Fprintln(w, "recover = from a kill to a view without its victim at every survivor, the longest of the run (- : the survivors ended first)")
}
