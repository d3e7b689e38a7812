// The second phase: commit, and what a node holding a proposal learns of
// its outcome when the commit is late.

package member

import (
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// maxSilentWaits is how many commit waits a node holding the proposal of a
// root outside its installed view lets pass without a word from that root
// before it counts the root as failed (softly, like a report). The detector
// watches the installed view only: without this, the crash of such a root
// (a merge after a partition, between its proposal and its commit) is never
// declared, and the proposal is held for ever.
const maxSilentWaits = 3

func (m *Member) onCommit(from core.NodeID, e uint64) {
	m.observe(e)
	switch {
	case m.accepted != nil && m.accepted.epoch == e && !m.driving && m.accepted.has(from):
		prev, adopted := m.cur, m.acceptedPrep != nil && !m.acceptedPrep.Committed
		m.install(m.accepted)
		if adopted && prev != nil && m.cur.base() == prev.epoch {
			// The root built on this node's installed view without having
			// installed it (it adopted it as a dead root's proposal): the
			// members it dropped were never in a view of the root's, which
			// does not probe them. Under PartitionMajority one of them,
			// told only of the root's older view, stayed in this node's
			// view for good (the oracle swarm, seed 18519).
			_, departed := diff(prev, m.cur)
			m.tellLeftBehind(departed, m.cur)
		}
		m.forwardCommit()
		m.afterChange()
	case m.cur != nil && m.cur.epoch == e && m.forwardedCommit != e:
		m.forwardCommit()
	case slices.Contains(m.ackedEpochs, e) && m.heldView(e) != nil && (m.cur == nil || e > m.cur.epoch) && m.heldView(e).has(from):
		// A proposal this node acknowledged, and has let go of since (it
		// took over as root on a stale verdict, or installed an older view
		// a member refused it with), committed: its other members hold it
		// with this node in it, so this node installs it too. Without
		// this, it stayed in the older view while the others counted it
		// in theirs, for ever.
		v := m.heldView(e)
		if !v.has(m.self) || v.inc(m.self) != m.inc {
			return
		}
		if m.driving {
			m.abort(fmt.Sprintf("%s committed", FormatEpoch(e)))
		}
		m.install(v)
		m.forwardCommit()
		m.afterChange()
	}
}

func (m *Member) forwardCommit() {
	m.forwardedCommit = m.cur.epoch
	c := &m.commitOut
	if !m.copies {
		c = new(Commit)
	}
	c.Epoch = m.cur.epoch
	for _, ch := range m.cur.children(m.self) {
		m.send(ch, c)
	}
}

// suspectSilentRoot counts a commit wait of the accepted proposal that
// ended without a word from its root r, when r is not in the installed view
// (so no detector watches it); after maxSilentWaits of them, r is marked
// failed softly, and the node proceeds as on a report of r's failure: the
// next live member of the proposal takes over as root, adopting it (it may
// have committed). A root wrongly taken for failed answers the VIEW_QUERY
// sent all along; the soft mark is forgiven with the next proposal
// accepted.
func (m *Member) suspectSilentRoot() {
	r := EpochRoot(m.accepted.epoch)
	if m.cur == nil || m.cur.has(r) || !m.accepted.has(r) || m.isFailed(m.accepted, r) {
		m.silentWaits = 0
		return
	}
	m.silentWaits++
	if m.silentWaits < maxSilentWaits {
		return
	}
	m.silentWaits = 0
	m.markFailed(r, m.accepted.inc(r), true, m.now())
	m.afterChange()
}

// queryOutcome asks what became of the accepted proposal whose commit is
// overdue: its root, or, when the root is known to have failed, its other
// members, any of which can tell that it never acknowledged it (then it
// cannot have committed).
func (m *Member) queryOutcome() { m.queryAbout(m.accepted) }

// queryAbout asks what became of proposal v (see queryOutcome).
func (m *Member) queryAbout(v *view) {
	q := &Query{Epoch: v.epoch}
	r := EpochRoot(v.epoch)
	m.send(r, q) // a detector may be wrong: the root's word is final
	if !m.rootGone(v) {
		return
	}
	for _, id := range v.list() {
		if !m.failed[id] && id != r {
			m.send(id, q)
		}
	}
}

// rootGone reports whether the root of proposal v is known to have failed
// in the incarnation v holds: it is marked failed, or a newer incarnation of
// it asked to join (its restarted process cannot answer for the proposal).
func (m *Member) rootGone(v *view) bool {
	r := EpochRoot(v.epoch)
	if m.failed[r] {
		return true
	}
	for _, j := range m.pendingJoins {
		if j.ID == r && j.Inc != v.inc(r) {
			return true
		}
	}
	return false
}

func (m *Member) onQuery(from core.NodeID, q *Query) {
	if m.cur == nil {
		// A joiner that never acknowledged q.Epoch promises it never will,
		// as a member does below, but has no view to send. A restarted
		// process admitted into a proposal whose root then died was asked
		// in vain, and under PartitionMajority the holder stayed blocked in
		// the dead root's proposal for good (the oracle swarm, seed 131142).
		// Not about a proposal of its own id: that was a former process's,
		// whose word it cannot give (and the extra answers sent seed
		// 146050 down a path that stayed stuck).
		if EpochRoot(q.Epoch) != m.self && (m.accepted == nil || m.accepted.epoch != q.Epoch) && !slices.Contains(m.ackedEpochs, q.Epoch) {
			put(&m.vetoed, q.Epoch, true)
			m.send(from, &Sync{Abort: q.Epoch, View: FullView{Incs: []Joiner{{m.self, m.inc}}}})
		}
		return
	}
	switch {
	case m.driving && m.accepted.epoch == q.Epoch:
		// still collecting acknowledgements
	case m.cur.epoch >= q.Epoch:
		if m.cur.has(from) {
			m.send(from, &Sync{View: m.cur.full(), v: m.cur})
		} else {
			m.notice(from, false)
		}
	case EpochRoot(q.Epoch) == m.self:
		// q.Epoch was this node's proposal and was abandoned: the querier
		// must forget it, and learns this node's view, or the dead root's
		// proposal this node adopted (which may have committed).
		if a := m.adoptedBase(); a != nil {
			m.send(from, &Sync{View: a.full(), Abort: q.Epoch, Pending: true, v: a})
		} else {
			m.send(from, &Sync{View: m.cur.full(), Abort: q.Epoch, v: m.cur})
		}
	case m.vetoed[q.Epoch] || (m.accepted != nil && EpochRoot(m.accepted.epoch) == EpochRoot(q.Epoch) && m.accepted.epoch > q.Epoch && !m.accepted.descends(q.Epoch)):
		// known never to commit: vetoed, or abandoned by its root for a
		// later proposal
		m.send(from, &Sync{View: m.cur.full(), Abort: q.Epoch, v: m.cur})
	case (m.accepted != nil && m.accepted.epoch == q.Epoch) || slices.Contains(m.ackedEpochs, q.Epoch):
		// This node acknowledged it: it may commit. Its installed view,
		// though, may be newer than the querier's, who then installs it
		// (and, under PartitionMajority, measures majorities against it).
		if m.cur.has(from) {
			m.send(from, &Sync{View: m.cur.full(), v: m.cur})
		}
	default:
		// This node never acknowledged q.Epoch and promises it never will:
		// if it is a member of it, q.Epoch cannot commit.
		put(&m.vetoed, q.Epoch, true)
		m.send(from, &Sync{View: m.cur.full(), Abort: q.Epoch, v: m.cur})
	}
}

func (m *Member) onSync(from core.NodeID, s *Sync) {
	aborted := false
	// vouches says whether the sender's abort of v holds: it is v's root,
	// or a member (a joiner's answer names its incarnation, which must be
	// v's: its promise is about itself, not a former process of its id),
	// or, under PartitionMajority, its installed view has left v's branch
	// (branchLeft).
	viewless := s.v == nil && s.View.Epoch == 0
	vouches := func(v *view) bool {
		if viewless {
			return len(s.View.Incs) == 1 && s.View.Incs[0].ID == from && v.has(from) && v.inc(from) == s.View.Incs[0].Inc
		}
		if EpochRoot(s.Abort) == from || v.has(from) {
			return true
		}
		// Or the sender's installed view proves that v never committed.
		if s.Pending || m.cfg.Partition != PartitionMajority || s.View.Epoch <= v.epoch {
			return false
		}
		x := s.v
		if x == nil {
			x = &view{epoch: s.View.Epoch, ancestry: s.View.Ancestry}
		}
		return branchLeft(x, v)
	}
	if s.Abort != 0 && m.adopted != nil && m.adopted.epoch == s.Abort && vouches(m.adopted) {
		// The dead root's proposal this node's proposal (or accepted one)
		// is based on never committed: forget it.
		put(&m.vetoed, s.Abort, true)
		m.adopted = nil
		if m.driving && m.accepted.base() == s.Abort {
			m.abort(fmt.Sprintf("its base %s never committed", FormatEpoch(s.Abort)))
		}
		aborted = true
	}
	if s.Abort != 0 && m.accepted != nil && m.accepted.epoch == s.Abort && !m.driving && vouches(m.accepted) {
		put(&m.vetoed, s.Abort, true) // dead: tell whoever else asks
		m.dropAccepted()
		m.restoreAdopted()
		aborted = true
	}
	if aborted {
		defer m.afterChange()
	}
	v := s.v
	if viewless {
		return // an abort alone, from a joiner
	}
	if v == nil {
		var err error
		if v, err = newView(s.View.Epoch, s.View.Members, s.View.Ancestry, s.View.Incs, m.cfg.Fanout); err != nil {
			return
		}
		v.left = s.View.Left
	}
	m.observe(v.epoch)
	if (m.cur != nil && v.epoch <= m.cur.epoch) || v.epoch <= m.epochFloor {
		return
	}
	if s.Pending {
		// A proposal that may have committed: hold it (like a VIEW_NACK's)
		// if it follows what this node holds and contains it.
		known := m.cur
		if m.accepted != nil {
			known = m.accepted
		}
		if !m.driving && m.cur != nil && EpochRoot(v.epoch) != m.self && v.has(m.self) && v.inc(m.self) == m.inc && v.epoch > known.epoch && v.descends(known.epoch) {
			m.dropAccepted()
			m.accepted, m.acceptedFrom = v, core.None
			m.hold(v)
			m.arm(tCommit, m.commitWait(v), v.epoch)
			m.pruneFailed()
			if !aborted {
				m.afterChange()
			}
		}
		return
	}
	if !v.has(m.self) {
		if m.cur != nil {
			m.evicted(v.epoch, m.rootOf(v), from)
		}
		return
	}
	if v.inc(m.self) != m.inc {
		return // a view of another incarnation of this node
	}
	if m.driving {
		m.abort(fmt.Sprintf("superseded by installed view %s", FormatEpoch(v.epoch)))
	}
	m.install(v)
	m.afterChange()
}

// adoptedBase returns the dead root's proposal this node builds on (its
// driving proposal's base, or the one it holds again after an abort), or
// nil.
func (m *Member) adoptedBase() *view {
	switch {
	case m.driving && m.adopted != nil:
		return m.adopted
	case !m.driving && m.accepted != nil && EpochRoot(m.accepted.epoch) != m.self:
		return m.accepted
	}
	return nil
}
