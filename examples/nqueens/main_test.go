package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// childEnv marks a process started by the tests below as a rank of a job:
// the test binary then runs the program instead of the tests.
const childEnv = "NQUEENS_TEST_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

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

// syncBuffer is a bytes.Buffer safe for the launcher's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launchJob runs this test binary as an n-rank job of the program.
func launchJob(t *testing.T, n int, kills []launch.Kill, args ...string) (string, []launch.Exit) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := launch.Start(ctx, launch.Config{
		N: n, Program: exe, Args: args, Env: []string{childEnv + "=1"},
		Stdout: &stdout, Stderr: &stderr, Prefix: true, Kills: kills,
	})
	if err != nil {
		t.Fatal(err)
	}
	exits, _ := job.Wait()
	t.Logf("stderr:\n%s", stderr.String())
	return stdout.String(), exits
}

// End to end with real processes over TCP (Phoenix §5.2.1, §6): the
// master–worker program on 5 processes survives SIGKILL of its master and of
// a worker and prints the exact count.
func TestProcessesMasterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	out, exits := launchJob(t, 5, []launch.Kill{{Rank: 0, After: 400 * time.Millisecond}, {Rank: 3, After: 600 * time.Millisecond}},
		"-n", "16", "-mode", "master", "-v")
	checkProcesses(t, out, exits, map[int]bool{0: true, 3: true})
}

// The same with random stealing (§5.2.2), killing the root holder (rank 0,
// whose root is checkpointed to rank 1) and a thief.
func TestProcessesStealKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	out, exits := launchJob(t, 5, []launch.Kill{{Rank: 0, After: 400 * time.Millisecond}, {Rank: 3, After: 600 * time.Millisecond}},
		"-n", "16", "-v")
	checkProcesses(t, out, exits, map[int]bool{0: true, 3: true})
}

func checkProcesses(t *testing.T, out string, exits []launch.Exit, killed map[int]bool) {
	t.Helper()
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
	t.Logf("stdout:\n%s", out)
}
