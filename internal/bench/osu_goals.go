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

// OSUKey names one benchmark's results among a run's: its mode and its
// number of ranks (Allreduce runs on several).
type OSUKey struct {
	Mode  string
	Ranks int
}

// Key is b's key among a run's results.
func (b *OSU) Key() OSUKey { return OSUKey{b.Mode, b.Ranks} }

// OSUGoal is one of the performance goals, against Open MPI's TCP path
// (or, for a same-host goal, its shared-memory path).
type OSUGoal struct {
	What   string
	Mode   string
	Ranks  int // processes of the job: 2 for latency and bandwidth
	Size   int
	Limit  float64 // the ratio ours ÷ Open MPI must be ≤ limit (or ≥ for higher-is-better)
	Higher bool
	// Against is the Open MPI implementation compared with: "mpi-tcp"
	// when empty, or "mpi-vader" (shared memory, same host).
	Against string
}

// OSUGoals are the goals [WriteOSUGoals] checks: over TCP, cohort at
// least level with Open MPI's tcp path; on one host, it stays within 1.2× of vader's
// shared memory (at least level in bandwidth), also with more ranks than
// cores.
var OSUGoals = []OSUGoal{
	{"8-byte one-way latency", "latency", 2, 8, 1, false, ""},
	{"1 MiB bandwidth", "bw", 2, 1 << 20, 1, true, ""},
	{"1 MiB Allreduce of float64 on 4 ranks", "allreduce", 4, 1 << 20, 1, false, ""},
	{"8-byte latency, same host (vs vader)", "latency", 2, 8, 1.2, false, "mpi-vader"},
	{"1 MiB latency, same host (vs vader)", "latency", 2, 1 << 20, 1.2, false, "mpi-vader"},
	{"1 MiB bandwidth, same host (vs vader)", "bw", 2, 1 << 20, 1, true, "mpi-vader"},
	{"8-byte Allreduce, 4 ranks, same host", "allreduce", 4, 8, 1.2, false, "mpi-vader"},
	{"1 MiB Allreduce, 4 ranks, same host", "allreduce", 4, 1 << 20, 1.2, false, "mpi-vader"},
	{"8-byte Allreduce, 8 ranks, same host", "allreduce", 8, 8, 1.2, false, "mpi-vader"},
	{"1 MiB Allreduce, 8 ranks, same host", "allreduce", 8, 1 << 20, 1.2, false, "mpi-vader"},
}

// WriteOSUGoals says where cohort stands against each goal. A goal
// against Open MPI's TCP path takes cohort's figure over loopback TCP
// (ours-tcp) when it ran, so that both sides use TCP; otherwise, and for
// the same-host goal, cohort's default path (ours: shared memory on one
// host). The line names the one it took.
func WriteOSUGoals(w io.Writer, all map[OSUKey][]OSUResult) {
	fmt.Fprintln(w, "# goals, cohort ÷ Open MPI tcp (vader where said); against tcp, cohort over TCP when ours-tcp ran")
	for _, g := range OSUGoals {
		against := g.Against
		if against == "" {
			against = "mpi-tcp"
		}
		var ours, oursTCP, mpi OSUResult
		for _, r := range all[OSUKey{g.Mode, g.Ranks}] {
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
			fmt.Fprintf(w, "  %-40s not measured (needs ours and %s at %d B on %d ranks)\n", g.What, against, g.Size, g.Ranks)
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
