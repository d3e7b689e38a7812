// The first phase: Prepare down the tree, Ack up.

package member

import (
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// proposals is what a node holds above its installed view: the proposal it
// accepted and its acknowledgement, the proposals it holds beneath (adopted,
// held) and what it knows of other proposals' fate (ackedEpochs, vetoed).
type proposals struct {
	// accepted is the proposal this node accepted (or adopted as known),
	// newer than cur; acceptedPrep the delta form of its Prepare, and
	// acceptedFrom its sender (nil and core.None if it came otherwise:
	// adopted from a refusal, held again after an abort); acceptedFull the
	// full form of the Prepare, built on demand for joiners.
	accepted     *view
	acceptedPrep *Prepare
	acceptedFull *Prepare
	acceptedFrom core.NodeID
	// silentWaits counts the commit waits of accepted that ended without a
	// word from its root, when the detector does not watch that root (it
	// is not in cur): see maxSilentWaits.
	silentWaits int
	// adopted is the uncommitted proposal of a dead root that accepted is
	// based on (Prepare.Committed false): if accepted is abandoned, adopted
	// is what may have committed, and becomes accepted again.
	adopted   *view
	acked     ackSet // the children of this node in accepted that acknowledged it
	ackSent   bool
	ackResent int      // how many times accepted went again to the silent children (see onAckTimeout)
	lastPrep  *Prepare // the last accepted Prepare, for VIEW_NEED after commit
	// ackedEpochs holds the proposals above the installed view that this
	// node acknowledged; vetoed those known never to commit: their root
	// abandoned them, or this node promised never to acknowledge them (it
	// told a node holding one that it cannot have committed). A node holds
	// one or two proposals at a time: ackedEpochs and held are short
	// slices, which every view change at every node empties and refills
	// without allocating.
	ackedEpochs     []uint64
	vetoed          map[uint64]bool
	held            []*view // accepted proposals above the installed view
	forwardedCommit uint64  // the last epoch whose commit this node forwarded
}

type relation uint8

const (
	relNone       relation = iota
	relExtends             // the proposal descends from this node's newest view
	relSupersedes          // the proposal replaces the accepted one of the same root
	relJoins               // the proposal admits this node
)

func (m *Member) listedJoiner(p *Prepare) bool {
	for _, j := range p.Joined {
		if j.ID == m.self {
			return j.Inc == m.inc
		}
	}
	return false
}

func (m *Member) onPrepare(from core.NodeID, p *Prepare) {
	m.observe(p.Epoch)
	joiner := m.listedJoiner(p)
	if joiner && p.Committed && m.cur != nil && m.mergeEpoch == 0 && p.Ancestry[0] > m.cur.epoch {
		// p's root installed a view newer than this node's that does not
		// contain it (it is listed as a joiner): its lineage is over. (An
		// adopted base, never installed, proves nothing: then the node
		// refuses, and p's root learns of this node's view.)
		m.evicted(p.Ancestry[0], EpochRoot(p.Epoch), from)
	}
	n := m.newest()
	if n != nil && p.Epoch <= n.epoch {
		if EpochRoot(p.Epoch) == EpochRoot(n.epoch) {
			// A duplicate, or a proposal its root has replaced. A parent
			// sends the proposal again when this node's ACK did not reach
			// it in time (see onAckTimeout): the ACK is repeated.
			if m.accepted != nil && p.Epoch == m.accepted.epoch && from == m.acceptedFrom && m.ackSent {
				m.send(m.acceptedFrom, m.ackMsg())
			}
			return
		}
		m.nack(p.Epoch, n)
		return
	}
	if p.Epoch <= m.epochFloor {
		return
	}
	if m.vetoed[p.Epoch] {
		if n != nil {
			m.nack(p.Epoch, n)
		}
		return
	}
	// takenBack: under PartitionMajority, p lists this node as a joiner and
	// descends from its installed view (a view between excluded it).
	takenBack := joiner && m.cfg.Partition == PartitionMajority && m.cur != nil && slices.Contains(p.Ancestry, m.cur.epoch)
	rel := relNone
	switch {
	case n != nil && slices.Contains(p.Ancestry, n.epoch):
		rel = relExtends
	case m.accepted != nil && supersedes(p.Epoch, p.Ancestry, m.accepted.epoch):
		rel = relSupersedes
	case joiner && (m.cur == nil || m.mergeEpoch != 0):
		// Admitted: a joiner, or a member of a view that a newer one has
		// excluded (it is merging). A member content with its view refuses
		// to be taken into another lineage.
		rel = relJoins
	case takenBack && m.holdsOnlyInstalled():
		// Taken back by a proposal of its own lineage: p's ancestry holds
		// this node's installed view, and a view between (a dead root's
		// proposal that excluded it, which may have committed) is p's
		// base. The node accepts if it holds no proposal that may have
		// committed: nothing, or its own proposal on its installed view.
		// Refused, the two roots refused each other for good: p's root
		// cannot build on this node's view while it holds the excluding
		// proposal (the oracle swarm, seeds 1207433 and 1325516,
		// majority). A node holding another root's proposal, or building
		// on a dead root's, still refuses: p does not descend from it
		// (seed 23793). Under PartitionPaper the sides of a partition
		// merge instead; there, two roots that each took over a dead
		// root's proposal and listed the other side as joiners took
		// members from each other for good (seed 166388).
		rel = relJoins
	case n == nil:
		// A joiner with nothing accepted: a proposal that lists it as a
		// member with its incarnation (the dead root's proposal that
		// admitted it was adopted) admits it too (checked below).
		rel = relJoins
	}
	if (rel == relJoins || rel == relSupersedes) && m.cur != nil && m.cfg.Partition == PartitionMajority && !mayDescend(p.Epoch, p.Ancestry, m.cur.epoch) {
		// Under PartitionMajority the installed views form one history: a
		// member refuses to be taken into a lineage that cannot descend
		// from its installed view, and tells the proposer about that view,
		// which then merges into it. A merging member is offered one by a
		// minority's proposal built on a dead root's proposal that never
		// committed; any member by the replacement of a proposal it held,
		// whose root gave that proposal up and fell back to an older view
		// of its own (accepted, it took members of the installed view into
		// a lineage that abandons it: the oracle swarm, seed 279940).
		m.nack(p.Epoch, m.cur)
		return
	}
	if rel == relSupersedes && m.cfg.Partition == PartitionMajority && m.cur != nil {
		if e := m.openAcked(p); e != 0 {
			// p replaces the proposal this node holds, which says that its
			// root gave that one up, but not e, a dead root's proposal
			// beneath it that this node acknowledged: e may have committed
			// (its root may have held every ACK). Accepted, p took this
			// node, a member of both majorities, out of the members that
			// keep them apart; e's other holders, short of a majority of
			// it, refused p's root for good (the oracle swarm, seed
			// 1816437, majority). The node drops what was given up, falls
			// back to what it holds beneath, refuses p and asks e's
			// members: one that never acknowledged e frees it. (Applied to
			// every proposal, or to acknowledged proposals that the held
			// one does not build on, this broke other seeds' liveness: a
			// node that merged into another lineage had already left those
			// behind. A live root of e says itself what became of it.)
			if !m.driving { // openAcked found e beneath the proposal held
				put(&m.vetoed, m.accepted.epoch, true)
				m.dropAccepted()
				m.restoreAdopted()
				defer m.afterChange()
			}
			m.nack(p.Epoch, m.newest())
			m.queryAbout(m.heldView(e)) // a member that never acknowledged it frees it
			return
		}
	}
	if rel == relNone {
		if n != nil {
			m.nack(p.Epoch, n)
		}
		if takenBack && m.accepted != nil && !m.driving {
			// Refused only for the proposal this node holds, another
			// root's: ask what became of it now, not at its commit
			// timeout. Its root has often given it up (it accepted p,
			// which takes it back too); then this node accepts p's next
			// proposal, where waiting let the two roots go round for
			// seconds (the oracle swarm, seed 1002924).
			m.queryOutcome()
		}
		return
	}
	v := m.viewOf(p)
	if v == nil {
		m.send(from, &NeedView{Epoch: p.Epoch})
		return
	}
	if me := m.ownPos(v); me < 0 || v.parentAt(me) != from || v.incAt(me) != m.inc {
		// Not this node's place, or the place of a former process of its
		// id: a joiner that held a proposal admitting it accepted the next
		// one, which listed its id with the incarnation of the process
		// before the restart. Counted as that member, it made a majority
		// of an installed view that the restart had halved, and the views
		// forked (the oracle swarm, seed 29180, majority).
		return
	}
	if m.cfg.Partition == PartitionMajority && m.cur != nil && m.mergeEpoch == 0 && m.holdsOnlyInstalled() &&
		!(p.Committed && p.Ancestry[0] == m.cur.epoch) && slices.Contains(p.Ancestry, m.cur.epoch) && 2*kept(m.cur, v) <= m.cur.size() {
		// p descends from this node's installed view through proposals
		// this node never acknowledged (it holds nothing newer), and keeps
		// no majority of it: its root counted majorities against older
		// views and adopted proposals only (a chain of them is guarded by
		// its last link). The installed view's majority may have moved
		// on without this node; accepted, p forked the views (the oracle
		// swarm, seed 1741812: n4, root of the installed 5.n4 = [n4 n5 n6],
		// accepted n1's 9.n1 = [n1 n2 n3 n4], built on two uncommitted
		// proposals of 5.n4's lineage, while n5 and n6 installed 9.n5).
		// Refused, p's root learns of the view (and merges into it if the
		// view excludes it). (A proposal on this very view whose root
		// installed it needs no count: that root kept a strict majority of
		// it, rootStep.)
		m.nack(p.Epoch, m.cur)
		return
	}
	prev := m.accepted
	if m.driving {
		m.abort(fmt.Sprintf("superseded by %s", FormatEpoch(p.Epoch)))
		prev = m.accepted // the adopted proposal the root's own was based on
	}
	// A proposal this node held or built on that p's lineage gave up
	// never committed: its root proposed anew without it (p replaces it,
	// or p's ancestry holds a later proposal of the same root). Said to
	// whoever holds it and asks (VIEW_QUERY); else this node, which
	// acknowledged it, kept its holder waiting for good (the oracle swarm,
	// seed 239171, once a member accepted a proposal that takes it back).
	for _, h := range [...]*view{prev, m.adopted} {
		if h != nil && !slices.Contains(p.Ancestry, h.epoch) && (rel == relSupersedes && h == prev || supersedes(p.Epoch, p.Ancestry, h.epoch) && !mayDescend(p.Epoch, p.Ancestry, h.epoch)) {
			put(&m.vetoed, h.epoch, true)
		}
	}
	adopted := m.adopted
	switch {
	case rel == relExtends && !p.Committed && prev != nil && prev.epoch == p.Ancestry[0]:
		adopted = prev
	case adopted != nil && adopted.epoch == p.Ancestry[0]:
	default:
		adopted = nil
	}
	m.dropAccepted()
	if joiner && m.cur != nil {
		m.staleVerdicts(v)
	}
	if rel == relExtends && p.Committed && prev != nil && prev.epoch == p.Ancestry[0] && prev.has(m.self) && (m.cur == nil || prev.epoch > m.cur.epoch) {
		// p's root installed (committed) the proposal this node accepted:
		// its commit did not reach this node; install it now.
		m.install(prev)
	}
	// Set before accept, which may start a proposal on v (this node is
	// v's next root when v's root failed: reportFailures, rootStep) and
	// adopt v for it. Set after, it undid that adoption: the root then
	// held no adopted proposal under its own, yielded to a competing
	// proposal that abandons v, which it had acknowledged, and v's other
	// holders, waiting for v's lineage to go on, refused everything else
	// for good (the oracle swarm, seed 3124975, majority).
	m.adopted = adopted
	m.accept(v, p, from)
}

// openAcked returns a proposal that the one this node holds is built on
// (above the installed view), that this node acknowledged, whose root is
// known to have failed, that p cannot descend from and that nobody gave up
// (not vetoed; no proposal this node held, nor p, replaces it), or 0.
func (m *Member) openAcked(p *Prepare) uint64 {
	if m.accepted == nil {
		return 0
	}
	for _, e := range m.ackedEpochs {
		if e <= m.cur.epoch || EpochRoot(e) == m.self || m.vetoed[e] || !slices.Contains(m.accepted.ancestry, e) ||
			mayDescend(p.Epoch, p.Ancestry, e) || supersedes(p.Epoch, p.Ancestry, e) {
			continue
		}
		if h := m.heldView(e); h == nil || !m.rootGone(h) {
			continue // its live root will say what became of it
		}
		if slices.ContainsFunc(m.held, func(h *view) bool { return supersedes(h.epoch, h.ancestry, e) }) {
			continue
		}
		return e
	}
	return 0
}

// holdsOnlyInstalled reports whether this node holds nothing newer than
// its installed view that may have committed: no proposal, or its own
// (driving) proposal on that view.
func (m *Member) holdsOnlyInstalled() bool { return m.accepted == nil || m.driving && m.adopted == nil }

// branchLeft reports whether the installed view x has left the branch of
// proposal p: x is newer than p and descends from p's base but not from
// p. Under PartitionMajority the installed views form one history, so p
// never committed (x and p would have forked at p's base), and a node
// that holds p, which may have committed as far as it knows, may drop
// it once it learns of x. Not under PartitionPaper, whose partitions
// install views side by side.
func branchLeft(x *view, p *view) bool {
	return x.epoch > p.epoch && p.base() != 0 && x.descends(p.base()) && !x.descends(p.epoch)
}

// mayDescend reports whether a view numbered epoch with the given ancestry
// may descend from the view numbered e: e is the view or one of its
// ancestors, or the ancestry is full (maxAncestry) and reaches back no
// further than after e, so that e may be an older ancestor.
func mayDescend(epoch uint64, ancestry []uint64, e uint64) bool {
	if epoch == e || slices.Contains(ancestry, e) {
		return true
	}
	return len(ancestry) == maxAncestry && ancestry[len(ancestry)-1] > e
}

// supersedes reports whether a proposal numbered epoch, with the given
// ancestry, replaces the uncommitted proposal numbered old: a later proposal
// of old's root is the proposal itself or one of its ancestors. A root
// proposes anew only after abandoning (or committing, and then old is an
// ancestor) its previous proposal, and nobody else commits it, so old never
// committed.
func supersedes(epoch uint64, ancestry []uint64, old uint64) bool {
	r := EpochRoot(old)
	if EpochRoot(epoch) == r && epoch > old {
		return true
	}
	for _, e := range ancestry {
		if EpochRoot(e) == r && e > old {
			return true
		}
	}
	return false
}

// viewOf returns the view p proposes, or nil if this node cannot compute it
// (it lacks the base) or p is inconsistent.
func (m *Member) viewOf(p *Prepare) *view {
	base := p.Ancestry[0]
	var bv *view
	switch {
	case m.cur != nil && m.cur.epoch == base:
		bv = m.cur
	case m.accepted != nil && m.accepted.epoch == base:
		bv = m.accepted
	}
	if p.v != nil && (p.Full || bv != nil) {
		return p.v // what this node would compute, already built by the sender
	}
	if p.Full {
		v, err := newView(p.Epoch, p.Members, p.Ancestry, p.Incs, m.cfg.Fanout)
		if err != nil {
			return nil
		}
		v.delta, v.committed, v.failed, v.joined, v.left = true, p.Committed, p.Failed, p.Joined, p.Left
		return v
	}
	if bv == nil {
		return nil
	}
	v, err := bv.apply(p.Epoch, p.Ancestry, p.Failed, p.Joined, m.cfg.Fanout)
	if err != nil {
		return nil
	}
	v.committed, v.left = p.Committed, p.Left
	return v
}

// accept takes v (proposed by p, received from parent) as the accepted
// proposal and passes p down to this node's children.
func (m *Member) accept(v *view, p *Prepare, parent core.NodeID) {
	delta := p
	switch {
	case p.v == nil && !p.Full:
		// Decoded here: this node's own, so it carries the view down.
		p.v = v
	case p.Full || p.v != v:
		delta = &Prepare{Cause: p.Cause, Epoch: p.Epoch, Ancestry: p.Ancestry, Failed: p.Failed, Joined: p.Joined, Committed: p.Committed, Left: p.Left, v: v}
	}
	m.forgetRejoined(p.Joined)
	// Reports and ACK timeouts this node passed on concern the proposals
	// before this one; the root has them. Only the detector's own verdicts
	// stand (a lost report is found again: a dead child does not ACK).
	for id := range m.soft {
		m.unmark(id)
	}
	m.learnProposedLeavers(p)
	m.accepted, m.acceptedPrep, m.acceptedFull, m.acceptedFrom = v, delta, nil, parent
	m.silentWaits = 0
	m.hold(v)
	m.lastPrep = delta
	m.acked.reset(v, m.ownPos(v))
	m.ackSent, m.ackResent = false, 0
	m.cancel(tAck)
	m.sendDown(v, delta)
	if len(m.acked.kids) == 0 {
		m.sendAck()
	} else {
		m.arm(tAck, m.ackWait(v), v.epoch)
	}
	m.arm(tCommit, m.commitWait(v), v.epoch)
	m.pruneFailed()
	if len(m.failedIn(v)) > 0 {
		m.reportFailures()
	}
}

// fullOf returns the full form of a delta Prepare.
func fullOf(p *Prepare) *Prepare {
	return &Prepare{Cause: p.Cause, Epoch: p.Epoch, Ancestry: p.Ancestry, Failed: p.Failed, Joined: p.Joined,
		Committed: p.Committed, Full: true, Members: p.v.list(), Incs: p.v.incList(), Left: p.Left, v: p.v}
}

// sendDown sends p to this node's children in v, the ones whose ACKs it
// waits for (acked, reset for v before); joiners get the full list.
func (m *Member) sendDown(v *view, p *Prepare) {
	for _, c := range m.acked.kids {
		m.send(c, m.downTo(v, p, c))
	}
}

// downTo is the form of p that child c gets: the full list for a joiner.
func (m *Member) downTo(v *view, p *Prepare, c core.NodeID) *Prepare {
	if !isJoiner(p, c) {
		return p
	}
	if m.acceptedFull == nil || m.acceptedFull.Epoch != p.Epoch {
		m.acceptedFull = fullOf(p)
	}
	return m.acceptedFull
}

func isJoiner(p *Prepare, id core.NodeID) bool {
	for _, j := range p.Joined {
		if j.ID == id {
			return true
		}
	}
	return false
}

func (m *Member) sendAck() {
	if m.ackSent || m.accepted == nil {
		return
	}
	m.ackSent = true
	m.cancel(tAck)
	if len(m.ackedEpochs) < 256 && !slices.Contains(m.ackedEpochs, m.accepted.epoch) {
		m.ackedEpochs = append(m.ackedEpochs, m.accepted.epoch)
	}
	m.send(m.acceptedFrom, m.ackMsg())
}

// ackMsg is this node's ACK of the accepted proposal: ackOut when the Env
// copies what is sent (see copies), a new message otherwise.
func (m *Member) ackMsg() *Ack {
	a := &m.ackOut
	if !m.copies {
		a = new(Ack)
	}
	*a = Ack{Cause: m.acceptedPrep.Cause, Epoch: m.accepted.epoch}
	return a
}

func (m *Member) onAck(from core.NodeID, a *Ack) {
	if m.accepted == nil || a.Epoch != m.accepted.epoch || !m.acked.on {
		return
	}
	i := slices.Index(m.acked.kids, from)
	if i < 0 {
		return // not a child of this node in the accepted proposal
	}
	if m.acked.add(i) < len(m.acked.kids) {
		return
	}
	if m.driving {
		m.stable()
	} else {
		m.sendAck()
	}
}

// onAckTimeout reports the children that did not acknowledge as failed
// (§3.5: "the node that fails to get an acknowledgment from the dead node
// informs the root through a NODE_FAILURE"), at the end of the retry
// waits: at the first timeout, the proposal goes again to the silent
// children and the retry waits (ackRetryWaits, twice the first) start,
// during which it goes again every half wait (ackResends). Lost messages
// (the proposal, or an ACK, which a child repeats when the proposal comes
// again), or a child whose messages are slow, therefore do not exclude a
// live child and its subtree; a crashed child is excluded two waits
// later, unless its failure detector's verdict comes first (as it usually
// does), which is handled at once.
//
// A silent child that this node's detector watches (a member of the
// installed view in the same incarnation) is not cut at the end of the
// retry waits: it is handed to the detector (a core.PeerHint, which makes
// it probe the child, suspect it, ask others to reach it), and the
// proposal goes to it again every wait during the hand-over
// (ackHandedWaits: longer at every level above the leaves' parents).
// Only a verdict, the end of those waits, or the child's refusal heard a
// wait or more before without its ACK cuts it: a refusal of the proposal
// to this node (VIEW_NACK: this node is the root) or a notice that the
// child holds a view without it (EXCLUDED). The child then refuses for
// itself, whatever its subtree does, and waiting for it kept competing
// roots from settling (swarm seed 3468). A wait, not at once: a starved
// process that resumes fires its timers (heartbeats) before it reads the
// proposal it owes an ACK for. Speech alone (heartbeats, failure
// reports) cuts no child. An inner child's ACK speaks for its subtree,
// so a live inner child goes on speaking without its ACK while it waits
// for its own silent children (crashed with their host and not yet
// declared, as when a whole host dies and the proposal drops only the
// first of its processes declared); its detector's verdicts, or its own
// waits, which end before its parent's, report them. And a leaf that
// speaks may never have had the proposal: a pair's two directions are
// separate streams, and while the transport routes around a cut host the
// direction from this node has lagged seconds behind the other, the
// leaf's heartbeats and failure reports coming all along
// (testdata/leaf-heard-proposal-late.txt). A timeout of a few
// hundred milliseconds cannot tell a crash from a process that an
// overloaded host starved for a second or two; the detector's timeouts
// adapt to the stalls it measures, and a child that crashed is declared
// by it in its own bound, which is what the view change waits for then.
// A child that no detector watches (a joiner, or a new incarnation of a
// member) is cut as before: nothing else would ever declare it.
//
// Under PartitionMajority a node reports at the first timeout, as the
// paper does: with the retry's longer waits, one swarm seed in 100,000
// (TestSwarmMajority, seed 77236) reached a state that policy does not
// leave: a member holding a newer view whose next root never learned of
// it, the older view's root blocked in a minority. That case is open.
func (m *Member) onAckTimeout(epoch uint64) {
	if m.accepted == nil || m.accepted.epoch != epoch || m.ackSent {
		return
	}
	if m.ackResent < ackResends && m.ackWaits() > 1 {
		m.ackResent++
		again := false
		for _, c := range m.accepted.children(m.self) {
			if !m.acked.has(c) && !m.isFailed(m.accepted, c) {
				m.send(c, m.downTo(m.accepted, m.acceptedPrep, c))
				again = true
			}
		}
		if again {
			m.acked.age()
			m.arm(tAck, ackRetryWaits*m.ackWait(m.accepted)/ackResends, epoch)
			return
		}
	}
	handing := m.ackWaits() > 1 && m.ackResent < ackResends+m.ackHandedWaits(m.accepted)
	cut, handed := false, false
	for i, c := range m.acked.kids {
		if m.acked.flags[i] || m.isFailed(m.accepted, c) {
			continue
		}
		spoke := m.acked.heard[i] == heardEarlier && m.acked.refused[i]
		if handing && !spoke && m.watched(c, m.accepted.inc(c)) {
			if m.ackResent == ackResends {
				m.env.Emit(core.PeerHint{Node: c, Reason: "no acknowledgement of a view proposal"})
			}
			m.send(c, m.downTo(m.accepted, m.acceptedPrep, c))
			handed = true
			continue
		}
		m.markFailed(c, m.accepted.inc(c), true, m.now())
		cut = true
	}
	if handed && !cut {
		m.ackResent++
		m.acked.age()
		m.arm(tAck, m.ackWait(m.accepted), epoch)
		return
	}
	if m.driving {
		m.rootStep()
	} else {
		m.reportFailures()
	}
}

// watched reports whether this node's failure detector watches id in
// incarnation inc: it follows the installed view (core.MembersChanged),
// so it watches the members of that view, in the incarnation the view
// holds, and nobody else.
func (m *Member) watched(id core.NodeID, inc uint64) bool {
	return m.cur != nil && m.cur.has(id) && m.cur.inc(id) == inc
}

// ackSet records which of a node's children in the proposal it holds
// acknowledged it: the children (a run of the proposal's list, or of its
// base's: see view.childrenAt) and a flag per child, in memory reused from
// one proposal to the next, where a map would be made anew. An ACK finds
// its child among a few consecutive ids, not in the whole view.
type ackSet struct {
	on    bool          // a proposal is being acknowledged
	kids  []core.NodeID // the children, in view order
	n     int           // flags set
	flags []bool
	// heard says, per child, whether a message of any layer came from it
	// since the proposal went (see onAckTimeout): heardNot, heardLately
	// (since the last ACK wait ended) or heardEarlier.
	heard []uint8
	// refused says, per child, whether it refused the proposal to this
	// node (VIEW_NACK) or told it that it holds a view without it
	// (EXCLUDED) since the proposal went.
	refused []bool
}

// What an ackSet heard of a child.
const (
	heardNot uint8 = iota
	heardLately
	heardEarlier
)

// reset starts the acknowledgement of v by the children of the member at
// position self of v.
func (s *ackSet) reset(v *view, self int) {
	s.on, s.kids, s.n = true, v.childrenAt(self), 0
	s.flags = slices.Grow(s.flags[:0], len(s.kids))[:len(s.kids)]
	clear(s.flags)
	s.heard = slices.Grow(s.heard[:0], len(s.kids))[:len(s.kids)]
	clear(s.heard)
	s.refused = slices.Grow(s.refused[:0], len(s.kids))[:len(s.kids)]
	clear(s.refused)
}

// off ends it: no ACK counts until the next reset.
func (s *ackSet) off() { s.on, s.kids = false, nil }

// add records the ACK of child i (its offset among the children) and
// returns how many children have acknowledged; a repeated ACK counts once.
func (s *ackSet) add(i int) int {
	if !s.flags[i] {
		s.flags[i] = true
		s.n++
	}
	return s.n
}

// has reports whether child c acknowledged.
func (s *ackSet) has(c core.NodeID) bool {
	i := slices.Index(s.kids, c)
	return s.on && i >= 0 && s.flags[i]
}

// hear records a message from id, if it is a child.
func (s *ackSet) hear(id core.NodeID) {
	if !s.on {
		return
	}
	if i := slices.Index(s.kids, id); i >= 0 && s.heard[i] == heardNot {
		s.heard[i] = heardLately
	}
}

// refuse records a refusal from id, if it is a child.
func (s *ackSet) refuse(id core.NodeID) {
	if !s.on {
		return
	}
	if i := slices.Index(s.kids, id); i >= 0 {
		s.refused[i] = true
	}
}

// age marks what was heard lately as heard earlier: an ACK wait ended.
func (s *ackSet) age() {
	for i, h := range s.heard {
		if h == heardLately {
			s.heard[i] = heardEarlier
		}
	}
}

func (m *Member) onNeedView(from core.NodeID, q *NeedView) {
	var p *Prepare
	switch {
	case m.acceptedPrep != nil && m.acceptedPrep.Epoch == q.Epoch:
		p = m.acceptedPrep
	case m.lastPrep != nil && m.lastPrep.Epoch == q.Epoch && m.cur != nil && m.cur.epoch == q.Epoch:
		// Committed: the child missed the base while the commit passed.
		// A proposal this node no longer holds and never installed was
		// given up (a root's abort): handed out, it was accepted by a
		// child its root would never commit nor abort to, which then
		// adopted it and refused the live root's proposals for good
		// (the oracle swarm, seed 1101496, majority).
		p = m.lastPrep
	default:
		return
	}
	if p.v.parent(from) != m.self {
		return
	}
	m.send(from, fullOf(p))
}

// nack refuses proposal epoch, telling its root about n.
func (m *Member) nack(epoch uint64, n *view) {
	m.send(EpochRoot(epoch), &Nack{Epoch: epoch, Pending: n == m.accepted, View: n.full(), v: n})
}
