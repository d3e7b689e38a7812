package simdemo

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
	cfg := Config{N: 64, Crashes: 3, Seed: 4, Schedule: topo.BinaryRoundRobin, Out: dir}
	res, err := Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !res.OK {
		t.Fatalf("demo failed: %s\n%s", res.Verdict, text)
	}
	if len(res.Crashes) != 3 {
		t.Fatalf("%d crashes", len(res.Crashes))
	}
	for _, cr := range res.Crashes {
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
	if strings.Count(text, legend) != 1 || strings.Index(text, legend) > strings.Index(text, " crashed\n") {
		t.Errorf("the legend is not shown once before the events:\n%s", text)
	}
	if st, err := os.Stat(filepath.Join(dir, "detections.png")); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1024: "1,024", 1234567: "1,234,567", -5000: "-5,000"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}
