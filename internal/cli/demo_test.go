package cli

import (
	"strings"
	"testing"
)

// TestDemoTraceHash: the same seed gives the same trace hash, another seed
// another (what .ci/run checks with the binary).
func TestDemoTraceHash(t *testing.T) {
	hash := func(seed string) string {
		code, out, stderr := run(t, "demo", "--sim", "-n", "32", "--crashes", "2", "--seed", seed, "--trace-only")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if len(strings.TrimSpace(out)) != 16 {
			t.Fatalf("trace-only printed %q", out)
		}
		return out
	}
	a, b, c := hash("11"), hash("11"), hash("12")
	if a != b {
		t.Errorf("seed 11 gave %q then %q", a, b)
	}
	if a == c {
		t.Errorf("seeds 11 and 12 gave the same hash %q", a)
	}
}

func TestDemoBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--sim", "-n", "2"},
		{"demo", "--sim", "--crashes", "0"},
		{"demo", "--sim", "-n", "8", "--crashes", "5"},
		{"demo", "--sim", "--schedule", "star"},
		{"demo", "--sim", "--seed", "x"},
		{"demo", "--sim", "extra"},
		{"demo", "--n", "7"},
		{"demo", "--n", "17"},
		{"demo", "--procs", "1"},
		{"demo", "--procs", "4", "--kill", "4"},
		{"demo", "--kill", "-1"},
		{"demo", "--seed", "x"},
		{"demo", "--crashes", "3"},
		{"demo", "extra"},
	} {
		code, _, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, "cohort demo:") {
			t.Errorf("cohort %q: exit %d, stderr %q", args, code, stderr)
		}
	}
}
