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

const childEnv = "EP_TEST_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{{"-class", "Q"}, {"-crash", "x"}, {"-crash", "1@0"}} {
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

// Fault-tolerant EP with real processes over TCP: rank 2 of 4 dies
// (os.Exit, no goodbye) after 20 of its 64 batches; the survivors
// recompute its batches and rank 0 prints VERIFICATION SUCCESSFUL.
func TestProcessesRankDies(t *testing.T) {
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
		N: 4, Program: exe, Args: []string{"-class", "S", "-crash", "2@20"}, Env: []string{childEnv + "=1"},
		Stdout: &stdout, Stderr: &stderr, Prefix: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	exits, _ := job.Wait()
	out := stdout.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	if !strings.Contains(out, "VERIFICATION SUCCESSFUL") || !strings.Contains(out, "64 batches of 256 recomputed") {
		t.Fatal("no verified result after recomputing the dead rank's 64 batches")
	}
	for _, e := range exits {
		switch {
		case e.Rank == 2 && e.Code != 3:
			t.Errorf("rank 2: %s, want exit code 3 (the injected crash)", e.How())
		case e.Rank != 2 && !e.OK():
			t.Errorf("rank %d: %s", e.Rank, e.How())
		}
	}
}
