package member_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/member/membertest"
	"github.com/cohort-mp/cohort/sim"
)

// TestRefreshNewEpochSameMembers: a Refresh handed to the root makes every
// member install a new epoch with the same members (over the wire codec:
// the empty REFRESH proposal must decode); handed to another member it
// changes nothing.
func TestRefreshNewEpochSameMembers(t *testing.T) {
	cfg := member.DefaultConfig()
	cfg.Fanout = 2
	h := membertest.NewHarness(1, sim.Constant(time.Millisecond), cfg, 10*time.Millisecond)
	h.WireTrip = true
	ids := h.AddInitial(5)
	h.W.At(50*time.Millisecond, func() { h.Member(ids[3]).Handle(member.Refresh{}) })
	if err := h.W.RunChecked(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	first := h.Member(ids[0]).View()
	if got := member.EpochCounter(first.Epoch); got != 1 {
		t.Fatalf("a Refresh at a non-root changed the view: epoch counter %d, want 1", got)
	}
	h.W.At(150*time.Millisecond, func() { h.Member(ids[0]).Handle(member.Refresh{}) })
	if err := h.W.RunChecked(time.Second); err != nil {
		t.Fatal(err)
	}
	if d := h.Converged(); d != "" {
		t.Fatalf("%s\n%s", d, h.Dump())
	}
	for _, id := range ids {
		v := h.Member(id).View()
		if member.EpochCounter(v.Epoch) != 2 || !slices.Equal(v.Members, first.Members) {
			t.Fatalf("n%d holds epoch %s %v, want counter 2 with %v", id, member.FormatEpoch(v.Epoch), v.Members, first.Members)
		}
	}
}
