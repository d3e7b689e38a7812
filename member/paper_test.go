package member

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// §3.2: every node computes the default view alone, without messages: the
// members sorted by id, the lowest id as root, an a-ary heap as tree.
func TestInitialViewWithoutMessages(t *testing.T) {
	s := newScript(t, 2, 7)
	if len(s.queue) != 0 {
		t.Fatalf("initialization sent %d messages", len(s.queue))
	}
	s.expectView("1.n0", ids(0, 1, 2, 3, 4, 5, 6), ids(0, 1, 2, 3, 4, 5, 6)...)
	v := s.nodes[3].m.cur
	if p := v.parent(3); p != 1 {
		t.Errorf("parent of n3 = %v, want n1", p)
	}
	if c := v.children(1); !slicesEqual(c, ids(3, 4)) {
		t.Errorf("children of n1 = %v, want [n3 n4]", c)
	}
}

func slicesEqual(a, b []core.NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// §3.4 and Figure 3(a): a single node failure. The detector sends
// NODE_FAILURE to the root, the root acknowledges (FAILURE_DET_ACK),
// recalculates the tree and sends FAILED_NODE to its children in the new
// tree, which pass it down; FAILURE_ACKs come up; the tree is stable when
// the root holds every child's ACK, and the commit installs the view.
func TestSingleNodeFailure(t *testing.T) {
	s := newScript(t, 2, 7) // tree: n0 → n1 n2; n1 → n3 n4; n2 → n5 n6
	s.fail(5, 1)
	s.deliver()
	// New view [n0 n2 n3 n4 n5 n6]: n0 → n2 n3; n2 → n4 n5; n3 → n6.
	s.expectTrace(
		"n5->n0 NODE_FAILURE [n1]",
		"n0->n5 FAILURE_DET_ACK [n1]",
		"n0->n2 FAILED_NODE 2.n0 -[n1] +[]",
		"n0->n3 FAILED_NODE 2.n0 -[n1] +[]",
		"n2->n4 FAILED_NODE 2.n0 -[n1] +[]",
		"n2->n5 FAILED_NODE 2.n0 -[n1] +[]",
		"n3->n6 FAILED_NODE 2.n0 -[n1] +[]",
		"n4->n2 FAILURE_ACK 2.n0",
		"n5->n2 FAILURE_ACK 2.n0",
		"n6->n3 FAILURE_ACK 2.n0",
		"n2->n0 FAILURE_ACK 2.n0",
		"n3->n0 FAILURE_ACK 2.n0",
		"n0->n2 VIEW_COMMIT 2.n0",
		"n0->n3 VIEW_COMMIT 2.n0",
		"n2->n4 VIEW_COMMIT 2.n0",
		"n2->n5 VIEW_COMMIT 2.n0",
		"n3->n6 VIEW_COMMIT 2.n0",
	)
	s.expectEvents(
		"n0 starts 2.n0 FAILED_NODE -[n1] +[]",
		"n0 stable 2.n0",
		"n0 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n2 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n3 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n4 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n5 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n6 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
	)
}

// §3.4: "When multiple nodes simultaneously detect the same failure, the
// root acknowledges each failure detection message but disregards all but
// the first."
func TestDuplicateFailureReports(t *testing.T) {
	s := newScript(t, 2, 7)
	s.fail(5, 1)
	s.fail(6, 1)
	for range 4 {
		s.step() // both reports, both acknowledgements, first FAILED_NODEs
	}
	s.expectTrace(
		"n5->n0 NODE_FAILURE [n1]",
		"n6->n0 NODE_FAILURE [n1]",
		"n0->n5 FAILURE_DET_ACK [n1]",
		"n0->n2 FAILED_NODE 2.n0 -[n1] +[]",
	)
	s.deliver()
	s.takeTrace()
	s.expectEvents(
		"n0 starts 2.n0 FAILED_NODE -[n1] +[]",
		"n0 stable 2.n0",
		"n0 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n2 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n3 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n4 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n5 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n6 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
	)
}

// §3.5: failures found while a stabilization runs. Nodes n1 and n5 fail; n6
// detects n1 only. The root sends FAILED_NODE(n1); n5 never acknowledges,
// so its parent n2 times out, sends the proposal to n5 again, times out
// again and reports NODE_FAILURE(n5); the root
// propagates the list of failed nodes [n1 n5] in a new proposal.
func TestFailureFoundDuringStabilization(t *testing.T) {
	s := newScript(t, 2, 7)
	s.crash(1)
	s.crash(5)
	s.fail(6, 1)
	s.deliver()
	s.expectTrace(
		"n6->n0 NODE_FAILURE [n1]",
		"n0->n6 FAILURE_DET_ACK [n1]",
		"n0->n2 FAILED_NODE 2.n0 -[n1] +[]",
		"n0->n3 FAILED_NODE 2.n0 -[n1] +[]",
		"n2->n4 FAILED_NODE 2.n0 -[n1] +[]",
		"n2->n5 FAILED_NODE 2.n0 -[n1] +[] (lost)",
		"n3->n6 FAILED_NODE 2.n0 -[n1] +[]",
		"n4->n2 FAILURE_ACK 2.n0",
		"n6->n3 FAILURE_ACK 2.n0",
		"n3->n0 FAILURE_ACK 2.n0",
	)
	s.advance(s.cfg.AckTimeout) // n2 (one level above the leaves) tries n5 again
	s.deliver()
	s.expectTrace("n2->n5 FAILED_NODE 2.n0 -[n1] +[] (lost)")
	s.advance(s.cfg.AckTimeout)
	s.deliver()
	// n2 tries n5 every half wait. The root's first wait (two levels)
	// ends: it tries n2 again, which has not acknowledged yet and ignores
	// the copy.
	s.expectTrace(
		"n0->n2 FAILED_NODE 2.n0 -[n1] +[]",
		"n2->n5 FAILED_NODE 2.n0 -[n1] +[] (lost)",
		"n2->n5 FAILED_NODE 2.n0 -[n1] +[] (lost)",
	)
	s.advance(s.cfg.AckTimeout) // n2's retry waits, twice the first, end: it gives up on n5
	s.deliver()
	// New view [n0 n2 n3 n4 n6]: n0 → n2 n3; n2 → n4 n6.
	s.expectTrace(
		"n0->n2 FAILED_NODE 2.n0 -[n1] +[]",
		"n2->n5 FAILED_NODE 2.n0 -[n1] +[] (lost)",
		"n2->n0 NODE_FAILURE [n5]",
		"n0->n2 FAILURE_DET_ACK [n5]",
		"n0->n2 FAILED_NODE 3.n0 -[n1 n5] +[]",
		"n0->n3 FAILED_NODE 3.n0 -[n1 n5] +[]",
		"n2->n4 FAILED_NODE 3.n0 -[n1 n5] +[]",
		"n2->n6 FAILED_NODE 3.n0 -[n1 n5] +[]",
		"n3->n0 FAILURE_ACK 3.n0",
		"n4->n2 FAILURE_ACK 3.n0",
		"n6->n2 FAILURE_ACK 3.n0",
		"n2->n0 FAILURE_ACK 3.n0",
		"n0->n2 VIEW_COMMIT 3.n0",
		"n0->n3 VIEW_COMMIT 3.n0",
		"n2->n4 VIEW_COMMIT 3.n0",
		"n2->n6 VIEW_COMMIT 3.n0",
	)
	s.expectView("3.n0", ids(0, 2, 3, 4, 6), ids(0, 2, 3, 4, 6)...)
	s.expectEvents(
		"n0 starts 2.n0 FAILED_NODE -[n1] +[]",
		"n0 aborts 2.n0",
		"n0 starts 3.n0 FAILED_NODE -[n1 n5] +[]",
		"n0 stable 3.n0",
		"n0 installs 3.n0 [n0 n2 n3 n4 n6]",
		"n2 installs 3.n0 [n0 n2 n3 n4 n6]",
		"n3 installs 3.n0 [n0 n2 n3 n4 n6]",
		"n4 installs 3.n0 [n0 n2 n3 n4 n6]",
		"n6 installs 3.n0 [n0 n2 n3 n4 n6]",
	)
}

// §3.6 and Figure 3(b): the root fails. The detector sends ROOT_FAILURE to
// the next live node in the linear list, which acknowledges
// (FAILURE_DET_ACK), becomes the root and sends ROOT_DEAD down its tree;
// every node updates its root during the recalculation.
func TestRootFailure(t *testing.T) {
	s := newScript(t, 2, 7)
	s.crash(0)
	s.fail(4, 0)
	s.deliver()
	// New view [n1 n2 n3 n4 n5 n6]: n1 → n2 n3; n2 → n4 n5; n3 → n6.
	s.expectTrace(
		"n4->n1 ROOT_FAILURE [n0]",
		"n1->n4 FAILURE_DET_ACK [n0]",
		"n1->n2 ROOT_DEAD 2.n1 -[n0] +[]",
		"n1->n3 ROOT_DEAD 2.n1 -[n0] +[]",
		"n2->n4 ROOT_DEAD 2.n1 -[n0] +[]",
		"n2->n5 ROOT_DEAD 2.n1 -[n0] +[]",
		"n3->n6 ROOT_DEAD 2.n1 -[n0] +[]",
		"n4->n2 FAILURE_ACK 2.n1",
		"n5->n2 FAILURE_ACK 2.n1",
		"n6->n3 FAILURE_ACK 2.n1",
		"n2->n1 FAILURE_ACK 2.n1",
		"n3->n1 FAILURE_ACK 2.n1",
		"n1->n2 VIEW_COMMIT 2.n1",
		"n1->n3 VIEW_COMMIT 2.n1",
		"n2->n4 VIEW_COMMIT 2.n1",
		"n2->n5 VIEW_COMMIT 2.n1",
		"n3->n6 VIEW_COMMIT 2.n1",
	)
	s.expectView("2.n1", ids(1, 2, 3, 4, 5, 6), ids(1, 2, 3, 4, 5, 6)...)
}

// §3.6 and §6 ("chained, simultaneous root and top node failures, the last of
// which requires linear selection of the next root node"): n0, n1 and n2
// fail. A detector that knows all three sends ROOT_FAILURE straight to n3; a
// detector that knew only n0 sent it to n1, lost, and retries to n2 once it
// learns n1 failed.
func TestChainedRootFailures(t *testing.T) {
	s := newScript(t, 2, 7)
	s.crash(0)
	s.crash(1)
	s.crash(2)
	s.fail(6, 0)
	s.deliver()
	s.expectTrace("n6->n1 ROOT_FAILURE [n0] (lost)")
	s.fail(6, 1)
	s.deliver()
	s.expectTrace("n6->n2 ROOT_FAILURE [n0 n1] (lost)")
	s.advance(s.cfg.ReportRetry) // no FAILURE_DET_ACK: report again
	s.deliver()
	s.expectTrace("n6->n2 ROOT_FAILURE [n0 n1] (lost)")
	s.fail(6, 2)
	s.deliver()
	// New view [n3 n4 n5 n6]: n3 → n4 n5; n4 → n6.
	s.expectTrace(
		"n6->n3 ROOT_FAILURE [n0 n1 n2]",
		"n3->n6 FAILURE_DET_ACK [n0 n1 n2]",
		"n3->n4 ROOT_DEAD 2.n3 -[n0 n1 n2] +[]",
		"n3->n5 ROOT_DEAD 2.n3 -[n0 n1 n2] +[]",
		"n4->n6 ROOT_DEAD 2.n3 -[n0 n1 n2] +[]",
		"n5->n3 FAILURE_ACK 2.n3",
		"n6->n4 FAILURE_ACK 2.n3",
		"n4->n3 FAILURE_ACK 2.n3",
		"n3->n4 VIEW_COMMIT 2.n3",
		"n3->n5 VIEW_COMMIT 2.n3",
		"n4->n6 VIEW_COMMIT 2.n3",
	)
	s.expectView("2.n3", ids(3, 4, 5, 6), ids(3, 4, 5, 6)...)
}

// §3.6: "a root failure coincides with multiple node failures": the new root
// sends ROOT_AND_NODE_FAILURE, naming the new root (the epoch's) and the set
// of failed nodes, followed by acknowledgements upwards.
func TestRootAndNodeFailure(t *testing.T) {
	s := newScript(t, 2, 7)
	s.crash(0)
	s.crash(4)
	s.fail(6, 4) // reported to the root n0: lost
	s.fail(6, 0) // now ROOT_FAILURE to the next node, with both
	s.deliver()
	// New view [n1 n2 n3 n5 n6]: n1 → n2 n3; n2 → n5 n6.
	s.expectTrace(
		"n6->n0 NODE_FAILURE [n4] (lost)",
		"n6->n1 ROOT_FAILURE [n0 n4]",
		"n1->n6 FAILURE_DET_ACK [n0 n4]",
		"n1->n2 ROOT_AND_NODE_FAILURE 2.n1 -[n0 n4] +[]",
		"n1->n3 ROOT_AND_NODE_FAILURE 2.n1 -[n0 n4] +[]",
		"n2->n5 ROOT_AND_NODE_FAILURE 2.n1 -[n0 n4] +[]",
		"n2->n6 ROOT_AND_NODE_FAILURE 2.n1 -[n0 n4] +[]",
		"n3->n1 FAILURE_ACK 2.n1",
		"n5->n2 FAILURE_ACK 2.n1",
		"n6->n2 FAILURE_ACK 2.n1",
		"n2->n1 FAILURE_ACK 2.n1",
		"n1->n2 VIEW_COMMIT 2.n1",
		"n1->n3 VIEW_COMMIT 2.n1",
		"n2->n5 VIEW_COMMIT 2.n1",
		"n2->n6 VIEW_COMMIT 2.n1",
	)
	s.expectView("2.n1", ids(1, 2, 3, 5, 6), ids(1, 2, 3, 5, 6)...)
}

// §3.6 during §3.4: the root fails in the middle of a stabilization. Its
// proposal 2.n0 reached every node but its commit never left: nodes hold it
// accepted, uncommitted. The detector's ROOT_FAILURE goes to the next live
// node of the newest view it knows, n2, which adopts 2.n0 (it may have
// committed) and proposes ROOT_DEAD on top of it. Nobody installs 2.n0 (the
// two-phase commit closes the window in which the paper's nodes could hold
// different views); everyone installs 3.n2.
func TestRootFailureDuringStabilization(t *testing.T) {
	s := newScript(t, 2, 7)
	s.crash(1)
	s.fail(5, 1)
	s.fail(2, 1)
	for range 7 {
		s.step()
	}
	s.crash(0)
	s.deliver()
	s.takeTrace()
	s.fail(4, 0)
	s.deliver()
	// 3.n2 = 2.n0 − n0 = [n2 n3 n4 n5 n6]: n2 → n3 n4; n3 → n5 n6.
	s.expectTrace(
		"n4->n2 ROOT_FAILURE [n0]",
		"n2->n4 FAILURE_DET_ACK [n0]",
		"n2->n3 ROOT_DEAD 3.n2 -[n0] +[]",
		"n2->n4 ROOT_DEAD 3.n2 -[n0] +[]",
		"n3->n5 ROOT_DEAD 3.n2 -[n0] +[]",
		"n3->n6 ROOT_DEAD 3.n2 -[n0] +[]",
		"n4->n2 FAILURE_ACK 3.n2",
		"n5->n3 FAILURE_ACK 3.n2",
		"n6->n3 FAILURE_ACK 3.n2",
		"n3->n2 FAILURE_ACK 3.n2",
		"n2->n3 VIEW_COMMIT 3.n2",
		"n2->n4 VIEW_COMMIT 3.n2",
		"n3->n5 VIEW_COMMIT 3.n2",
		"n3->n6 VIEW_COMMIT 3.n2",
	)
	s.expectEvents(
		"n0 starts 2.n0 FAILED_NODE -[n1] +[]",
		"n2 starts 3.n2 ROOT_DEAD -[n0] +[]",
		"n2 stable 3.n2",
		"n2 installs 3.n2 [n2 n3 n4 n5 n6]",
		"n3 installs 3.n2 [n2 n3 n4 n5 n6]",
		"n4 installs 3.n2 [n2 n3 n4 n5 n6]",
		"n5 installs 3.n2 [n2 n3 n4 n5 n6]",
		"n6 installs 3.n2 [n2 n3 n4 n5 n6]",
	)
}

// §3.7 and Figure 3(c): a new node joins. Its NEW_NODE reaches a member that
// is not the root, which passes it to the root. The root adds the joiner as
// a leaf at the bottom of the tree and sends NEW_NODE_JOIN down; the joiner
// gets the full member list from its parent; NEW_NODE_JOIN_ACKs come up;
// once the tree is stable the root welcomes the joiner (JOIN_DET_ACK).
func TestNodeJoin(t *testing.T) {
	s := newScript(t, 2, 5)
	s.join(5, false, 3, 0)
	s.deliver()
	// [n0 n1 n2 n3 n4 n5]: n0 → n1 n2; n1 → n3 n4; n2 → n5.
	s.expectTrace(
		"n5->n3 NEW_NODE [n5]",
		"n3->n0 NEW_NODE [n5]",
		"n0->n1 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n0->n2 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n1->n3 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n1->n4 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n2->n5 NEW_NODE_JOIN 2.n0 -[] +[n5] full",
		"n3->n1 NEW_NODE_JOIN_ACK 2.n0",
		"n4->n1 NEW_NODE_JOIN_ACK 2.n0",
		"n5->n2 NEW_NODE_JOIN_ACK 2.n0",
		"n1->n0 NEW_NODE_JOIN_ACK 2.n0",
		"n2->n0 NEW_NODE_JOIN_ACK 2.n0",
		"n0->n1 VIEW_COMMIT 2.n0",
		"n0->n2 VIEW_COMMIT 2.n0",
		"n0->n5 JOIN_DET_ACK 2.n0",
		"n1->n3 VIEW_COMMIT 2.n0",
		"n1->n4 VIEW_COMMIT 2.n0",
		"n2->n5 VIEW_COMMIT 2.n0",
	)
	s.expectView("2.n0", ids(0, 1, 2, 3, 4, 5), ids(0, 1, 2, 3, 4, 5)...)
}

// §3.7: a recovered process re-joins under its original id with NODE_ALIVE.
// Here it restarted before anyone noticed its crash: the root learns it from
// the new incarnation, removes the former one and appends the new one
// (ALIVE_NODE_JOIN -[n3] +[n3]).
func TestRecoveredNodeRejoins(t *testing.T) {
	s := newScript(t, 2, 5)
	s.crash(3)
	m := s.join(3, true, 0, 1, 2, 3, 4)
	s.deliver()
	// [n0 n1 n2 n4 n3]: n0 → n1 n2; n1 → n4 n3.
	s.expectTrace(
		"n3->n0 NODE_ALIVE [n3]",
		"n0->n1 ALIVE_NODE_JOIN 2.n0 -[n3] +[n3]",
		"n0->n2 ALIVE_NODE_JOIN 2.n0 -[n3] +[n3]",
		"n1->n4 ALIVE_NODE_JOIN 2.n0 -[n3] +[n3]",
		"n1->n3 ALIVE_NODE_JOIN 2.n0 -[n3] +[n3] full",
		"n2->n0 ALIVE_NODE_JOIN_ACK 2.n0",
		"n4->n1 ALIVE_NODE_JOIN_ACK 2.n0",
		"n3->n1 ALIVE_NODE_JOIN_ACK 2.n0",
		"n1->n0 ALIVE_NODE_JOIN_ACK 2.n0",
		"n0->n1 VIEW_COMMIT 2.n0",
		"n0->n2 VIEW_COMMIT 2.n0",
		"n0->n3 JOIN_DET_ACK 2.n0",
		"n1->n4 VIEW_COMMIT 2.n0",
		"n1->n3 VIEW_COMMIT 2.n0",
	)
	s.expectView("2.n0", ids(0, 1, 2, 4, 3), ids(0, 1, 2, 3, 4)...)
	if inc := s.nodes[0].m.cur.inc(3); inc != m.Incarnation() || inc == 0 {
		t.Errorf("the view holds incarnation %d of n3, want %d", inc, m.Incarnation())
	}
	// The detectors are told to watch the new incarnation afresh: their
	// verdict about n3 may be about the process that just joined.
	seen := 0
	for _, r := range s.raw {
		mc, ok := r.e.(core.MembersChanged)
		if !ok || FormatEpoch(mc.Epoch) != "2.n0" {
			continue
		}
		seen++
		want := ids(3)
		if r.id == 3 {
			want = nil // its first view: everything is new to it
		}
		if !slices.Equal(mc.Renewed, want) {
			t.Errorf("n%d: MembersChanged 2.n0 renews %v, want %v", r.id, mc.Renewed, want)
		}
	}
	if seen != 5 {
		t.Errorf("%d nodes announced 2.n0 to their detector, want 5", seen)
	}
}

// §3.7: "a failure to get a JOIN_DET_ACK from the root triggers the new node
// ... to send a NEW_NODE(ID) ... message to the next node in its sequential
// list of nodes."
func TestJoinRetriesNextNode(t *testing.T) {
	s := newScript(t, 2, 5)
	s.join(5, false, 9, 2) // n9 does not exist
	s.deliver()
	s.expectTrace("n5->n9 NEW_NODE [n5] (lost)")
	s.advance(s.cfg.JoinRetry)
	s.deliver()
	s.expectTrace(
		"n5->n2 NEW_NODE [n5]",
		"n2->n0 NEW_NODE [n5]",
		"n0->n1 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n0->n2 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n1->n3 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n1->n4 NEW_NODE_JOIN 2.n0 -[] +[n5]",
		"n2->n5 NEW_NODE_JOIN 2.n0 -[] +[n5] full",
		"n3->n1 NEW_NODE_JOIN_ACK 2.n0",
		"n4->n1 NEW_NODE_JOIN_ACK 2.n0",
		"n5->n2 NEW_NODE_JOIN_ACK 2.n0",
		"n1->n0 NEW_NODE_JOIN_ACK 2.n0",
		"n2->n0 NEW_NODE_JOIN_ACK 2.n0",
		"n0->n1 VIEW_COMMIT 2.n0",
		"n0->n2 VIEW_COMMIT 2.n0",
		"n0->n5 JOIN_DET_ACK 2.n0",
		"n1->n3 VIEW_COMMIT 2.n0",
		"n1->n4 VIEW_COMMIT 2.n0",
		"n2->n5 VIEW_COMMIT 2.n0",
	)
}

// §3.7, concurrent joins: a join that arrives while the root stabilizes
// another waits for it, then is admitted; joiners are appended in the order
// the root admits them.
func TestConcurrentJoins(t *testing.T) {
	s := newScript(t, 2, 3)
	s.join(3, false, 0)
	s.join(4, false, 1)
	s.deliver()
	s.expectTrace(
		"n3->n0 NEW_NODE [n3]",
		"n4->n1 NEW_NODE [n4]",
		"n0->n1 NEW_NODE_JOIN 2.n0 -[] +[n3]",
		"n0->n2 NEW_NODE_JOIN 2.n0 -[] +[n3]",
		"n1->n0 NEW_NODE [n4]",
		"n1->n3 NEW_NODE_JOIN 2.n0 -[] +[n3] full",
		"n2->n0 NEW_NODE_JOIN_ACK 2.n0",
		"n3->n1 NEW_NODE_JOIN_ACK 2.n0",
		"n1->n0 NEW_NODE_JOIN_ACK 2.n0",
		"n0->n1 VIEW_COMMIT 2.n0",
		"n0->n2 VIEW_COMMIT 2.n0",
		"n0->n3 JOIN_DET_ACK 2.n0",
		"n0->n1 NEW_NODE_JOIN 3.n0 -[] +[n4]",
		"n0->n2 NEW_NODE_JOIN 3.n0 -[] +[n4]",
		"n1->n3 VIEW_COMMIT 2.n0",
		"n1->n3 NEW_NODE_JOIN 3.n0 -[] +[n4]",
		"n1->n4 NEW_NODE_JOIN 3.n0 -[] +[n4] full",
		"n2->n0 NEW_NODE_JOIN_ACK 3.n0",
		"n3->n1 NEW_NODE_JOIN_ACK 3.n0",
		"n4->n1 NEW_NODE_JOIN_ACK 3.n0",
		"n1->n0 NEW_NODE_JOIN_ACK 3.n0",
		"n0->n1 VIEW_COMMIT 3.n0",
		"n0->n2 VIEW_COMMIT 3.n0",
		"n0->n4 JOIN_DET_ACK 3.n0",
		"n1->n3 VIEW_COMMIT 3.n0",
		"n1->n4 VIEW_COMMIT 3.n0",
	)
	s.expectView("3.n0", ids(0, 1, 2, 3, 4), ids(0, 1, 2, 3, 4)...)
}

// Paper footnote 1: a node that timed out but is alive is excluded, and its
// messages are ignored until it re-joins. n3 is declared failed by n4 while
// alive; its later report of n1's (real) crash is ignored by the root, which
// answers EXCLUDED; n3 asks to re-join (NODE_ALIVE), is admitted, and its
// report counts once it is a member again.
func TestExcludedNodeIgnoredUntilRejoin(t *testing.T) {
	s := newScript(t, 2, 5)
	s.fail(4, 3)
	s.deliver()
	s.takeTrace()
	s.expectView("2.n0", ids(0, 1, 2, 4), ids(0, 1, 2, 4)...)
	s.takeEvents()
	s.crash(1)
	s.fail(3, 1)
	s.deliver()
	s.expectTrace(
		"n3->n0 NODE_FAILURE [n1]",
		"n0->n3 EXCLUDED 2.n0 root n0",
		"n3->n0 EXCLUDED 2.n0 root n0",
		"n3->n0 NODE_ALIVE [n3]",
		"n0->n1 NEW_NODE_JOIN 3.n0 -[] +[n3] (lost)",
		"n0->n2 NEW_NODE_JOIN 3.n0 -[] +[n3]",
		"n2->n0 NEW_NODE_JOIN_ACK 3.n0",
	)
	s.advance(2 * s.cfg.AckTimeout) // n1 does not acknowledge: the root tries again
	s.deliver()
	s.expectTrace("n0->n1 NEW_NODE_JOIN 3.n0 -[] +[n3] (lost)")
	s.advance(2 * ackRetryWaits * s.cfg.AckTimeout) // and, after a wait twice as long, gives up on n1
	s.deliver()
	s.takeTrace()
	s.expectView("4.n0", ids(0, 2, 4, 3), ids(0, 2, 3, 4)...)
	s.expectEvents(
		"n3 evicted by 2.n0",
		"n0 starts 3.n0 NEW_NODE_JOIN -[] +[n3]",
		"n0 aborts 3.n0",
		"n0 starts 4.n0 FAILED_NODE -[n1] +[n3]",
		"n0 stable 4.n0",
		"n0 installs 4.n0 [n0 n2 n4 n3]",
		"n2 installs 4.n0 [n0 n2 n4 n3]",
		"n4 installs 4.n0 [n0 n2 n4 n3]",
		"n3 installs 4.n0 [n0 n2 n4 n3]",
	)
}

// splitDetect makes every node of a declare every node of b failed and
// vice versa, as detectors on both sides of a partition do.
func (s *script) splitDetect(a, b []core.NodeID) {
	for _, x := range a {
		for _, y := range b {
			s.fail(x, y)
			s.fail(y, x)
		}
	}
}

// §3.3 under PartitionMajority: the side {n0 n1} holds 2 of the 5 members of
// the last view. Its root cannot install a view: it announces MINORITY and
// every node of the side emits Minority. The side {n2 n3 n4} reorganizes
// with n2 as root. After the partition heals, the minority merges into the
// majority's view.
func TestPartitionMajority(t *testing.T) {
	s := newScript(t, 2, 5)
	for _, id := range s.ids {
		s.nodes[id].m.cfg.Partition = PartitionMajority
	}
	a, b := ids(0, 1), ids(2, 3, 4)
	s.partition(a, b)
	s.splitDetect(a, b)
	s.deliver()
	s.takeTrace()
	s.expectView("1.n0", ids(0, 1, 2, 3, 4), 0, 1)
	s.expectView("2.n2", ids(2, 3, 4), 2, 3, 4)
	var minority []string
	for _, e := range s.takeEvents() {
		if strings.Contains(e, "minority") || strings.Contains(e, "installs") {
			minority = append(minority, e)
		}
	}
	want := []string{
		"n0 minority 1.n0 2/5",
		"n1 minority 1.n0 2/5",
		"n2 installs 2.n2 [n2 n3 n4]",
		"n3 installs 2.n2 [n2 n3 n4]",
		"n4 installs 2.n2 [n2 n3 n4]",
	}
	if !slices.Equal(minority, want) {
		t.Fatalf("got %q\nwant %q", minority, want)
	}
	s.heal()
	for _, x := range a {
		for _, y := range b {
			s.recovered(x, y)
			s.recovered(y, x)
		}
	}
	s.deliver()
	s.advance(time.Second)
	s.deliver()
	// n0, back in a majority of 1.n0 with n2, first proposes 4.n0 without n3
	// and n4; n2 refuses it (it holds 2.n2, which excludes n0), so n0 learns
	// it was excluded and merges with its side.
	s.expectView("5.n2", ids(2, 3, 4, 0, 1), ids(0, 1, 2, 3, 4)...)
}

// §3.3 under PartitionPaper: "partitions (subtrees) reorganize to form a new
// view". Both sides install views, numbered apart by their roots: side A
// (whose root learns the failures one by one and restarts twice, §3.5)
// reaches 4.n0, side B 2.n2. When the partition heals, the side whose view
// has the lower epoch (B) merges into the other: its root asks to be
// admitted with its whole side (NODE_ALIVE listing it), and n0 admits them.
func TestPartitionPaper(t *testing.T) {
	s := newScript(t, 2, 5)
	a, b := ids(0, 1), ids(2, 3, 4)
	s.partition(a, b)
	s.splitDetect(a, b)
	s.deliver()
	s.takeTrace()
	s.expectView("4.n0", ids(0, 1), 0, 1)
	s.expectView("2.n2", ids(2, 3, 4), 2, 3, 4)
	s.takeEvents()
	s.heal()
	for _, x := range a { // the detectors hear the other side again
		for _, y := range b {
			s.recovered(y, x)
			s.recovered(x, y)
		}
	}
	s.deliver()
	// Every node tells the outsiders it hears from again that they are not in
	// its view; the members of B learn of 4.n0, newer than their 2.n2: the
	// root n2 asks for its whole side, n3 and n4 for themselves (duplicates
	// the root of A ignores).
	s.expectTrace(
		"n2->n0 EXCLUDED 2.n2 root n2",
		"n0->n2 EXCLUDED 4.n0 root n0",
		"n3->n0 EXCLUDED 2.n2 root n2",
		"n0->n3 EXCLUDED 4.n0 root n0",
		"n4->n0 EXCLUDED 2.n2 root n2",
		"n0->n4 EXCLUDED 4.n0 root n0",
		"n2->n1 EXCLUDED 2.n2 root n2",
		"n1->n2 EXCLUDED 4.n0 root n0",
		"n3->n1 EXCLUDED 2.n2 root n2",
		"n1->n3 EXCLUDED 4.n0 root n0",
		"n4->n1 EXCLUDED 2.n2 root n2",
		"n1->n4 EXCLUDED 4.n0 root n0",
		"n2->n3 EXCLUDED 4.n0 root n0",
		"n2->n4 EXCLUDED 4.n0 root n0",
		"n2->n0 NODE_ALIVE [n2 n3 n4]",
		"n3->n2 EXCLUDED 4.n0 root n0",
		"n3->n0 NODE_ALIVE [n3]",
		"n4->n2 EXCLUDED 4.n0 root n0",
		"n4->n0 NODE_ALIVE [n4]",
		"n0->n1 NEW_NODE_JOIN 5.n0 -[] +[n2 n3 n4]",
		"n0->n2 NEW_NODE_JOIN 5.n0 -[] +[n2 n3 n4] full",
		"n1->n3 NEW_NODE_JOIN 5.n0 -[] +[n2 n3 n4] full",
		"n1->n4 NEW_NODE_JOIN 5.n0 -[] +[n2 n3 n4] full",
		"n2->n0 NEW_NODE_JOIN_ACK 5.n0",
		"n3->n1 NEW_NODE_JOIN_ACK 5.n0",
		"n4->n1 NEW_NODE_JOIN_ACK 5.n0",
		"n1->n0 NEW_NODE_JOIN_ACK 5.n0",
		"n0->n1 VIEW_COMMIT 5.n0",
		"n0->n2 VIEW_COMMIT 5.n0",
		"n0->n2 JOIN_DET_ACK 5.n0",
		"n0->n3 JOIN_DET_ACK 5.n0",
		"n0->n4 JOIN_DET_ACK 5.n0",
		"n1->n3 VIEW_COMMIT 5.n0",
		"n1->n4 VIEW_COMMIT 5.n0",
	)
	s.expectView("5.n0", ids(0, 1, 2, 3, 4), ids(0, 1, 2, 3, 4)...)
}

// §4: T_s is the time from the root receiving the failure report to the
// root holding all ACKs. The root's StabilizationStarted and Stabilized
// events carry both instants (Began and At), taken from its clock.
func TestStabilizationTimeEvents(t *testing.T) {
	s := newScript(t, 2, 7)
	s.fail(5, 1)
	const hop = time.Millisecond
	for {
		s.now += hop // every delivery takes one millisecond
		if !s.step() {
			break
		}
	}
	var began, at time.Duration
	for _, r := range s.raw {
		switch e := r.e.(type) {
		case StabilizationStarted:
			began = e.Began
		case Stabilized:
			at = e.At
			if e.Began != began {
				t.Errorf("Stabilized.Began = %v, StabilizationStarted.Began = %v", e.Began, began)
			}
		}
	}
	// The report arrives at 1 ms; FAILED_NODE goes down two levels and the
	// ACKs come back: the root holds the last ACK when the 12th message is
	// delivered (report, ack, 5 FAILED_NODE, 5 FAILURE_ACK).
	if began != 1*hop || at != 12*hop {
		t.Errorf("T_s measured from %v to %v, want 1ms to 12ms", began, at)
	}
}

// The two-phase commit closes the paper's window (nodes installing at
// FAILED_NODE, so that a failure during propagation leaves them on
// different views): a node whose commit was lost holds the view accepted,
// not installed, and installs it when the next proposal, based on it,
// arrives.
func TestLostCommitInstalledByNextProposal(t *testing.T) {
	s := newScript(t, 2, 7)
	s.fail(5, 1)
	for s.step() {
		s.drop(func(from, to core.NodeID, m core.Msg) bool { _, ok := m.(*Commit); return ok && to == 6 })
	}
	s.takeTrace()
	s.expectView("1.n0", ids(0, 1, 2, 3, 4, 5, 6), 6)
	s.expectView("2.n0", ids(0, 2, 3, 4, 5, 6), 0, 2, 3, 4, 5)
	s.takeEvents()
	s.fail(0, 4)
	s.deliver()
	s.takeTrace()
	s.expectEvents(
		"n0 starts 3.n0 FAILED_NODE -[n4] +[]",
		"n6 installs 2.n0 [n0 n2 n3 n4 n5 n6]",
		"n0 stable 3.n0",
		"n0 installs 3.n0 [n0 n2 n3 n5 n6]",
		"n2 installs 3.n0 [n0 n2 n3 n5 n6]",
		"n3 installs 3.n0 [n0 n2 n3 n5 n6]",
		"n5 installs 3.n0 [n0 n2 n3 n5 n6]",
		"n6 installs 3.n0 [n0 n2 n3 n5 n6]",
	)
}

// A node whose commit is lost and to which no further proposal comes asks
// the root (VIEW_QUERY) once CommitTimeout passes and installs the view the
// root answers with (VIEW_SYNC).
func TestLostCommitQueried(t *testing.T) {
	s := newScript(t, 2, 7)
	s.fail(5, 1)
	for s.step() {
		s.drop(func(from, to core.NodeID, m core.Msg) bool { _, ok := m.(*Commit); return ok && to == 6 })
	}
	s.takeTrace()
	s.advance(s.cfg.CommitTimeout + (1+ackRetryWaits)*3*s.cfg.AckTimeout) // commitWait of a 3-level tree
	s.deliver()
	s.expectTrace(
		"n6->n0 VIEW_QUERY 2.n0",
		"n0->n6 VIEW_SYNC 2.n0 abort 0.n0",
	)
	s.expectView("2.n0", ids(0, 2, 3, 4, 5, 6), 6)
}

// A node asked to accept a proposal whose base it never held (here, a dead
// root's proposal that never reached it, adopted by the next root) asks its
// parent for the full member list (VIEW_NEED) instead of guessing.
func TestNeedViewForUnknownBase(t *testing.T) {
	s := newScript(t, 2, 7)
	s.crash(1)
	s.fail(5, 1)
	s.fail(2, 1)
	// 2.n0 reaches every node but n6 (its FAILED_NODE is lost), then n0
	// crashes before the commit.
	for s.step() {
		s.drop(func(from, to core.NodeID, m core.Msg) bool { _, ok := m.(*Prepare); return ok && to == 6 })
		s.drop(func(from, to core.NodeID, m core.Msg) bool { _, ok := m.(*Ack); return ok && to == 0 })
	}
	s.crash(0)
	s.deliver()
	s.takeTrace()
	s.fail(4, 0)
	s.fail(6, 0)
	s.deliver()
	got := s.takeTrace()
	if !slices.Contains(got, "n6->n3 VIEW_NEED 3.n2") || !slices.Contains(got, "n3->n6 ROOT_DEAD 3.n2 -[n0] +[] full") {
		t.Fatalf("no VIEW_NEED exchange in:\n  %s", strings.Join(got, "\n  "))
	}
	s.expectView("3.n2", ids(2, 3, 4, 5, 6), 2, 3, 4, 5, 6)
}

// A lost proposal or a lost ACK no longer excludes a live node. n2's
// FAILED_NODE to its live child n5 is lost, and so is n6's FAILURE_ACK to
// n3: at their first ACK timeout n2 and n3 send the proposal again, n5
// acknowledges it, n6 repeats its ACK, and the view excludes only the
// crashed n1. (Before, n5 and n6 were reported failed at the first
// timeout and excluded, alive.)
func TestLostProposalOrAckRetried(t *testing.T) {
	s := newScript(t, 2, 7)
	s.crash(1)
	s.fail(6, 1)
	lost := map[string]bool{}
	for s.step() {
		s.drop(func(from, to core.NodeID, m core.Msg) bool {
			key := fmt.Sprintf("%v->%v %T", from, to, m)
			if lost[key] {
				return false
			}
			_, prep := m.(*Prepare)
			_, ack := m.(*Ack)
			if (prep && from == 2 && to == 5) || (ack && from == 6 && to == 3) {
				lost[key] = true
				return true
			}
			return false
		})
	}
	if len(lost) != 2 {
		t.Fatalf("dropped %v, want the proposal to n5 and n6's ACK", lost)
	}
	s.takeTrace()
	s.advance(s.cfg.AckTimeout)
	s.deliver()
	s.expectTrace(
		"n2->n5 FAILED_NODE 2.n0 -[n1] +[]",
		"n3->n6 FAILED_NODE 2.n0 -[n1] +[]",
		"n5->n2 FAILURE_ACK 2.n0",
		"n6->n3 FAILURE_ACK 2.n0",
		"n2->n0 FAILURE_ACK 2.n0",
		"n3->n0 FAILURE_ACK 2.n0",
		"n0->n2 VIEW_COMMIT 2.n0",
		"n0->n3 VIEW_COMMIT 2.n0",
		"n2->n4 VIEW_COMMIT 2.n0",
		"n2->n5 VIEW_COMMIT 2.n0",
		"n3->n6 VIEW_COMMIT 2.n0",
	)
	s.expectView("2.n0", ids(0, 2, 3, 4, 5, 6), ids(0, 2, 3, 4, 5, 6)...)
}
