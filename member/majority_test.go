package member

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// TestMajorityBlocksOnDeadRootProposal documents exactly when the majority
// policy blocks (the blocking case of two-phase commit; see the package
// documentation's Limits). After a partition of [n0 … n6] into
// A = {n0 n1 n2 n3} (which installs V = [n0 n1 n2 n3]) and B = {n4 n5 n6}
// (a minority), the partition heals and B merges: n0 proposes
// P = V + [n4 n5 n6]. Then n0 and the three joiners crash, at a time when
//
//   - "acked": every member of P acknowledged it, so n0 may have committed
//     it (and the dead may have installed views after it). The survivors
//     n1 n2 n3 hold 3 of the 4 members of V but only 3 of the 7 of P, less
//     than half: they can neither build on V (P may have committed) nor on P
//     (a view descending from P that committed among the dead would not be
//     seen). They stay in a minority, emitting Minority, for good: restarted
//     processes are new incarnations that remember nothing, and joiners
//     change nothing. Only an operator can tell (or the dead's disks).
//   - "n3 never acked": P never reached n3, so it cannot have committed (a
//     proposal commits only with every member's acknowledgement). The
//     survivors ask P's members (VIEW_QUERY), n3 promises never to
//     acknowledge it, P is dropped, and [n1 n2 n3] is installed.
func TestMajorityBlocksOnDeadRootProposal(t *testing.T) {
	for _, acked := range []bool{true, false} {
		name := "acked"
		if !acked {
			name = "n3 never acked"
		}
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Fanout = 2
			cfg.Partition = PartitionMajority
			s := newScriptCfg(t, cfg, 7)
			a, b := ids(0, 1, 2, 3), ids(4, 5, 6)
			s.partition(a, b)
			s.splitDetect(a, b)
			s.deliver()
			expectMembers(t, s, ids(0, 1, 2, 3), 0, 1, 2, 3)
			// The partition heals; B merges into A's view.
			s.heal()
			s.recovered(0, 4) // n0 tells n4, B's root, which asks for its whole side
			// n0 proposes P with the three joiners. In the first case every
			// member acknowledges it and n0 commits it (installs it) and
			// crashes before any commit leaves; in the second P never
			// reaches n3 and n0 crashes while it waits.
			lose := func(from, to core.NodeID, m core.Msg) bool {
				p, ok := m.(*Prepare)
				return !acked && ok && to == 3 && len(p.Joined) == 3
			}
			for s.drop(lose); s.step(); s.drop(lose) {
				if len(s.nodes[0].m.View().Members) == 7 {
					break
				}
			}
			p := s.nodes[0].m.accepted
			if acked {
				p = s.nodes[0].m.cur
			}
			if p == nil || p.size() != 7 {
				t.Fatalf("n0 does not propose a view of the 7 nodes\n%s", strings.Join(s.takeEvents(), "\n"))
			}
			for _, id := range ids(0, 4, 5, 6) {
				s.crash(id)
			}
			s.drop(func(from, to core.NodeID, m core.Msg) bool { return from == 0 })
			s.deliver()
			// The live members that P reached hold it (acknowledged, when
			// their subtree did).
			holders := ids(1, 2, 3)
			if !acked {
				holders = ids(1, 2)
			}
			for _, id := range holders {
				m := s.nodes[id].m
				if m.accepted == nil || m.accepted.epoch != p.epoch || (acked && !slices.Contains(m.ackedEpochs, p.epoch)) {
					t.Fatalf("%v does not hold P (acknowledged)", id)
				}
			}
			s.takeEvents()
			for _, x := range ids(1, 2, 3) {
				for _, y := range ids(0, 4, 5, 6) {
					s.fail(x, y)
				}
			}
			for range 200 { // 20 s
				s.deliver()
				s.advance(100 * time.Millisecond)
			}
			if !acked {
				expectMembers(t, s, ids(1, 2, 3), 1, 2, 3)
				return
			}
			// Blocked: nothing installed, Minority emitted, still after the
			// dead restart as new incarnations and ask to join.
			for _, id := range ids(4, 5, 6) {
				s.nodes[id].down = false
				s.join(id, true, 1, 2, 3)
			}
			for range 200 {
				s.deliver()
				s.advance(100 * time.Millisecond)
			}
			var minority []string
			for _, e := range s.takeEvents() {
				if strings.Contains(e, "installs") {
					t.Fatalf("a view was installed: %s", e)
				}
				if strings.Contains(e, "minority") && !slices.Contains(minority, e) {
					minority = append(minority, e)
				}
			}
			for _, id := range ids(1, 2, 3) {
				want := fmt.Sprintf("%v minority %s 3/7", id, FormatEpoch(p.epoch))
				if !slices.Contains(minority, want) {
					t.Errorf("no %q among the Minority events %q", want, minority)
				}
			}
			for _, id := range ids(1, 2, 3) {
				if v := s.nodes[id].m.View(); !slices.Equal(v.Members, ids(0, 1, 2, 3)) {
					t.Fatalf("%v holds %s %v, want V", id, FormatEpoch(v.Epoch), v.Members)
				}
			}
			t.Logf("blocked as documented: %v", minority)
		})
	}
}
