package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/experiment/swarm"
)

func TestSimSwarm(t *testing.T) {
	code, out, errs := run(t, "sim", "swarm", "--protocol", "agree", "--seeds", "20", "--from", "5", "--workers", "2")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if !strings.Contains(out, "swarm agree: seeds 5–24: 20 seeds, 20 passed, 0 failed, 0 stuck") {
		t.Errorf("no summary in:\n%s", out)
	}
	for _, args := range [][]string{
		{"sim", "swarm"},
		{"sim", "swarm", "--protocol", "nope"},
		{"sim", "swarm", "--protocol", "member", "--seeds", "0"},
		{"sim", "swarm", "--protocol", "member", "extra"},
		{"sim", "swarm", "--protocol", "agree", "--faults", "partial"},
		{"sim", "swarm", "--protocol", "member", "--faults", "all"},
	} {
		if code, _, _ := run(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	code, out, errs = run(t, "sim", "swarm", "--protocol", "member", "--faults", "partial", "--seeds", "4", "--workers", "2")
	if code != exitOK || !strings.Contains(out, "swarm member: seeds 1–4: 4 seeds, 4 passed") {
		t.Errorf("--faults partial: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if code, out, _ := run(t, "sim", "swarm", "-h"); code != exitOK || !strings.Contains(out, "--protocol member|vsync|stable|replica|agree") || !strings.Contains(out, "--faults partial") {
		t.Errorf("help: exit %d:\n%s", code, out)
	}
}

func TestSwarmFailureLine(t *testing.T) {
	var b strings.Builder
	writeSwarmFailure(&b, swarm.Result{Seed: 42, Outcome: swarm.Failed, Variant: "policy majority",
		Err: errors.New("seed 42: agreement broken\nplan: …"), Replay: "go test ./member -run 'TestSwarmMajority$' -seed=42"})
	want := "seed 42 FAILED (policy majority): seed 42: agreement broken\n  replay: go test ./member -run 'TestSwarmMajority$' -seed=42\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
