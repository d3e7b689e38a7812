package member

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// startMember starts member self of the initial view ids (fan-out 2) under
// policy, on a scripted Env whose sent messages are cleared.
func startMember(t *testing.T, policy PartitionPolicy, ids []core.NodeID, self core.NodeID) (*Member, *coretest.Env) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Fanout = 2
	cfg.Partition = policy
	m, err := New(cfg, ids)
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(self, uint64(len(ids)))
	m.Start(env)
	env.TakeSent()
	return m, env
}

// takeBack is n2's proposal 3.n2 on n3's 2.n3, a dead root's proposal
// that excluded n1 from 1.n0 = [n0 n1 n2 n3 n4]: it drops n0 and takes n1
// back. In [n2 n3 n4 n1] (fan-out 2) n1 is a leaf under n3.
func takeBack() *Prepare {
	return &Prepare{Cause: CauseRootDead, Epoch: MakeEpoch(3, 2), Ancestry: []uint64{MakeEpoch(2, 3), MakeEpoch(1, 0)},
		Failed: []core.NodeID{0}, Joined: []Joiner{{ID: 1}}, Full: true, Members: []core.NodeID{2, 3, 4, 1}}
}

func sentOf[M core.Msg](env *coretest.Env) []M {
	var out []M
	for _, s := range env.TakeSent() {
		if m, ok := s.Msg.(M); ok {
			out = append(out, m)
		}
	}
	return out
}

// TestRootTakenBackByItsLineage: n1, root of its installed view after n0
// failed and driving its own proposal on it, is listed as a joiner by a
// proposal whose ancestry holds that view (a dead root's proposal between
// excluded n1). Under PartitionMajority it accepts: refusing, it and the
// other root refused each other for good (the oracle swarm, seeds 1207433
// and 1325516). Under PartitionPaper the sides merge instead, and it
// refuses (seed 166388).
func TestRootTakenBackByItsLineage(t *testing.T) {
	for _, c := range []struct {
		policy PartitionPolicy
		accept bool
	}{{PartitionMajority, true}, {PartitionPaper, false}} {
		m, env := startMember(t, c.policy, []core.NodeID{0, 1, 2, 3, 4}, 1)
		m.Handle(core.Failed{Node: 0})
		if !m.driving {
			t.Fatalf("%v: n1 does not drive a proposal after n0 failed", c.policy)
		}
		own := m.accepted.epoch
		env.TakeSent()
		p := takeBack()
		m.Receive(3, p)
		acks := sentOf[*Ack](env)
		accepted := m.accepted != nil && m.accepted.epoch == p.Epoch
		if accepted != c.accept || (len(acks) == 1) != c.accept {
			t.Fatalf("%v: n1 accepted %s: %v (%d ACKs), want %v", c.policy, FormatEpoch(p.Epoch), accepted, len(acks), c.accept)
		}
		if c.accept && m.driving {
			t.Fatalf("%v: n1 still drives %s", c.policy, FormatEpoch(own))
		}
	}
}

// TestHolderTakenBackAsksTheOtherRoot: n1 holds n0's proposal and is
// listed as a joiner by another root's proposal of its lineage. It
// refuses (n0's proposal may commit, and p does not descend from it) and
// asks n0 at once what became of its proposal, rather than at its commit
// timeout: n0 has often given it up (the oracle swarm, seed 1002924).
func TestHolderTakenBackAsksTheOtherRoot(t *testing.T) {
	m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4}, 1)
	q := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{MakeEpoch(1, 0)}, Failed: []core.NodeID{4}, Committed: true}
	m.Receive(0, q)
	if m.accepted == nil || m.accepted.epoch != q.Epoch {
		t.Fatalf("n1 does not hold %s", FormatEpoch(q.Epoch))
	}
	env.TakeSent()
	p := takeBack()
	m.Receive(3, p)
	var queried, acked bool
	for _, s := range env.TakeSent() {
		switch x := s.Msg.(type) {
		case *Query:
			queried = queried || s.To == 0 && x.Epoch == q.Epoch
		case *Ack:
			acked = true
		}
	}
	if acked || m.accepted.epoch != q.Epoch {
		t.Fatalf("n1 accepted %s while holding %s", FormatEpoch(p.Epoch), FormatEpoch(q.Epoch))
	}
	if !queried {
		t.Fatalf("n1 did not ask n0 about %s", FormatEpoch(q.Epoch))
	}
}

// TestMemberRefusesADescendantKeepingNoMajority: under PartitionMajority a
// member whose newest view is its installed view C refuses a proposal
// that descends from C through proposals it never acknowledged and keeps
// no majority of C; a root that built it counted majorities against older
// views and adopted proposals only, while C's majority may have moved on
// (the oracle swarm, seed 1741812: a fork). It answers VIEW_NACK with C.
// A descendant that keeps a majority of C is accepted.
func TestMemberRefusesADescendantKeepingNoMajority(t *testing.T) {
	for _, c := range []struct {
		members []core.NodeID
		accept  bool
	}{{[]core.NodeID{1, 2, 3, 5}, false}, {[]core.NodeID{1, 5, 6}, true}} {
		m, env := startMember(t, PartitionMajority, []core.NodeID{4, 5, 6}, 5)
		installed := m.cur.epoch
		// Built on X = 3.n1, a proposal of C's lineage n5 never saw.
		v, err := newViewAt(MakeEpoch(4, 1), c.members, nil, nil, m.cfg.Fanout)
		if err != nil {
			t.Fatal(err)
		}
		p := &Prepare{Cause: CauseRootDead, Epoch: v.epoch, Ancestry: []uint64{MakeEpoch(3, 1), installed},
			Full: true, Members: c.members}
		m.Receive(v.parent(5), p)
		var acked bool
		var nack *Nack
		for _, s := range env.TakeSent() {
			switch x := s.Msg.(type) {
			case *Ack:
				acked = true
			case *Nack:
				if s.To == 1 {
					nack = x
				}
			}
		}
		if acked != c.accept {
			t.Fatalf("%v: n5 acknowledged %s: %v, want %v", c.members, FormatEpoch(p.Epoch), acked, c.accept)
		}
		if !c.accept && (nack == nil || nack.View.Epoch != installed) {
			t.Fatalf("%v: n5 did not tell n1 of its installed view %s", c.members, FormatEpoch(installed))
		}
	}
}

// TestNeedViewAnswersNoGivenUpProposal: a parent answers a child's
// VIEW_NEED with the proposal it holds, or with the one it installed (the
// commit passed while the child lacked the base), but not with a proposal
// it gave up. Handed out so, an aborted proposal was accepted by a child
// that its root would never commit nor abort to; the child built on it
// after the root died and refused the live root's proposals for good (the
// oracle swarm, seeds 1101496 and 1203508, majority).
func TestNeedViewAnswersNoGivenUpProposal(t *testing.T) {
	m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4, 5, 6}, 1)
	base := m.cur
	// n6 fails: [n0 n1 n2 n3 n4 n5], n1's children are n3 and n4.
	p := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{base.epoch},
		Failed: []core.NodeID{6}, Committed: true}
	m.Receive(0, p)
	if m.accepted == nil || m.accepted.epoch != p.Epoch {
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
	if m.accepted != nil {
		t.Fatalf("n1 still holds %s after its root's abort", FormatEpoch(m.accepted.epoch))
	}
	m.Receive(3, &NeedView{Epoch: p.Epoch})
	if got := answers(); got != 0 {
		t.Fatalf("VIEW_NEED for a proposal given up: %d full Prepares to n3, want 0", got)
	}
}

// TestMergeFollowsTheViewsNewRoot: n1, in 1.n0 = [n0 n1 n2 n3 n4], learns
// from n3 of 5.n3, which excluded it, and asks n3 to admit it. n3 dies and
// a member of 5.n3 names its new root n4 for the same view: n1 asks n4,
// and asks n3 no more. Held to n3, it gave up after its tries and stayed
// in its old view, told by nobody again (the oracle swarm, seed 1691255).
// While n3 may live, n4 naming itself is not followed: a member cut off
// from the root names itself too (seed 1885079).
func TestMergeFollowsTheViewsNewRoot(t *testing.T) {
	m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4}, 1)
	e := MakeEpoch(5, 3)
	m.Receive(3, &Notice{Epoch: e, Root: 3})
	joinsTo := func() []core.NodeID {
		var to []core.NodeID
		for _, s := range env.TakeSent() {
			if r, ok := s.Msg.(*JoinRequest); ok && r.Alive {
				to = append(to, s.To)
			}
		}
		return to
	}
	if to := joinsTo(); len(to) != 1 || to[0] != 3 {
		t.Fatalf("after n3's notice n1 asked %v to admit it, want [n3]", to)
	}
	m.Receive(2, &Notice{Epoch: e, Root: 3})
	if to := joinsTo(); len(to) != 0 {
		t.Fatalf("a repeated notice made n1 ask %v again", to)
	}
	m.Receive(4, &Notice{Epoch: e, Root: 4})
	if to := joinsTo(); len(to) != 0 {
		t.Fatalf("n4 naming itself root while n3 may live made n1 ask %v", to)
	}
	m.Handle(core.Failed{Node: 3})
	joinsTo()
	m.Receive(4, &Notice{Epoch: e, Root: 4})
	if to := joinsTo(); len(to) != 1 || to[0] != 4 {
		t.Fatalf("after n4's notice naming itself root n1 asked %v, want [n4]", to)
	}
	if m.mergeRoot != 4 || m.mergeEpoch != e {
		t.Fatalf("n1 merges into %s by %v, want %s by n4", FormatEpoch(m.mergeEpoch), m.mergeRoot, FormatEpoch(e))
	}
}

// TestRefusedRootKeepsTheProposalItBuildsOn: n1 holds n0's 3.n0 = [n0 n1
// n2 n3 n4], built on 2.n0, a view n1 never installed. n0 dies and n1
// takes 3.n0 over; n2 refuses n1's proposal with its installed 2.n0. n1
// installs 2.n0 and keeps building on 3.n0, which may have committed
// (every member may have acknowledged it). Dropped with n1's own
// proposal, it left n1 free to accept proposals that abandon it, and its
// other holders, short of a majority of it, refused those proposals for
// good (the oracle swarm, seed 1380442).
func TestRefusedRootKeepsTheProposalItBuildsOn(t *testing.T) {
	m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4, 5, 6}, 1)
	first := m.cur.epoch
	b := FullView{Epoch: MakeEpoch(2, 0), Ancestry: []uint64{first}, Members: []core.NodeID{0, 1, 2, 3, 4, 5}}
	x := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(3, 0), Ancestry: []uint64{b.Epoch, first},
		Failed: []core.NodeID{5}, Committed: true, Full: true, Members: []core.NodeID{0, 1, 2, 3, 4}}
	m.Receive(0, x)
	if m.accepted == nil || m.accepted.epoch != x.Epoch {
		t.Fatalf("n1 does not hold %s", FormatEpoch(x.Epoch))
	}
	m.Handle(core.Failed{Node: 0})
	if !m.driving || m.adopted == nil || m.adopted.epoch != x.Epoch {
		t.Fatalf("n1 does not take %s over", FormatEpoch(x.Epoch))
	}
	own := m.accepted.epoch
	env.TakeSent()
	m.Receive(2, &Nack{Epoch: own, View: b})
	if m.cur.epoch != b.Epoch {
		t.Fatalf("n1 installed %s, want %s", FormatEpoch(m.cur.epoch), FormatEpoch(b.Epoch))
	}
	if n := m.newest(); n.epoch != x.Epoch && !n.descends(x.Epoch) {
		t.Fatalf("n1's newest is %s, which does not descend from %s", FormatEpoch(n.epoch), FormatEpoch(x.Epoch))
	}
}

// TestMemberKeepsAnAcknowledgedProposalItsRootNeverGaveUp: n5 acknowledged
// n3's 2.n3 = [n3 n4 n5 n6] (n3 then died, maybe after holding every ACK)
// and accepted n4's 3.n4, built on it. n4 replaces 3.n4 by 4.n4 on the
// installed view, which abandons 2.n3. n5 refuses it and falls back to
// 2.n3: n4 gave up its own proposal, not n3's, which only its members can
// now give up (n5 asks them). Accepted, 4.n4 took n5 out
// of the members that keep 2.n3's majority and another apart; the other
// holders of 2.n3, short of a majority of it, refused for good (the oracle
// swarm, seed 1816437).
func TestMemberKeepsAnAcknowledgedProposalItsRootNeverGaveUp(t *testing.T) {
	m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4, 5, 6}, 5)
	first := m.cur.epoch
	x := &Prepare{Cause: CauseRootDead, Epoch: MakeEpoch(2, 3), Ancestry: []uint64{first},
		Failed: []core.NodeID{0, 1, 2}, Committed: true}
	m.Receive(3, x)
	y := &Prepare{Cause: CauseRootDead, Epoch: MakeEpoch(3, 4), Ancestry: []uint64{x.Epoch, first},
		Failed: []core.NodeID{3}}
	m.Receive(4, y)
	if m.accepted == nil || m.accepted.epoch != y.Epoch {
		t.Fatalf("n5 does not hold %s", FormatEpoch(y.Epoch))
	}
	m.Handle(core.Failed{Node: 3})
	env.TakeSent()
	z := &Prepare{Cause: CauseRootDead, Epoch: MakeEpoch(4, 4), Ancestry: []uint64{first},
		Failed: []core.NodeID{0, 1, 2, 3}, Committed: true}
	m.Receive(4, z)
	var acked bool
	asked := map[core.NodeID]bool{}
	for _, s := range env.TakeSent() {
		switch q := s.Msg.(type) {
		case *Ack:
			acked = true
		case *Query:
			asked[s.To] = asked[s.To] || q.Epoch == x.Epoch
		}
	}
	if acked || m.accepted != nil && m.accepted.epoch == z.Epoch {
		t.Fatalf("n5 accepted %s, which abandons %s", FormatEpoch(z.Epoch), FormatEpoch(x.Epoch))
	}
	if !asked[4] || !asked[6] {
		t.Fatalf("n5 asked %v about %s, want its live members n4 and n6", asked, FormatEpoch(x.Epoch))
	}
	if n := m.newest(); n.epoch != x.Epoch {
		t.Fatalf("n5's newest is %s, want %s", FormatEpoch(n.epoch), FormatEpoch(x.Epoch))
	}
	if !m.vetoed[y.Epoch] {
		t.Fatalf("n5 does not know that %s was given up", FormatEpoch(y.Epoch))
	}
}

// TestHolderAsksAReporterOfTheViewItsProposalBuildsOn: n4 never saw 2.n0
// installed (a partition hid it) and holds n1's 3.n1, built on it. n5,
// which installed 2.n0, reports to n4 with 2.n0's epoch: n4 asks it what
// became of 2.n0. Not asking, n4 (root once n1 and n2 died) counted
// majorities in 1.n0, where it was short of one, while a majority of 2.n0
// lived and reported to it (the oracle swarm, seed 3061610).
func TestHolderAsksAReporterOfTheViewItsProposalBuildsOn(t *testing.T) {
	m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4, 5, 6}, 4)
	first := m.cur.epoch
	base := MakeEpoch(2, 0) // [n0 … n5]: n6 excluded
	x := &Prepare{Cause: CauseRootDead, Epoch: MakeEpoch(3, 1), Ancestry: []uint64{base, first},
		Failed: []core.NodeID{0}, Full: true, Members: []core.NodeID{1, 2, 3, 4, 5}}
	m.Receive(2, x)
	if m.accepted == nil || m.accepted.epoch != x.Epoch {
		t.Fatalf("n4 does not hold %s", FormatEpoch(x.Epoch))
	}
	env.TakeSent()
	m.Receive(5, &Report{Epoch: base, Failed: []Joiner{{ID: 0}}})
	asked := false
	for _, s := range env.TakeSent() {
		if q, ok := s.Msg.(*Query); ok && s.To == 5 && q.Epoch == base {
			asked = true
		}
	}
	if !asked {
		t.Fatalf("n4 did not ask n5 about %s", FormatEpoch(base))
	}
}

// TestVerdictOnARestartedMemberCountsItsNewIncarnation: n2 holds n0's
// 2.n0, which takes n1 back under the incarnation it restarted with. n2's
// detector then declares n1 failed: n1 is failed in 2.n0 (its newer
// process, the one the detector watches) as in the installed view (its
// former one). Counted failed in the installed view's incarnation only,
// n1, root of a later proposal, stayed alive for its holder, which waited
// for it for good (the oracle swarm, seeds 3743248 and 3867740).
func TestVerdictOnARestartedMemberCountsItsNewIncarnation(t *testing.T) {
	m, _ := startMember(t, PartitionPaper, []core.NodeID{0, 1, 2}, 2)
	first := m.cur.epoch
	x := &Prepare{Cause: CauseAliveNodeJoin, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{first},
		Failed: []core.NodeID{1}, Joined: []Joiner{{ID: 1, Inc: 77}}, Full: true, Members: []core.NodeID{0, 2, 1}, Incs: []Joiner{{ID: 1, Inc: 77}}}
	m.Receive(0, x)
	if m.accepted == nil || m.accepted.epoch != x.Epoch || m.accepted.inc(1) == m.cur.inc(1) {
		t.Fatalf("n2 does not hold %s with n1's new incarnation", FormatEpoch(x.Epoch))
	}
	m.Handle(core.Failed{Node: 1})
	if !m.isFailed(m.accepted, 1) || !m.isFailed(m.cur, 1) {
		t.Fatalf("n1 failed in %s: %v, in %s: %v; want both", FormatEpoch(x.Epoch), m.isFailed(m.accepted, 1), FormatEpoch(first), m.isFailed(m.cur, 1))
	}
	m.pruneFailed()
	if !m.isFailed(m.accepted, 1) {
		t.Fatalf("n1 is no longer failed in %s once the verdicts were visited again", FormatEpoch(x.Epoch))
	}
}

// TestInstallDropsStaleJoins: a member that holds the join request of a
// node's former self (queued while it was root of its side) drops it when
// the view it installs admits that node under another incarnation, and
// hands the root the requests the view says nothing about. Handed to the
// root, the stale request took the admitted process out again (the oracle
// swarm, seed 5342883, majority).
func TestInstallDropsStaleJoins(t *testing.T) {
	m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2}, 2)
	m.pendingJoins = []pendingJoin{{Joiner{ID: 1, Inc: 5}, true, 0}, {Joiner{ID: 9, Inc: 3}, false, 0}}
	x := &Prepare{Cause: CauseAliveNodeJoin, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{m.cur.epoch},
		Failed: []core.NodeID{1}, Joined: []Joiner{{ID: 1, Inc: 77}}, Full: true, Members: []core.NodeID{0, 2, 1}, Incs: []Joiner{{ID: 1, Inc: 77}}}
	m.Receive(0, x)
	if m.accepted == nil || m.accepted.epoch != x.Epoch {
		t.Fatalf("n2 does not hold %s", FormatEpoch(x.Epoch))
	}
	env.TakeSent()
	m.Receive(0, &Commit{Epoch: x.Epoch})
	if m.cur.epoch != x.Epoch {
		t.Fatalf("n2 installed %s, want %s", FormatEpoch(m.cur.epoch), FormatEpoch(x.Epoch))
	}
	var handed []Joiner
	for _, r := range sentOf[*JoinRequest](env) {
		handed = append(handed, r.Joiners...)
	}
	if len(handed) != 1 || handed[0] != (Joiner{ID: 9, Inc: 3}) {
		t.Errorf("n2 handed the root the joins %v, want n9's alone", handed)
	}
}

// TestRefusedRootJoinsHeldLineage: n0, root of its installed view 1.n0 =
// [n0 n1 n2 n3 n4], proposes to drop n1 once n1 failed, and n3 refuses:
// it acknowledged 2.n1, dead n1's proposal on 1.n0 that excludes n0,
// which may have committed. Under PartitionMajority n0 tells n3 about its
// installed view and joins 2.n1's lineage, asking its next live root
// (n2); refused for good otherwise, the live members stayed blocked (the
// oracle swarm, seeds 3476017, 6235739 and 6296744). Not for a proposal
// whose root lives (it says itself what became of it), nor under
// PartitionPaper.
func TestRefusedRootJoinsHeldLineage(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy PartitionPolicy
		root   core.NodeID // the held proposal's root
		joins  bool
	}{
		{"majority, dead root", PartitionMajority, 1, true},
		{"majority, live root", PartitionMajority, 2, false},
		{"paper, dead root", PartitionPaper, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, env := startMember(t, c.policy, []core.NodeID{0, 1, 2, 3, 4}, 0)
			installed := m.cur.epoch
			m.Handle(core.Failed{Node: 1})
			if !m.driving {
				t.Fatal("n0 does not drive a proposal after n1 failed")
			}
			mine := m.accepted.epoch
			env.TakeSent()
			held := FullView{Epoch: MakeEpoch(2, c.root), Ancestry: []uint64{installed}, Members: []core.NodeID{1, 2, 3, 4}}
			if c.root == 2 {
				held.Members = []core.NodeID{2, 3, 4, 1}
			}
			m.Receive(3, &Nack{Epoch: mine, Pending: true, View: held})
			sent := env.TakeSent()
			var synced, asked bool
			for _, s := range sent {
				switch x := s.Msg.(type) {
				case *Sync:
					synced = synced || s.To == 3 && x.View.Epoch == installed
				case *JoinRequest:
					asked = asked || s.To == 2
				}
			}
			if synced != c.joins || asked != c.joins {
				t.Errorf("n0 told n3 its installed view: %v, asked n2 to join: %v; want %v (sent %v)", synced, asked, c.joins, sent)
			}
		})
	}
}

// TestOutsiderReporterOfAnAncestorIsAsked: n4 installed 1.n0 = [n0 … n6]
// and holds dead n1's 3.n1, built on 2.n0, which admitted n7, and which
// n4 never saw installed; 3.n1 excludes n0 and n7. n7, an outsider of
// both views n4 knows, reports with epoch 2.n0: n4 asks it what became of
// 2.n0 (it may have installed it), and still tells it that it is out.
// Ignored as an outsider's, the report was the only word of the commit a
// root in a minority of 1.n0 could get (the oracle swarm, seed 3498115).
// A reporter whose epoch is not in the held proposal's ancestry is not
// asked.
func TestOutsiderReporterOfAnAncestorIsAsked(t *testing.T) {
	for _, c := range []struct {
		name  string
		epoch uint64
		asked bool
	}{
		{"ancestor", MakeEpoch(2, 0), true},
		{"unrelated view", MakeEpoch(2, 5), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, env := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4, 5, 6}, 4)
			first := m.cur.epoch
			base := MakeEpoch(2, 0) // [n0 … n6 n7]
			x := &Prepare{Cause: CauseRootDead, Epoch: MakeEpoch(3, 1), Ancestry: []uint64{base, first},
				Failed: []core.NodeID{0, 7}, Full: true, Members: []core.NodeID{1, 2, 3, 4, 5, 6}}
			m.Receive(2, x)
			if m.accepted == nil || m.accepted.epoch != x.Epoch {
				t.Fatalf("n4 does not hold %s", FormatEpoch(x.Epoch))
			}
			env.TakeSent()
			m.Receive(7, &Report{Epoch: c.epoch, Failed: []Joiner{{ID: 0}}})
			var asked, told bool
			for _, s := range env.TakeSent() {
				switch q := s.Msg.(type) {
				case *Query:
					asked = asked || s.To == 7 && q.Epoch == c.epoch
				case *Notice:
					told = told || s.To == 7
				}
			}
			if asked != c.asked || !told {
				t.Errorf("n4 asked n7 about %s: %v, told it it is out: %v; want %v, true", FormatEpoch(c.epoch), asked, told, c.asked)
			}
		})
	}
}

// TestBranchLeft: a node's installed view proves that a proposal of
// another branch never committed when it descends from the proposal's
// base and not from the proposal, and is newer.
func TestBranchLeft(t *testing.T) {
	v1, v2, p3 := MakeEpoch(1, 0), MakeEpoch(2, 1), MakeEpoch(3, 0)
	p := &view{epoch: MakeEpoch(2, 0), ancestry: []uint64{v1}}
	for _, c := range []struct {
		name string
		x    *view
		want bool
	}{
		{"sibling branch", &view{epoch: MakeEpoch(3, 1), ancestry: []uint64{v2, v1}}, true},
		{"descends from it", &view{epoch: MakeEpoch(4, 1), ancestry: []uint64{p3, p.epoch, v1}}, false},
		{"older", &view{epoch: MakeEpoch(1, 9), ancestry: []uint64{v1}}, false},
		{"base unknown", &view{epoch: MakeEpoch(3, 1), ancestry: []uint64{v2}}, false},
		{"the base itself", &view{epoch: v1}, false},
	} {
		if got := branchLeft(c.x, p); got != c.want {
			t.Errorf("%s: branchLeft(%s, %s) = %v, want %v", c.name, FormatEpoch(c.x.epoch), FormatEpoch(p.epoch), got, c.want)
		}
	}
}

// TestHolderDropsALeftBranch: n3 holds dead n0's 2.n0 on 1.n0, which may
// have committed as far as it knows. n5, no member of it, tells it (a
// VIEW_SYNC with an abort) its installed view 3.n1, built on 1.n0 through
// 2.n1, not on 2.n0. Under PartitionMajority, where the installed views
// form one history, 2.n0 never committed: n3 drops it. Held, it refused
// the proposals of the lineage that had left it for good, and nobody it
// asked could free it (the oracle swarm, seed 4228535). Not under
// PartitionPaper, nor from a view that descends from 2.n0.
func TestHolderDropsALeftBranch(t *testing.T) {
	for _, c := range []struct {
		name     string
		policy   PartitionPolicy
		ancestry func(first, held uint64) []uint64
		drops    bool
	}{
		{"majority, left", PartitionMajority, func(first, _ uint64) []uint64 { return []uint64{MakeEpoch(2, 1), first} }, true},
		{"paper, left", PartitionPaper, func(first, _ uint64) []uint64 { return []uint64{MakeEpoch(2, 1), first} }, false},
		{"majority, descends", PartitionMajority, func(first, held uint64) []uint64 { return []uint64{held, first} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, env := startMember(t, c.policy, []core.NodeID{0, 1, 2, 3, 4}, 3)
			first := m.cur.epoch
			m.Handle(core.Failed{Node: 0})
			held := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{first},
				Failed: []core.NodeID{4}, Full: true, Members: []core.NodeID{0, 1, 2, 3}}
			m.Receive(1, held)
			if m.accepted == nil || m.accepted.epoch != held.Epoch {
				t.Fatalf("n3 does not hold %s", FormatEpoch(held.Epoch))
			}
			env.TakeSent()
			x := FullView{Epoch: MakeEpoch(3, 1), Ancestry: c.ancestry(first, held.Epoch), Members: []core.NodeID{1, 2, 4, 5}}
			m.Receive(5, &Sync{View: x, Abort: held.Epoch})
			if dropped := m.accepted == nil || m.accepted.epoch != held.Epoch; dropped != c.drops {
				t.Errorf("n3 dropped %s: %v, want %v", FormatEpoch(held.Epoch), dropped, c.drops)
			}
		})
	}
}

// TestRootOfAHeldProposalAdoptsIt: n2 learns that n0 failed, then gets
// n0's 2.n0 (sent before n0 died), in which n2 comes right after n0: as
// it accepts 2.n0 it is its next root, and proposes on it at once. The
// proposal is built on 2.n0, which n2 must hold as adopted (it may have
// committed). Overwritten once the acceptance returned, the adoption was
// lost: the root then yielded to a competing proposal that abandons 2.n0,
// and 2.n0's other holders refused everything else for good (the oracle
// swarm, seed 3124975).
func TestRootOfAHeldProposalAdoptsIt(t *testing.T) {
	m, _ := startMember(t, PartitionMajority, []core.NodeID{0, 1, 2, 3, 4}, 2)
	first := m.cur.epoch
	m.Handle(core.Failed{Node: 0})
	p := &Prepare{Cause: CauseFailedNode, Epoch: MakeEpoch(2, 0), Ancestry: []uint64{first},
		Failed: []core.NodeID{1}, Full: true, Members: []core.NodeID{0, 2, 3, 4}}
	m.Receive(0, p)
	if !m.driving || m.accepted.base() != p.Epoch {
		t.Fatalf("n2 does not drive a proposal on %s (driving %v)", FormatEpoch(p.Epoch), m.driving)
	}
	if m.adopted == nil || m.adopted.epoch != p.Epoch {
		t.Errorf("n2 drives %s without holding %s as adopted", FormatEpoch(m.accepted.epoch), FormatEpoch(p.Epoch))
	}
}

// TestRootProvesALeftBranchToAJoiner: n2 installed 3.n2 = [n2 n3 n4],
// built on 1.n0 = [n0 … n4], and admits n1, which refuses: it holds dead
// n0's 2.n0 = [n0 n1 n3], also built on 1.n0, which may have committed as
// far as n1 knows. Under PartitionMajority n2's view proves that 2.n0
// never committed, and n2 sends it to n1 with an abort of 2.n0; refused
// for good otherwise (the oracle swarm, seed 4228535). Not under
// PartitionPaper, nor when n2's view descends from the held proposal.
func TestRootProvesALeftBranchToAJoiner(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy PartitionPolicy
		onHeld bool // n2's view is built on the held proposal
		proves bool
	}{
		{"majority, left", PartitionMajority, false, true},
		{"paper, left", PartitionPaper, false, false},
		{"majority, descends", PartitionMajority, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, env := startMember(t, c.policy, []core.NodeID{0, 1, 2, 3, 4}, 2)
			first := m.cur.epoch
			held := MakeEpoch(2, 0)
			ancestry := []uint64{first}
			if c.onHeld {
				ancestry = []uint64{held, first}
			}
			installed := FullView{Epoch: MakeEpoch(3, 2), Ancestry: ancestry, Members: []core.NodeID{2, 3, 4}}
			m.Receive(3, &Sync{View: installed})
			if m.cur.epoch != installed.Epoch {
				t.Fatalf("n2 installed %s, want %s", FormatEpoch(m.cur.epoch), FormatEpoch(installed.Epoch))
			}
			m.Receive(1, &JoinRequest{Alive: true, From: 1, Epoch: held, Joiners: []Joiner{{ID: 1}}})
			if !m.driving || !isJoiner(m.acceptedPrep, 1) {
				t.Fatalf("n2 does not drive a proposal admitting n1 (driving %v)", m.driving)
			}
			env.TakeSent()
			m.Receive(1, &Nack{Epoch: m.accepted.epoch, Pending: true,
				View: FullView{Epoch: held, Ancestry: []uint64{first}, Members: []core.NodeID{0, 1, 3}}})
			proved := false
			for _, s := range sentOf[*Sync](env) {
				proved = proved || s.Abort == held && s.View.Epoch == installed.Epoch
			}
			if proved != c.proves {
				t.Errorf("n2 sent n1 its view with an abort of %s: %v, want %v", FormatEpoch(held), proved, c.proves)
			}
		})
	}
}
