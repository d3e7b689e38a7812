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

const childEnv = "IS_TEST_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{{"-class", "C"}, {"-nosuchflag"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

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

// IS over real processes and TCP: 3 ranks exchange the keys with
// Alltoall(v) and rank 0 prints VERIFICATION SUCCESSFUL.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := launch.Start(ctx, launch.Config{
		N: 3, Program: exe, Args: []string{"-class", "S"}, Env: []string{childEnv + "=1"},
		Stdout: &stdout, Stderr: &stderr, Prefix: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	exits, err := job.Wait()
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	if err != nil {
		t.Fatalf("job: %v (%v)", err, exits)
	}
	if !strings.Contains(out, "Checks passed: 51 of 51") || !strings.Contains(out, "VERIFICATION SUCCESSFUL") {
		t.Fatal("no verified result")
	}
}
