package bench_test

import (
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/internal/bench"
)

// TestOSUGoals checks the verdicts against hand-made figures.
func TestOSUGoals(t *testing.T) {
	res := func(ours, mpi float64, size int) []bench.OSUResult {
		return []bench.OSUResult{{Impl: "ours", Figures: map[int]float64{size: ours}}, {Impl: "mpi-tcp", Figures: map[int]float64{size: mpi}}}
	}
	var b strings.Builder
	bench.WriteOSUGoals(&b, map[bench.OSUKey][]bench.OSUResult{
		{"latency", 2}:   res(4.5, 5, 8),         // 0.9 ≤ 1: met
		{"bw", 2}:        res(800, 1000, 1<<20),  // 0.8 < 1: not met
		{"allreduce", 4}: res(1600, 1000, 1<<20), // 1.6 > 1: not met
	})
	out := b.String()
	if !strings.Contains(out, "same host (vs vader)     not measured (needs ours and mpi-vader at 8 B on 2 ranks)") {
		t.Fatalf("the same-host goal is not reported as unmeasured without vader:\n%s", out)
	}
	b.Reset()
	bench.WriteOSUGoals(&b, map[bench.OSUKey][]bench.OSUResult{{"latency", 2}: {
		{Impl: "ours", Figures: map[int]float64{8: 10}},
		{Impl: "mpi-vader", Figures: map[int]float64{8: 0.5}},
	}})
	if !strings.Contains(b.String(), "ratio 20.00 (goal ≤ 1.2) NOT met") {
		t.Fatalf("same-host goal against vader:\n%s", b.String())
	}
	// The same-host bandwidth goal is a floor: at least vader's.
	b.Reset()
	bench.WriteOSUGoals(&b, map[bench.OSUKey][]bench.OSUResult{{"bw", 2}: {
		{Impl: "ours", Figures: map[int]float64{1 << 20: 21000}},
		{Impl: "mpi-vader", Figures: map[int]float64{1 << 20: 20000}},
	}})
	if want := "1 MiB bandwidth, same host (vs vader)    cohort 21000.00, Open MPI 20000.00 MB/s: ratio 1.05 (goal ≥ 1.0) met"; !strings.Contains(b.String(), want) {
		t.Fatalf("missing %q in:\n%s", want, b.String())
	}
	for _, want := range []string{"ratio 0.90 (goal ≤ 1.0) met", "ratio 0.80 (goal ≥ 1.0) NOT met", "ratio 1.60 (goal ≤ 1.0) NOT met"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in:\n%s", want, out)
		}
	}
	// With cohort measured over both paths, the goal against Open MPI's
	// TCP takes cohort over TCP, the same-host goal cohort's default path.
	b.Reset()
	bench.WriteOSUGoals(&b, map[bench.OSUKey][]bench.OSUResult{{"latency", 2}: {
		{Impl: "ours", Figures: map[int]float64{8: 4}},
		{Impl: "ours-tcp", Figures: map[int]float64{8: 8}},
		{Impl: "mpi-tcp", Figures: map[int]float64{8: 5}},
		{Impl: "mpi-vader", Figures: map[int]float64{8: 2}},
	}})
	for _, want := range []string{"cohort TCP 8.00, Open MPI 5.00 µs: ratio 1.60", "cohort 4.00, Open MPI 2.00 µs: ratio 2.00"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("missing %q in:\n%s", want, b.String())
		}
	}
	// Over rounds, the verdict takes the medians and the line lists each
	// round's ratio.
	b.Reset()
	rounds := func(fs ...float64) []map[int]float64 {
		var out []map[int]float64
		for _, f := range fs {
			out = append(out, map[int]float64{8: f})
		}
		return out
	}
	bench.WriteOSUGoals(&b, map[bench.OSUKey][]bench.OSUResult{{"latency", 2}: {
		{Impl: "ours", Figures: map[int]float64{8: 6}, PerRound: rounds(6, 9, 5)},
		{Impl: "mpi-tcp", Figures: map[int]float64{8: 5}, PerRound: rounds(5, 3, 5)},
	}})
	if want := "ratio 1.20 (goal ≤ 1.0) NOT met; by round: 1.20 3.00 1.00"; !strings.Contains(b.String(), want) {
		t.Fatalf("missing %q in:\n%s", want, b.String())
	}
	// The same-host Allreduce goals take each job size's own figures.
	b.Reset()
	vader := func(ours8, mpi8, ours1M, mpi1M float64) []bench.OSUResult {
		return []bench.OSUResult{
			{Impl: "ours", Figures: map[int]float64{8: ours8, 1 << 20: ours1M}},
			{Impl: "mpi-vader", Figures: map[int]float64{8: mpi8, 1 << 20: mpi1M}},
		}
	}
	bench.WriteOSUGoals(&b, map[bench.OSUKey][]bench.OSUResult{
		{"allreduce", 4}: vader(11, 10, 500, 400),
		{"allreduce", 8}: vader(30, 20, 900, 1000),
	})
	for _, want := range []string{
		"8-byte Allreduce, 4 ranks, same host     cohort 11.00, Open MPI 10.00 µs: ratio 1.10 (goal ≤ 1.2) met",
		"1 MiB Allreduce, 4 ranks, same host      cohort 500.00, Open MPI 400.00 µs: ratio 1.25 (goal ≤ 1.2) NOT met",
		"8-byte Allreduce, 8 ranks, same host     cohort 30.00, Open MPI 20.00 µs: ratio 1.50 (goal ≤ 1.2) NOT met",
		"1 MiB Allreduce, 8 ranks, same host      cohort 900.00, Open MPI 1000.00 µs: ratio 0.90 (goal ≤ 1.2) met",
		"1 MiB Allreduce of float64 on 4 ranks    not measured (needs ours and mpi-tcp at 1048576 B on 4 ranks)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("missing %q in:\n%s", want, b.String())
		}
	}
}
