package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	registerBench(&benchmark{
		name:    "osu",
		summary: "p2p, bw and allreduce in one run, with the goals against Open MPI's TCP path",
		help: `The osu benchmark runs p2p, bw and allreduce (see their -h) one after the other
with the same flags, prints their three tables, and then where cohort stands
against the goals set against Open MPI's TCP path (btl self,tcp):

  8-byte one-way latency             within 1.5× of Open MPI tcp
  8-byte latency, same host          within 1.2× of Open MPI vader (shared memory)
  1 MiB latency, same host           within 1.2× of Open MPI vader
  1 MiB bandwidth                    at least 0.9× Open MPI tcp
  1 MiB bandwidth, same host         at least Open MPI vader's
  1 MiB Allreduce of float64, 4 ranks within 1.5× of Open MPI tcp

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

// newOSUBenches are the three benchmarks of the osu command, each run over
// osuGoalRounds rounds by default.
func newOSUBenches() []*bench.OSU {
	bs := []*bench.OSU{bench.OSULatency(), bench.OSUBandwidth(), bench.OSUAllreduce(4)}
	for _, b := range bs {
		b.Rounds = osuGoalRounds
	}
	return bs
}

// osuGoalRounds is the osu command's default --rounds: on this kind of
// shared machine one run of each implementation moved the goals' ratios by
// up to twice (the 1 MiB bandwidth ratio was 0.71, 1.91 and 0.88 in three
// runs of a few minutes apart); the median of three alternated rounds
// does not rest on one phase.
const osuGoalRounds = 3

var osuTitles = map[string]string{
	"latency":   "one-way latency (µs), osu_latency loops",
	"bw":        "bandwidth (MB/s), osu_bw loops, window 64",
	"allreduce": "Allreduce of float64 with Sum on 4 ranks (µs per call), osu_allreduce loops",
}

func runBenchOSUAll(ctx context.Context, c *call) error {
	benches := newOSUBenches()
	for _, b := range benches { // the same flags for each
		if err := parseOSUFlags(c, b, nil); err != nil {
			return err
		}
	}
	start := time.Now()
	all := map[string][]bench.OSUResult{}
	for _, b := range benches {
		results, err := b.Measure(ctx)
		if err != nil {
			return err
		}
		all[b.Mode] = results
		b.WriteTable(c.stdout, osuTitles[b.Mode], results)
		fmt.Fprintf(c.stdout, "(%s)\n\n", b.Loops())
	}
	bench.WriteOSUGoals(c.stdout, all)
	fmt.Fprintf(c.stdout, "(%.0f s)\n", time.Since(start).Seconds())
	return nil
}
