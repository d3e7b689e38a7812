package comm

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// A process that finalizes tells the launcher which processes the views
// excluded as failed: a crashed rank, not one that left. A process that
// was excluded itself tells nothing: what it took for failures may be the
// live rest of the job.
func TestExclusionReport(t *testing.T) {
	ss := job(t, 4, detecting)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := ss[2].Finalize(ctx); err != nil {
		t.Fatal(err)
	}
	ss[3].kill()
	for _, s := range ss[:2] {
		select {
		case f := <-s.Failures():
			if f.Rank != 3 {
				t.Fatalf("Failures() gave rank %d, want 3", f.Rank)
			}
		case <-ctx.Done():
			t.Fatal("rank 3's failure never reached the survivors")
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !slices.Contains(ss[0].World().Left(), 2) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("rank 0 never saw rank 2 leave: left %v", ss[0].World().Left())
		}
	}
	if got := ss[0].exclusionReport(); !slices.Equal(got, []int{3}) {
		t.Fatalf("rank 0 reports %v excluded, want [3]", got)
	}
	ss[1].onEvent(0, member.Evicted{Epoch: 1 << 40})
	if got := ss[1].exclusionReport(); got != nil {
		t.Fatalf("rank 1, excluded itself, reports %v excluded, want nothing", got)
	}
}

func TestExclusionsReadmitted(t *testing.T) {
	var x exclusions
	x.view(member.ViewInstalled{Departed: []core.NodeID{4, 1, 2}, Left: []core.NodeID{2}})
	x.view(member.ViewInstalled{Departed: []core.NodeID{5}})
	x.view(member.ViewInstalled{Joined: []core.NodeID{4}})
	if got := x.list(); !slices.Equal(got, []int{1, 5}) {
		t.Fatalf("got %v, want [1 5]: 2 left, 4 was admitted again", got)
	}
}
