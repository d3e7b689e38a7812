package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/cohort-mp/cohort/experiment"
)

func init() {
	register(&command{
		name:     "sim",
		synopsis: "<experiment> [flags]   |   cohort sim list",
		summary:  "run an experiment that reproduces a paper's figure",
		help: `Sim runs one experiment: a sweep of deterministic simulations (or Monte-Carlo
trials) in parallel, written as CSV, PNG and SVG plots and a report.md that
puts the results beside the paper's figure and lists which checks passed.
The exit status is 1 if a check failed.

Every experiment has the flags --seed, --out, --quick and --workers; some
have more: see 'cohort sim <experiment> -h'. 'cohort sim swarm' runs a
protocol's randomized swarm over many seeds instead: see 'cohort sim swarm -h'.

Examples:
  cohort sim list
  cohort sim fd-detect --quick
  cohort sim fd-reliability --seed 7 --out /tmp/rel
  cohort sim fd-heartbeat -h`,
		run: runSim,
	})
}

func runSim(ctx context.Context, c *call) error {
	if len(c.args) == 0 {
		writeExperimentList(c.stderr)
		return usagef("missing the experiment name")
	}
	name := c.args[0]
	switch {
	case name == "swarm":
		return runSwarm(ctx, c)
	case name == "list":
		if len(c.args) > 1 {
			return usagef("unexpected argument %q", c.args[1])
		}
		writeExperimentList(c.stdout)
		return nil
	case name == "-h" || name == "-help" || name == "--help" || name == "--h":
		writeCommandUsage(c.stdout, c.cmd, nil)
		fmt.Fprintln(c.stdout)
		writeExperimentList(c.stdout)
		return nil
	case strings.HasPrefix(name, "-"):
		return usagef("missing the experiment name before %s (flags go after it: cohort sim <experiment> %s)", name, name)
	}
	spec, ok := experiment.Lookup(name)
	if !ok {
		writeExperimentList(c.stderr)
		return usagef("unknown experiment %q", name)
	}
	exp := spec.New()
	var opts experiment.Options
	fs := c.newFlags()
	opts.Bind(fs, name)
	exp.Flags(fs)
	sub := &call{cmd: &command{
		name:     "sim " + name,
		synopsis: "[flags]",
		help:     spec.Summary + "\n\nExamples:\n  cohort sim " + name + " --quick\n  cohort sim " + name + " --seed 7 --out /tmp/" + name,
	}, stdout: c.stdout, stderr: c.stderr}
	if err := sub.parse(fs, c.args[1:], 0); err != nil {
		return err
	}
	opts.Progress = c.stderr
	opts.Log = c.stdout
	opts.Command = reproduceCommand(name, fs, opts)
	_, err := experiment.Execute(ctx, spec, exp, opts)
	if errors.Is(err, experiment.ErrBadOption) {
		return &usageError{msg: err.Error()}
	}
	return err
}

// reproduceCommand is the command line that gives the same results: the
// seed, --quick and the experiment's own flags that were set; --workers and
// --out are left out because they do not change the results.
func reproduceCommand(name string, fs *flag.FlagSet, opts experiment.Options) string {
	cmd := fmt.Sprintf("cohort sim %s --seed %d", name, opts.Seed)
	if opts.Quick {
		cmd += " --quick"
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "seed", "quick", "workers", "out":
			return
		}
		cmd += fmt.Sprintf(" --%s=%s", f.Name, f.Value.String())
	})
	return cmd
}

func writeExperimentList(w io.Writer) {
	fmt.Fprintln(w, "Experiments:")
	for _, s := range experiment.List() {
		fmt.Fprintf(w, "  %-16s %s\n", s.Name, s.Summary)
	}
}
