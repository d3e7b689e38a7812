// Installing views.

package member

import (
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// tellLeftBehind tells the members of the view this node leaves that v
// lacks that their view is over, now and at the next probes (leaveBehind),
// unless this node's own detector declares them failed: v's root may never
// have had them in a view, and so never probes them.
func (m *Member) tellLeftBehind(departed []core.NodeID, v *view) {
	for _, id := range departed {
		if id != m.self && !v.has(id) {
			m.notice(id, true)
			if _, dead := m.detected[id]; !dead {
				m.leaveBehind(id, m.cfg.MaxProbes)
			}
		}
	}
}

// install makes v the installed view and tells the other layers.
func (m *Member) install(v *view) {
	if !v.has(m.self) {
		panic(fmt.Sprintf("member: %v installing view %s that does not contain it", m.self, FormatEpoch(v.epoch)))
	}
	if m.cur != nil && v.epoch <= m.cur.epoch {
		panic(fmt.Sprintf("member: %v installing view %s after %s", m.self, FormatEpoch(v.epoch), FormatEpoch(m.cur.epoch)))
	}
	prev := m.cur
	m.cur = v
	m.observe(v.epoch)
	if m.accepted != nil && !m.keeps(m.accepted, v) {
		if m.driving {
			m.env.Emit(StabilizationAborted{Epoch: m.accepted.epoch, At: m.now(), Reason: fmt.Sprintf("%s installed", FormatEpoch(v.epoch))})
		}
		m.dropAccepted()
	}
	if m.joining {
		m.joining = false
	}
	if via := m.mergeVia; m.mergeEpoch != 0 && v.epoch > m.mergeEpoch && via != core.None && !v.has(via) {
		// A merge given up for a view of this node's own, newer than the
		// one it was merging into: the member that told of that view may
		// stay in it for good, its root gone (a restarted root joined this
		// node's side instead, and the other members, joiners of the other
		// side, are on no list of this side's probes: the oracle swarm,
		// seed 967016, paper). Tell it, now and at the next probes.
		m.notice(via, true)
		m.leaveBehind(via, m.cfg.MaxProbes)
	}
	m.stopMerging()
	m.cancel(tJoin)
	m.minorityEpoch = 0
	joined, departed := diff(prev, v)
	// A pending join of a node that v admits under another incarnation is
	// stale: it was queued before v's root admitted that process. Handed
	// to the root (forwardJoins), it took the admitted process out again,
	// as a member re-joining under a new incarnation (the oracle swarm,
	// seed 5342883, majority: a former root passed on a request of a
	// member's crashed former self, the root excluded the live process and
	// then counted a minority where four of seven members lived). A process
	// that is in fact newer than the admitted one is still joining and asks
	// again.
	m.pendingJoins = slices.DeleteFunc(m.pendingJoins, func(j pendingJoin) bool {
		return v.has(j.ID) && v.inc(j.ID) != j.Inc && slices.Contains(joined, j.ID)
	})
	if prev != nil && v.base() != prev.epoch && (!v.descends(prev.epoch) || !prev.has(EpochRoot(v.epoch))) {
		// This node skipped views, to a view whose root may never have had
		// the members it leaves behind in a view (so it never probes them):
		// it moved to another lineage (a merge after a partition), or v
		// descends from prev through proposals it never installed (a dead
		// root's proposal adopted by a root from outside prev). The members
		// of prev that v lacks may not know that the view they share with
		// this node is over: tell them, whether this node believes them
		// failed or not (a reporter's guess, an acknowledgement that timed
		// out, a detector's verdict about a slow node may be wrong), and
		// tell them again at the next probes, in case the notice is lost,
		// unless this node's own detector declares them failed.
		m.tellLeftBehind(departed, v)
	}
	for _, id := range departed {
		if id != m.self && !v.has(id) && EpochRoot(v.epoch) == m.self {
			m.dropped = append(slices.DeleteFunc(m.dropped, func(d core.NodeID) bool { return d == id }), id)
		}
	}
	m.dropped = slices.DeleteFunc(m.dropped, v.has)
	if over := len(m.dropped) - m.cfg.MaxProbes; over > 0 {
		m.dropped = slices.Delete(m.dropped, 0, over)
	}
	for _, id := range departed {
		if id != m.self && !v.has(id) {
			m.departed = append(m.departed, id)
			put(&m.goneInc, id, prev.inc(id))
			// The detector stops watching a node that leaves the view: its
			// verdict goes stale (it is given afresh if the node returns),
			// and so does the failure it made. A held proposal that lists
			// the node again (a dead root's, admitting it) otherwise kept
			// it failed for good, with no detector left to withdraw it: the
			// proposal's heir counted it lost and stayed in a minority,
			// refusing every other proposal (the partial-partition swarm,
			// seed 38415, gossip). A proposal's member that no detector
			// watches is judged by its acknowledgement, as a joiner is.
			delete(m.detected, id)
			if !m.soft[id] {
				m.unmark(id)
			}
		}
	}
	// The detector watches a node that enters the view afresh (it follows
	// core.MembersChanged; a restarted process that keeps its id is listed
	// in Renewed) and declares it failed again if it still is: its
	// verdicts about the node's previous stay in (or absence from) the view
	// are void.
	if prev == nil {
		// Every member joined: visit the verdicts, not the n members
		// (unmark only clears what m.failed holds).
		for id := range m.failed {
			if id != m.self && v.has(id) {
				m.unmark(id)
			}
		}
		for id := range m.detected {
			if id != m.self && v.has(id) {
				delete(m.detected, id)
			}
		}
	} else {
		for _, id := range joined {
			if id != m.self {
				m.unmark(id)
				delete(m.detected, id)
			}
		}
	}
	// Verdicts set aside when a proposal took this node back (staleVerdicts)
	// go too: the detector watches those members afresh, as it does the
	// renewed ones.
	renew := renewed(prev, joined, m.self)
	for _, id := range m.stale {
		if v.has(id) {
			m.unmark(id)
			delete(m.detected, id)
			if !slices.Contains(renew, id) {
				renew = append(renew, id)
			}
		}
	}
	m.stale = nil
	m.departed = slices.DeleteFunc(m.departed, v.has)
	if over := len(m.departed) - m.cfg.MaxProbes; over > 0 {
		m.departed = slices.Delete(m.departed, 0, over)
	}
	m.pruneFailed()
	if m.adopted != nil && !m.keeps(m.adopted, v) {
		m.adopted = nil
	}
	m.ackedEpochs = slices.DeleteFunc(m.ackedEpochs, func(e uint64) bool { return e <= v.epoch })
	m.held = slices.DeleteFunc(m.held, func(h *view) bool { return !m.keeps(h, v) })
	for e := range m.vetoed {
		if e <= v.epoch {
			delete(m.vetoed, e)
		}
	}
	// An emptied map is dropped (put makes it again): a machine at rest
	// holds no per-proposal state (the slices keep their few words).
	if len(m.vetoed) == 0 {
		m.vetoed = nil
	}
	m.env.Emit(core.MembersChanged{Epoch: v.epoch, Members: v.list(), Renewed: renew})
	m.pruneLeavers(v)
	m.env.Emit(ViewInstalled{Epoch: v.epoch, Members: v.list(), Joined: joined, Departed: departed, Left: installedLeft(v, departed)})
}

// renewed returns the joiners of a view that prev held too, under an earlier
// incarnation: processes that restarted and joined again under their id.
// The detector watches them afresh (core.MembersChanged.Renewed): its verdict
// may be about the former incarnation, or about the new one that died again
// before this view, and install voids it either way, so without a fresh
// watch a dead member could stay in the view until the next change.
func renewed(prev *view, joined []core.NodeID, self core.NodeID) []core.NodeID {
	if prev == nil {
		return nil
	}
	var out []core.NodeID
	for _, id := range joined {
		if id != self && prev.has(id) {
			out = append(out, id)
		}
	}
	return out
}

// keeps reports whether the proposal p, held when v is installed, stays
// held: it may still be a view after v for this node. It does if it is
// newer and may descend from v. It does too if it admits this node as a
// joiner: the node accepted it while merging into another lineage, and
// its own lineage's older view, whose commit was late, does not undo the
// merge (p may commit: it has this node's ACK). Any other proposal that
// is newer but descends from another view is a sibling of v's lineage,
// which never commits (it needs this node's ACK, which the node never
// gave, or gave before a proposal that superseded it, see onPrepare).
// Kept, it would serve as the base of this node's next proposal if the
// node became root, and the views installed would fork (a gossip-detector
// swarm, seed 3338917836, under PartitionMajority: n3 installed 3.n1
// while holding n2's 3.n2, adopted from a refusal, then proposed on 3.n2
// and installed a view that did not descend from 3.n1).
func (m *Member) keeps(p, v *view) bool {
	if p.epoch <= v.epoch {
		return false
	}
	return mayDescend(p.epoch, p.ancestry, v.epoch) || slices.ContainsFunc(p.joined, func(j Joiner) bool { return j.ID == m.self && j.Inc == m.inc })
}

// dropAccepted forgets the accepted proposal.
func (m *Member) dropAccepted() {
	m.accepted, m.acceptedPrep, m.acceptedFull, m.acceptedFrom = nil, nil, nil, core.None
	m.acked.off()
	m.ackSent = false
	m.driving = false
	m.cancel(tAck)
	m.cancel(tCommit)
}

// restoreAdopted makes the adopted proposal the accepted one again after
// the proposal based on it was abandoned: it may have committed.
//
// More generally, when the proposal this node held is abandoned, the
// newest proposal it accepted before (from another root) that is not known
// to be dead may have committed: it becomes the accepted one again (a chain
// of adoptions can be abandoned link by link).
func (m *Member) restoreAdopted() {
	m.adopted = nil
	if m.accepted != nil {
		return
	}
	var best *view
	for _, v := range m.held {
		e := v.epoch
		if m.vetoed[e] || (m.cur != nil && e <= m.cur.epoch) || EpochRoot(e) == m.self || !v.has(m.self) || v.inc(m.self) != m.inc {
			continue
		}
		if best == nil || e > best.epoch {
			best = v
		}
	}
	if best == nil {
		return
	}
	m.accepted, m.acceptedFrom = best, core.None
	m.arm(tCommit, m.commitWait(best), best.epoch)
	m.pruneFailed()
}

// hold remembers an accepted proposal until a view at least as new is
// installed (see restoreAdopted).
func (p *proposals) hold(v *view) {
	for i, h := range p.held {
		if h.epoch == v.epoch {
			p.held[i] = v
			return
		}
	}
	if len(p.held) < 64 {
		p.held = append(p.held, v)
	}
}

// heldView returns the held proposal numbered e, or nil.
func (p *proposals) heldView(e uint64) *view {
	for _, v := range p.held {
		if v.epoch == e {
			return v
		}
	}
	return nil
}
