// The root's side of the protocol (proposals, acknowledgements, commits,
// joins) in one file, a little under 700 lines: it is one state machine.

package member

import (
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// rootStep is the root's decision procedure, run whenever its knowledge
// changes: restart a proposal a failure made hopeless (§3.5), take over a
// dead root's proposal (§3.6), check the partition policy, and propose the
// next view with every failure and join known so far.
func (m *Member) rootStep() {
	if m.cur == nil {
		return
	}
	if m.driving {
		if !m.restart && !m.hopeless(m.acc) {
			return // joins wait for the running proposal to finish
		}
		// A joiner that failed to acknowledge is dropped: it asks again if it
		// lives (its failure is not remembered: it is no member).
		for _, j := range m.accMsg.Joined {
			if m.failed[j.ID] && !m.cur.has(j.ID) {
				m.pjoins = slices.DeleteFunc(m.pjoins, func(p pendingJoin) bool { return p.Joiner == j })
			}
		}
		m.abort("failure during stabilization")
	}
	m.restart = false
	if m.acc != nil && EpochRoot(m.acc.epoch) == m.self {
		m.dropAcc() // this node's own abandoned proposal: it never committed
	}
	// The base: a pending proposal of a root this node replaces, else the
	// installed view.
	base := m.cur
	if m.acc != nil {
		base = m.acc
	}
	if m.rootOf(base) != m.self {
		m.reportFailures()
		m.forwardJoins()
		return
	}
	failed, joined := m.changes(base)
	if len(failed) == 0 && len(joined) == 0 {
		return
	}
	// When base is the proposal of a dead root, this root adopts it: it may
	// have committed somewhere, so the new view descends from it; but as it
	// may as well not have, nobody installs it (Prepare.Committed is false).
	v, err := base.apply(MakeEpoch(m.maxCounter+1, m.self), nil, failed, joined, m.cfg.Fanout)
	if err != nil {
		panic(fmt.Sprintf("member: %v cannot derive its proposal: %v", m.self, err))
	}
	if m.cfg.Partition == PartitionMajority {
		// The new view must keep a strict majority of the last installed
		// view, and at least half of an adopted proposal A: a view that
		// descends from A and committed would hold a strict majority of A,
		// so it would share a member with the new view, and that member,
		// holding the newer view, refuses the new one.
		if alive := kept(m.cur, v); 2*alive <= m.cur.size() {
			m.enterMinority(m.cur, alive)
			return
		}
		if alive := kept(base, v); 2*alive < base.size() {
			m.enterMinority(base, alive)
			return
		}
		// If A did not commit, the last installed view of its lineage is
		// A's own base B. When this node never installed B (a joiner that
		// A admitted, a member that missed B's commit), the check against
		// its installed view says nothing about B: B's members may go on
		// without this side, and a view holding none of them forked the
		// history (the oracle swarm, seed 108951: a joiner adopted a join
		// proposal on a three-member view and dropped all three). So the
		// new view must keep a strict majority of B too, counted from A's
		// change when A says its root installed B. (When B is itself a dead
		// root's proposal, or A was learnt without its change, this node
		// cannot count B: that case is open, see the package doc.)
		if base != m.cur && base.base() != m.cur.epoch {
			if alive, size, ok := keptOfBase(base, v); ok && 2*alive <= size {
				m.enterMinority(base, alive)
				return
			}
		}
	}
	m.propose(v, base == m.cur)
}

// keptOfBase counts the members of a's base (a minus its joiners plus its
// failed members) that stay in v with the incarnation they had there, and
// the base's size; ok is false unless a carries its change from a base
// its root installed. A failed member of the base is not counted as kept
// (its incarnation there is not known).
func keptOfBase(a, v *view) (alive, size int, ok bool) {
	if !a.delta || !a.committed {
		return 0, 0, false
	}
	for i, id := range a.list() {
		if slices.ContainsFunc(a.joined, func(j Joiner) bool { return j.ID == id }) {
			continue
		}
		if v.has(id) && v.inc(id) == a.incAt(i) {
			alive++
		}
	}
	return alive, a.size() - len(a.joined) + len(a.failed), true
}

// kept counts the members of ref that stay in v with the same incarnation.
func kept(ref, v *view) int {
	n := 0
	for _, id := range ref.list() {
		if v.has(id) && v.inc(id) == ref.inc(id) {
			n++
		}
	}
	return n
}

// hopeless reports whether proposal v can no longer commit: one of its
// members failed or is re-joining with a new incarnation.
func (m *Member) hopeless(v *view) bool {
	if len(m.failedIn(v)) > 0 {
		return true
	}
	for _, j := range m.pjoins {
		if v.has(j.ID) && v.inc(j.ID) != j.Inc {
			return true
		}
	}
	return false
}

// changes returns what the next proposal on base does: the failed members
// (in base order; a re-joining member is among them) and the joiners.
func (m *Member) changes(base *view) ([]core.NodeID, []Joiner) {
	failed := m.failedIn(base)
	var joined []Joiner
	kept := m.pjoins[:0]
	for _, j := range m.pjoins {
		switch {
		case base.has(j.ID) && base.inc(j.ID) == j.Inc:
			if !m.isFailed(base, j.ID) {
				continue // already a member: nothing to do
			}
			// Excluded now, admitted again once the exclusion is installed.
			kept = append(kept, j)
			continue
		case base.has(j.ID):
			if m.failed[j.ID] && slices.Contains(m.failedInc[j.ID], j.Inc) {
				continue // the new incarnation failed too; it will ask again
			}
			if !slices.Contains(failed, j.ID) {
				failed = append(failed, j.ID) // a recovered process re-joins
			}
		case m.failed[j.ID]:
			// A joiner that did not acknowledge: it will ask again.
			m.unmark(j.ID)
			continue
		}
		kept = append(kept, j)
		joined = append(joined, j.Joiner)
	}
	m.pjoins = kept
	if base != m.cur {
		// The adopted proposal may have dropped members of the installed
		// view that are alive as far as this node knows: take them back
		// (they hold the installed view, which the new view descends from).
		// Under PartitionMajority this keeps the majority of the installed
		// view that the new view needs.
		for _, id := range m.cur.list() {
			if !base.has(id) && !m.failed[id] && !slices.ContainsFunc(joined, func(j Joiner) bool { return j.ID == id }) {
				joined = append(joined, Joiner{id, m.cur.inc(id)})
			}
		}
	}
	if len(failed) > 1 {
		slices.SortFunc(failed, func(a, b core.NodeID) int { return base.pos(a) - base.pos(b) })
	}
	return failed, joined
}

// propose sends v (its base minus the failed members plus the joiners) down
// its tree (Figure 3, Regroup). committed says whether the base is the
// installed view.
func (m *Member) propose(v *view, committed bool) {
	m.maxCounter++
	epoch := v.epoch
	if EpochCounter(epoch) != m.maxCounter || v.root() != m.self {
		panic(fmt.Sprintf("member: %v proposes view %s rooted at %v", m.self, FormatEpoch(epoch), v.root()))
	}
	failed, joined := v.failed, v.joined
	v.committed = committed
	m.forgetRejoined(joined)
	base := m.cur
	m.adopted = nil
	if !committed {
		base = m.acc
		m.adopted = base
	}
	cause := causeOf(base, m.self, failed, joined)
	p := &Prepare{Cause: cause, Epoch: epoch, Ancestry: v.ancestry, Failed: failed, Joined: joined, Committed: committed, v: v}
	began := m.now()
	for _, f := range failed {
		if t, ok := m.failedAt[f]; ok && t < began {
			began = t
		}
	}
	for _, j := range m.pjoins {
		if j.at < began {
			began = j.at
		}
	}
	m.began = began
	m.acc, m.accMsg, m.accFull, m.accParent = v, p, nil, core.None
	m.lastPrep = p
	m.acked.reset(v, m.at(v))
	m.ackSent, m.ackResent = false, 0
	m.driving = true
	m.sendDown(v, p)
	m.env.Emit(StabilizationStarted{Epoch: epoch, Cause: cause, Began: began, At: m.now(), Failed: failed, Joined: joinerIDs(joined)})
	if len(m.acked.kids) == 0 {
		m.stable()
		return
	}
	m.arm(tAck, m.ackWait(v), epoch)
}

// causeOf picks the paper's message for a view change.
func causeOf(base *view, root core.NodeID, failed []core.NodeID, joined []Joiner) Cause {
	rejoin := func(id core.NodeID) bool {
		return slices.ContainsFunc(joined, func(j Joiner) bool { return j.ID == id })
	}
	var before, after int // failed members before and after the new root
	rootPos := base.pos(root)
	for _, f := range failed {
		if rejoin(f) {
			continue
		}
		if base.pos(f) < rootPos {
			before++
		} else {
			after++
		}
	}
	switch {
	case before > 0 && after > 0:
		return CauseRootAndNodeFailure
	case before > 0:
		return CauseRootDead
	case after > 0:
		return CauseFailedNode
	}
	for _, j := range joined {
		if !base.has(j.ID) {
			return CauseNewNodeJoin
		}
	}
	return CauseAliveNodeJoin
}

// stable is reached when the root holds every child's ACK: the view is
// stable (§3.4), the root installs it and commits it down the tree, and
// welcomes the joiners (JOIN_DET_ACK, §3.7).
func (m *Member) stable() {
	v := m.acc
	m.env.Emit(Stabilized{Epoch: v.epoch, Began: m.began, At: m.now(), Members: v.size()})
	joined := m.accMsg.Joined
	m.pjoins = slices.DeleteFunc(m.pjoins, func(j pendingJoin) bool {
		return v.has(j.ID) && v.inc(j.ID) == j.Inc
	})
	m.dropAcc()
	m.install(v)
	m.forwardCommit()
	for _, j := range joined {
		m.send(j.ID, &JoinDetAck{Epoch: v.epoch})
	}
	m.rootStep()
}

// abort abandons the root's running proposal.
func (m *Member) abort(reason string) {
	if !m.driving {
		return
	}
	m.env.Emit(StabilizationAborted{Epoch: m.acc.epoch, At: m.now(), Reason: reason})
	m.dropAcc()
	m.restoreAdopted()
}

// enterMinority stops a root whose side holds no majority of base
// (PartitionMajority) and tells the side.
func (m *Member) enterMinority(base *view, alive int) {
	if !m.waits[tMinority].armed {
		m.arm(tMinority, m.cfg.ReportRetry, base.epoch)
	}
	if m.minority == base.epoch {
		return
	}
	m.minority = base.epoch
	m.env.Emit(Minority{Epoch: base.epoch, Alive: alive, Size: base.size()})
	n := &MinorityNotice{Epoch: base.epoch, Alive: uint32(alive), Size: uint32(base.size())}
	for _, id := range base.list() {
		if !m.failed[id] {
			m.send(id, n)
		}
	}
}

// retryMinority is the minority root trying again: failures its own
// detector does not vouch for (acknowledgements that timed out, other
// nodes' reports) are forgiven, and the next proposal shows who is there;
// true failures are found again (reports come back when members accept the
// proposal, dead nodes do not acknowledge it).
func (m *Member) retryMinority() {
	if m.minority == 0 || m.cur == nil || m.driving {
		return
	}
	for id := range m.soft {
		if _, det := m.detected[id]; !det {
			m.unmark(id)
		}
	}
	if m.acc != nil && m.rootGone(m.acc) {
		// The base this root adopts may be what keeps it in a minority:
		// ask the proposal's members whether it can have committed.
		m.queryOutcome()
	}
	m.rootStep()
}

func (m *Member) onMinority(from core.NodeID, x *MinorityNotice) {
	if m.cur == nil || !m.newest().has(from) || m.minority == x.Epoch {
		return
	}
	m.minority = x.Epoch
	m.env.Emit(Minority{Epoch: x.Epoch, Alive: int(x.Alive), Size: int(x.Size)})
}

// onNack handles a member's refusal of this node's proposal.
func (m *Member) onNack(from core.NodeID, k *Nack) {
	m.observe(k.Epoch)
	m.observe(k.View.Epoch)
	if m.cur == nil {
		return
	}
	v := k.v
	if v == nil {
		var err error
		if v, err = newView(k.View.Epoch, k.View.Members, k.View.Ancestry, k.View.Incs, m.cfg.Fanout); err != nil {
			return
		}
	}
	mine := m.driving && m.acc.epoch == k.Epoch
	if mine && k.Pending && EpochRoot(v.epoch) == from && v.has(m.self) && from != m.self && v.base() == m.acc.base() {
		// Two roots compete with proposals on the same base (each believes
		// the other failed); the refuser is driving v. The higher epoch
		// wins: this root yields to v, or proposes again above the counter
		// it just saw, and the other yields when it is refused. (Nothing is
		// lost by yielding: both proposals replace the same view.)
		if v.epoch < k.Epoch {
			m.restart = true
			m.rootStep()
			return
		}
		m.abort(fmt.Sprintf("yields to %v's %s", from, FormatEpoch(v.epoch)))
		m.unmark(from)
		m.dropAcc()
		m.acc, m.accParent = v, core.None
		m.hold(v)
		m.arm(tCommit, m.commitWait(v), v.epoch)
		m.pruneFailed()
		m.afterChange()
		return
	}
	if mine && isJoiner(m.accMsg, from) && !m.cur.has(from) {
		switch {
		case !v.has(m.self) && v.epoch > m.cur.epoch && (!k.Pending || m.cfg.Partition != PartitionMajority || mayDescend(v.epoch, v.ancestry, m.cur.epoch)):
			// The joiner's lineage is ahead of this one: merge into it.
			// (Under PartitionMajority not into a proposal that cannot
			// descend from this node's installed view: a minority's, which
			// must not take the primary's members.)
			m.evicted(v.epoch, m.rootOf(v), from)
		case k.Pending:
			// The joiner is changing views in its old lineage, numbered at
			// or above the proposal: propose again with a higher epoch
			// (observe raised the counter). Or it holds a dead root's
			// proposal of a branch that this node's installed view has
			// left: that one never committed, and the joiner, which could
			// not know, refused every proposal for good while nobody it
			// asked could tell it so (the oracle swarm, seed 4228535,
			// majority). Tell it, with the view that proves it.
			if m.cfg.Partition == PartitionMajority && branchLeft(m.cur, v) {
				m.send(from, &Sync{View: m.cur.full(), Abort: v.epoch, v: m.cur})
			}
			m.restart = true
			m.rootStep()
		default:
			// The joiner no longer wants to join: go on without it.
			m.pjoins = slices.DeleteFunc(m.pjoins, func(j pendingJoin) bool { return j.ID == from })
			m.restart = true
			m.rootStep()
		}
		return
	}
	// A refusal of the running proposal matters if the refuser holds
	// anything newer than the installed view; any other only if it tells of
	// a view newer than everything this node knows.
	known := m.cur.epoch
	if m.acc != nil && !mine {
		known = m.acc.epoch
	}
	if v.epoch <= known || (m.acc != nil && v.epoch == m.acc.epoch) || !v.has(from) {
		return // stale: the refuser will time out and re-join
	}
	if !v.has(m.self) {
		switch {
		case !k.Pending:
			m.evicted(v.epoch, m.rootOf(v), from) // an installed view excludes this node
		case mine && m.cfg.Partition == PartitionMajority && m.adopted == nil && m.rootGone(v) && v.descends(m.cur.epoch):
			// The refuser holds a dead root's proposal on this root's
			// installed view that excludes this root, and it acknowledged
			// it: the proposal may have committed (its root, and members
			// that installed it, may be gone), so no view of this lineage
			// may leave it out, and its holders refuse this root for good
			// (the oracle swarm, seeds 3476017, 6235739 and 6296744,
			// majority: they never saw the installed view, and counted
			// majorities in an older one). As Paxos adopts a value that
			// may have been chosen, this root joins the proposal's lineage
			// instead, which takes it back, and tells the refuser about
			// its installed view, against which the lineage's next root
			// counts the majority of its proposal.
			m.send(from, &Sync{View: m.cur.full(), v: m.cur})
			m.evicted(v.epoch, m.rootOf(v), from)
		}
		return
	}
	if k.Pending && EpochRoot(v.epoch) == m.self {
		return // a proposal this node abandoned: it knows it never committed
	}
	if k.Pending && m.vetoed[v.epoch] {
		// Known never to commit: pass the news on (as a member of it).
		m.send(from, &Sync{View: m.cur.full(), Abort: v.epoch, v: m.cur})
		return
	}
	if v.inc(m.self) != m.inc {
		return
	}
	if k.Pending && m.acc != nil && supersedes(m.acc.epoch, m.acc.ancestry, v.epoch) {
		return // the refuser holds a proposal that this node's replaces
	}
	if k.Pending {
		// Adopt an uncommitted proposal only if it descends from the newest
		// view that may have committed as far as this node knows (its
		// installed view, or the dead root's proposal it adopted or holds);
		// otherwise the refuser holds a competing proposal: not this node's
		// business, the refuser will time out or learn of this one.
		known := m.cur
		switch {
		case m.driving && m.adopted != nil:
			known = m.adopted
		case !m.driving && m.acc != nil:
			known = m.acc
		}
		if !v.descends(known.epoch) && !(known != m.cur && supersedes(v.epoch, v.ancestry, known.epoch)) {
			if mine && known == m.adopted && known.has(from) && !m.vetoed[known.epoch] {
				// A member of the dead root's proposal this root builds on
				// holds a competing one: ask it about the adopted one. If it
				// never acknowledged it, the adopted proposal cannot have
				// committed, and the answer (an abort) frees this root from
				// it; otherwise the two roots refused each other's proposals
				// for good (the oracle swarm, seed 318884, majority).
				m.send(from, &Query{Epoch: known.epoch})
			}
			return
		}
		if !mayDescend(v.epoch, v.ancestry, known.epoch) {
			// v's lineage holds a later proposal of known's root, and
			// cannot descend from known: its root abandoned known, which
			// never committed. Say so to whoever holds it and asks
			// (VIEW_QUERY): this node may have acknowledged it, and
			// without this it stayed silent, as one whose ACK may have
			// committed it, while the holder waited for ever (the oracle
			// swarm, seed 239171, majority).
			put(&m.vetoed, known.epoch, true)
		}
	}
	if m.driving {
		m.abort(fmt.Sprintf("refused by %v, which holds %s", from, FormatEpoch(v.epoch)))
	}
	if k.Pending {
		// An uncommitted proposal this node did not know: it may have
		// committed, so it becomes the base of whatever comes next.
		m.dropAcc()
		m.acc, m.accParent = v, core.None
		m.hold(v)
		m.arm(tCommit, m.commitWait(v), v.epoch)
		m.pruneFailed()
	} else {
		// The refuser installed v, newer than this node's view. This node's
		// own proposal is over; another root's proposal it holds (the dead
		// root's one its own was built on, back in hand after the abort)
		// may have committed, and stays held if it descends from v (install
		// drops it otherwise). Dropped, it left this node free to accept
		// proposals that abandon it, while its other holders, short of a
		// majority of it, refused those for good (the oracle swarm, seed
		// 1380442, majority).
		if m.acc != nil && EpochRoot(m.acc.epoch) == m.self {
			m.dropAcc()
		}
		m.install(v)
	}
	m.afterChange()
}

// ---------------------------------------------------------------------------
// Joins (§3.7, Figure 3(c)).

// sendJoin asks to be admitted: NEW_NODE or NODE_ALIVE to the next node of
// the list, or, when merging after a partition, to the root of the view that
// excluded this node.
func (m *Member) sendJoin() {
	req := &JoinRequest{Alive: m.alive || m.cur != nil, From: m.self, Epoch: m.floor, Joiners: []Joiner{{m.self, m.inc}}}
	if n := m.newest(); n != nil && n.epoch > req.Epoch {
		req.Epoch = n.epoch
	}
	to := m.mergeRoot
	if m.mergeEpoch != 0 {
		// Merging: ask the root of the newer view, or, every other try or
		// when the root is dead or unknown, the live member that told.
		m.mergeTries++
		if m.mergeVia != core.None && (to == core.None || m.failed[to] || m.mergeTries%2 == 0) {
			to = m.mergeVia
		}
	}
	if m.mergeEpoch == 0 {
		for range m.contacts {
			c := m.contacts[m.nextContact%len(m.contacts)]
			m.nextContact++
			if c != m.self {
				to = c
				break
			}
		}
	} else if n := m.newest(); n != nil && m.rootOf(n) == m.self {
		// The root of a losing side brings its whole side along.
		for _, id := range n.list() {
			if id != m.self && !m.failed[id] {
				req.Joiners = append(req.Joiners, Joiner{id, n.inc(id)})
			}
		}
	}
	m.send(to, req)
	m.arm(tJoin, m.cfg.JoinRetry, 0)
}

func (m *Member) onJoinRequest(from core.NodeID, r *JoinRequest) {
	if m.cur == nil {
		return
	}
	m.observe(r.Epoch)
	n := m.newest()
	for _, j := range r.Joiners {
		if j.ID == r.From && n.has(j.ID) && n.inc(j.ID) != j.Inc && !m.isFailed(n, j.ID) && j.ID != m.self {
			// A member asks to join under a new incarnation: its former
			// self has crashed, whatever the detector says (it may have
			// restarted too fast to be noticed). It may have been the root.
			m.markFailed(j.ID, n.inc(j.ID), true)
			if m.rootOf(n) != m.self {
				m.reportFailures()
			}
		}
	}
	if root := m.rootOf(n); root != m.self {
		if r.Hops < maxJoinHops {
			fwd := *r
			fwd.Hops++
			m.send(root, &fwd)
		}
		return
	}
	for _, j := range r.Joiners {
		if n.has(j.ID) {
			if j.ID != r.From || j.ID == m.self {
				continue // named by another node: only a node itself re-joins
			}
			if n.inc(j.ID) == j.Inc {
				if m.cur.has(j.ID) && m.cur.inc(j.ID) == j.Inc {
					// A member that believes it is not: send it the view.
					m.send(j.ID, &Sync{View: m.cur.full(), v: m.cur})
				}
				continue
			}
		}
		m.addJoin(j, r.Alive)
	}
	m.rootStep()
}

func (m *Member) addJoin(j Joiner, alive bool) {
	for i := range m.pjoins {
		if m.pjoins[i].ID == j.ID {
			if m.pjoins[i].Inc != j.Inc {
				m.pjoins[i] = pendingJoin{j, alive, m.now()}
			}
			return
		}
	}
	m.pjoins = append(m.pjoins, pendingJoin{j, alive, m.now()})
}

// forwardJoins hands the pending joins of a node that is no longer the root
// to the root.
func (m *Member) forwardJoins() {
	if len(m.pjoins) == 0 {
		return
	}
	root := m.rootOf(m.newest())
	for _, j := range m.pjoins {
		m.send(root, &JoinRequest{Alive: j.alive, From: j.ID, Epoch: m.newest().epoch, Joiners: []Joiner{j.Joiner}})
	}
	m.pjoins = nil
}

// ---------------------------------------------------------------------------
// Exclusion notices and merging after partitions.

// notice tells an outsider that this node's view does not contain it, at
// most once per NoticeInterval unless forced.
func (m *Member) notice(to core.NodeID, force bool) {
	if m.cur == nil || to == m.self || m.cur.has(to) || m.acc.has(to) {
		return
	}
	if last, ok := m.lastNotice[to]; ok && m.now()-last < m.cfg.NoticeInterval && !force {
		return
	}
	put(&m.lastNotice, to, m.now())
	m.send(to, &Notice{Epoch: m.cur.epoch, Root: m.rootOf(m.cur)})
}

// probe sends EXCLUDED to the departed nodes (root only).
//
// Besides the departed nodes, it probes, in turn, the nodes of its list
// (the initial members, or a joiner's contacts) that are not in its view:
// two sides of a healed partition that share no member any more (every
// common member crashed) find each other that way.
func (m *Member) probe() {
	if m.cur == nil {
		return
	}
	m.probeLeft()
	if m.rootOf(m.newest()) != m.self {
		m.probeDropped()
		return
	}
	n := 0
	var x *Notice // built for the first node probed: most probes find none
	send := func(d core.NodeID) {
		if d != m.self && !m.cur.has(d) && !m.acc.has(d) && n < m.cfg.MaxProbes {
			n++
			put(&m.lastNotice, d, m.now())
			if x == nil {
				x = &Notice{Epoch: m.cur.epoch, Root: m.self}
			}
			m.send(d, x)
		}
	}
	for i := len(m.departed) - 1; i >= 0; i-- {
		send(m.departed[i])
	}
	list := m.contacts
	if m.initial != nil {
		list = m.initial
	}
	for range list {
		if n >= m.cfg.MaxProbes {
			break
		}
		m.probeNext = (m.probeNext + 1) % len(list)
		if d := list[m.probeNext]; !slices.Contains(m.departed, d) {
			send(d)
		}
	}
}

// probeDropped tells the nodes this node excluded as a root, while another
// node is root, that their view is over. The root probes the nodes that
// left its own views; a node that became root later (a merge, a root
// taking over) may never have had these in a view, and a node excluded
// while alive (an acknowledgement that timed out under loss) whose
// detector still hears from a former fellow member would otherwise stay in
// its old view for good: its pings are answered, nobody tells it. One
// node probes each such node (the root that excluded it), as when it was
// root, and at most MaxProbes of them.
func (m *Member) probeDropped() {
	if len(m.dropped) == 0 {
		return
	}
	x := &Notice{Epoch: m.cur.epoch, Root: m.rootOf(m.cur)}
	for _, id := range m.dropped {
		if !m.cur.has(id) && !m.acc.has(id) {
			put(&m.lastNotice, id, m.now())
			m.send(id, x)
		}
	}
}

// leaveBehind records a member of a former view that a view skipping views
// dropped, to be probed maxLeftProbes times (the most recent MaxProbes).
func (m *Member) leaveBehind(id core.NodeID) {
	m.left = slices.DeleteFunc(m.left, func(l leftNode) bool { return l.id == id })
	m.left = append(m.left, leftNode{id: id})
	if over := len(m.left) - m.cfg.MaxProbes; over > 0 {
		m.left = slices.Delete(m.left, 0, over)
	}
}

// probeLeft tells the members left behind (see leaveBehind) that their view
// is over, once per probe, until they are back in a view this node holds
// or were told maxLeftProbes times. Every node does it, not only the root:
// the root of this node's view may never have had them in a view.
func (m *Member) probeLeft() {
	if len(m.left) == 0 {
		return
	}
	x := &Notice{Epoch: m.cur.epoch, Root: m.rootOf(m.cur)}
	m.left = slices.DeleteFunc(m.left, func(l leftNode) bool { return m.cur.has(l.id) || m.acc.has(l.id) })
	for i := range m.left {
		m.left[i].probes++
		put(&m.lastNotice, m.left[i].id, m.now())
		m.send(m.left[i].id, x)
	}
	m.left = slices.DeleteFunc(m.left, func(l leftNode) bool { return l.probes >= maxLeftProbes })
	if len(m.left) == 0 {
		m.left = nil
	}
}

func (m *Member) onNotice(from core.NodeID, x *Notice) {
	m.observe(x.Epoch)
	if m.cur == nil {
		if m.acc == nil && x.Root != m.self && x.Epoch > m.floor {
			// A joiner learns where a root is.
			m.mergeRoot = x.Root
			m.sendJoin()
			m.mergeRoot = core.None
		}
		return
	}
	n := m.newest()
	switch {
	case x.Epoch > n.epoch:
		via := from // a member of the newer view, unless a fellow member forwards
		if n.has(from) || m.cur.has(from) {
			via = core.None
		}
		m.evicted(x.Epoch, x.Root, via)
	case x.Epoch > m.cur.epoch && n != m.cur && m.cur.has(from) && (!n.has(from) && !m.cur.has(EpochRoot(n.epoch)) || m.minority != 0 && m.failed[EpochRoot(n.epoch)]):
		// A member of the installed view installed a newer view without this
		// node, while this node holds the accepted proposal of a root outside
		// its installed view. The detector watches the installed view only:
		// if that root crashed, no failure is ever declared and the proposal
		// is held forever (it may have committed, so this node cannot take it
		// over alone either). Merging into the newer view is what a node of
		// a healed partition does; the proposal, if it committed, is a view
		// this node skips, as after any merge. So too when the proposal's
		// root is a member known to have failed while this node is in a
		// minority (PartitionMajority), where it cannot take the proposal
		// over: held, it kept the node out of the newer view for ever (a
		// gossip-detector swarm, seed 2704121030, whose newer view had a
		// lower epoch than the dead root's proposal), whether the sender
		// is a member of the proposal or not (seed 1964465853, where it
		// was one: its notices were ignored for ever).
		m.evicted(x.Epoch, x.Root, core.None)
	case x.Epoch < n.epoch && !n.has(from) && !m.cur.has(from):
		m.notice(from, false)
	}
}

// evicted reacts to a view newer than this node's that does not contain it:
// footnote 1's excluded node, or a side of a healed partition whose view is
// older. The node asks that view's root to admit it (NODE_ALIVE); a root
// brings its whole side, and a member tells its root.
func (m *Member) evicted(epoch uint64, root, via core.NodeID) {
	if via == m.self {
		via = core.None
	}
	if root == core.None {
		root = via
	}
	if root == core.None || root == m.self || epoch < m.mergeEpoch {
		return
	}
	if epoch == m.mergeEpoch {
		if _, dead := m.detected[m.mergeRoot]; root != m.mergeRoot && (dead || m.failed[m.mergeRoot]) {
			// The view being merged into has another root now: the root
			// this node asks failed, and a member that took over names
			// itself. Ask that one. Held to the dead root, the node gave
			// up after its tries and stayed in its old view for good,
			// told by nobody again (the oracle swarm, seed 1691255,
			// majority). Not while the first root may live: a member cut
			// off from it names itself root too, and following it led a
			// merge astray (seed 1885079).
			m.mergeRoot, m.mergeVia, m.mergeTries = root, via, 0
			m.sendJoin()
		}
		return
	}
	m.env.Emit(Evicted{Epoch: epoch, Root: root})
	m.mergeEpoch, m.mergeRoot, m.mergeVia, m.mergeTries = epoch, root, via, 0
	if m.driving {
		m.abort(fmt.Sprintf("evicted by %s", FormatEpoch(epoch)))
	}
	n := m.newest()
	if r := m.rootOf(n); r != m.self {
		m.send(r, &Notice{Epoch: epoch, Root: root})
	} else {
		// The root takes its whole side along: every member learns that its
		// view is over (and accepts being admitted by root's view).
		x := &Notice{Epoch: epoch, Root: root}
		for _, id := range n.list() {
			if !m.failed[id] {
				m.send(id, x)
			}
		}
	}
	m.sendJoin()
}
