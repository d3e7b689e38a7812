package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/runner"
)

func init() {
	register(&command{
		name:     "node",
		synopsis: "[flags]",
		summary:  "run one process of a job (started by cohort cluster or a launcher)",
		hidden:   true,
		help: `Node runs one process of a cohort job: the failure detector and the membership
service over TCP, until it receives SIGINT or SIGTERM. It is started by
'cohort cluster', 'cohort bench' or a launcher, not by hand.

Its place in the job comes from the environment (never the command line,
where every user of the machine could read the secret):

  COHORT_JOB_ID   the job's name
  COHORT_NODE_ID  this node's id, listed in COHORT_NODES
  COHORT_NODES    id=host:port entries separated by commas, or a file of them
  COHORT_SECRET   the job secret, hex, at least 16 bytes

A missing or malformed variable exits with status 2.

--events writes one JSON line per event (views installed, stabilization
times, suspicions, failures); "-" is standard output. --supervised (used by
cohort cluster) announces the listening address on the event stream, waits
for a line "start" on standard input, and stops when standard input closes;
its later lines "peer <id>=<addr>" add a node to the address book and
"fail <id>" hands the machines a failure verdict about node id, as if the
detector had declared it (with --quiet-detector, the only verdicts).

Example:
  COHORT_JOB_ID=j1 COHORT_NODE_ID=0 COHORT_NODES=0=127.0.0.1:7000,1=127.0.0.1:7001 \
  COHORT_SECRET=$(openssl rand -hex 32) cohort node --events n0.jsonl`,
		run: runNode,
	})
}

func runNode(ctx context.Context, c *call) error {
	fs := c.newFlags()
	opts := runner.NodeOptions{Detector: runner.DefaultDetector}
	fs.IntVar(&opts.Fanout, "fanout", runner.MemberConfig(0).Fanout, "radix tree `fan-out` a, a power of two (same on every node)")
	fs.TextVar(&opts.Detector, "detector", runner.DefaultDetector, "failure `detector`: brr, dbrr (gossip every 50 ms) or heartbeat (100 ms, aggressive)")
	fs.BoolVar(&opts.QuietDetector, "quiet-detector", false, "postpone the detector's verdicts by an hour: failures are reported only by \"fail <id>\" lines of the supervisor (cohort bench --report one)")
	events := fs.String("events", "", "write the event stream (JSON lines) to `file`; - for standard output")
	fs.BoolVar(&opts.Join, "join", false, "join the running group through the other listed nodes instead of being an initial member")
	ping := fs.Int("ping", -1, "run a ping-pong with node `id` once the first view is installed (measures L)")
	fs.IntVar(&opts.PingCount, "ping-count", 200, "round `trips` of the ping-pong, after 20 of warm-up")
	fs.Uint64Var(&opts.Seed, "seed", 0, "`seed` of the machines' random source (0: random)")
	supervised := fs.Bool("supervised", false, "announce the address, wait for \"start\" on standard input, stop at its end")
	var level slog.Level = slog.LevelWarn
	fs.TextVar(&level, "log-level", slog.LevelWarn, "`level` of the logs on standard error: debug, info, warn or error")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	if err := runner.MemberConfig(opts.Fanout).Validate(); err != nil {
		return usagef("--fanout %d: want a power of two from 2 to 65536", opts.Fanout)
	}
	if *ping < -1 || int64(*ping) >= int64(core.None) {
		return usagef("--ping %d: not a node id", *ping)
	}
	if *ping >= 0 {
		opts.PingPeer = core.NodeID(*ping)
		if opts.PingCount < 1 {
			return usagef("--ping-count %d: want at least 1", opts.PingCount)
		}
	} else {
		opts.PingCount = 0
	}
	boot, err := runner.LoadBootstrap(os.Getenv)
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if *ping >= 0 && boot.Addr(opts.PingPeer) == "" {
		return usagef("--ping %d: node %d is not listed in %s", *ping, *ping, runner.EnvNodes)
	}
	switch *events {
	case "":
	case "-":
		opts.Events = c.stdout
	default:
		f, err := os.Create(*events)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.Events = f
	}
	opts.Logger = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	if *supervised {
		opts.Supervisor = os.Stdin
	}
	err = runner.RunNode(ctx, boot, opts)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node %v: %w", boot.Self, err)
	}
	return nil
}
