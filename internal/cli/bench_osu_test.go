package cli

import (
	"bytes"
	"context"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// osuDeadline bounds each OSU-style benchmark these tests run: far above
// what one takes under load (seconds), far below the test binary's
// timeout. A job still running at the deadline is stopped with SIGQUIT, so
// the test fails with its ranks' goroutine stacks instead of hanging until
// the whole run is killed.
const osuDeadline = 2 * time.Minute

// runWithin is run with a deadline d from now.
func runWithin(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errb bytes.Buffer
	code := Run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestBenchOSU runs each OSU-style benchmark with tiny sizes and
// iterations over cohort and raw TCP: a row per size,
// every figure positive, the ratio column present.
func TestBenchOSU(t *testing.T) {
	cases := []struct {
		bench string
		sizes []int
	}{
		{"p2p", []int{0, 1, 2, 4, 8, 16}},
		{"bw", []int{4, 8, 16}}, // --min 4
		{"allreduce", []int{8, 16, 32, 64}},
	}
	for _, c := range cases {
		t.Run(c.bench, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", c.bench, "--max", strconv.Itoa(c.sizes[len(c.sizes)-1]), "--iters", "5", "--skip", "1", "--impl", "ours,tcp"}
			if c.bench == "allreduce" {
				args = append(args, "-n", "3")
			}
			if c.bench == "p2p" {
				args = append(args, "--rounds", "2")
			}
			if c.bench == "bw" {
				args = append(args, "--min", "4")
			}
			code, stdout, stderr := runWithin(t, osuDeadline, args...)
			if code != exitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			rounds := strings.Contains(stdout, "median of 2 rounds") && strings.Count(stderr, "round 2 of 2") == 2
			if rounds != (c.bench == "p2p") {
				t.Fatalf("--rounds 2 given: %v; the table and progress say otherwise:\n%s\n%s", c.bench == "p2p", stdout, stderr)
			}
			if !strings.Contains(stdout, "÷raw TCP") {
				t.Fatalf("no ratio column:\n%s", stdout)
			}
			if !strings.Contains(stdout, "allocs/") {
				t.Fatalf("no allocation column:\n%s", stdout)
			}
			// size, cohort, raw TCP, ratio, then cohort's allocations.
			row := regexp.MustCompile(`(?m)^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+$`)
			rows := row.FindAllStringSubmatch(stdout, -1)
			if len(rows) != len(c.sizes) {
				t.Fatalf("want %d rows, got:\n%s", len(c.sizes), stdout)
			}
			for i, r := range rows {
				if r[1] != strconv.Itoa(c.sizes[i]) {
					t.Fatalf("row %d is size %s, want %d", i, r[1], c.sizes[i])
				}
				for j, f := range r[2:] {
					v, err := strconv.ParseFloat(f, 64)
					// The table rounds to 0.01: a bandwidth of 1-byte
					// messages under load (the race detector, other test
					// binaries) can print 0.00, so only the largest size's
					// figures must be positive there; so can the ratio,
					// when a loaded machine slows the baseline's wake-ups
					// two hundredfold (raw TCP at 313 µs against 0.87).
					ratio := j == 2
					if err != nil || v < 0 || (v == 0 && !ratio && (c.bench != "bw" || i == len(rows)-1)) {
						t.Fatalf("figure %s in row %q", f, r[0])
					}
				}
			}
		})
	}
}

func TestBenchOSUBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"bench", "p2p", "--max", "0"}, "--max 0: want 1 bytes to 64M"},
		{[]string{"bench", "p2p", "--max", "lots"}, "not a size in bytes"},
		{[]string{"bench", "bw", "--impl", "ours,udp"}, `unknown implementation "udp"`},
		{[]string{"bench", "p2p", "--iters", "-1"}, "--iters -1"},
		{[]string{"bench", "p2p", "--skip", "-2"}, "--skip -2"},
		{[]string{"bench", "p2p", "--rounds", "0"}, "--rounds 0: want 1 to 99"},
		{[]string{"bench", "osu", "--rounds", "100"}, "--rounds 100: want 1 to 99"},
		{[]string{"bench", "allreduce", "-n", "0"}, "-n 0: want 1 to 64 ranks"},
		{[]string{"bench", "allreduce", "--max", "4"}, "--max 4: want 8 bytes"},
		{[]string{"bench", "allreduce", "--min", "4"}, "--min 4: want a power of two from 8 bytes"},
		{[]string{"bench", "p2p", "--min", "3"}, "--min 3: want a power of two"},
		{[]string{"bench", "bw", "--min", "1K", "--max", "512"}, "--min 1K: want a power of two from 1 bytes to --max (512)"},
		{[]string{"bench", "p2p", "--min", "few"}, "not a size in bytes"},
		{[]string{"osu-worker", "latency"}, "want latency|bw|allreduce"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestBenchOSUAll: one command gives the three tables and the goals
// section; without mpicc and mpirun in PATH the Open MPI columns are left
// out with the reason, the rest runs, and the goals are "not measured".
func TestBenchOSUAll(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, stdout, stderr := runWithin(t, osuDeadline, "bench", "osu", "--max", "16", "--iters", "3", "--skip", "0", "--impl", "ours,mpi-tcp")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"# one-way latency", "# bandwidth", "# Allreduce of float64", "# goals",
		"# OMPI tcp: not run (mpicc or mpirun is not in PATH", "cohort µs",
		"8-byte one-way latency", "not measured (needs ours and mpi-tcp at 8 B on 2 ranks)", "# Allreduce of float64 with Sum on 8 ranks", "8-byte Allreduce, 8 ranks, same host", "median of 3 rounds"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("missing %q in:\n%s", want, stdout)
		}
	}
}

// TestBenchReplication runs the replication benchmark at a tiny size: every
// degree measured, overheads and the table printed; bad flags refused.
func TestBenchReplication(t *testing.T) {
	code, stdout, stderr := run(t, "bench", "replication", "--max-r", "2", "--reps", "2", "--max", "8", "--trips", "5",
		"--queens", "../../examples/nqueens", "--queens-n", "12", "--queens-procs", "2", "--out", t.TempDir())
	if code != exitOK || !strings.Contains(stdout, "r=2 overhead") || !regexp.MustCompile(`(?m)^\s+8\s+[0-9.]+\s+[0-9.]+\s+[+-][0-9]+% \[\?\]\s+[0-9.]+\s+[0-9.]+ \[\?\]`).MatchString(stdout) ||
		// Two repetitions give no interval: the goal cannot be decided.
		!regexp.MustCompile(`(?m)^  r = 2 ≤ 1\.5× the floor: undecided \(the nearest to missing at 8 B: [0-9.]+ \[\?\]\)`).MatchString(stdout) ||
		!strings.Contains(stdout, "replication.png") ||
		!regexp.MustCompile(`N-Queens n=12 on 2 ranks .*: r=1 [0-9.]+ s, r=2 [0-9.]+ s .*ratio [0-9.]+`).MatchString(stdout) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, args := range [][]string{{"--max-r", "0"}, {"--max-r", "99"}, {"--reps", "0"}, {"--max", "x"}, {"--queens-procs", "-1"}, {"--tcp=x"}} {
		if code, _, _ := run(t, append([]string{"bench", "replication"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestBenchRawShm: the raw shared-memory baseline runs the latency loop
// beside cohort (a ratio column, positive figures at every size) and is
// reported as not run by the other benchmarks.
func TestBenchRawShm(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("raw shared memory runs on Linux only")
	}
	code, stdout, stderr := runWithin(t, osuDeadline, "bench", "p2p", "--max", "64", "--iters", "5", "--skip", "1", "--impl", "ours,shm")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "raw shm µs") || !strings.Contains(stdout, "÷raw shm") {
		t.Fatalf("no raw shm columns:\n%s", stdout)
	}
	// size, cohort, raw shm, ratio, allocations.
	rows := regexp.MustCompile(`(?m)^\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+$`).FindAllStringSubmatch(stdout, -1)
	if len(rows) != 8 { // 0, 1, 2, … 64
		t.Fatalf("want 8 rows, got:\n%s", stdout)
	}
	for _, r := range rows {
		if v, err := strconv.ParseFloat(r[3], 64); err != nil || v <= 0 {
			t.Fatalf("raw shm figure %s in row %q", r[3], r[0])
		}
	}
	code, stdout, stderr = runWithin(t, osuDeadline, "bench", "bw", "--max", "8", "--iters", "3", "--skip", "0", "--impl", "ours,shm")
	if code != exitOK || !strings.Contains(stdout, "# raw shm: not run (latency only)") {
		t.Fatalf("bw with shm: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
