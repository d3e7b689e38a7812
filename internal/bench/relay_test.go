package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRelayedMeasures runs the relayed path's benchmark briefly: both
// paths give figures, node 2 forwards (Measure checks it), and the table
// names both figures with their goals.
func TestRelayedMeasures(t *testing.T) {
	r := &Relayed{Rounds: 1, Iters: 50, Windows: 1}
	direct, relayed, err := r.Measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []RelayedResult{direct, relayed} {
		if x.LatencyMicros <= 0 || x.BandwidthMBs <= 0 {
			t.Fatalf("figures %+v, %+v: want positive ones", direct, relayed)
		}
	}
	var out bytes.Buffer
	WriteRelayed(&out, direct, relayed)
	for _, want := range []string{"8 B latency", "1 MiB bandwidth", "≤ 2.20", "≥ 0.45"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
