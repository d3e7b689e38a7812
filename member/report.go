// Failure detection and reports (§3.4–3.6, Figure 3(a)).

package member

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// failures is what a node knows of failures: the verdicts of its detector,
// the failures reported to it or found by its own timeouts, and its
// reports to the root.
type failures struct {
	failed   map[core.NodeID]bool          // members declared failed (detector or reports)
	failedAt map[core.NodeID]time.Duration // when each failure became known
	// detected is what this node's detector declares failed now, with the
	// incarnation the verdict is about (the one this node's views held).
	detected map[core.NodeID]uint64
	// reportTo is the root the last report went to, reportTries how many
	// reports it has not acknowledged.
	reportTo    core.NodeID
	reportTries int
	soft        map[core.NodeID]bool // failures known only from reports or ACK timeouts
	// failedInc holds the incarnations a failure was recorded for: a
	// re-joining process's new incarnation can fail too, and a verdict about
	// a former incarnation does not concern the new one.
	failedInc map[core.NodeID][]uint64
	// stale holds the members of a proposal that took this node back
	// (merging) that it held failed then: it does not report them, and the
	// next view it installs drops its verdicts about those it holds and
	// lists them in core.MembersChanged's Renewed, for the detector to
	// watch them afresh (staleVerdicts).
	stale []core.NodeID
	// reported holds the failures known only from other members' reports
	// (not this node's detector), doubted the members whose reported
	// failure this node, as root, set aside because it heard from them
	// after the report, with the epoch of its installed view then (see
	// doubt).
	reported map[core.NodeID]bool
	doubted  map[core.NodeID]uint64
	// aliveAt holds when this node's detector last found members alive
	// that it had suspected or declared failed (see refutedLately).
	aliveAt map[core.NodeID]time.Duration
	// restarted holds the incarnations of members that a view this node
	// holds lists and that are known dead because the process asked to
	// join under another incarnation: a process restarts only after its
	// former self ended. Their failure is no verdict to withdraw: the
	// detector's core.Recovered and a message from the id (see doubt)
	// are about the new process, and a proposal admitting it may abort
	// while the held views still list the former one (see unmark).
	restarted map[core.NodeID][]uint64
}

// maxReportTries is how many unacknowledged reports a node sends to a root
// before it takes the root for failed.
const maxReportTries = 3

// maxReportBackoff caps the wait between reports to a root that this
// node's detector watches and that acknowledged none of maxReportTries
// (see reportWait): 8 ReportRetry, 4 s with the default.
const maxReportBackoff = 8

func (m *Member) onLocalFailure(x core.NodeID) {
	if x == m.self {
		return
	}
	inc := m.accepted.inc(x)
	if m.cur.has(x) {
		inc = m.cur.inc(x)
	}
	put(&m.detected, x, inc)
	if m.cur == nil || (!m.cur.has(x) && !m.accepted.has(x)) {
		return
	}
	known := m.failed[x]
	m.markDetected(x, inc) // now the detector's own verdict
	m.failPendingJoin(x, inc)
	if !known {
		m.reportFailures()
	}
}

// onRecovered withdraws x's failure. A root whose running view change
// excludes x gives it up (if x was all it was about, the view stays): a
// process that an overloaded host starved past its detector's timeouts
// resumes a few hundred milliseconds after the verdict, while the change
// is still running, and excluding it would only make it ask to come
// back. Not under PartitionMajority, where a side's recovery comes with
// the heal of a partition, which its merge settles.
func (m *Member) onRecovered(x core.NodeID) {
	delete(m.detected, x)
	if m.failed[x] {
		m.unmark(x)
		if m.cur != nil && m.rootOf(m.newest()) == m.self {
			if m.driving && !m.accepted.has(x) && m.cur.has(x) && m.cfg.Partition == PartitionPaper {
				m.restart = true
			}
			m.rootStep()
		}
	}
	if m.cur == nil {
		return
	}
	if !m.cur.has(x) && !m.accepted.has(x) {
		m.notice(x, false)
	}
}

// pruneFailed forgets failures of nodes that are in no view this node holds,
// and counts as failed the members of these views that its detector
// declares failed (a detector reports a failure once, possibly before the
// node was a member of this node's view).
func (m *Member) pruneFailed() {
	m.pruneRestarted()
	for id := range m.failed {
		if !m.cur.has(id) && !m.accepted.has(id) {
			m.unmark(id)
		}
	}
	for id, inc := range m.detected {
		m.markDetected(id, inc)
	}
}

// markDetected counts id failed by its detector's verdict, given about the
// incarnation inc (the installed view's, else the held proposal's), if a
// view this node holds has it. A process that the held proposal lists under
// a newer incarnation than the installed view (it restarted and joined
// again) is counted failed in that one too: the detector watches the newer
// process now, and the former one died before it started. Counted failed
// in the installed view's incarnation only, a proposal's dead root stayed
// alive for this node, which waited for it for good (the oracle swarm,
// seeds 3743248 and 3867740; in the second the restart was too quick for
// the detector to see the former process die).
func (m *Member) markDetected(id core.NodeID, inc uint64) {
	inCur := m.cur.has(id) && m.cur.inc(id) == inc
	if inCur || (m.accepted.has(id) && m.accepted.inc(id) == inc) {
		m.markFailed(id, inc, false, m.now())
	}
	if inCur && m.accepted.has(id) && m.accepted.inc(id) != inc {
		m.markFailed(id, m.accepted.inc(id), false, m.now())
	}
}

// failPendingJoin counts failed, on a verdict about member id of the
// installed view (incarnation inc), the process whose join under another
// incarnation this root holds: the detector watches the id, and the
// former process was already known dead when the new one asked. Left
// pending, the join of a restarted process that crashed again went into
// every proposal, which it never acknowledged, and no view came (the
// oracle swarm, seed 3248248488). A verdict that was about the former
// process after all (it restarted before its detector noticed) costs the
// new one a retry of its join.
func (m *Member) failPendingJoin(id core.NodeID, inc uint64) {
	if !m.cur.has(id) || m.cur.inc(id) != inc {
		return
	}
	for _, j := range m.pendingJoins {
		if j.ID == id && j.Inc != inc {
			m.markFailed(id, j.Inc, false, m.now())
		}
	}
}

// markFailed records that id failed; soft marks a failure this node's
// detector did not declare (a report, an ACK timeout).
func (f *failures) markFailed(id core.NodeID, inc uint64, soft bool, now time.Duration) {
	if !f.failed[id] {
		put(&f.failed, id, true)
		put(&f.failedAt, id, now)
	}
	if !slices.Contains(f.failedInc[id], inc) {
		put(&f.failedInc, id, append(f.failedInc[id], inc))
	}
	if _, det := f.detected[id]; soft && !det {
		put(&f.soft, id, true)
	} else {
		delete(f.soft, id)
		delete(f.reported, id)
	}
}

// unmark forgets that id failed, but in an incarnation that restarted.
func (f *failures) unmark(id core.NodeID) {
	delete(f.soft, id)
	delete(f.reported, id)
	if incs := f.restarted[id]; len(incs) > 0 && f.failed[id] {
		put(&f.failedInc, id, slices.Clone(incs))
		return
	}
	delete(f.failed, id)
	delete(f.failedAt, id)
	delete(f.failedInc, id)
}

// markRestarted records that id's incarnation inc ended: the process
// asked to join under another one.
func (m *Member) markRestarted(id core.NodeID, inc uint64) {
	if !slices.Contains(m.restarted[id], inc) {
		put(&m.restarted, id, append(slices.Clone(m.restarted[id]), inc))
	}
	m.markFailed(id, inc, false, m.now())
}

// pruneRestarted forgets the restarted incarnations that no view this
// node holds lists any more, and with the last of an id's, its failure
// if that concerned only them.
func (m *Member) pruneRestarted() {
	for id, incs := range m.restarted {
		held := func(inc uint64) bool {
			return (m.cur.has(id) && m.cur.inc(id) == inc) || (m.accepted.has(id) && m.accepted.inc(id) == inc)
		}
		keep := slices.DeleteFunc(slices.Clone(incs), func(inc uint64) bool { return !held(inc) })
		if len(keep) > 0 {
			put(&m.restarted, id, keep)
			continue
		}
		delete(m.restarted, id)
		if !slices.ContainsFunc(m.failedInc[id], held) {
			m.unmark(id)
		}
	}
}

// failedIn returns the members of v known to have failed, in view order.
func (f *failures) failedIn(v *view) []core.NodeID {
	var out []core.NodeID
	for id := range f.failed {
		if f.isFailed(v, id) {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b core.NodeID) int { return v.pos(a) - v.pos(b) })
	return out
}

// isFailed reports whether member id of v is known to have failed in the
// incarnation v holds.
func (f *failures) isFailed(v *view, id core.NodeID) bool {
	if !f.failed[id] || !v.has(id) {
		return false
	}
	return slices.Contains(f.failedInc[id], v.inc(id))
}

// reportFailures sends the failed members of the newest view to its root:
// NODE_FAILURE, or ROOT_FAILURE when the root is among them (Figure 3(a),
// "on failure of a node"). A root handles its own knowledge directly.
func (m *Member) reportFailures() {
	n := m.newest()
	if n == nil {
		return
	}
	list := m.failedIn(n)
	if len(list) == 0 {
		m.cancel(tReport)
		return
	}
	r := m.rootOf(n)
	if r != m.self && len(m.stale) > 0 {
		// Set aside (staleVerdicts): acted on here, not reported.
		list = slices.DeleteFunc(list, func(id core.NodeID) bool { return slices.Contains(m.stale, id) })
		if len(list) == 0 {
			m.cancel(tReport)
			return
		}
	}
	if r == m.self {
		m.cancel(tReport)
		m.rootStep()
		return
	}
	failed := make([]Joiner, len(list))
	for i, id := range list {
		failed[i] = Joiner{id, n.inc(id)}
	}
	if r != m.reportTo {
		m.reportTo, m.reportTries = r, 0
	}
	m.reportTries++
	m.send(r, &Report{Root: m.failed[n.root()], Epoch: n.epoch, Failed: failed, Left: m.leftOf(n, list)})
	m.arm(tReport, m.reportWait(), 0)
}

// reportWait is how long this node waits for the acknowledgement of the
// report it just sent: ReportRetry, and once a root that the detector
// watches has left maxReportTries reports unanswered, twice as long per
// report beyond them, up to maxReportBackoff ReportRetry. Such a root is
// alive as far as the detector knows and is kept until its verdict (see
// onReportTimeout); a root that a whole group reports to at once, on a
// host that starves it, only falls further behind for every copy queued
// before it (125 members reporting twice a second to a next root on 2
// cores running 128 processes), while the first copy it reads starts
// the view change.
func (m *Member) reportWait() time.Duration {
	beyond := m.reportTries - maxReportTries
	if beyond <= 0 || m.reportTo == core.None || !m.watched(m.reportTo, m.reportInc()) {
		return m.cfg.ReportRetry
	}
	return m.cfg.ReportRetry * time.Duration(min(1<<min(beyond, 30), maxReportBackoff))
}

// reportInc is the incarnation of reportTo that the reports went to: the
// held proposal's, else the installed view's.
func (m *Member) reportInc() uint64 {
	if !m.accepted.has(m.reportTo) {
		return m.cur.inc(m.reportTo)
	}
	return m.accepted.inc(m.reportTo)
}

// onReportTimeout reports again. A root that acknowledged none of
// maxReportTries reports is taken for failed (the paper's timeout detection,
// §2.2: "excessive delay in response ... leads to the assumption that the
// process has failed"): this node's detector may not watch it (it may have
// entered this node's views only through a proposal). A root that the
// detector watches is handed to it instead (a core.PeerHint, again every
// maxReportTries reports) and taken for failed only on its verdict:
// reachability is not liveness. The detector declares a crashed root in
// its own bound (a refused connection to it, soon after the crash),
// while a root that an overloaded host starves, or that is busy with the
// reports of a whole group, is alive however long it leaves reports
// unanswered (see onAckTimeout): when the old root's death makes it the
// root, every member's report comes to it at once, and a fixed count of
// unanswered reports had the members after it exclude it alive and
// compete with it for the view change (testdata/busy-new-root.txt).
func (m *Member) onReportTimeout() {
	if m.reportTries >= maxReportTries && m.reportTo != core.None && m.reportTo != m.self {
		inc := m.reportInc()
		switch {
		case !m.watched(m.reportTo, inc):
			m.markFailed(m.reportTo, inc, true, m.now())
		case m.reportTries%maxReportTries == 0:
			m.env.Emit(core.PeerHint{Node: m.reportTo, Reason: "no acknowledgement of a failure report"})
		}
	}
	m.reportFailures()
}

func (m *Member) onReport(from core.NodeID, r *Report) {
	if m.cur == nil {
		return
	}
	n := m.newest()
	if !n.has(from) && !m.cur.has(from) {
		if r.Epoch > m.cur.epoch && r.Epoch != n.epoch && n.descends(r.Epoch) {
			// An outsider of both views holds one of the held proposal's
			// ancestors above the installed view: a member of that
			// ancestor, which the proposal then excluded. It may have
			// installed it: ask, as from a member below. Its report is
			// still ignored. A dead root's proposal on a view installed
			// behind a partition left its next root counting majorities
			// in the view before, in a minority there, while the only
			// live node that had seen the commit was one the proposal
			// excluded (the oracle swarm, seed 3498115).
			m.send(from, &Query{Epoch: r.Epoch})
		}
		m.notice(from, false) // footnote 1: messages of excluded nodes are ignored
		return
	}
	m.observe(r.Epoch)
	m.send(from, &ReportAck{Epoch: n.epoch, Failed: r.Failed})
	m.learnReportedLeavers(r)
	if m.cur.has(from) && (r.Epoch > n.epoch || r.Epoch > m.cur.epoch && r.Epoch != n.epoch && n.descends(r.Epoch)) {
		// The reporter holds a view newer than anything this node does:
		// ask what became of it. Installed, it comes back (VIEW_SYNC) and
		// this node installs it too; under PartitionMajority a node that
		// never learned of a view its peers installed measured majorities
		// against its own, older one, and stayed in a minority for good
		// while a majority of the newer view lived (the oracle swarm,
		// seed 326194). So does one whose held proposal builds on the
		// reporter's view, which this node never saw installed: a dead
		// root's proposal on a view installed behind a partition left this
		// node counting majorities in the view before, as the root of
		// a proposal whose own members were mostly dead, while a majority
		// of the installed view lived and reported to it (seed 3061610).
		m.send(from, &Query{Epoch: r.Epoch})
	}
	grew := false
	for _, f := range r.Failed {
		if f.ID == m.self || (m.failed[f.ID] && slices.Contains(m.failedInc[f.ID], f.Inc)) {
			continue // duplicates are acknowledged and disregarded (§3.4)
		}
		if !(n.has(f.ID) && n.inc(f.ID) == f.Inc) && !(m.cur.has(f.ID) && m.cur.inc(f.ID) == f.Inc) {
			continue // not a member, or a report about a former incarnation
		}
		inc, known := m.leavers[f.ID]
		leaver := known && inc == f.Inc
		// Only a node of the installed view, which the detector watches,
		// is doubted: the doubt leaves its failure to the detector's
		// verdict, which never comes about anyone else. A joiner that a
		// partition's heal showed alive a moment before the view left it
		// out, dead since, was doubted for as long as the root's view
		// stood, and every proposal waited for it and cut its live parent
		// instead (the partial-partition swarm, seed 2292, gossip). A
		// joiner dropped for nothing asks again. A member re-joining under
		// a new incarnation is still doubted: the detector watches its id,
		// and its verdict counts the new incarnation failed too
		// (markDetected), while a report counted at once dropped the new
		// process's join whenever a member's verdict on the former one
		// was passed on to it (seed 2103).
		if m.cur.has(f.ID) && !leaver {
			if e, ok := m.doubted[f.ID]; ok && e == m.cur.epoch {
				continue // heard from since such a report: its own detector decides (doubt)
			}
			if _, det := m.detected[f.ID]; !det && m.refutedLately(f.ID) {
				put(&m.doubted, f.ID, m.cur.epoch)
				continue
			}
		}
		m.markFailed(f.ID, f.Inc, !leaver, m.now()) // a leave is no guess to forget
		if _, det := m.detected[f.ID]; !det && !leaver {
			put(&m.reported, f.ID, true) // a leave is not refuted by the leaver's last messages
		}
		grew = true
	}
	switch {
	case m.rootOf(n) == m.self && (grew || !m.driving):
		m.rootStep()
	case m.rootOf(n) != m.self && grew:
		m.reportFailures() // not the root (any more): pass it on
	}
}

// forgetRejoined forgets the failures of nodes that a view change admits
// (again): the failure concerned their former incarnation.
//
// Only a new incarnation wipes the detector's verdict: a node re-admitted
// under the same incarnation (an excluded node merging back) is still
// failed if the detector says so now. A failure recorded earlier and not
// vouched for by the detector any more (it stopped watching the node when
// the node left the view) is forgotten: kept, it would be reported again
// each time the node is admitted, and the node excluded again, for ever.
func (m *Member) forgetRejoined(joined []Joiner) {
	for _, j := range joined {
		old, known := m.cur.inc(j.ID), m.cur.has(j.ID)
		if !known {
			old, known = m.goneInc[j.ID]
		}
		if known && old == j.Inc {
			if inc, det := m.detected[j.ID]; det && inc == j.Inc {
				continue
			}
			if !m.cur.has(j.ID) {
				m.unmark(j.ID)
			}
			continue
		}
		m.unmark(j.ID) // the detector's verdict stays, about the former incarnation
	}
}

// staleVerdicts sets aside this node's failure verdicts about the members
// of v, a proposal that takes it back (it was excluded, and merges). They
// were given while it watched its own view, cut off from v's side, which,
// having excluded it, neither gossips nor beats to it any more: after a
// partition its detector may hold v's live members failed for good.
// Reported to v's root, they aborted every proposal to merge the two sides
// (a swarm over the gossip detector, and one over the heartbeat detector,
// stayed stuck so), and the root, believing its own members failed, could
// even find itself in a minority. So this node does not report them; it
// still acts on them itself (a dead root of v is one to take over from).
// The next view it installs drops them, and its detector watches those
// members afresh (Renewed), declaring again one that is dead.
func (m *Member) staleVerdicts(v *view) {
	set := func(id core.NodeID) {
		if id != m.self && v.has(id) && !slices.Contains(m.stale, id) {
			m.stale = append(m.stale, id)
		}
	}
	for id := range m.failed {
		set(id)
	}
	for id := range m.detected {
		set(id)
	}
}

// doubt sets aside the failure of x that this root knows only from a
// report, because a message from x came after the report: x ran after
// some member's detector declared it. On an overloaded host a process
// starved past its monitor's timeouts resumes and refutes a few hundred
// milliseconds after the verdict, while the view change that excludes it
// is still running; the root then gives that change up (if x was all it
// was about, the view stays) and, until it installs another view, acts on
// x's failure only on its own detector's verdict, which a crashed x gets
// in the detector's bound (it watches every member of the installed
// view), so that the reporter, whose verdict may stand until the
// refutation reaches it, cannot exclude x again meanwhile. A message
// from x sent before its crash and delivered after the report would
// delay its exclusion until then, never prevent it.
func (m *Member) doubt(x core.NodeID) {
	if m.cur == nil || !m.cur.has(x) || m.now() <= m.failedAt[x] || m.rootOf(m.newest()) != m.self {
		return
	}
	for id, e := range m.doubted {
		if e != m.cur.epoch {
			delete(m.doubted, id)
		}
	}
	put(&m.doubted, x, m.cur.epoch)
	m.unmark(x)
	if m.driving {
		m.restart = true
	}
	m.rootStep()
}

// alive records that this node's detector found x alive after it had
// suspected it or declared it failed.
func (m *Member) alive(x core.NodeID) {
	now := m.now()
	for id, at := range m.aliveAt {
		if now-at > m.doubtWindow() {
			delete(m.aliveAt, id)
		}
	}
	put(&m.aliveAt, x, now)
}

// refutedLately reports whether this node's detector found x alive,
// after a suspicion or a verdict, within the last doubtWindow. A report of
// x's failure that arrives then is set aside as one from a member heard
// after the report is (see doubt): on an overloaded host the report of a
// verdict that the suspect refuted a few hundred milliseconds later can
// reach the root after the refutation did (the reporter's first report
// went to a dead root, or the root was starved itself).
func (m *Member) refutedLately(x core.NodeID) bool {
	at, ok := m.aliveAt[x]
	return ok && m.now()-at <= m.doubtWindow()
}

// doubtWindow is how long after a refutation reports of the refuted
// member's failure are doubted: as long as a reporter retries its
// reports before it takes a root for failed (maxReportTries·ReportRetry,
// 1.5 s by default), which a report older than the refutation has taken
// at most, to its first live root.
func (m *Member) doubtWindow() time.Duration {
	return maxReportTries * m.cfg.ReportRetry
}
