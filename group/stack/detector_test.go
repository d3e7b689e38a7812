package stack_test

import (
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
)

func TestDetectorNamesAndBounds(t *testing.T) {
	for _, d := range stack.Detectors {
		b, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got stack.Detector
		if err := got.UnmarshalText(b); err != nil || got != d {
			t.Fatalf("%s: got %v, %v", b, got, err)
		}
		cfg := testConfig(1, d)
		st, err := stack.New(cfg, []core.NodeID{1, 2, 3}, stack.Options{})
		if err != nil {
			t.Fatalf("%v: NewStack: %v", d, err)
		}
		if (st.Detector == nil) != (d == stack.DetectorOff) {
			t.Errorf("%v: detector machine %T", d, st.Detector)
		}
		to, desc := cfg.DetectionBound(16)
		if (to <= 0) != (d == stack.DetectorOff) || desc == "" {
			t.Errorf("%v: bound %v %q", d, to, desc)
		}
	}
	// The paper's heartbeat parameters: T_interval + T_timeout + T_broken = 15 s.
	if to, _ := testConfig(1, stack.DetectorHeartbeatPaper).DetectionBound(4); to.Seconds() != 15 {
		t.Errorf("heartbeat-paper bound %v, want 15s", to)
	}
	var d stack.Detector
	if err := d.UnmarshalText([]byte("swim")); err == nil || !strings.Contains(err.Error(), "want brr, dbrr, heartbeat, heartbeat-paper or off") {
		t.Fatalf("err = %v", err)
	}
}

// testConfig returns the loopback configuration of node id with detector d.
func testConfig(id core.NodeID, d stack.Detector) stack.Config {
	c := stack.DefaultLocalConfig()
	c.ID = id
	c.Detector = d
	return c
}
