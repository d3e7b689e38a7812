package cli

import (
	"context"
)

func init() {
	register(&command{
		name:     "model",
		synopsis: "replication|checkpoint|tradeoff [flags]",
		summary:  "evaluate an analytical model of the papers (CSV, plot, report)",
		help: `Model evaluates an analytical model and writes CSV, PNG and SVG plots and a
report.md beside the paper's figure, like 'cohort sim'.

  replication   P2P-MPI's Figure 10: the failure probability of an application
                of p processes against its replication degree r, with Weibull
                host failures over a duration from Amdahl's law and an
                overhead linear in r (flags -p, -tseq, -alpha, -beta, -lambda,
                -delta, -max-r; see 'cohort model replication -h').
  checkpoint    the interval between coordinated checkpoints (package
                resil) by Young's and Daly's models, and the time wasted
                at intervals around it (--cost, --restart, --mtbf); prints
                a table, writes no files.
  tradeoff      the expected time to solution with checkpoints at Daly's
                interval and spares, beside replication r = 1 … 3 under
                Figure 10's model, for one failure rate per process, at job
                MTBFs from 1 min to 100 h (--work, -p, --cost, --restart,
                -beta); with --out also a CSV and a plot.

Examples:
  cohort model replication
  cohort model replication -p 64 -beta 0.2 --out /tmp/repl
  cohort model checkpoint --cost 1.4ms --restart 120ms --mtbf 1h
  cohort model tradeoff --work 1h -p 64 --out /tmp/tradeoff`,
		run: runModel,
	})
}

// models are the experiments 'cohort model' runs (they are also 'cohort
// sim' experiments: one code path).
var models = map[string]bool{"replication": true}

func runModel(ctx context.Context, c *call) error {
	if len(c.args) == 0 {
		return usagef("missing the model name (replication, checkpoint, tradeoff)")
	}
	switch name := c.args[0]; {
	case name == "-h" || name == "-help" || name == "--help":
		writeCommandUsage(c.stdout, c.cmd, nil)
		return nil
	case name == "checkpoint":
		return runModelCheckpoint(ctx, c)
	case name == "tradeoff":
		return runModelTradeoff(ctx, c)
	case !models[name]:
		return usagef("unknown model %q (want replication, checkpoint or tradeoff)", name)
	}
	return runSim(ctx, &call{cmd: c.cmd, args: c.args, stdout: c.stdout, stderr: c.stderr})
}
