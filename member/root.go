// The root's side of the protocol: deciding, proposing and committing the
// next view (§3.5–3.6), and the partition policy's minority.

package member

import (
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// stabilization is the state of a root driving its own proposal.
type stabilization struct {
	driving       bool          // the accepted proposal is this node's own, being stabilized
	restart       bool          // restart the proposal with a higher epoch
	began         time.Duration // when the first failure or join the proposal handles was known
	minorityEpoch uint64        // the epoch whose minority was announced
}

// rootStep is the root's decision procedure, run whenever its knowledge
// changes: restart a proposal a failure made hopeless (§3.5), take over a
// dead root's proposal (§3.6), check the partition policy, and propose the
// next view with every failure and join known so far.
func (m *Member) rootStep() {
	if m.cur == nil {
		return
	}
	if m.driving {
		if !m.restart && !m.hopeless(m.accepted) {
			return // joins wait for the running proposal to finish
		}
		// A joiner that failed to acknowledge is dropped: it asks again if it
		// lives (its failure is not remembered: it is no member).
		for _, j := range m.acceptedPrep.Joined {
			if m.failed[j.ID] && !m.cur.has(j.ID) {
				m.pendingJoins = slices.DeleteFunc(m.pendingJoins, func(p pendingJoin) bool { return p.Joiner == j })
			}
		}
		m.abort("failure during stabilization")
	}
	m.restart = false
	if m.accepted != nil && EpochRoot(m.accepted.epoch) == m.self {
		m.dropAccepted() // this node's own abandoned proposal: it never committed
	}
	// The base: a pending proposal of a root this node replaces, else the
	// installed view.
	base := m.cur
	if m.accepted != nil {
		base = m.accepted
	}
	if m.rootOf(base) != m.self {
		m.reportFailures()
		m.forwardJoins()
		return
	}
	failed, joined := m.changes(base)
	if len(failed) == 0 && len(joined) == 0 && (!m.refresh || base != m.cur) {
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
	for _, j := range m.pendingJoins {
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
	kept := m.pendingJoins[:0]
	for _, j := range m.pendingJoins {
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
		case m.failed[j.ID] && slices.Contains(m.failedInc[j.ID], j.Inc):
			// A joiner that did not acknowledge: it will ask again. A
			// failure of another incarnation is its former self's (a
			// member of the installed view that an adopted proposal
			// dropped, taken back below, which the restarted process
			// never acknowledges): dropping the restarted process's
			// join for it would take the former self back again at
			// every proposal.
			m.unmark(j.ID)
			continue
		}
		kept = append(kept, j)
		joined = append(joined, j.Joiner)
	}
	m.pendingJoins = kept
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
	m.refresh = false // this proposal is the new epoch asked for
	m.forgetRejoined(joined)
	base := m.cur
	m.adopted = nil
	if !committed {
		base = m.accepted
		m.adopted = base
	}
	cause := causeOf(base, m.self, failed, joined)
	v.left = m.proposalLeft(base, committed, failed)
	p := &Prepare{Cause: cause, Epoch: epoch, Ancestry: v.ancestry, Failed: failed, Joined: joined, Committed: committed, Left: v.left, v: v}
	began := m.now()
	for _, f := range failed {
		if t, ok := m.failedAt[f]; ok && t < began {
			began = t
		}
	}
	for _, j := range m.pendingJoins {
		if j.askedAt < began {
			began = j.askedAt
		}
	}
	m.began = began
	m.accepted, m.acceptedPrep, m.acceptedFull, m.acceptedFrom = v, p, nil, core.None
	m.lastPrep = p
	m.acked.reset(v, m.ownPos(v))
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
	if len(failed) == 0 && len(joined) == 0 {
		return CauseRefresh
	}
	return CauseAliveNodeJoin
}

// stable is reached when the root holds every child's ACK: the view is
// stable (§3.4), the root installs it and commits it down the tree, and
// welcomes the joiners (JOIN_DET_ACK, §3.7).
func (m *Member) stable() {
	v := m.accepted
	m.env.Emit(Stabilized{Epoch: v.epoch, Began: m.began, At: m.now(), Members: v.size()})
	joined := m.acceptedPrep.Joined
	m.pendingJoins = slices.DeleteFunc(m.pendingJoins, func(j pendingJoin) bool {
		return v.has(j.ID) && v.inc(j.ID) == j.Inc
	})
	m.dropAccepted()
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
	m.env.Emit(StabilizationAborted{Epoch: m.accepted.epoch, At: m.now(), Reason: reason})
	m.dropAccepted()
	m.restoreAdopted()
}

// enterMinority stops a root whose side holds no majority of base
// (PartitionMajority) and tells the side.
func (m *Member) enterMinority(base *view, alive int) {
	if !m.waits[tMinority].armed {
		m.arm(tMinority, m.cfg.ReportRetry, base.epoch)
	}
	if m.minorityEpoch == base.epoch {
		return
	}
	m.minorityEpoch = base.epoch
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
	if m.minorityEpoch == 0 || m.cur == nil || m.driving {
		return
	}
	for id := range m.soft {
		if _, det := m.detected[id]; !det {
			m.unmark(id)
		}
	}
	if m.accepted != nil && m.rootGone(m.accepted) {
		// The base this root adopts may be what keeps it in a minority:
		// ask the proposal's members whether it can have committed.
		m.queryOutcome()
	}
	m.rootStep()
}

func (m *Member) onMinority(from core.NodeID, x *MinorityNotice) {
	if m.cur == nil || !m.newest().has(from) || m.minorityEpoch == x.Epoch {
		return
	}
	m.minorityEpoch = x.Epoch
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
		v.left = k.View.Left
	}
	mine := m.driving && m.accepted.epoch == k.Epoch
	if mine && k.Pending && EpochRoot(v.epoch) == from && v.has(m.self) && from != m.self && v.base() == m.accepted.base() {
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
		m.dropAccepted()
		m.accepted, m.acceptedFrom = v, core.None
		m.hold(v)
		m.arm(tCommit, m.commitWait(v), v.epoch)
		m.pruneFailed()
		m.afterChange()
		return
	}
	if mine && isJoiner(m.acceptedPrep, from) && !m.cur.has(from) {
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
			m.pendingJoins = slices.DeleteFunc(m.pendingJoins, func(j pendingJoin) bool { return j.ID == from })
			m.restart = true
			m.rootStep()
		}
		return
	}
	// A refusal of the running proposal matters if the refuser holds
	// anything newer than the installed view; any other only if it tells of
	// a view newer than everything this node knows.
	known := m.cur.epoch
	if m.accepted != nil && !mine {
		known = m.accepted.epoch
	}
	if v.epoch <= known || (m.accepted != nil && v.epoch == m.accepted.epoch) || !v.has(from) {
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
	if k.Pending && m.accepted != nil && supersedes(m.accepted.epoch, m.accepted.ancestry, v.epoch) {
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
		case !m.driving && m.accepted != nil:
			known = m.accepted
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
		m.dropAccepted()
		m.accepted, m.acceptedFrom = v, core.None
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
		if m.accepted != nil && EpochRoot(m.accepted.epoch) == m.self {
			m.dropAccepted()
		}
		m.install(v)
	}
	m.afterChange()
}
