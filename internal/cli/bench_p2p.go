package cli

import (
	"context"
	"flag"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	registerBench(&benchmark{
		name:    "p2p",
		summary: "OSU-style one-way latency, 0 B … 4 MiB: cohort, raw TCP, raw shared memory, Open MPI tcp and vader",
		help: `The p2p benchmark is osu_latency (OSU micro-benchmarks) run side by side over
cohort's comm (two processes started by package launch, over transport/tcp:
"ours" over shared memory set up on its same-host Unix sockets, the default
between processes of one host, "ours-unix" over the Unix sockets themselves,
"ours-tcp" over loopback TCP, "ours-mac" over loopback TCP with the frames
in authenticated records as between hosts, "ours-tls" encrypted),
raw Go TCP sockets between two processes, raw shared memory between two
processes ("shm": a file of /dev/shm mapped by both, each message copied in
and out beside a polled sequence number; the floor of a same-host path on
this machine in this run), and — when mpicc and mpirun are in
PATH — Open MPI with --mca btl self,tcp (on the loopback interface) and with
shared memory (--mca btl self,vader), from a small C program embedded in
cohort and built with mpicc into a temporary directory.

Rank 0 sends a message of each size to rank 1, which sends it back, 10,000
times after 100 warm-up round trips (1,000 and 10 above 8 KiB), and reports
half the mean round trip in µs. The table gives every figure and cohort's
figure divided by each baseline's (below 1: cohort is faster).

With --relayed it measures transport/tcp's relayed path instead: four
transports in this process over loopback TCP, node 1 talking to node 4
over their connection (direct) and to node 3 through node 2, their direct
link cut (relayed: frames wrapped, tagged end to end and forwarded); 8 B
one-way latency (10,000 round trips a path, --iters) and 1 MiB bandwidth
(20 windows of 64 frames a path), both paths through Send, measured in
turn in ten rounds or --rounds (medians), with the ratios and their goals
(relayed latency at most 2.2× the direct one, bandwidth at least 0.45×).

Examples:
  cohort bench p2p
  cohort bench p2p --relayed
  cohort bench p2p --max 64K --impl ours,tcp
  cohort bench p2p --max 64K --impl ours,ours-unix,ours-tcp,tcp   # shared memory, Unix sockets, loopback TCP
  cohort bench p2p --iters 1000`,
		run: func(ctx context.Context, c *call) error {
			b := bench.OSULatency()
			relayed := false
			iters := 0
			var flags *flag.FlagSet
			err := parseOSUFlags(c, b, func(fs *flag.FlagSet) {
				fs.BoolVar(&relayed, "relayed", false, "measure transport/tcp's relayed path against its direct one, in this process, instead")
				flags = fs
			})
			if err != nil {
				return err
			}
			if relayed {
				r := bench.DefaultRelayed()
				if iters = b.Loop; iters > 0 && iters != bench.OSULatency().Loop {
					r.Iters = iters
				}
				flags.Visit(func(f *flag.Flag) {
					if f.Name == "rounds" {
						r.Rounds = b.Rounds
					}
				})
				direct, via, err := r.Measure(ctx)
				if err != nil {
					return err
				}
				bench.WriteRelayed(c.stdout, direct, via)
				return nil
			}
			return runOSU(ctx, c, b, "one-way latency (µs), osu_latency loops")
		},
	})
	registerBench(&benchmark{
		name:    "bw",
		summary: "OSU-style bandwidth, 1 B … 4 MiB: cohort, raw TCP, Open MPI tcp and vader",
		help: `The bw benchmark is osu_bw (OSU micro-benchmarks) run side by side over the
same implementations as p2p (see 'cohort bench p2p -h').

Rank 0 posts a window of 64 non-blocking sends of each size to rank 1, waits
for them, then for a 4-byte acknowledgement from rank 1 (which posts 64
receives); 100 times after 10 warm-up windows (20 and 2 above 8 KiB). The
figure is the bandwidth in MB/s (10^6 bytes per second). The table gives
cohort's figure divided by each baseline's (above 1: cohort is faster).

Examples:
  cohort bench bw
  cohort bench bw --max 1M --impl ours,mpi-tcp`,
		run: func(ctx context.Context, c *call) error {
			b := bench.OSUBandwidth()
			if err := parseOSUFlags(c, b, nil); err != nil {
				return err
			}
			return runOSU(ctx, c, b, "bandwidth (MB/s), osu_bw loops, window 64")
		},
	})
}
