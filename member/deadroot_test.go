package member

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// TestDeadRootProposalYieldsToExcluded replays the liveness bug of vsync's
// swarm seed 1791088728 (§3.5 root failure, footnote 1 and the package
// doc's merging after partitions): after a partition heals, n0 accepts a
// proposal of n2, the root of the other side, and n2 crashes before its
// commit reaches n0. n2 is in no view n0 installed, so n0's detector, which
// watches the installed view only, never declares it failed: n0 holds the
// proposal forever. Meanwhile n1, which n2's proposal left out, installs a
// view without n0 and tells it so (EXCLUDED). n0 must merge into n1's view;
// before the fix it ignored the notice (its accepted proposal is newer) and
// the two live nodes stayed split for good.
func TestDeadRootProposalYieldsToExcluded(t *testing.T) {
	s := deadRootProposal(t)
	// n1 declares n0 failed (it is not a member of n2's proposal any more and
	// n0 stopped talking to it) and installs a view of its own, then hears
	// from n0 again and tells it that it is excluded.
	s.fail(1, 0)
	s.deliver()
	s.recovered(1, 0)
	for range 100 {
		s.deliver()
		s.advance(50 * time.Millisecond)
	}
	expectJoined(t, s)
}

// TestDeadRootProposalSilentRoot is the same state without the notice
// (vsync swarm seed 959106894 stayed split that way): n0 holds the
// proposal of n2, a root its detector does not watch, and n2 says nothing
// any more. After maxSilentWaits commit waits n0 counts n2 as failed and
// takes over as the root of n2's proposal (§3.5 root failure: it adopts the
// proposal, which may have committed), and n1, left in the older view,
// merges in. Before the fix n0 sent VIEW_QUERY to n2 for ever.
func TestDeadRootProposalSilentRoot(t *testing.T) {
	s := deadRootProposal(t)
	for range 100 {
		s.deliver()
		s.advance(50 * time.Millisecond)
	}
	expectJoined(t, s)
}

func expectJoined(t *testing.T, s *script) {
	t.Helper()
	v0, v1 := s.nodes[0].m.View(), s.nodes[1].m.View()
	if v0.Epoch != v1.Epoch || len(v1.Members) != 2 || s.nodes[0].m.acc != nil {
		t.Fatalf("live nodes split: n0 holds %s %v, n1 holds %s %v\nmessages: %v", FormatEpoch(v0.Epoch), v0.Members, FormatEpoch(v1.Epoch), v1.Members, s.takeTrace())
	}
}

// deadRootProposal builds the state of both tests: n0 has installed 2.n0
// [n0 n1] and holds n2's proposal [n2 n0], which n2 committed before it
// crashed.
func deadRootProposal(t *testing.T) *script {
	s := newScript(t, 2, 3)
	// A partition isolates n2; each side installs its own view.
	s.partition(ids(0, 1), ids(2))
	s.fail(0, 2)
	s.fail(1, 2)
	s.fail(2, 0)
	s.fail(2, 1)
	s.deliver()
	s.expectView("2.n0", ids(0, 1), 0, 1)
	s.expectView("2.n2", ids(2), 2)
	// The partition heals: n2's EXCLUDED makes n0 bring its side to n2,
	// whose proposal reaches n0 but not n1.
	s.heal()
	s.recovered(2, 0)
	s.takeTrace()
	// n2's proposals never reach n1, and their commits never reach n0.
	lose := func(from, to core.NodeID, m core.Msg) bool {
		switch m.(type) {
		case *Prepare:
			return from == 2 && to == 1
		case *Commit, *JoinDetAck:
			return from == 2 && to == 0
		}
		return false
	}
	for s.drop(lose); s.step(); s.drop(lose) {
	}
	// n2 gives up on n1 (no ACK) and proposes without it; n0 accepts, n2
	// commits and crashes before its commit leaves.
	for range 20 {
		s.advance(10 * time.Millisecond)
		for s.drop(lose); s.step(); s.drop(lose) {
		}
		if v := s.nodes[2].m.View(); len(v.Members) == 2 {
			break
		}
	}
	if v := s.nodes[2].m.View(); !(len(v.Members) == 2 && v.Members[1] == 0) {
		t.Fatalf("n2 holds %s %v, want a view of n2 and n0", FormatEpoch(v.Epoch), v.Members)
	}
	s.crash(2)
	if s.nodes[0].m.acc == nil || EpochRoot(s.nodes[0].m.acc.epoch) != 2 {
		t.Fatalf("n0 holds no proposal of n2")
	}
	s.takeTrace()
	return s
}
