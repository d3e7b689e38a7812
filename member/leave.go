// Graceful leaves: a node that finished tells the members, which exclude it
// as they would a failed member, and the view change that does says that it
// left.

package member

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// leaves is what a node knows of graceful leaves.
type leaves struct {
	// leaving: this node announced that it leaves ([LeaveRequest]); it
	// takes no further part in the protocol.
	leaving bool
	// leavers holds the members that announced they leave, with the
	// incarnation that did, until a view installed here excludes them.
	leavers map[core.NodeID]uint64
}

// leave announces this node's leave to every member of the views it holds
// and stops it. It does not wait for the view that excludes it: that view
// is the others' business, and a node that waited would wait for ever when
// every member leaves at once.
func (m *Member) leave() {
	if m.leaving {
		return
	}
	m.leaving = true
	if m.cur == nil {
		return // never admitted: nobody counts on it
	}
	x := &Leave{Epoch: m.newest().epoch, Inc: m.inc}
	for _, id := range m.cur.list() {
		m.send(id, x)
	}
	if m.accepted != nil {
		for _, id := range m.accepted.list() {
			if !m.cur.has(id) {
				m.send(id, x)
			}
		}
	}
}

// Leaving reports whether this node announced that it leaves.
func (m *Member) Leaving() bool { return m.leaving }

// onLeave handles the LEAVE of from: a member (of the installed view or of
// the held proposal, under the incarnation it names) that finished.
func (m *Member) onLeave(from core.NodeID, x *Leave) {
	if m.cur == nil {
		return
	}
	inCur := m.cur.has(from) && m.cur.inc(from) == x.Inc
	if !inCur && !(m.accepted.has(from) && m.accepted.inc(from) == x.Inc) {
		return // not a member, or a former process of that id
	}
	m.observe(x.Epoch)
	m.learnLeaver(from, x.Inc)
	// A leave is a failure that nothing refutes: the leaver's last
	// heartbeats, or a message of another layer that it sent before it
	// left, must not make this node (as root) doubt it.
	delete(m.doubted, from)
	delete(m.aliveAt, from)
	m.onLocalFailure(from)
}

// learnLeaver records that member id, under incarnation inc, leaves.
func (m *Member) learnLeaver(id core.NodeID, inc uint64) {
	if old, ok := m.leavers[id]; ok && old == inc {
		return
	}
	put(&m.leavers, id, inc)
	m.env.Emit(Leaving{Node: id})
}

// isLeaver reports whether member id of v announced that it leaves, in the
// incarnation v holds.
func (m *Member) isLeaver(v *view, id core.NodeID) bool {
	inc, ok := m.leavers[id]
	return ok && v.has(id) && v.inc(id) == inc
}

// leftOf returns those of ids, members of v, that announced they leave.
func (m *Member) leftOf(v *view, ids []core.NodeID) []core.NodeID {
	if len(m.leavers) == 0 {
		return nil
	}
	var out []core.NodeID
	for _, id := range ids {
		if m.isLeaver(v, id) {
			out = append(out, id)
		}
	}
	return out
}

// learnReportedLeavers records the leavers a report lists: members of the
// views this node holds, named in the report's failed list with the
// incarnation these views give them.
func (m *Member) learnReportedLeavers(r *Report) {
	for _, id := range r.Left {
		i := slices.IndexFunc(r.Failed, func(j Joiner) bool { return j.ID == id })
		if i < 0 {
			continue
		}
		inc := r.Failed[i].Inc
		if (m.cur.has(id) && m.cur.inc(id) == inc) || (m.accepted.has(id) && m.accepted.inc(id) == inc) {
			m.learnLeaver(id, inc)
			delete(m.doubted, id)
			delete(m.aliveAt, id)
		}
	}
}

// learnProposedLeavers records the leavers that p, a proposal this node
// accepts, names: members of the views this node holds (p's base first),
// under the incarnation these give them. The root learnt of the leave,
// and this node may not have: the leaver's LEAVE may still be on its way
// (relayed round a cut link, say), or lost with the last frames of a
// process that exited; meanwhile this node's detector, told nothing,
// would take the leaver's silence for a crash and declare it failed.
// Learnt here, the leave reaches the detector (Leaving) while the view
// change that excludes the leaver runs.
func (m *Member) learnProposedLeavers(p *Prepare) {
	views := []*view{m.accepted, m.cur}
	if m.cur != nil && len(p.Ancestry) > 0 && m.cur.epoch == p.Ancestry[0] {
		views = []*view{m.cur, m.accepted}
	}
	for _, id := range p.Left {
		if id == m.self {
			continue
		}
		for _, v := range views {
			if v.has(id) {
				m.learnLeaver(id, v.inc(id))
				break
			}
		}
	}
}

// proposalLeft is the Left list of a proposal on base that excludes failed:
// the failed members known to leave, and, when base is a dead root's
// proposal that this root adopts (not committed), the leavers base itself
// excluded, which the members that installed none of it have yet to learn
// of.
func (m *Member) proposalLeft(base *view, committed bool, failed []core.NodeID) []core.NodeID {
	left := m.leftOf(base, failed)
	if !committed {
		for _, id := range base.left {
			if !slices.Contains(left, id) {
				left = append(left, id)
			}
		}
	}
	return left
}

// installedLeft returns the departed nodes of an installed view v that
// left by announcing it.
func installedLeft(v *view, departed []core.NodeID) []core.NodeID {
	if len(v.left) == 0 {
		return nil
	}
	var out []core.NodeID
	for _, id := range departed {
		if !v.has(id) && slices.Contains(v.left, id) {
			out = append(out, id)
		}
	}
	return out
}

// pruneLeavers forgets the leavers that installed view v no longer holds
// under the incarnation that left: the change is done.
func (m *Member) pruneLeavers(v *view) {
	for id, inc := range m.leavers {
		if !v.has(id) || v.inc(id) != inc {
			delete(m.leavers, id)
		}
	}
	if len(m.leavers) == 0 {
		m.leavers = nil
	}
}
