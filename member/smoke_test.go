package member

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/sim"
)

func TestSmokeSingleFailure(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Fanout = 2
	h := newHarness(t, 1, sim.Constant(time.Millisecond), cfg, 10*time.Millisecond)
	h.trace = true
	h.addInitial(7)
	h.w.CrashAt(100*time.Millisecond, 3)
	if err := h.w.RunChecked(time.Second); err != nil {
		t.Fatal(err)
	}
	if d := h.converged(); d != "" {
		t.Fatalf("%s\n%s", d, h.dump())
	}
}
