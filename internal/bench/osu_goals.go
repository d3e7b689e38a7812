package bench

import (
	"fmt"
	"io"
	"strings"
)

// OSULatency is osu_latency's configuration (2 ranks, 0 B up, 10,000
// loops and 100 warm-up ones; 1,000 and 10 above OSULargeMessage); the
// caller sets MaxSize, Impls and Progress.
func OSULatency() *OSU {
	return &OSU{Mode: "latency", Ranks: 2, MinSize: 0, Unit: "µs", Loop: 10000, Skip: 100, LoopL: 1000, SkipL: 10, Window: 1}
}

// OSUBandwidth is osu_bw's configuration (2 ranks, 1 B up, windows of 64).
func OSUBandwidth() *OSU {
	return &OSU{Mode: "bw", Ranks: 2, MinSize: 1, Unit: "MB/s", Higher: true, Loop: 100, Skip: 10, LoopL: 20, SkipL: 2, Window: 64}
}

// OSUAllreduce is osu_allreduce's configuration on the given number of
// ranks (8 B up, float64 with Sum).
func OSUAllreduce(ranks int) *OSU {
	return &OSU{Mode: "allreduce", Ranks: ranks, MinSize: 8, Unit: "µs", Loop: 1000, Skip: 100, LoopL: 100, SkipL: 10, Window: 1}
}

// OSUGoal is one of the performance goals, against Open MPI's TCP path
// (or, for a same-host goal, its shared-memory path).
type OSUGoal struct {
	What   string
	Mode   string
	Size   int
	Limit  float64 // the ratio ours ÷ Open MPI must be ≤ limit (or ≥ for higher-is-better)
	Higher bool
	// Against is the Open MPI implementation compared with: "mpi-tcp"
	// when empty, or "mpi-vader" (shared memory, same host).
	Against string
}

// OSUGoals are the goals [WriteOSUGoals] checks.
var OSUGoals = []OSUGoal{
	{"8-byte one-way latency", "latency", 8, 1.5, false, ""},
	{"8-byte latency, same host (vs vader)", "latency", 8, 1.2, false, "mpi-vader"},
	{"1 MiB latency, same host (vs vader)", "latency", 1 << 20, 1.2, false, "mpi-vader"},
	{"1 MiB bandwidth", "bw", 1 << 20, 0.9, true, ""},
	{"1 MiB bandwidth, same host (vs vader)", "bw", 1 << 20, 1, true, "mpi-vader"},
	{"1 MiB Allreduce of float64 on 4 ranks", "allreduce", 1 << 20, 1.5, false, ""},
}

// WriteOSUGoals says where cohort stands against each goal. A goal
// against Open MPI's TCP path takes cohort's figure over loopback TCP
// (ours-tcp) when it ran, so that both sides use TCP; otherwise, and for
// the same-host goal, cohort's default path (ours: Unix sockets on one
// host). The line names the one it took.
func WriteOSUGoals(w io.Writer, all map[string][]OSUResult) {
	fmt.Fprintln(w, "# goals, cohort ÷ Open MPI tcp (vader where said); against tcp, cohort over TCP when ours-tcp ran")
	for _, g := range OSUGoals {
		against := g.Against
		if against == "" {
			against = "mpi-tcp"
		}
		var ours, oursTCP, mpi OSUResult
		for _, r := range all[g.Mode] {
			switch r.Impl {
			case "ours":
				ours = r
			case "ours-tcp":
				oursTCP = r
			case against:
				mpi = r
			}
		}
		oursImpl := "ours"
		if _, ok := oursTCP.Figures[g.Size]; ok && against == "mpi-tcp" {
			ours, oursImpl = oursTCP, "ours-tcp"
		}
		cmp := "≤"
		if g.Higher {
			cmp = "≥"
		}
		o, ok1 := ours.Figures[g.Size]
		m, ok2 := mpi.Figures[g.Size]
		if !ok1 || !ok2 || m == 0 {
			fmt.Fprintf(w, "  %-40s not measured (needs ours and %s at %d B)\n", g.What, against, g.Size)
			continue
		}
		ratio := o / m
		met := ratio <= g.Limit
		if g.Higher {
			met = ratio >= g.Limit
		}
		verdict := map[bool]string{true: "met", false: "NOT met"}[met]
		fmt.Fprintf(w, "  %-40s %s %.2f, Open MPI %.2f %s: ratio %.2f (goal %s %.1f) %s%s\n",
			g.What, osuImplTitle[oursImpl], o, m, map[bool]string{true: "MB/s", false: "µs"}[g.Higher], ratio, cmp, g.Limit, verdict,
			roundRatios(ours.PerRound, mpi.PerRound, g.Size))
	}
}

// roundRatios lists, when there were several rounds, ours ÷ theirs at size
// in each round: how far the machine's phases moved the ratio.
func roundRatios(ours, theirs []map[int]float64, size int) string {
	if len(ours) < 2 || len(ours) != len(theirs) {
		return ""
	}
	var b strings.Builder
	b.WriteString("; by round:")
	for i := range ours {
		if t := theirs[i][size]; t > 0 {
			fmt.Fprintf(&b, " %.2f", ours[i][size]/t)
		} else {
			b.WriteString(" —")
		}
	}
	return b.String()
}
