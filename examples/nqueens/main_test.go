package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/examples/internal/proctest"
	"github.com/cohort-mp/cohort/launch"
)

// childEnv marks a process started by proctest.Launch as a rank.
const childEnv = "NQUEENS_TEST_RANK"

func TestMain(m *testing.M) { proctest.Main(m, childEnv, run) }

func TestBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-nosuchflag"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}

func TestNotLaunched(t *testing.T) {
	t.Setenv("COHORT_RANK", "")
	var out, errb bytes.Buffer
	if code := run([]string{"-n", "8"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "cohort run") {
		t.Fatalf("exit %d, stderr %q; want 1 and a hint to use cohort run", code, errb.String())
	}
}

// End to end with real processes over TCP (Phoenix §5.2.1, §6): the
// master–worker program on 5 processes survives SIGKILL of its master and of
// a worker and prints the exact count.
func TestProcessesMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	res := proctest.Launch(t, childEnv, 5, []launch.Kill{{Rank: 0, After: 400 * time.Millisecond}, {Rank: 3, After: 600 * time.Millisecond}},
		"-n", "16", "-mode", "master", "-v")
	checkProcesses(t, res, map[int]bool{0: true, 3: true})
}

// The same with random stealing (§5.2.2), killing the root holder (rank 0,
// whose root is checkpointed to rank 1) and a thief.
func TestProcessesStealKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	res := proctest.Launch(t, childEnv, 5, []launch.Kill{{Rank: 0, After: 400 * time.Millisecond}, {Rank: 3, After: 600 * time.Millisecond}},
		"-n", "16", "-v")
	checkProcesses(t, res, map[int]bool{0: true, 3: true})
}

func checkProcesses(t *testing.T, res proctest.Result, killed map[int]bool) {
	t.Helper()
	out, exits := res.Stdout, res.Exits
	if !strings.Contains(out, "14772512 solutions") || !strings.Contains(out, "CORRECT") {
		t.Fatalf("no correct count in the output:\n%s", out)
	}
	for _, e := range exits {
		if killed[e.Rank] {
			if !e.Killed {
				t.Errorf("rank %d was not killed (%s): the job ended before the crash", e.Rank, e.How())
			}
			continue
		}
		if !e.OK() {
			t.Errorf("rank %d: %s", e.Rank, e.How())
		}
	}
}
