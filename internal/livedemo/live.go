// Package livedemo is `cohort demo`: examples/nqueens (random work
// stealing, Phoenix §5.2.2) as procs real processes under package launch, a failure-free run first
// (the reference time, and the window in which the kills fall), then the
// same run with kills. Each rank writes its node's events to a file of its
// own (launch.Config.EventsDir → comm.Init); the demo tails the files and
// prints what every survivor detects and every view the survivors install.
package livedemo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
)

// nqueensKnown holds the published counts of solutions (OEIS A000170).
var nqueensKnown = map[int]uint64{8: 92, 9: 352, 10: 724, 11: 2680, 12: 14200, 13: 73712, 14: 365596, 15: 2279184, 16: 14772512}

// Config is what the live demo's flags set.
type Config struct {
	N, Procs, Kills int // board size (8 to 16), ranks (2 to 64), ranks killed (never rank 0)
	Seed            uint64
	Quiet           bool   // print only the result
	Program         string // run this executable instead of building examples/nqueens
	// Build builds examples/nqueens when Program is empty and returns the
	// executable and a function that removes it; the build's output goes
	// to stderr.
	Build func(ctx context.Context, stderr io.Writer) (path string, cleanup func(), err error)
}

// ErrConfig is wrapped by the errors of [Config.Validate].
var ErrConfig = errors.New("bad demo configuration")

// Validate checks the configuration; its errors name the flag at fault.
func (c Config) Validate() error {
	switch {
	case nqueensKnown[c.N] == 0:
		return fmt.Errorf("%w: --n %d: want a board of 8 to 16", ErrConfig, c.N)
	case c.Procs < 2 || c.Procs > 64:
		return fmt.Errorf("%w: --procs %d: want 2 to 64 processes", ErrConfig, c.Procs)
	case c.Kills < 0 || c.Kills > c.Procs-1:
		return fmt.Errorf("%w: --kill %d: want 0 to procs-1 = %d (rank 0 is spared)", ErrConfig, c.Kills, c.Procs-1)
	case c.Program == "" && c.Build == nil:
		return fmt.Errorf("%w: neither a program nor a way to build one", ErrConfig)
	}
	return nil
}

const (
	liveMode    = "steal"
	liveTimeout = 2 * time.Minute // a run that takes longer is stopped
	livePoll    = 25 * time.Millisecond
	// Kills fall in [10 %, 50 %) of the failure-free search: the run with
	// kills may search faster (fewer ranks compete for the cores, or the
	// failure-free run was slowed by other work), and a kill planned late
	// in the search would then come after the count.
	liveKillFirst = 0.10
	liveKillLast  = 0.50
)

// Run runs the live demo and prints it to stdout; stderr receives the
// output of the program's build.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	out := newLiveOut(stdout, cfg.Quiet)
	program := cfg.Program
	if program == "" {
		began := time.Now()
		out.status("building examples/nqueens")
		path, cleanup, err := cfg.Build(ctx, stderr)
		if err != nil {
			out.clear()
			return err
		}
		defer cleanup()
		program = path
		out.line("", "", "", fmt.Sprintf("built examples/nqueens in %.1f s", time.Since(began).Seconds()), dim)
	}
	known := nqueensKnown[cfg.N]
	out.header(fmt.Sprintf("cohort demo: %d-queens on %d processes (random work stealing, Phoenix §5.2.2), %d killed with SIGKILL, seed %d",
		cfg.N, cfg.Procs, cfg.Kills, cfg.Seed))

	// The failure-free run: the reference time.
	out.status("failure-free run")
	base, err := runNQueens(ctx, cfg, program, nil, nil)
	if err != nil {
		out.clear()
		return err
	}
	if base.count != known || !base.ok() {
		out.clear()
		return fmt.Errorf("the failure-free run failed: %s", base.problem(known))
	}
	out.line("", "", "", fmt.Sprintf("failure-free run: %s solutions, search %.3f s (%.1f s with start-up and exit)",
		commas(int(base.count)), base.search.Seconds(), base.wall.Seconds()), dim)

	// Victims and kill times from the seed, inside the search window of
	// the failure-free run.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c697665)) // "live"
	perm := rng.Perm(cfg.Procs - 1)
	searchStart := base.reportAt - base.search
	kills := make([]launch.Kill, cfg.Kills)
	for i := range kills {
		f := liveKillFirst + (liveKillLast-liveKillFirst)*rng.Float64()
		kills[i] = launch.Kill{Rank: perm[i] + 1, After: searchStart + time.Duration(f*float64(base.search))}
	}
	slices.SortFunc(kills, func(a, b launch.Kill) int { return int(a.After - b.After) })
	var plan []string
	for _, k := range kills {
		plan = append(plan, fmt.Sprintf("n%d at +%.3fs", k.Rank, k.After.Seconds()))
	}
	if len(plan) > 0 {
		out.line("", "", "", "kills planned: "+strings.Join(plan, ", "), dim)
	}
	out.blank()
	out.legend()
	out.line("time", "who", " ", "event", bold)

	dir, err := os.MkdirTemp("", "cohort-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	run, err := runNQueens(ctx, cfg, program, kills, &liveWatch{dir: dir, out: out, base: base})
	if err != nil {
		out.clear()
		return err
	}
	return out.summary(cfg, known, base, run)
}

// liveRun is the outcome of one run of the program.
type liveRun struct {
	count    uint64        // the reporter's count (0: none reported)
	reporter int           // its rank, -1 if none
	search   time.Duration // the reporter's own measure of the search
	reportAt time.Duration // when its line came, after the job's start
	wall     time.Duration // the job's start to its end
	load     machineLoad   // what the rest of the machine took meanwhile
	exits    []launch.Exit
	killedAt map[int]time.Duration // rank → when the demo killed it, after the start
	waitErr  error
	stderr   []string // lines the demo did not show
	watch    *liveWatch
}

// ok reports whether every rank the demo did not kill exited with status 0.
func (r *liveRun) ok() bool { return len(r.badExits()) == 0 }

func (r *liveRun) badExits() []launch.Exit {
	var bad []launch.Exit
	for _, e := range r.exits {
		if _, killed := r.killedAt[e.Rank]; !killed && !e.OK() {
			bad = append(bad, e)
		}
	}
	return bad
}

// problem says what went wrong with a run, for an error.
func (r *liveRun) problem(known uint64) string {
	var parts []string
	if r.reporter < 0 {
		parts = append(parts, "no rank reported a count")
	} else if r.count != known {
		parts = append(parts, fmt.Sprintf("count %d, known %d", r.count, known))
	}
	if bad := r.badExits(); len(bad) > 0 {
		parts = append(parts, launch.FormatExits(bad, launch.Exit.How))
	}
	if len(parts) == 0 && r.waitErr != nil {
		parts = append(parts, r.waitErr.Error())
	}
	if tail := r.stderr; len(tail) > 0 {
		parts = append(parts, "last error output: "+tail[len(tail)-1])
	}
	return strings.Join(parts, "; ")
}

// The reporter's line, and the recovery lines of -v worth showing.
var (
	reportLine   = regexp.MustCompile(`^nqueens n=\d+ mode=\w+ ranks=\d+: (\d+) solutions in ([0-9.]+)s`)
	rankLogLine  = regexp.MustCompile(`^rank (\d+): (.*)$`)
	recoveryText = regexp.MustCompile(`^(took |dropped \d+ grant)`)
)

// runNQueens runs the program once; w, if not nil, follows it live.
func runNQueens(ctx context.Context, cfg Config, program string, kills []launch.Kill, w *liveWatch) (*liveRun, error) {
	lines := &lineQueue{}
	lcfg := launch.Config{
		N: cfg.Procs, Program: program,
		Args:   []string{"-n", strconv.Itoa(cfg.N), "-mode", liveMode, "-seed", strconv.FormatUint(cfg.Seed, 10), "-v"},
		Stdout: lines.writer(false), Stderr: lines.writer(true), Prefix: true,
		Grace: time.Second, Timeout: liveTimeout,
	}
	if w != nil {
		lcfg.EventsDir = w.dir
	}
	job, err := launch.Start(ctx, lcfg)
	if err != nil {
		return nil, err
	}
	start := job.Started()
	cpu0 := sampleCPU()
	run := &liveRun{reporter: -1, killedAt: map[int]time.Duration{}, watch: w}
	var killMu sync.Mutex
	var killed []int // in order, for the display
	over := false    // the job has ended: no more kills (killedAt is read unlocked from then on)
	// A kill falls in the search only once every rank is in the job: on
	// a machine more loaded than during the failure-free run the start
	// takes longer, and a kill timed on that run could hit a rank before
	// it installed the first view. Kills that come due before the
	// watcher has seen every rank install a view wait for it.
	joined := w == nil
	var held []int
	kill := func(rank int) { // under killMu
		at := time.Since(start) // before the signal: detections come after it
		if !over && job.Kill(rank) == nil {
			run.killedAt[rank] = at
			killed = append(killed, rank)
		}
	}
	for _, k := range kills {
		time.AfterFunc(time.Until(start.Add(k.After)), func() {
			killMu.Lock()
			defer killMu.Unlock()
			if !joined {
				held = append(held, k.Rank)
				return
			}
			kill(k.Rank)
		})
	}
	if w != nil {
		w.begin(start, cfg.Procs)
	}
	tick := time.NewTicker(livePoll)
	defer tick.Stop()
	shownKills := 0
	step := func() {
		if w != nil && !joined && len(w.views) == cfg.Procs {
			killMu.Lock()
			joined = true
			for _, r := range held {
				kill(r)
			}
			held = nil
			killMu.Unlock()
		}
		killMu.Lock()
		newKills := slices.Clone(killed[shownKills:])
		at := make([]time.Duration, len(newKills))
		for i, r := range newKills {
			at[i] = run.killedAt[r]
		}
		shownKills = len(killed)
		nKilled := len(killed)
		killMu.Unlock()
		if w != nil {
			for i, r := range newKills {
				w.killed(r, start.Add(at[i]))
			}
			w.poll()
		}
		for _, l := range lines.take() {
			run.take(l, start, w)
		}
		if w != nil {
			w.progress(time.Since(start), nKilled, len(kills))
		}
	}
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-job.Done():
			done = true
		}
		step()
	}
	killMu.Lock()
	over = true
	killMu.Unlock()
	run.exits, run.waitErr = job.Wait()
	run.wall = time.Since(start)
	var ranksCPU time.Duration
	for _, x := range run.exits {
		ranksCPU += x.CPU
	}
	run.load = loadOf(cpu0, sampleCPU(), ranksCPU, run.wall)
	step()
	if w != nil {
		w.end()
	}
	return run, nil
}

// take handles one line of the ranks' output.
func (r *liveRun) take(l queuedLine, start time.Time, w *liveWatch) {
	if m := reportLine.FindStringSubmatch(l.text); m != nil && !l.stderr {
		r.count, _ = strconv.ParseUint(m[1], 10, 64)
		secs, _ := strconv.ParseFloat(m[2], 64)
		r.search = time.Duration(secs * float64(time.Second))
		r.reportAt = l.at.Sub(start)
		r.reporter = l.rank
		if w != nil {
			w.out.event(l.at.Sub(start), core.NodeID(l.rank).String(), "★", fmt.Sprintf("counts %s solutions (search %.3f s)", commas(int(r.count)), secs), bold+green)
		}
		return
	}
	if m := rankLogLine.FindStringSubmatch(l.text); m != nil {
		if w != nil && recoveryText.MatchString(m[2]) {
			w.out.event(l.at.Sub(start), core.NodeID(l.rank).String(), "↺", m[2], green)
		}
		return // "learned that …" (the views say it) and the counters
	}
	if strings.TrimSpace(l.text) == "" {
		return
	}
	r.stderr = append(r.stderr, l.text)
	if w != nil {
		w.out.event(l.at.Sub(start), "", "·", l.text, dim)
	}
}

// queuedLine is a line of a rank's output, when the demo got it.
type queuedLine struct {
	rank   int // from launch's prefix; -1 if none
	text   string
	stderr bool
	at     time.Time
}

// lineQueue collects the ranks' output lines; launch's writers never block
// on the display.
type lineQueue struct {
	mu    sync.Mutex
	lines []queuedLine
}

type queueWriter struct {
	q      *lineQueue
	stderr bool
}

func (q *lineQueue) writer(stderr bool) io.Writer { return &queueWriter{q: q, stderr: stderr} }

func (w *queueWriter) Write(p []byte) (int, error) {
	now := time.Now()
	w.q.mu.Lock()
	defer w.q.mu.Unlock()
	for _, text := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		rank := -1
		if m := prefixed.FindStringSubmatch(text); m != nil {
			rank, _ = strconv.Atoi(m[1])
			text = m[2]
		}
		w.q.lines = append(w.q.lines, queuedLine{rank: rank, text: text, stderr: w.stderr, at: now})
	}
	return len(p), nil
}

func (q *lineQueue) take() []queuedLine {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.lines
	q.lines = nil
	return out
}

// prefixed is a forwarded line with launch's "[rank] " prefix.
var prefixed = regexp.MustCompile(`^\[(\d+)\] (.*)$`)

// summary prints the result and returns the demo's error, nil only if the
// count is the known one and every survivor exited with status 0.
func (o *liveOut) summary(cfg Config, known uint64, base, run *liveRun) error {
	w := run.watch
	o.quiet = false
	o.blank()
	verdict, col := "✔ exact", green
	if run.count != known || run.reporter < 0 {
		verdict, col = "✗ WRONG", red
	}
	count := "none"
	if run.reporter >= 0 {
		count = commas(int(run.count))
	}
	o.plain(fmt.Sprintf("  %-10s %s solutions, known %s for n = %d   %s", "count", count, commas(int(known)), cfg.N, o.paint(col+bold, verdict)))
	if run.reporter >= 0 {
		lost := run.search - base.search
		if lost >= 0 {
			o.plain(fmt.Sprintf("  %-10s %.3f s with %d killed, %.3f s failure-free: %.3f s lost to recovery (+%.0f%%)",
				"search", run.search.Seconds(), len(run.killedAt), base.search.Seconds(), lost.Seconds(), 100*lost.Seconds()/base.search.Seconds()))
		} else {
			o.plain(fmt.Sprintf("  %-10s %.3f s with %d killed, %.3f s failure-free: no time lost to recovery that run-to-run noise does not hide",
				"search", run.search.Seconds(), len(run.killedAt), base.search.Seconds()))
			o.plain(o.paint(dim, "             (fewer processes compete for the cores after the kills)"))
		}
		o.plain(o.paint(dim, "             (the reporter's own search time, start of the search to the count; the difference is the time"))
		o.plain(o.paint(dim, "              spent detecting the deaths, agreeing on the views and redoing the work the dead held)"))
		for _, l := range loadNote(base.load, run.load) {
			o.plain(o.paint(dim, "             "+l))
		}
	}
	var survivors []core.NodeID
	for r := range cfg.Procs {
		if _, k := run.killedAt[r]; !k {
			survivors = append(survivors, core.NodeID(r))
		}
	}
	var victims []int
	for r := range run.killedAt {
		victims = append(victims, r)
	}
	slices.SortFunc(victims, func(a, b int) int { return int(run.killedAt[a] - run.killedAt[b]) })
	for i, r := range victims {
		id := core.NodeID(r)
		k := w.killAt[id]
		since := func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return fmt.Sprintf("+%.3f s", t.Sub(k).Seconds())
		}
		label := ""
		if i == 0 {
			label = "recovery"
		}
		o.plain(fmt.Sprintf("  %-10s %v killed at +%.3fs: first suspected %s, declared failed %s, out of every survivor's view %s",
			label, id, k.Sub(w.start).Seconds(), since(w.suspected[id]), since(w.declared[id]), since(w.excluded(id, survivors))))
	}
	if w.liveSuspected > 0 || w.liveDeclared > 0 {
		o.plain(fmt.Sprintf("  %-10s %d suspicion(s) of live ranks (slow answers on a loaded machine), %d of them declared failed",
			"mistakes", w.liveSuspected, w.liveDeclared))
	}
	if missed := cfg.Kills - len(victims); missed > 0 {
		o.plain(fmt.Sprintf("             (%d planned kill(s) came after the job had ended)", missed))
	}
	if run.count == known && run.reporter >= 0 && run.ok() {
		return nil
	}
	return fmt.Errorf("the run with kills failed: %s", run.problem(known))
}
