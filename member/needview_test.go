package member

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// TestNeedViewAnswersNoGivenUpProposal: a parent answers a child's
// VIEW_NEED with the proposal it holds, or with the one it installed (the
// commit passed while the child lacked the base), but not with a proposal
// it gave up. Handed out so, an aborted proposal was accepted by a child
// that its root would never commit nor abort to; the child built on it
// after the root died and refused the live root's proposals for good (the
// oracle swarm, seeds 1101496 and 1203508, majority).
func TestNeedViewAnswersNoGivenUpProposal(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Fanout = 2
	cfg.Partition = PartitionMajority
	ids := []core.NodeID{0, 1, 2, 3, 4, 5, 6}
	m, err := New(cfg, ids)
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(1, 7)
	m.Start(env)
	env.TakeSent()
	base := m.cur
	// n6 fails: [n0 n1 n2 n3 n4 n5], n1's children are n3 and n4.
	p := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{base.epoch},
		Failed: []core.NodeID{6}, Committed: true}
	m.Receive(0, p)
	if m.acc == nil || m.acc.epoch != p.Epoch {
		t.Fatalf("n1 does not hold %s", FormatEpoch(p.Epoch))
	}
	env.TakeSent()
	answers := func() (n int) {
		for _, s := range env.TakeSent() {
			if q, ok := s.Msg.(*Prepare); ok && s.To == 3 && q.Epoch == p.Epoch && q.Full {
				n++
			}
		}
		return n
	}
	m.Receive(3, &NeedView{Epoch: p.Epoch})
	if got := answers(); got != 1 {
		t.Fatalf("VIEW_NEED for the proposal n1 holds: %d full Prepares to n3, want 1", got)
	}

	// The root says it gave p up: n1 drops it, and must not hand it out.
	m.Receive(0, &Sync{View: base.full(), Abort: p.Epoch})
	if m.acc != nil {
		t.Fatalf("n1 still holds %s after its root's abort", FormatEpoch(m.acc.epoch))
	}
	m.Receive(3, &NeedView{Epoch: p.Epoch})
	if got := answers(); got != 0 {
		t.Fatalf("VIEW_NEED for a proposal given up: %d full Prepares to n3, want 0", got)
	}
}
