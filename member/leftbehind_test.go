package member

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// TestLeftBehindJoinerMerges replays the liveness bug of vsync's swarm seed
// 3040358880 (§3.3 partitions, §3.6 root failure, §3.7 joins, footnote 1).
// A joiner n4 is admitted into one side's view A = [n0 n1 n4]. When the
// partition heals, the other side (n2, n3) merges in, but n1 and n4 are
// cut off for a moment: n0 takes them for failed and proposes [n0 n2 n3]; n2 falsely takes n0 for
// failed, adopts that proposal (it may have committed) and installs
// [n2 n3] above it; n0 then merges into n2's view, which descends from A.
// Neither n2 nor n3 ever held a view with n4, and n4 is not in their node
// list: n2's probes never reach it. n0 and n1 are alive and answer n4's
// detector, so n4 stays in A for ever — unless the members that install a
// view that skips views (one not based on the view they had installed)
// tell the members of their former view that the new view lacks, whether
// they believe them failed or not, and tell them again at the next probes
// in case the notice is lost.
func TestLeftBehindJoinerMerges(t *testing.T) {
	for _, lose := range []int{0, 2} {
		t.Run(map[int]string{0: "notices delivered", 2: "first notices lost"}[lose], func(t *testing.T) {
			s := leftBehind(t)
			lost := 0
			for range 200 {
				for {
					if lost < lose {
						before := len(s.queue)
						s.drop(func(from, to core.NodeID, m core.Msg) bool { _, ok := m.(*Notice); return ok && to == 4 })
						lost += before - len(s.queue)
					}
					if !s.step() {
						break
					}
				}
				s.advance(50 * time.Millisecond)
			}
			if lost < lose {
				t.Fatalf("%d notices to n4 lost, want %d\n%s\n%s", lost, lose, strings.Join(s.takeTrace(), "\n"), strings.Join(s.takeEvents(), "\n"))
			}
			want := s.nodes[2].m.View()
			for _, id := range ids(0, 1, 2, 3, 4) {
				if v := s.nodes[id].m.View(); v.Epoch != want.Epoch || len(v.Members) != 5 {
					t.Fatalf("%v holds %s %v, n2 holds %s %v: live nodes split\n%s", id, FormatEpoch(v.Epoch), v.Members,
						FormatEpoch(want.Epoch), want.Members, strings.Join(s.takeEvents(), "\n"))
				}
			}
		})
	}
}

// leftBehind builds the state of TestLeftBehindJoinerMerges: n0, n2 and n3
// share a view that descends from A = [n0 n1 n4] through a proposal of n0
// that dropped n1 and n4 and that n2 adopted; n1 and n4 still hold A.
func leftBehind(t *testing.T) *script {
	cfg := DefaultConfig()
	cfg.Fanout = 2
	s := newScriptCfg(t, cfg, 4)
	// Two sides, each installing its own view; n4 joins n0's.
	s.partition(ids(0, 1, 4), ids(2, 3))
	for _, a := range []core.NodeID{0, 1} {
		for _, b := range []core.NodeID{2, 3} {
			s.fail(a, b)
			s.fail(b, a)
		}
	}
	s.deliver()
	s.join(4, false, 0)
	s.deliver()
	expectMembers(t, s, ids(0, 1, 4), 0, 1, 4)
	expectMembers(t, s, ids(2, 3), 2, 3)
	a := s.nodes[0].m.View()
	if b := s.nodes[2].m.View(); a.Epoch <= b.Epoch {
		t.Fatalf("n0's view %s is not newer than n2's %s", FormatEpoch(a.Epoch), FormatEpoch(b.Epoch))
	}
	// The partition heals, but n1 and n4 are cut off for a while (their
	// messages are lost); n0 tells n2 that n2 is outside its newer view, and
	// n2 brings its side to n0.
	s.partition(ids(1, 4))
	s.recovered(0, 2)
	for len(s.nodes[0].m.pendingJoins) == 0 && s.step() {
	}
	if !s.nodes[0].m.driving {
		t.Fatal("n0 proposes nothing after n2's request")
	}
	// n0 takes n1 and n4 for failed and proposes [n0 n2 n3]; the
	// acknowledgements of n2 and n3 are lost, so it never commits.
	s.fail(0, 1)
	s.fail(0, 4)
	lose := func(from, to core.NodeID, m core.Msg) bool {
		_, ack := m.(*Ack)
		return ack && to == 0 && (from == 2 || from == 3)
	}
	for s.drop(lose); s.step(); s.drop(lose) {
	}
	p := s.nodes[2].m.accepted
	if p == nil || EpochRoot(p.epoch) != 0 || !slices.Equal(p.list(), ids(0, 2, 3)) {
		t.Fatalf("n2 does not hold n0's proposal [n0 n2 n3]")
	}
	// n2 falsely takes n0 for failed: it adopts n0's proposal and installs
	// [n2 n3] above it, then tells n0 (whose proposal still waits) that it
	// is outside; n0 merges. (Their detectors hear from n0 again.)
	s.fail(2, 0)
	s.fail(3, 0)
	s.deliver()
	expectMembers(t, s, ids(2, 3), 2, 3)
	s.recovered(2, 0)
	s.recovered(3, 0)
	// n2 tells n0 at once (it gave up merging into n0's view for its own),
	// and n0's first request may be refused while n3 still takes n0 for
	// failed: n0 asks again after JoinRetry.
	s.deliver()
	for i := 0; i < 40 && !slices.Equal(s.nodes[0].m.View().Members, ids(2, 3, 0)); i++ {
		s.advance(50 * time.Millisecond)
		s.deliver()
	}
	expectMembers(t, s, ids(2, 3, 0), 0, 2, 3)
	expectMembers(t, s, ids(0, 1, 4), 1, 4)
	s.heal()
	s.takeTrace()
	s.takeEvents()
	return s
}

// expectMembers checks that the nodes at hold views with members (in that
// order), whatever their epochs.
func expectMembers(t *testing.T, s *script, members []core.NodeID, at ...core.NodeID) {
	t.Helper()
	for _, id := range at {
		if v := s.nodes[id].m.View(); !slices.Equal(v.Members, members) {
			t.Fatalf("%v holds %s %v, want %v\nmessages:\n%s\nevents:\n%s", id, FormatEpoch(v.Epoch), v.Members, members,
				strings.Join(s.takeTrace(), "\n"), strings.Join(s.takeEvents(), "\n"))
		}
	}
}
