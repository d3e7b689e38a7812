package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// TestCrashEachSystem runs every system at n = 4 with one crash: each must
// agree on the crash, with no false death, and measure some traffic.
func TestCrashEachSystem(t *testing.T) {
	for _, name := range []string{"heartbeat", "brr", "memberlist"} {
		t.Run(name, func(t *testing.T) {
			p := params{trials: 1, quiet: time.Second, warmup: 200 * time.Millisecond, limit: 60 * time.Second, seed: 1}
			var log bytes.Buffer
			r := runOne(p, name, 20, 4, &log)
			t.Log(log.String())
			if r.err != "" {
				t.Fatal(r.err)
			}
			if len(r.agree) != 1 || r.timeouts != 0 {
				t.Fatalf("crash not agreed on: %d agreed, %d timed out", len(r.agree), r.timeouts)
			}
			if r.detect[0] <= 0 || r.agree[0] < r.detect[0] {
				t.Errorf("detection %v, agreement %v: want 0 < detection ≤ agreement", r.detect[0], r.agree[0])
			}
			if r.msgsPerSec <= 0 || r.bytesPerSec <= 0 {
				t.Errorf("no traffic measured: %.2f msgs/s, %.0f B/s per member", r.msgsPerSec, r.bytesPerSec)
			}
			if r.falseTotal != 0 {
				t.Errorf("%d false deaths", r.falseTotal)
			}
		})
	}
}

// TestRunOutput runs the whole command on a tiny configuration and checks
// the table, the ratios and the CSV.
func TestRunOutput(t *testing.T) {
	csvPath := filepath.Join(t.TempDir(), "out.csv")
	var out, log bytes.Buffer
	err := run([]string{"--sizes", "3", "--rates", "20", "--trials", "1", "--quiet", "500ms",
		"--systems", "heartbeat,memberlist", "--seed", "7", "--faults", "--out", csvPath}, &out, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if n := strings.Count(log.String(), "with 5% loss and 200 ms delay on one member"); n != 2 {
		t.Errorf("%d faults windows, want one for cohort's heartbeat and one for memberlist:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "seed 7") {
		t.Errorf("seed not printed: %s", log.String())
	}
	for _, want := range []string{"heartbeat", "memberlist", "cohort / memberlist"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 3 {
		t.Errorf("CSV has %d lines, want a header and 2 rows:\n%s", len(lines), b)
	}
	if err := run([]string{"--sizes", "1"}, &out, &log); err == nil {
		t.Error("--sizes 1 accepted")
	}
	if err := run([]string{"--systems", "consul"}, &out, &log); err == nil {
		t.Error("unknown system accepted")
	}
}

// TestConcurrentJoins reproduces joins that are never admitted when
// several nodes join a small cohort group at once (MLBENCH_JOIN_REPRO=1;
// MLBENCH_JOIN_N nodes, default 8, in batches of 8, BRR at 20 msgs/s).
func TestConcurrentJoins(t *testing.T) {
	if os.Getenv("MLBENCH_JOIN_REPRO") == "" {
		t.Skip("set MLBENCH_JOIN_REPRO=1 to run")
	}
	n := 8
	if v, err := strconv.Atoi(os.Getenv("MLBENCH_JOIN_N")); err == nil {
		n = v
	}
	joinAttempts = 1
	defer func() { joinAttempts = 4 }()
	s := newCohortSystem(group.DetectorBRR, 20, 1)
	defer s.close()
	if err := s.start(n); err != nil {
		t.Fatal(err)
	}
}
