package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	registerBench(&benchmark{
		name:    "allreduce",
		summary: "OSU-style Allreduce of float64, 8 B … 4 MiB on 4 ranks: cohort, raw TCP ring, Open MPI",
		help: `The allreduce benchmark is osu_allreduce (OSU micro-benchmarks) with MPI_SUM over
float64, run side by side over cohort's comm.Allreduce (-n processes started
by package launch), a ring allreduce (reduce-scatter then allgather) over raw
Go TCP sockets between the same number of processes, and — when mpicc and
mpirun are in PATH — Open MPI's MPI_Allreduce with --mca btl self,tcp and
with --mca btl self,vader.

Each size is reduced 1,000 times after 100 warm-up calls (100 and 10 above
8 KiB); each rank times its calls and the figure is the mean time of one
call in µs, averaged over the ranks. The table gives cohort's figure
divided by each baseline's (below 1: cohort is faster).

Examples:
  cohort bench allreduce
  cohort bench allreduce -n 8 --max 1M`,
		run: func(ctx context.Context, c *call) error {
			b := bench.OSUAllreduce(4)
			if err := parseOSUFlags(c, b, func(fs *flag.FlagSet) { fs.IntVar(&b.Ranks, "n", 4, "number of `ranks`") }); err != nil {
				return err
			}
			if b.Ranks < 1 || b.Ranks > 64 {
				return usagef("-n %d: want 1 to 64 ranks", b.Ranks)
			}
			return runOSU(ctx, c, b, fmt.Sprintf("Allreduce of float64 with Sum on %d ranks (µs per call), osu_allreduce loops", b.Ranks))
		},
	})
}
