package cli

import (
	"context"
	"fmt"
	"io"
	"time"
)

func init() {
	registerBench(&benchmark{
		name:    "osu",
		summary: "p2p, bw and allreduce in one run, with the goals against Open MPI's TCP path",
		help: `The osu benchmark runs p2p, bw and allreduce (see their -h) one after the other
with the same flags, prints their three tables, and then where cohort stands
against the goals set against Open MPI's TCP path (btl self,tcp):

  8-byte one-way latency             within 1.5× of Open MPI tcp
  1 MiB bandwidth                    at least 0.9× Open MPI tcp
  1 MiB Allreduce of float64, 4 ranks within 1.5× of Open MPI tcp

A goal is "not measured" when Open MPI is absent or --max leaves the size out.

Examples:
  cohort bench osu
  cohort bench osu --impl ours,tcp --max 64K`,
		run: runBenchOSUAll,
	})
}

// osuGoal is one of the performance goals.
type osuGoal struct {
	what   string
	mode   string
	size   int
	limit  float64 // the ratio ours ÷ Open MPI tcp must be ≤ limit (or ≥ for higher-is-better)
	higher bool
}

var osuGoals = []osuGoal{
	{"8-byte one-way latency", "latency", 8, 1.5, false},
	{"1 MiB bandwidth", "bw", 1 << 20, 0.9, true},
	{"1 MiB Allreduce of float64 on 4 ranks", "allreduce", 1 << 20, 1.5, false},
}

func newOSUBenches() []*osuBench {
	return []*osuBench{
		{mode: "latency", ranks: 2, minSize: 0, unit: "µs", loop: 10000, skip: 100, loopL: 1000, skipL: 10, window: 1},
		{mode: "bw", ranks: 2, minSize: 1, unit: "MB/s", higher: true, loop: 100, skip: 10, loopL: 20, skipL: 2, window: 64},
		{mode: "allreduce", ranks: 4, minSize: 8, unit: "µs", loop: 1000, skip: 100, loopL: 100, skipL: 10, window: 1},
	}
}

var osuTitles = map[string]string{
	"latency":   "one-way latency (µs), osu_latency loops",
	"bw":        "bandwidth (MB/s), osu_bw loops, window 64",
	"allreduce": "Allreduce of float64 with Sum on 4 ranks (µs per call), osu_allreduce loops",
}

func runBenchOSUAll(ctx context.Context, c *call) error {
	benches := newOSUBenches()
	for _, b := range benches { // the same flags for each
		if err := b.parseFlags(c, nil); err != nil {
			return err
		}
	}
	start := time.Now()
	all := map[string][]osuResult{}
	for _, b := range benches {
		results, err := b.measure(ctx)
		if err != nil {
			return err
		}
		all[b.mode] = results
		b.writeTable(c.stdout, osuTitles[b.mode], results)
		fmt.Fprintf(c.stdout, "(%s)\n\n", b.loops())
	}
	writeOSUGoals(c.stdout, all)
	fmt.Fprintf(c.stdout, "(%.0f s)\n", time.Since(start).Seconds())
	return nil
}

// writeOSUGoals says where cohort stands against each goal.
func writeOSUGoals(w io.Writer, all map[string][]osuResult) {
	fmt.Fprintln(w, "# goals, cohort ÷ Open MPI tcp")
	for _, g := range osuGoals {
		var ours, mpi map[int]float64
		for _, r := range all[g.mode] {
			switch r.impl {
			case "ours":
				ours = r.figures
			case "mpi-tcp":
				mpi = r.figures
			}
		}
		cmp := "≤"
		if g.higher {
			cmp = "≥"
		}
		o, ok1 := ours[g.size]
		m, ok2 := mpi[g.size]
		if !ok1 || !ok2 || m == 0 {
			fmt.Fprintf(w, "  %-40s not measured (needs ours and mpi-tcp at %d B)\n", g.what, g.size)
			continue
		}
		ratio := o / m
		met := ratio <= g.limit
		if g.higher {
			met = ratio >= g.limit
		}
		verdict := map[bool]string{true: "met", false: "NOT met"}[met]
		fmt.Fprintf(w, "  %-40s cohort %.2f, Open MPI %.2f %s: ratio %.2f (goal %s %.1f) %s\n",
			g.what, o, m, map[bool]string{true: "MB/s", false: "µs"}[g.higher], ratio, cmp, g.limit, verdict)
	}
}
