package cli

import (
	"context"
	"path/filepath"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	registerBench(&benchmark{
		name:    "resilience",
		summary: "the Jacobi stencil's time to solution under failures: checkpoints at several intervals with spares, spares alone, replication r = 2",
		help: `The resilience benchmark runs the Jacobi stencil (examples/jacobi) the
three ways a program that needs its N ranks survives deaths, under one
failure schedule: in-memory checkpoints every k iterations with spares
(for each k of --k), spares without checkpoints (a spare restarts the
stencil from its first iteration, without a relaunch), and replication
r = 2. Each repetition first runs the stencil failure-free without
checkpoints (the work) and with checkpoints every smallest k (the cost of
one checkpoint), then draws kill times from a Poisson process of mean
--mtbf over the work (at most --kills, seeded by --seed), and runs every
configuration with the same kills: kill i takes process i·⌊N/kills⌋
(that rank's process, or replica 0 of that rank; never a rank and its
buddy). Every run's checksum must be the
failure-free run's. The time to solution is the job's wall time, launch
included; process-seconds weigh it by the processes held (N+S, or 2N). The
model column is Young's first-order waste with the measured checkpoint
cost and --restart.

Writes resilience.csv and the figure resilience.png/.svg under --out.

Examples:
  cohort bench resilience
  cohort bench resilience --reps 1 --k 50,200 --mtbf 1s`,
		run: func(ctx context.Context, c *call) error {
			fs := c.newFlags()
			cfg := bench.ResilienceConfig{Ranks: 4, Size: 96, Iters: 2000, Pace: time.Millisecond, MTBF: 2 * time.Second, MaxKills: 2,
				Restart: 150 * time.Millisecond, Reps: 3, Seed: 1, Progress: c.stderr}
			intervals := intList{25, 50, 100, 200, 400}
			fs.IntVar(&cfg.Ranks, "n", cfg.Ranks, "the stencil's `ranks`")
			fs.IntVar(&cfg.Size, "size", cfg.Size, "the plate's side (`points`)")
			fs.IntVar(&cfg.Iters, "iters", cfg.Iters, "`iterations`")
			fs.DurationVar(&cfg.Pace, "pace", cfg.Pace, "pause between two iterations (`duration`; sets an iteration's length)")
			fs.Var(&intervals, "k", "checkpoint `intervals` in iterations, comma-separated")
			fs.DurationVar(&cfg.MTBF, "mtbf", cfg.MTBF, "the job's mean time between failures (`duration`)")
			fs.IntVar(&cfg.MaxKills, "kills", cfg.MaxKills, "at most this many `kills` a run, and as many spares")
			fs.DurationVar(&cfg.Restart, "restart", cfg.Restart, "the model's cost of one failure beside the lost work (`duration`)")
			fs.IntVar(&cfg.Reps, "reps", cfg.Reps, "`repetitions`")
			fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "`seed` of the kill times")
			program := fs.String("program", "github.com/cohort-mp/cohort/examples/jacobi", "the stencil (a Go package or an executable)")
			out := fs.String("out", filepath.Join("out", "bench-resilience"), "`directory` for resilience.csv and the figure resilience.png/.svg")
			if err := c.parse(fs, c.args, 0); err != nil {
				return err
			}
			cfg.Intervals = intervals
			switch {
			case cfg.Ranks < 2 || cfg.Ranks > maxRunRanks/2:
				return usagef("-n %d: want 2 to %d ranks", cfg.Ranks, maxRunRanks/2)
			case cfg.Size < cfg.Ranks || cfg.Iters < 2 || cfg.Pace < 0:
				return usagef("--size %d, --iters %d, --pace %v: want a side of at least -n points, 2 iterations or more, a pace of 0 or more", cfg.Size, cfg.Iters, cfg.Pace)
			case cfg.MTBF <= 0 || cfg.Restart < 0:
				return usagef("--mtbf %v, --restart %v: want a positive MTBF and a restart of 0 or more", cfg.MTBF, cfg.Restart)
			case cfg.MaxKills < 1 || cfg.MaxKills > cfg.Ranks:
				return usagef("--kills %d: want 1 to -n (%d)", cfg.MaxKills, cfg.Ranks)
			case cfg.Reps < 1:
				return usagef("--reps %d: want at least 1", cfg.Reps)
			case len(cfg.Intervals) == 0:
				return usagef("--k: want at least one checkpoint interval")
			}
			for _, k := range cfg.Intervals {
				if k < 1 || k >= cfg.Iters {
					return usagef("--k %d: want intervals from 1 to --iters − 1 (%d)", k, cfg.Iters-1)
				}
			}
			path, cleanup, err := resolveProgram(ctx, *program, c.stderr)
			if err != nil {
				return err
			}
			defer cleanup()
			cfg.Program = path
			start := time.Now()
			res, err := bench.RunResilience(ctx, cfg)
			if err != nil {
				return err
			}
			return c.reportBench(res, *out, "resilience.csv", "%s.png/.svg", start)
		},
	})
}
