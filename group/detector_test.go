package group_test

import (
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group"
)

func TestDetectorNamesAndBounds(t *testing.T) {
	for _, d := range group.Detectors {
		b, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got group.Detector
		if err := got.UnmarshalText(b); err != nil || got != d {
			t.Fatalf("%s: got %v, %v", b, got, err)
		}
		cfg := testConfig(1, d)
		st, err := group.NewStack(cfg, []core.NodeID{1, 2, 3}, group.StackOptions{})
		if err != nil {
			t.Fatalf("%v: NewStack: %v", d, err)
		}
		if (st.Detector == nil) != (d == group.DetectorOff) {
			t.Errorf("%v: detector machine %T", d, st.Detector)
		}
		to, desc := cfg.DetectionBound(16)
		if (to <= 0) != (d == group.DetectorOff) || desc == "" {
			t.Errorf("%v: bound %v %q", d, to, desc)
		}
	}
	// The paper's heartbeat parameters: T_interval + T_timeout + T_broken = 15 s.
	if to, _ := testConfig(1, group.DetectorHeartbeatPaper).DetectionBound(4); to.Seconds() != 15 {
		t.Errorf("heartbeat-paper bound %v, want 15s", to)
	}
	var d group.Detector
	if err := d.UnmarshalText([]byte("swim")); err == nil || !strings.Contains(err.Error(), "want brr, dbrr, heartbeat, heartbeat-paper or off") {
		t.Fatalf("err = %v", err)
	}
}
