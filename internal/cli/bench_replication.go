package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
	"github.com/cohort-mp/cohort/launch"
)

func init() {
	registerBench(&benchmark{
		name:    "replication",
		summary: "ping-pong latency with each rank replicated r = 1 … 4 times (P2P-MPI Fig. 9)",
		help: `The replication benchmark is P2P-MPI's Figure 9: two ranks ping-pong at
each size up to 128 KiB, each rank running as r replicas (cohort run -r),
for r = 1 to --max-r in one invocation. It prints the one-way latency per
degree and the overhead of each degree over r = 1.

r replicas of a pair are 2r busy processes: on a machine with fewer cores,
part of that overhead is only the sharing of the cores. So each degree
r ≥ 2 is also measured against its floor, the unreplicated pair while r − 1
other unreplicated pairs ping-pong beside it, and the ratio over the floor
is printed beside the overhead, with the goals (r = 2 at most 1.5×, r = 3
at most 2× the floor, at every size from 8 B to 64 KiB).

On a shared machine the load moves faster than a long run lasts, so the
benchmark runs many short repetitions (--reps of --trips round trips),
each the floor and the degree one right after the other, in an order
reversed from one repetition to the next. Every figure is the median of
the repetitions' paired ratios with a 95% interval from the sign test
(no assumption on the spread; 6 repetitions at least, 20 or more to
narrow it), and each goal is reported met (every size's interval within
it), NOT met (some size's interval wholly above it) or undecided.

--tcp runs the ranks over loopback TCP with the frames in authenticated
records, the path cohort takes between hosts, instead of shared memory.
--netns runs each process on a host of its own instead: network
namespaces on a bridge of this machine (2 × --max-r of them, each with a
peer daemon, and a supernode), the jobs submitted to them as 'cohort run
--hosts' does, over TCP with authenticated records across the veth links.
It needs root; the hosts are torn down when the benchmark ends. The
N-Queens runs (--queens-procs) stay on this host.

Examples:
  cohort bench replication
  cohort bench replication --max-r 3 --reps 30 --max 64K --queens-procs 0
  cohort bench replication --tcp --max-r 3 --max 64K --queens-procs 0
  cohort bench replication --netns --max-r 3 --max 64K --queens-procs 0`,
		run: func(ctx context.Context, c *call) error {
			fs := c.newFlags()
			cfg := bench.ReplicationConfig{MaxReplicas: 4, Trips: 200, Reps: 20, Progress: c.stderr}
			maxText := "128K"
			fs.IntVar(&cfg.MaxReplicas, "max-r", cfg.MaxReplicas, "the highest replication `degree`")
			fs.IntVar(&cfg.Trips, "trips", cfg.Trips, "round `trips` per size and repetition")
			fs.IntVar(&cfg.Reps, "reps", cfg.Reps, "`repetitions`, each a pair of runs per degree (the intervals come from them; 6 at least)")
			fs.BoolVar(&cfg.TCP, "tcp", false, "run over loopback TCP with authenticated records, as between hosts")
			fs.BoolVar(&cfg.Netns, "netns", false, "run each process on a network-namespace host of its own, over TCP with authenticated records (needs root)")
			fs.StringVar(&maxText, "max", maxText, "largest message `size` in bytes (suffix K or M allowed)")
			out := fs.String("out", filepath.Join("out", "bench-replication"), "`directory` for replication.csv and the figure replication.png/.svg")
			queensProcs := fs.Int("queens-procs", 4, "N-Queens `ranks` (0: skip the N-Queens runs)")
			queens := fs.String("queens", "github.com/cohort-mp/cohort/examples/nqueens", "the N-Queens `program` (a Go package or an executable)")
			fs.IntVar(&cfg.QueensN, "queens-n", 14, "N-Queens board `size`")
			if err := c.parse(fs, c.args, 0); err != nil {
				return err
			}
			size, err := parseSize(maxText)
			switch {
			case err != nil:
				return usagef("--max %q: %v", maxText, err)
			case size < 1 || size > 16<<20:
				return usagef("--max %s: want 1 byte to 16M", maxText)
			case cfg.MaxReplicas < 1 || cfg.MaxReplicas > launch.MaxReplicas:
				return usagef("--max-r %d: want 1 to %d", cfg.MaxReplicas, launch.MaxReplicas)
			case cfg.Trips < 1 || cfg.Reps < 1:
				return usagef("--trips %d, --reps %d: want at least 1", cfg.Trips, cfg.Reps)
			case cfg.TCP && cfg.Netns:
				return usagef("--tcp and --netns: choose one path")
			}
			cfg.MaxSize = size
			if *queensProcs < 0 || *queensProcs > maxRunRanks/2 || cfg.QueensN < 4 || cfg.QueensN > 18 {
				return usagef("--queens-procs %d, --queens-n %d: want 0 to %d ranks and a board of 4 to 18", *queensProcs, cfg.QueensN, maxRunRanks/2)
			}
			if *queensProcs > 0 {
				path, cleanup, err := resolveProgram(ctx, *queens, c.stderr)
				if err != nil {
					return fmt.Errorf("the N-Queens runs need the program (--queens; --queens-procs 0 skips them): %w", err)
				}
				defer cleanup()
				cfg.Queens, cfg.QueensProcs = path, *queensProcs
			}
			start := time.Now()
			res, err := bench.RunReplication(ctx, cfg)
			if err != nil {
				return err
			}
			return c.reportBench(res, *out, "replication.csv", "%s", start)
		},
	})
}

// benchFiles is a benchmark's result that prints a table and writes its
// CSV and figure.
type benchFiles interface {
	WriteTable(w io.Writer)
	WriteFiles(dir string) (string, error)
}

// reportBench prints res's table, writes its files into out when set
// (csv, the CSV's name; figFormat, how the returned figure path is
// shown) and the time since start.
func (c *call) reportBench(res benchFiles, out, csv, figFormat string, start time.Time) error {
	res.WriteTable(c.stdout)
	if out != "" {
		fig, err := res.WriteFiles(out)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "wrote %s and "+figFormat+"\n", filepath.Join(out, csv), fig)
	}
	fmt.Fprintf(c.stdout, "(%.0f s)\n", time.Since(start).Seconds())
	return nil
}
