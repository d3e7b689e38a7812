package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/topo"
)

// TestDemoSmallCluster runs the demo's logic on 64 nodes: every crash is
// declared by every live node (P2P-MPI §5.3: BRR detects every crash, no
// false detection), the report names each crash and the plot is written.
func TestDemoSmallCluster(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	cfg := demoConfig{n: 64, crashes: 3, seed: 4, schedule: topo.BinaryRoundRobin, out: dir}
	res, err := runDemo(context.Background(), cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !res.ok {
		t.Fatalf("demo failed: %s\n%s", res.verdict, text)
	}
	if len(res.crashes) != 3 {
		t.Fatalf("%d crashes", len(res.crashes))
	}
	for _, cr := range res.crashes {
		for _, want := range []string{cr.Node.String() + " crashed", cr.Node.String() + " known failed by all"} {
			if !strings.Contains(text, want) {
				t.Errorf("output lacks %q:\n%s", want, text)
			}
		}
		if cr.CompleteAt < cr.At {
			t.Errorf("%v: complete at %v, crashed at %v", cr.Node, cr.CompleteAt, cr.At)
		}
	}
	if !strings.Contains(text, "✔ 3 crashes, each declared by all 61 live nodes; no false detection") {
		t.Errorf("summary line missing:\n%s", text)
	}
	if st, err := os.Stat(filepath.Join(dir, "detections.png")); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
}

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

func TestCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1024: "1,024", 1234567: "1,234,567", -5000: "-5,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}
