package member_test

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/sim"
)

func TestSmokeSingleFailure(t *testing.T) {
	cfg := member.DefaultConfig()
	cfg.Fanout = 2
	h := membertest.NewHarness(1, sim.Constant(time.Millisecond), cfg, 10*time.Millisecond)
	h.Trace = func(line string) { t.Log(line) }
	h.AddInitial(7)
	h.W.CrashAt(100*time.Millisecond, 3)
	if err := h.W.RunChecked(time.Second); err != nil {
		t.Fatal(err)
	}
	if d := h.Converged(); d != "" {
		t.Fatalf("%s\n%s", d, h.Dump())
	}
}
