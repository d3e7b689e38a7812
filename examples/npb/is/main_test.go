package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/examples/internal/proctest"
)

const childEnv = "IS_TEST_RANK"

func TestMain(m *testing.M) { proctest.Main(m, childEnv, run) }

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{{"-class", "C"}, {"-nosuchflag"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// IS over real processes and TCP: 3 ranks exchange the keys with
// Alltoall(v) and rank 0 prints VERIFICATION SUCCESSFUL.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	res := proctest.Launch(t, childEnv, 3, nil, "-class", "S")
	if res.Err != nil {
		t.Fatalf("job: %v", res.Err)
	}
	if !strings.Contains(res.Stdout, "Checks passed: 51 of 51") || !strings.Contains(res.Stdout, "VERIFICATION SUCCESSFUL") {
		t.Fatal("no verified result")
	}
}
