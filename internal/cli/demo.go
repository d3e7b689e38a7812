package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/cohort-mp/cohort/internal/simdemo"
	"github.com/cohort-mp/cohort/topo"
)

func init() {
	register(&command{
		name:     "demo",
		synopsis: "[--n N] [--procs P] [--kill K] [--seed S] [--quiet] | --sim [flags]",
		summary:  "count N-Queens on 8 processes while two are killed, and watch them recover",
		help: `Demo builds examples/nqueens and runs it on --procs local processes (package
launch, no daemon): the fault-tolerant N-Queens count with random work
stealing (Phoenix §5.2.2), first without failures, then again while --kill
ranks (never rank 0, where the search starts) are killed with SIGKILL at
random moments of the search. It prints, live, what every survivor's failure
detector says (suspicions, failures), every membership view the survivors
install (epoch, members), the work the survivors take back, and at the end
the count beside the published one, the time lost to recovery (the search
time with kills minus the failure-free one; when other processes took a
noticeable share of the cores meanwhile, it says how much, since that time
counts as lost too) and, for each kill, when it was first suspected,
declared and excluded from every survivor's view. A legend before the
events explains their symbols. It exits
with status 0 only if the count is the published one and every survivor
exited with status 0. The same --seed gives the same victims, killed at the
same fractions (10-50 %) of the failure-free run's search; a kill that
comes after the count is reported as such.

--sim runs the earlier demo instead: a simulated 1,024-node cluster where 5
nodes crash and BRR gossip detects them (see cohort demo --sim -h); its
--trace-only prints the run's trace hash, which CI compares between runs.

Examples:
  cohort demo
  cohort demo --n 14 --kill 3 --seed 7
  cohort demo --quiet
  cohort demo --sim -n 128 --seed 11 --trace-only`,
		run: runDemoCommand,
	})
}

// simDemoCommand describes `cohort demo --sim` for its usage message.
var simDemoCommand = &command{
	name:     "demo",
	synopsis: "--sim [flags]",
	help: `Demo --sim simulates a cluster of nodes running the P2P-MPI gossip failure
detector (binary round-robin, a gossip every 0.5 s) over a network with 1-10 ms
latency. A few nodes crash at random times; the demo prints who detected what
and when, a summary per crash, a histogram of all detection times, and writes
a plot of them. It exits with status 0 only if every crash was detected by
every live node and no live node was ever declared failed.

The same seed gives the same run, event for event; --trace-only prints just
the run's trace hash (the CI compares two runs with it).

Examples:
  cohort demo --sim
  cohort demo --sim --seed 7 --crashes 10
  cohort demo --sim -n 4096 --schedule dbrr --out /tmp/demo
  cohort demo --sim -n 128 --seed 11 --trace-only`,
}

// runDemoCommand runs the live demo, or the simulated one with --sim.
func runDemoCommand(ctx context.Context, c *call) error {
	for _, a := range c.args {
		if a == "--" {
			break
		}
		if name, val, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "sim" && val != "false" {
			sc := *c
			sc.cmd = simDemoCommand
			return runSimDemo(ctx, &sc)
		}
	}
	return runLiveDemo(ctx, c)
}

func runSimDemo(ctx context.Context, c *call) error {
	fs := c.newFlags()
	cfg := simdemo.Config{Schedule: topo.BinaryRoundRobin}
	var traceOnly bool
	fs.Bool("sim", true, "run this simulated demo (without it: the live N-Queens demo)")
	fs.IntVar(&cfg.N, "n", 1024, "number of simulated `nodes`")
	fs.IntVar(&cfg.Crashes, "crashes", 5, "how many `nodes` crash")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "`seed` of the run (crash times, victims, network)")
	fs.TextVar(&cfg.Schedule, "schedule", topo.BinaryRoundRobin, "gossip `schedule`: brr, dbrr, rr or random")
	fs.StringVar(&cfg.Out, "out", filepath.Join("out", "demo"), "`directory` for the plot of detection times")
	fs.BoolVar(&traceOnly, "trace-only", false, "print only the run's trace hash")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	switch {
	case cfg.N < 4 || cfg.N > 1<<14:
		return usagef("-n %d: want 4 to 16384 nodes", cfg.N)
	case cfg.Crashes < 1 || cfg.Crashes > cfg.N/2:
		return usagef("--crashes %d: want 1 to n/2 = %d", cfg.Crashes, cfg.N/2)
	}
	if traceOnly {
		cfg.Out = ""
		res, err := simdemo.Run(ctx, cfg, io.Discard)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%016x\n", res.TraceHash)
		return nil
	}
	res, err := simdemo.Run(ctx, cfg, c.stdout)
	if err != nil {
		return err
	}
	if !res.OK {
		return errors.New(res.Verdict)
	}
	return nil
}
