package runner

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// TestDetectorOff: "off" (the "Normal" setting of Phoenix §6.1, Table 2)
// builds a node without a detector layer, and "heartbeat-paper" one with
// the paper's Table 1 heartbeat detector.
func TestDetectorOff(t *testing.T) {
	ids := []core.NodeID{0, 1, 2, 3}
	var d Detector
	if err := d.UnmarshalText([]byte("off")); err != nil || d != DetectorOff {
		t.Fatalf("UnmarshalText(off) = %v, %v", d, err)
	}
	n, err := NewNode(1, ids, NodeOptions{Detector: DetectorOff})
	if err != nil {
		t.Fatal(err)
	}
	if n.Detector != nil {
		t.Fatalf("DetectorOff node has a detector %T", n.Detector)
	}
	if err := d.UnmarshalText([]byte("heartbeat-paper")); err != nil || d != DetectorHeartbeatPaper {
		t.Fatalf("UnmarshalText(heartbeat-paper) = %v, %v", d, err)
	}
	n, err = NewNode(1, ids, NodeOptions{Detector: DetectorHeartbeatPaper})
	if err != nil {
		t.Fatal(err)
	}
	if n.Detector == nil {
		t.Fatal("heartbeat-paper node has no detector")
	}
	if to, _ := LocalConfig(0, DetectorHeartbeatPaper, 0).DetectionBound(4); to != 15e9 {
		t.Fatalf("paper heartbeat detection time %v, want 15s (5 s + 5 s + 5 s, Table 1)", to)
	}
}
