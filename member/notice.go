// Exclusion notices and merging after partitions.

package member

import (
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// outsiders are the nodes outside this node's views that it tells so: those
// that left its views, those it excluded as root, those a view skipping
// views left behind, and when it last told each.
type outsiders struct {
	departed []core.NodeID // most recent last
	// dropped holds the nodes this node excluded as the root of a view
	// (most recent last, at most MaxProbes): it keeps probing them after
	// another node became root, since that root may never have known them.
	dropped []core.NodeID
	// left holds the members of a former view that a view skipping views
	// dropped (see install): told again at each probe, maxLeftProbes times.
	left       []leftNode
	goneInc    map[core.NodeID]uint64 // the incarnation of nodes that left this node's views
	probeNext  int                    // rotation through the node list for probes
	lastNotice map[core.NodeID]time.Duration
}

// maxLeftProbes is how many probes (one per ProbeInterval) tell a member
// left behind by a view that skipped views that its view is over, after the
// notice sent at once (see install).
const maxLeftProbes = 5

// leftNode is a member left behind and how often it was probed since.
type leftNode struct {
	id     core.NodeID
	probes int
}

// notice tells an outsider that this node's view does not contain it, at
// most once per NoticeInterval unless forced.
func (m *Member) notice(to core.NodeID, force bool) { m.noticeFinal(to, force, false) }

// noticeFinal is notice; final marks the notice as one the receiver
// obeys whatever the epochs ([NotifyExcluded]).
func (m *Member) noticeFinal(to core.NodeID, force, final bool) {
	if m.cur == nil || to == m.self || m.cur.has(to) || m.accepted.has(to) {
		return
	}
	if last, ok := m.lastNotice[to]; ok && m.now()-last < m.cfg.NoticeInterval && !force {
		return
	}
	put(&m.lastNotice, to, m.now())
	m.send(to, &Notice{Epoch: m.cur.epoch, Root: m.rootOf(m.cur), Final: final})
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
		if d != m.self && !m.cur.has(d) && !m.accepted.has(d) && n < m.cfg.MaxProbes {
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
		if !m.cur.has(id) && !m.accepted.has(id) {
			put(&m.lastNotice, id, m.now())
			m.send(id, x)
		}
	}
}

// leaveBehind records a member of a former view that a view skipping views
// dropped, to be probed maxLeftProbes times (the most recent MaxProbes).
func (o *outsiders) leaveBehind(id core.NodeID, maxProbes int) {
	o.left = slices.DeleteFunc(o.left, func(l leftNode) bool { return l.id == id })
	o.left = append(o.left, leftNode{id: id})
	if over := len(o.left) - maxProbes; over > 0 {
		o.left = slices.Delete(o.left, 0, over)
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
	m.left = slices.DeleteFunc(m.left, func(l leftNode) bool { return m.cur.has(l.id) || m.accepted.has(l.id) })
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
		if m.accepted == nil && x.Root != m.self && x.Epoch > m.epochFloor {
			// A joiner learns where a root is.
			m.mergeRoot = x.Root
			m.sendJoin()
			m.mergeRoot = core.None
		}
		return
	}
	if x.Final {
		// The sender's group goes on without this node for good: the
		// views it formed since, taking the others for failed (it was
		// stopped or cut off), are a side nobody will merge with.
		m.env.Emit(Evicted{Epoch: x.Epoch, Root: x.Root})
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
	case x.Epoch > m.cur.epoch && n != m.cur && m.cur.has(from) && (!n.has(from) && !m.cur.has(EpochRoot(n.epoch)) || m.minorityEpoch != 0 && m.failed[EpochRoot(n.epoch)]):
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
	if root == core.None || root == m.self {
		return
	}
	// A merge given up and retried (retryMerge) asked a view that did not
	// answer, whose members may all have died since: it does not hold the
	// node back from another view newer than its own. Held to the higher
	// epoch of such a view, every side of a healed partition kept retrying
	// a merge into a dead node's view and ignored the others' notices for
	// good (the oracle swarm, seed 6268, paper).
	if epoch < m.mergeEpoch && !m.mergeRetried {
		return
	}
	if epoch == m.mergeEpoch && (!m.mergeRetried || root == m.mergeRoot) {
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
	m.mergeRetried = false
	if m.driving {
		m.abort(fmt.Sprintf("evicted by %s", FormatEpoch(epoch)))
	}
	n := m.newest()
	if m.rootOf(n) == m.self {
		// The newer view's root leads the merge now; this root only asks
		// it to admit its side. The joins it holds were asked of it while
		// its view looked the newer one, often by the members of the view
		// it now merges into: proposed, they took those members from
		// their root, whose proposal admitting this side they then
		// refused, and the two roots each proposed to admit the other
		// side and aborted, 1,400 epochs in 3 s after a partition of 11
		// and 6 healed (the oracle swarm, seed 132869, paper). A joiner
		// asks again, and its request reaches the newer view's root.
		m.pendingJoins = nil
	}
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
