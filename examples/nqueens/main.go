// Command nqueens counts the solutions of the N-Queens problem in parallel
// over cohort, surviving the death of processes: with random work stealing
// (Phoenix §5.2.2; the root of the search is checkpointed to the next rank,
// which takes it over) or master–worker with a checkpointed master that a
// backup replaces (§5.2.1). In both modes any ranks may die as long as one
// survives.
//
// Run it with cohort run:
//
//	go run ./cmd/cohort run -n 8 ./examples/nqueens -- -n 12
//	go run ./cmd/cohort run -n 8 --kill 3@300ms ./examples/nqueens -- -n 15 -mode master
//
// The rank that finishes prints the count and the published value beside
// it; the exit status is 0 only if they match.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cohort-mp/cohort/examples/internal/appmain"
	"github.com/cohort-mp/cohort/examples/nqueens/internal/job"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nqueens", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 12, "board size")
	mode := fs.String("mode", "steal", "fault-tolerance model: steal (random work stealing) or master (master–worker)")
	leaf := fs.Int("leaf", 0, "steal mode: queens placed before a unit is counted in one step (0: n-11, at least 2)")
	depth := fs.Int("depth", 0, "master mode: queens placed in a task (0: 2 up to n=12, 3 above)")
	every := fs.Int("checkpoint", 0, "steps between checkpoints to the backup (master mode: results, default 8; steal mode: root holder's steps, default 32)")
	seed := fs.Uint64("seed", 0, "seed of the victims' choice (0: random, the same for every replica of a rank)")
	verbose := fs.Bool("v", false, "log failures, recoveries and each rank's counters to stderr")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, s, done, err := appmain.Start("nqueens", *timeout, stderr)
	if err != nil {
		return 1
	}
	defer done()
	if *seed == 0 {
		if *seed, err = s.Seed(ctx); err != nil {
			fmt.Fprintf(stderr, "nqueens: %v\n", err)
			return 1
		}
	}
	rank, size := s.World().Rank(), s.World().Size()
	cfg := job.Config{N: *n, Mode: job.Mode(*mode), LeafDepth: *leaf, TaskDepth: *depth, CheckpointEvery: *every, Seed: *seed}
	if *verbose {
		cfg.Log = stderr
	}
	// The reporter prints the result as soon as it has it (job.Config.Report),
	// before the others are told the job is over.
	code := 0
	cfg.Report = func(out job.Outcome) { code = report(stdout, *n, cfg.Mode, size, out) }
	out, err := job.Run(ctx, s, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "nqueens: rank %d: %v\n", rank, err)
		return 1
	}
	if *verbose {
		fmt.Fprintf(stderr, "rank %d: %s\n", rank, out.Summary)
	}
	return code
}

// report prints the reporter's result line and returns the exit status.
func report(stdout io.Writer, n int, mode job.Mode, size int, out job.Outcome) int {
	switch {
	case !out.HasKnown:
		fmt.Fprintf(stdout, "nqueens n=%d mode=%s ranks=%d: %d solutions in %.3fs (no published value to compare)\n",
			n, mode, size, out.Count, out.Elapsed.Seconds())
		return 0
	case out.Correct():
		fmt.Fprintf(stdout, "nqueens n=%d mode=%s ranks=%d: %d solutions in %.3fs (known %d): CORRECT\n",
			n, mode, size, out.Count, out.Elapsed.Seconds(), out.Known)
		return 0
	default:
		fmt.Fprintf(stdout, "nqueens n=%d mode=%s ranks=%d: %d solutions in %.3fs (known %d): WRONG\n",
			n, mode, size, out.Count, out.Elapsed.Seconds(), out.Known)
		return 1
	}
}
