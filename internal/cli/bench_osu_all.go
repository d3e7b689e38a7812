package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	registerBench(&benchmark{
		name:    "osu",
		summary: "p2p, bw and allreduce in one run, with the goals against Open MPI",
		help: `The osu benchmark runs p2p, bw and allreduce on 4 ranks (see their -h) one after
the other with the same flags, then allreduce on 8 ranks with ours and
mpi-vader only (of those --impl names), prints their tables, and then where
cohort stands against the goals set against Open MPI's TCP path (btl
self,tcp) and its shared memory (btl self,vader):

  8-byte one-way latency                at most Open MPI tcp's
  1 MiB bandwidth                       at least Open MPI tcp's
  1 MiB Allreduce of float64, 4 ranks   at most Open MPI tcp's
  8-byte latency, same host             within 1.2× of Open MPI vader
  1 MiB latency, same host              within 1.2× of Open MPI vader
  1 MiB bandwidth, same host            at least Open MPI vader's
  8-byte and 1 MiB Allreduce, same host, 4 and 8 ranks
                                        within 1.2× of Open MPI vader

Against Open MPI tcp, cohort's figure is the one over loopback TCP (ours-tcp)
when it ran, its default path (ours: shared memory on one host) otherwise; the
same-host goals take the default path. Each goal line names the one it took.
A goal is "not measured" when Open MPI is absent or --max leaves the size out.

Every implementation runs --rounds times (3 by default here, 1 for p2p, bw
and allreduce alone), the implementations alternating within each round, and
each figure is the median of its rounds: a shared machine's slow and fast
phases then fall on cohort and Open MPI alike. A goal line lists each
round's ratio after the verdict.

Examples:
  cohort bench osu
  cohort bench osu --impl ours,tcp --max 64K`,
		run: runBenchOSUAll,
	})
}

// newOSUBenches are the benchmarks of the osu command, each run over
// osuGoalRounds rounds by default: latency, bandwidth and Allreduce on 4
// ranks with every implementation, then Allreduce on 8 ranks (more ranks
// than this kind of machine's cores) with those of its same-host goals.
func newOSUBenches() []*bench.OSU {
	bs := []*bench.OSU{bench.OSULatency(), bench.OSUBandwidth(), bench.OSUAllreduce(4), bench.OSUAllreduce(osuWideRanks)}
	for _, b := range bs {
		b.Rounds = osuGoalRounds
	}
	return bs
}

// osuWideRanks is the osu command's second Allreduce's ranks, and
// osuWideImpls the implementations it runs of those asked for: the two
// its goals compare.
const osuWideRanks = 8

var osuWideImpls = []string{"ours", "mpi-vader"}

// osuGoalRounds is the osu command's default --rounds: on this kind of
// shared machine one run of each implementation moved the goals' ratios by
// up to twice (the 1 MiB bandwidth ratio was 0.71, 1.91 and 0.88 in three
// runs of a few minutes apart); the median of three alternated rounds
// does not rest on one phase.
const osuGoalRounds = 3

func osuTitle(b *bench.OSU) string {
	switch b.Mode {
	case "latency":
		return "one-way latency (µs), osu_latency loops"
	case "bw":
		return "bandwidth (MB/s), osu_bw loops, window 64"
	}
	return fmt.Sprintf("Allreduce of float64 with Sum on %d ranks (µs per call), osu_allreduce loops", b.Ranks)
}

func runBenchOSUAll(ctx context.Context, c *call) error {
	benches := newOSUBenches()
	for _, b := range benches { // the same flags for each
		if err := parseOSUFlags(c, b, nil); err != nil {
			return err
		}
	}
	start := time.Now()
	all := map[bench.OSUKey][]bench.OSUResult{}
	for _, b := range benches {
		if b.Ranks == osuWideRanks {
			b.Impls = slices.DeleteFunc(b.Impls, func(impl string) bool { return !slices.Contains(osuWideImpls, impl) })
			if len(b.Impls) == 0 {
				continue
			}
		}
		results, err := b.Measure(ctx)
		if err != nil {
			return err
		}
		all[b.Key()] = results
		b.WriteTable(c.stdout, osuTitle(b), results)
		fmt.Fprintf(c.stdout, "(%s)\n\n", b.Loops())
	}
	bench.WriteOSUGoals(c.stdout, all)
	fmt.Fprintf(c.stdout, "(%.0f s)\n", time.Since(start).Seconds())
	return nil
}
