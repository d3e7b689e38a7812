package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/internal/runner"
)

// TestNodeBootstrapErrors: `cohort node` takes its place in the job from
// the environment; a missing or malformed variable exits with status 2 and
// says which.
func TestNodeBootstrapErrors(t *testing.T) {
	good := map[string]string{
		runner.EnvJobID:  "j",
		runner.EnvNodeID: "0",
		runner.EnvNodes:  "0=127.0.0.1:1,1=127.0.0.1:2",
		runner.EnvSecret: strings.Repeat("ab", 16),
	}
	cases := []struct {
		key, value, want string
		args             []string
	}{
		{runner.EnvJobID, "", "COHORT_JOB_ID is not set", nil},
		{runner.EnvNodeID, "5", "COHORT_NODE_ID=5 is not listed", nil},
		{runner.EnvNodes, "0=127.0.0.1", "missing port", nil},
		{runner.EnvSecret, "xyz", "COHORT_SECRET is not hex", nil},
		{runner.EnvSecret, "abcd", "COHORT_SECRET has 2 bytes", nil},
		{"", "", "--fanout 3: want a power of two", []string{"--fanout", "3"}},
		{"", "", `unknown detector "swim"`, []string{"--detector", "swim"}},
		{"", "", "--ping 7: node 7 is not listed", []string{"--ping", "7"}},
	}
	for _, c := range cases {
		for k, v := range good {
			t.Setenv(k, v)
		}
		if c.key != "" {
			t.Setenv(c.key, c.value)
		}
		code, _, stderr := run(t, append([]string{"node"}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%s=%q %v: exit %d, stderr %q; want 2 and %q", c.key, c.value, c.args, code, stderr, c.want)
		}
	}
}

// TestClusterAndBenchBadFlags: impossible jobs are usage errors.
func TestClusterAndBenchBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "-n", "1"}, "-n 1: want 2 to 512 processes"},
		{[]string{"cluster", "-n", "4", "--kill", "4"}, "--kill 4: want 0 to n−1 = 3"},
		{[]string{"cluster", "--kill", "-1"}, "--kill -1"},
		{[]string{"cluster", "--kill", "0", "--kill-root"}, "--kill-root needs --kill ≥ 1"},
		{[]string{"cluster", "--fanout", "6"}, "--fanout 6: want a power of two"},
		{[]string{"cluster", "--detector", "swim"}, `unknown detector "swim"`},
		{[]string{"cluster", "extra"}, `unexpected argument "extra"`},
		{[]string{"bench"}, "missing the benchmark name"},
		{[]string{"bench", "latency"}, `unknown benchmark "latency"`},
		{[]string{"bench", "-n", "8"}, "missing the benchmark name before -n"},
		{[]string{"bench", "membership", "-n", "8,2"}, "-n 2: want 3 to 512"},
		{[]string{"bench", "membership", "-n", "8,x"}, `"x" is not an integer`},
		{[]string{"bench", "membership", "--fanout", "2,3"}, "--fanout 3"},
		{[]string{"bench", "membership", "--samples", "1"}, "--samples 1: want at least 2"},
		{[]string{"bench", "membership", "--detector", "x"}, `unknown detector "x"`},
		{[]string{"bench", "membership", "--gap", "0"}, "--gap 0s: want a positive wait"},
		{[]string{"bench", "membership", "--gap", "2m"}, "--gap 2m0s: want a positive wait of at most a minute"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("cohort %q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if code, out, _ := run(t, "help", "node"); code != 0 || !strings.Contains(out, "COHORT_SECRET") {
		t.Errorf("help node: exit %d:\n%s", code, out)
	}
}

// TestClusterCommand runs `cohort cluster` end to end on real processes
// (this test binary, re-executed as `cohort node`): five processes, the
// root and one other killed; it must exit 0 and report one line per view
// and the survivors' agreement.
func TestClusterCommand(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := run(t, "cluster", "-n", "5", "--kill", "2", "--kill-root", "--seed", "2",
		"--window", "300ms", "--timeout", "40s", "--detector", "heartbeat", "--events-dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, want := range []string{
		"starting 5 processes on 127.0.0.1",
		"epoch 1.n0 installed by 5/5 live members",
		"killed n0 (SIGKILL",
		"✔ all 3 survivors hold epoch",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, " killed n"); n != 2 {
		t.Errorf("%d kills reported, want 2:\n%s", n, out)
	}
	for _, f := range []string{"job.jsonl", "n0.jsonl", "n4.jsonl", "n4.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("--events-dir: %v", err)
		}
	}
}

// TestBenchCommand runs `cohort bench membership` end to end on a small
// job: two failures measured, one table row, the model beside it.
func TestBenchCommand(t *testing.T) {
	code, out, stderr := run(t, "bench", "membership", "-n", "4", "--fanout", "2", "--samples", "2", "--detector", "heartbeat", "--ping-count", "50")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if n := strings.Count(stderr, "n=4 a=2 sample "); n != 2 {
		t.Errorf("%d samples reported, want 2:\n%s", n, stderr)
	}
	var row []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "4" && f[1] == "2" {
			row = f
		}
	}
	// n a H: 3 members left after a failure form a binary tree of height 2.
	if row == nil || row[2] != "2" {
		t.Fatalf("no row for n=4, a=2 with H=2:\n%s", out)
	}
	for _, want := range []string{"T_s (ms)", "model (ms)", "goal T_s < 1 ms and ≤ 1.3× the echo once at n = 4", "echo once (ms)", "cohort bench membership -n 4 --fanout 2 --samples 2 --detector heartbeat"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
