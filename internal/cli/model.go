package cli

import (
	"context"
)

func init() {
	register(&command{
		name:     "model",
		synopsis: "replication [flags]",
		summary:  "evaluate an analytical model of the papers (CSV, plot, report)",
		help: `Model evaluates an analytical model and writes CSV, PNG and SVG plots and a
report.md beside the paper's figure, like 'cohort sim'.

  replication   P2P-MPI's Figure 10: the failure probability of an application
                of p processes against its replication degree r, with Weibull
                host failures over a duration from Amdahl's law and an
                overhead linear in r (flags -p, -tseq, -alpha, -beta, -lambda,
                -delta, -max-r; see 'cohort model replication -h').

Examples:
  cohort model replication
  cohort model replication -p 64 -beta 0.2 --out /tmp/repl`,
		run: runModel,
	})
}

// models are the experiments 'cohort model' runs (they are also 'cohort
// sim' experiments: one code path).
var models = map[string]bool{"replication": true}

func runModel(ctx context.Context, c *call) error {
	if len(c.args) == 0 {
		return usagef("missing the model name (replication)")
	}
	switch name := c.args[0]; {
	case name == "-h" || name == "-help" || name == "--help":
		writeCommandUsage(c.stdout, c.cmd, nil)
		return nil
	case !models[name]:
		return usagef("unknown model %q (want replication)", name)
	}
	return runSim(ctx, &call{cmd: c.cmd, args: c.args, stdout: c.stdout, stderr: c.stderr})
}
