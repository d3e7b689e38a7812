package cli

import (
	"context"
	"errors"
	"time"

	"github.com/cohort-mp/cohort/internal/runner"
)

func init() {
	register(&command{
		name:     "cluster",
		synopsis: "[flags]",
		summary:  "run a job of real processes on this machine, kill some, check the survivors agree",
		help: `Cluster starts n real processes of this program ('cohort node'), each with its
own port on 127.0.0.1 and a fresh random job secret in its environment; each
runs a failure detector and the membership service over authenticated TCP.
Once all of them hold the same first view, cluster kills --kill of them with
SIGKILL at random times (drawn from --seed) within --window, the root (the
first member of the current view) among them with --kill-root, and prints
each view change as the processes report it: one line per view once every
live member has installed it, with its members, who departed, how long after
the kill, and the stabilization time T_s the root measured.

It exits with status 0 only if every survivor ends in the same view and that
view holds exactly the survivors (so it excludes every killed node); after
--timeout it exits with status 1 and says who holds which view. Ctrl-C stops
the whole job. --events-dir keeps each node's event stream (n<id>.jsonl), its
logs (n<id>.log) and the orchestrator's records (job.jsonl).

Examples:
  cohort cluster -n 16 --kill 3
  cohort cluster -n 16 --kill 3 --kill-root --seed 7
  cohort cluster -n 32 --kill 4 --fanout 2 --detector heartbeat --events-dir /tmp/job`,
		run: runClusterCommand,
	})
}

// clusterConfig is what the cluster command's flags set.
type clusterConfig struct {
	n, kill   int
	killRoot  bool
	fanout    int
	detector  runner.Detector
	seed      uint64
	eventsDir string
	window    time.Duration
	timeout   time.Duration
}

// maxClusterNodes bounds -n: every node is a process with a few threads.
const maxClusterNodes = 512

func runClusterCommand(ctx context.Context, c *call) error {
	fs := c.newFlags()
	cfg := clusterConfig{detector: runner.DefaultDetector}
	fs.IntVar(&cfg.n, "n", 16, "number of `processes`")
	fs.IntVar(&cfg.kill, "kill", 3, "how many `processes` to kill with SIGKILL")
	fs.BoolVar(&cfg.killRoot, "kill-root", false, "kill the root (the first member of the current view) as one of them")
	fs.IntVar(&cfg.fanout, "fanout", runner.MemberConfig(0).Fanout, "radix tree `fan-out` a, a power of two")
	fs.TextVar(&cfg.detector, "detector", runner.DefaultDetector, detectorHelp)
	fs.Uint64Var(&cfg.seed, "seed", 1, "`seed` of the kill times and victims (and of the nodes)")
	fs.StringVar(&cfg.eventsDir, "events-dir", "", "keep every node's event stream and logs in `directory`")
	fs.DurationVar(&cfg.window, "window", 2*time.Second, "the kills happen at random times within this `duration` after the first view")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "how long the survivors get to agree after the last kill")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	switch {
	case cfg.n < 2 || cfg.n > maxClusterNodes:
		return usagef("-n %d: want 2 to %d processes", cfg.n, maxClusterNodes)
	case cfg.kill < 0 || cfg.kill >= cfg.n:
		return usagef("--kill %d: want 0 to n−1 = %d (at least one process must survive)", cfg.kill, cfg.n-1)
	case cfg.killRoot && cfg.kill == 0:
		return usagef("--kill-root needs --kill ≥ 1")
	case runner.MemberConfig(cfg.fanout).Validate() != nil:
		return usagef("--fanout %d: want a power of two from 2 to 65536", cfg.fanout)
	case cfg.window < 0 || cfg.timeout <= 0:
		return usagef("--window must not be negative and --timeout must be positive")
	}
	ok, err := runner.RunKills(ctx, runner.KillConfig{N: cfg.n, Kill: cfg.kill, KillRoot: cfg.killRoot, Fanout: cfg.fanout,
		Detector: cfg.detector, Seed: cfg.seed, EventsDir: cfg.eventsDir, Window: cfg.window, Timeout: cfg.timeout}, c.stdout)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the survivors did not agree")
	}
	return nil
}
