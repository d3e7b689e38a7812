package cli

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestChaosNQueens: the chaos runs (Phoenix §5.2, §6) in small:
// two runs of the stealing N-Queens on 4 processes, each killing one
// rank (rank 0 included) at a random moment, all exact; the table and the
// totals are printed and the exit status is 0.
func TestChaosNQueens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/nqueens and starts real processes")
	}
	code, stdout, stderr := run(t, "chaos", "--runs", "2", "--procs", "4", "--kill-root", "--baseline", "1",
		"--seed", "7", "--timeout", "2m", "../../examples/nqueens", "--", "-n", "13")
	t.Logf("seed 7\n%s", stdout)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	rows := regexp.MustCompile(`(?m)^\s+[12]\s+\d+\s+.*\byes\b`).FindAllString(stdout, -1)
	if len(rows) != 2 || !strings.Contains(stdout, "total: 2 runs, 2 correct") {
		t.Fatalf("want 2 correct rows and the totals:\n%s", stdout)
	}
}

// TestChaosReplicas: with replicated ranks, one replica of every rank
// (rank 0 included) dies at a random moment of each run, and neither a
// program that knows nothing of failures (examples/allreduce) nor the
// N-Queens notices: 20 of 20 runs exact, then 5 of the ping-pong (which
// checks every message it gets back) and 3 of N-Queens.
func TestChaosReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the examples and starts real processes")
	}
	for _, tc := range []struct {
		runs string
		args []string
	}{
		{"20", []string{"--expect", "results checked on every rank", "../../examples/allreduce", "--", "-len", "1024", "-iters", "300"}},
		{"5", []string{"--expect", `\b65536\s+[0-9.]+`, "../../examples/pingpong", "--", "-sizes", "8,65536", "-iters", "300"}},
		{"3", []string{"../../examples/nqueens", "--", "-n", "12"}},
	} {
		args := append([]string{"chaos", "--runs", tc.runs, "--replicas", "2", "--procs", "3", "--baseline", "1",
			"--detector", "heartbeat", "--seed", "11", "--timeout", "2m"}, tc.args...)
		code, stdout, stderr := run(t, args...)
		t.Logf("%s\n%s", strings.Join(args, " "), stdout)
		if code != exitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		want := fmt.Sprintf("total: %s runs, %s correct; %d kills planned", tc.runs, tc.runs, 3*atoi(t, tc.runs))
		if !strings.Contains(stdout, want) {
			t.Fatalf("want %q:\n%s", want, stdout)
		}
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChaosDetectsWrongResult: a program whose ranks all exit 0 but whose
// result line says WRONG in the chaos runs (testdata/liar: right in the
// baseline, wrong afterwards) fails the campaign with exit status 1 and
// names the runs: chaos checks the verified output, not exit statuses
// alone.
func TestChaosDetectsWrongResult(t *testing.T) {
	if testing.Short() {
		t.Skip("builds testdata/liar and starts real processes")
	}
	state := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := run(t, "chaos", "--runs", "2", "--procs", "4", "--baseline", "1", "--seed", "3",
		"--expect", `\bCORRECT\b`, "./testdata/liar", "--", state)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailure, stdout, stderr)
	}
	if !strings.Contains(stdout, "total: 2 runs, 0 correct") ||
		!regexp.MustCompile(`run 1 \(seed \d+\): no output line matches`).MatchString(stderr) {
		t.Fatalf("the runs are not reported incorrect:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// TestChaosSpares: with spares, every run kills up to --spares processes
// of the ranks and spares (rank 0 included) at random moments, and the
// Jacobi stencil's checksum is the failure-free one, bit for bit.
func TestChaosSpares(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/jacobi and starts real processes")
	}
	args := []string{"chaos", "--runs", "3", "--spares", "1", "--procs", "3", "--baseline", "1", "--seed", "5", "--timeout", "2m",
		"--expect", "checksum 6dfe50962f3e68bd", "../../examples/jacobi", "--", "-size", "64", "-iters", "1500", "-pace", "1ms"}
	code, stdout, stderr := run(t, args...)
	t.Logf("%s\n%s", strings.Join(args, " "), stdout)
	if code != exitOK || !strings.Contains(stdout, "total: 3 runs, 3 correct") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, bad := range [][]string{
		{"chaos", "--spares", "1", "--replicas", "2", "x"},
		{"chaos", "--spares", "1", "--kill", "50%", "x"},
		{"chaos", "--spares", "-1", "x"},
	} {
		if code, _, stderr := run(t, bad...); code != exitUsage || !strings.Contains(stderr, "--spares") {
			t.Errorf("%v: exit %d, stderr %q", bad, code, stderr)
		}
	}
}
