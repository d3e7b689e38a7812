package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/internal/chaos"
	"github.com/cohort-mp/cohort/launch"
)

func init() {
	register(&command{
		name:     "chaos",
		synopsis: "[flags] PROGRAM [-- ARGS]",
		summary:  "run a program repeatedly while killing random ranks; check every result",
		help: `Chaos runs PROGRAM (as 'cohort run' does: an executable or a Go package,
built once) on --procs processes, first --baseline times without failures,
then --runs times while killing random ranks with SIGKILL at random moments,
and checks each run: every rank that was not killed must exit with status 0
and the ranks' output must match --expect (the program's verified result:
N-Queens prints CORRECT, the NPB programs VERIFICATION SUCCESSFUL).

Each run draws from its own seed (printed) how many ranks die (1 to
--kill of the processes, never all), which (rank 0 only with --kill-root)
and when: uniformly within --window after the rendezvous (default: the
baseline's median time to the result line). Replay one run with
--run-seed SEED --window W (the values printed).

Rank 0 is spared by default because a program that keeps its state on rank
0 cannot survive its death. examples/nqueens (both -mode steal, whose root
is checkpointed, and -mode master, whose master has a backup) and
examples/npb/ep survive any kills that leave one rank: give them
--kill-root.

With --replicas R every rank runs as R processes (transparent replication,
as 'cohort run -r R'), and each run kills exactly one replica of every rank
(rank 0 included), each at its own random moment: a replica's death must be
invisible, so any deterministic program, fault-tolerant or not, must give
its exact result every time. --kill and --kill-root do not apply. Process
j·N + r is replica j of rank r.

With --spares S the job has S spare processes besides the ranks (a program
under package resil, as 'cohort run --spares S'), and each run kills from 1
to S processes of all N+S (rank 0 and idle spares included), each at its
own random moment: the spares can replace them all, so the program must
give its exact result every time (give --expect its failure-free result,
e.g. the Jacobi checksum) as long as each rank's state has as many
buddies as there are spares (two kills close together may take a rank
and its only buddy, and the program then fails, saying the state is
lost). --kill and --kill-root do not apply.

The table has, per run: the seed, the kills (rank@time after the
rendezvous; in parentheses a kill whose rank had already ended), correct,
the wall time, the result time (from the rendezvous to the first output
line matching --expect), the cost (the result time minus the baseline's
median: what the failures cost the result, detection and redone work
together; a kill that finds no work to lose costs nothing, and the
baseline's own noise then shows, negative at times) and the time to
recover (from a kill to the moment every survivor holds a view without the
victim, the longest of the run, read from the ranks' event streams; "-"
when the survivors ended first). Chaos exits 0 only
if every run was correct.

Examples:
  cohort chaos --runs 20 --kill 25% --kill-root ./examples/nqueens -- -n 16
  cohort chaos --runs 20 --kill-root ./examples/nqueens -- -n 16 -mode master
  cohort chaos --runs 20 --kill-root ./examples/npb/ep -- -class W
  cohort chaos --runs 20 --replicas 2 --procs 4 ./examples/nqueens -- -n 14
  cohort chaos --runs 20 --spares 2 --procs 8 --expect 'checksum f9f8affe6ba62f0e' ./examples/jacobi -- -iters 8000 -buddies 2`,
		run: runChaos,
	})
}

// fraction is the --kill flag: "25%" or "0.25".
type fraction float64

func (f *fraction) String() string { return fmt.Sprintf("%g%%", float64(*f)*100) }

func (f *fraction) Set(s string) error {
	var v float64
	var err error
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err = strconv.ParseFloat(p, 64)
		v /= 100
	} else {
		v, err = strconv.ParseFloat(s, 64)
	}
	if err != nil || !(v > 0 && v <= 1) || math.IsNaN(v) {
		return fmt.Errorf("%q: want a fraction of the processes in (0, 1] or a percentage, e.g. 25%%", s)
	}
	*f = fraction(v)
	return nil
}

// errChaosWrong: some chaos run did not produce its verified result.
var errChaosWrong = errors.New("not every run was correct")

func runChaos(ctx context.Context, c *call) error {
	fs := c.newFlags()
	cfg := chaos.Config{Fraction: 0.25}
	kill := fraction(0.25)
	var runSeed uint64
	var expect string
	var verbose bool
	fs.IntVar(&cfg.Runs, "runs", 20, "number of chaos `runs`")
	fs.Var(&kill, "kill", "kill up to this `fraction` of the processes per run (25% or 0.25; at least 1, never all)")
	fs.IntVar(&cfg.Launch.N, "procs", 8, "number of `processes` (ranks)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "campaign `seed` (0: from the clock; printed)")
	fs.Uint64Var(&runSeed, "run-seed", 0, "replay the one run with this `seed` (with --window)")
	fs.BoolVar(&cfg.KillRoot, "kill-root", false, "rank 0 may be killed too")
	fs.StringVar(&expect, "expect", `\b(CORRECT|VERIFICATION SUCCESSFUL)\b`, "`regexp` the ranks' output must match")
	fs.IntVar(&cfg.Baseline, "baseline", 3, "failure-free `runs` first")
	fs.DurationVar(&cfg.Window, "window", 0, "kills fall within this `duration` after the rendezvous (0: the baseline's median result time)")
	fs.DurationVar(&cfg.RunTimeout, "timeout", 0, "stop a run after this `duration` (0: 20× the slowest baseline + 30 s)")
	fs.StringVar(&cfg.Launch.Detector, "detector", defaultDetector, detectorHelp)
	fs.IntVar(&cfg.Launch.Replicas, "replicas", 1, "run each rank as this many `replicas` and kill one replica of every rank per run")
	fs.IntVar(&cfg.Launch.Spares, "spares", 0, "start this many `spare` processes and kill 1 to that many processes per run")
	fs.BoolVar(&verbose, "v", false, "print every run's line as it ends, and the output of incorrect runs")
	if err := c.parse(fs, c.args, math.MaxInt); err != nil {
		return err
	}
	rest := fs.Args()
	replicated := cfg.Launch.Replicas > 1
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	switch {
	case cfg.Launch.Replicas < 1 || cfg.Launch.Replicas > launch.MaxReplicas:
		return usagef("--replicas %d: want 1 to %d", cfg.Launch.Replicas, launch.MaxReplicas)
	case cfg.Launch.Spares < 0 || cfg.Launch.Spares > maxRunRanks:
		return usagef("--spares %d: want 0 to %d", cfg.Launch.Spares, maxRunRanks)
	case cfg.Launch.Spares > 0 && replicated:
		return usagef("--spares with --replicas: spares and replicas do not go together")
	case cfg.Launch.Spares > 0 && (explicit["kill"] || explicit["kill-root"]):
		return usagef("--kill and --kill-root do not apply with --spares: every run kills 1 to --spares processes")
	case replicated && (explicit["kill"] || explicit["kill-root"]):
		return usagef("--kill and --kill-root do not apply with --replicas: every run kills one replica of each rank")
	case replicated && (cfg.Launch.N < 1 || cfg.Launch.N*cfg.Launch.Replicas > maxRunRanks):
		return usagef("--procs %d with --replicas %d: want 1 to %d processes in all", cfg.Launch.N, cfg.Launch.Replicas, maxRunRanks)
	case !replicated && (cfg.Launch.N < 2 || cfg.Launch.N > maxRunRanks):
		return usagef("--procs %d: want 2 to %d (one rank must survive)", cfg.Launch.N, maxRunRanks)
	case cfg.Runs < 1:
		return usagef("--runs %d: want at least 1", cfg.Runs)
	case cfg.Baseline < 1:
		return usagef("--baseline %d: want at least 1 (the baseline sets the kill window and the cost of the failures)", cfg.Baseline)
	case cfg.Window < 0 || cfg.RunTimeout < 0:
		return usagef("--window and --timeout must not be negative")
	case cfg.Launch.Detector != "" && !slices.Contains(launch.Detectors, cfg.Launch.Detector):
		return usagef("--detector %q: want one of %s", cfg.Launch.Detector, strings.Join(launch.Detectors, ", "))
	case len(rest) == 0 || rest[0] == "--" && len(rest) == 1:
		return usagef("missing the PROGRAM to run")
	}
	re, err := regexp.Compile(expect)
	if err != nil {
		return usagef("--expect: %v", err)
	}
	cfg.Expect = re
	cfg.Fraction = float64(kill)
	if runSeed != 0 {
		cfg.RunSeeds = []uint64{runSeed}
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if rest[0] == "--" {
		rest = rest[1:]
	}
	program, args := rest[0], rest[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	path, cleanup, err := resolveProgram(ctx, program, c.stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg.Launch.Program, cfg.Launch.Args = path, args
	if verbose {
		cfg.Progress = c.stderr
	}
	root := "rank 0 spared"
	if cfg.KillRoot {
		root = "rank 0 may die"
	}
	switch {
	case cfg.Launch.Spares > 0:
		fmt.Fprintf(c.stdout, "cohort chaos: %s %s on %d ranks and %d spares (processes %d to %d); %d runs, 1 to %d processes killed in each; seed %d\n",
			program, strings.Join(args, " "), cfg.Launch.N, cfg.Launch.Spares, cfg.Launch.N, cfg.Launch.N+cfg.Launch.Spares-1,
			max(cfg.Runs, len(cfg.RunSeeds)), cfg.Launch.Spares, cfg.Seed)
	case replicated:
		fmt.Fprintf(c.stdout, "cohort chaos: %s %s on %d ranks × %d replicas (process j·%d + r is replica j of rank r); %d runs, one replica of every rank killed in each; seed %d\n",
			program, strings.Join(args, " "), cfg.Launch.N, cfg.Launch.Replicas, cfg.Launch.N, max(cfg.Runs, len(cfg.RunSeeds)), cfg.Seed)
	default:
		fmt.Fprintf(c.stdout, "cohort chaos: %s %s on %d processes; %d runs, up to %d kills each (%s, %s); seed %d\n",
			program, strings.Join(args, " "), cfg.Launch.N, max(cfg.Runs, len(cfg.RunSeeds)),
			chaos.MaxKills(cfg.Launch.N, cfg.Fraction), kill.String(), root, cfg.Seed)
	}
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		if len(rep.Baseline) > 0 && !rep.Baseline[len(rep.Baseline)-1].Correct {
			fmt.Fprintf(c.stderr, "output of the last baseline run:\n%s", rep.Baseline[len(rep.Baseline)-1].Output)
		}
		return err
	}
	rep.Print(c.stdout)
	how := fmt.Sprintf("--kill %s%s", kill.String(), map[bool]string{true: " --kill-root", false: ""}[cfg.KillRoot])
	if replicated {
		how = fmt.Sprintf("--replicas %d", cfg.Launch.Replicas)
	}
	if cfg.Launch.Spares > 0 {
		how = fmt.Sprintf("--spares %d", cfg.Launch.Spares)
	}
	if cfg.Launch.Detector != "" {
		how += " --detector " + cfg.Launch.Detector
	}
	if explicit["expect"] {
		how += fmt.Sprintf(" --expect %q", expect)
	}
	fmt.Fprintf(c.stdout, "replay a run: cohort chaos --procs %d %s --window %v --run-seed SEED %s -- %s\n",
		cfg.Launch.N, how, rep.Window, program, strings.Join(args, " "))
	if rep.AllCorrect() {
		return nil
	}
	for _, x := range rep.Runs {
		if !x.Correct {
			fmt.Fprintf(c.stderr, "run %d (seed %d): %s\n", x.Index, x.Seed, x.Why)
			if verbose {
				fmt.Fprintf(c.stderr, "%s", x.Output)
			}
		}
	}
	return errChaosWrong
}
