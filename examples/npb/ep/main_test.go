package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/examples/internal/proctest"
)

const childEnv = "EP_TEST_RANK"

func TestMain(m *testing.M) { proctest.Main(m, childEnv, run) }

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{{"-class", "Q"}, {"-crash", "x"}, {"-crash", "1@0"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// Fault-tolerant EP with real processes over TCP: rank 2 of 4 dies
// (os.Exit, no goodbye) after 20 of its 64 batches; the survivors
// recompute its batches and rank 0 prints VERIFICATION SUCCESSFUL.
func TestProcessesRankDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	res := proctest.Launch(t, childEnv, 4, nil, "-class", "S", "-crash", "2@20")
	if !strings.Contains(res.Stdout, "VERIFICATION SUCCESSFUL") || !strings.Contains(res.Stdout, "64 batches of 256 recomputed") {
		t.Fatal("no verified result after recomputing the dead rank's 64 batches")
	}
	for _, e := range res.Exits {
		switch {
		case e.Rank == 2 && e.Code != 3:
			t.Errorf("rank 2: %s, want exit code 3 (the injected crash)", e.How())
		case e.Rank != 2 && !e.OK():
			t.Errorf("rank %d: %s", e.Rank, e.How())
		}
	}
}
