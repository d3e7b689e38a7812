// Joins (§3.7, Figure 3(c)).

package member

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// joins is the state of this node's own join or merge, and the joins it
// holds for others (as root, or until it hands them to the root).
type joins struct {
	pendingJoins []pendingJoin
	recovered    bool // join with NODE_ALIVE rather than NEW_NODE
	joining      bool
	nextContact  int
	mergeRoot    core.NodeID
	mergeVia     core.NodeID // a live member of the view to merge into, core.None if unknown
	mergeTries   int
	mergeEpoch   uint64
	// mergeRetried marks a merge that retryMerge started again: its view
	// did not answer before, so it yields to a notice of any view newer
	// than this node's (see evicted).
	mergeRetried bool
	// A merge given up (its tries unanswered) while this node stays in
	// the view it was told is over: gaveUpIn is that view's epoch, and
	// gaveUpEpoch and gaveUpRoot the newer view and its root, tried again
	// at each probe (see retryMerge).
	gaveUpIn, gaveUpEpoch uint64
	gaveUpRoot            core.NodeID
	gaveUpVia             int // the member of this node's view asked next
}

// maxJoinHops bounds how often a join request is forwarded towards a root.
const maxJoinHops = 8

// maxMergeTries is how many join requests a member that learned of a newer
// view sends before it gives up merging into it.
const maxMergeTries = 4

// pendingJoin is a join request this node holds: as root, until it admits
// the joiner; otherwise until it hands the request to the root.
type pendingJoin struct {
	Joiner
	recovered bool          // asked with NODE_ALIVE
	askedAt   time.Duration // when the request arrived
}

// sendJoin asks to be admitted: NEW_NODE or NODE_ALIVE to the next node of
// the list, or, when merging after a partition, to the root of the view that
// excluded this node.
func (m *Member) sendJoin() {
	req := &JoinRequest{Alive: m.recovered || m.cur != nil, From: m.self, Epoch: m.epochFloor, Joiners: []Joiner{{m.self, m.inc}}}
	if n := m.newest(); n != nil && n.epoch > req.Epoch {
		req.Epoch = n.epoch
	}
	to := m.mergeRoot
	if m.mergeEpoch != 0 {
		// Merging: ask the root of the newer view, or, every other try or
		// when the root is dead or unknown, the live member that told. A
		// retried merge asks the root every other try even when this node
		// holds it failed: the verdict is as old as the node's view, given
		// across the cut that the retry outlasts, and the member asked
		// instead is only one of that view, which may be dead, or stuck
		// outside with this node. Sending it every try, a member alone in
		// a minority whose view's only other member had died never reached
		// the newer view's live root (the partial-partition swarm, gossip
		// seed 17536; testdata/merge-retry-dead-via.txt).
		m.mergeTries++
		skipRoot := m.failed[to] && !m.mergeRetried
		if m.mergeVia != core.None && (to == core.None || skipRoot || m.mergeTries%2 == 0) {
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
		if j.ID != r.From || j.ID == m.self {
			continue
		}
		// A member asks to join under a new incarnation: its former self
		// has crashed, whatever the detector says (it may have restarted
		// too fast to be noticed). It may have been the root. The
		// installed view may list it too when the held proposal dropped
		// it: a root that adopts the proposal takes such a member back
		// unless it knows it failed.
		grew := false
		for _, v := range []*view{n, m.cur} {
			if v.has(j.ID) && v.inc(j.ID) != j.Inc && !slices.Contains(m.restarted[j.ID], v.inc(j.ID)) {
				m.markRestarted(j.ID, v.inc(j.ID))
				grew = true
			}
		}
		if grew && m.rootOf(n) != m.self {
			m.reportFailures()
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
		m.addJoin(j, r.Alive, m.now())
	}
	m.rootStep()
}

// retryMerge starts a merge given up again, at a probe, if this node has
// installed no view since: the members of the view it holds may all be
// alive and reachable, and so never declared failed, while they belong to
// the newer view (they told this node so, and then nobody tells it
// again), and the newer view's root, which the merge asked, may have been
// cut off from it only for those tries. Every other try of a retry goes
// through a member of this node's view (the next one at each retry),
// which forwards the request to its root, and the others ask the root
// itself, held failed or not (see sendJoin).
func (m *Member) retryMerge() {
	if m.gaveUpEpoch == 0 || m.mergeEpoch != 0 || m.joining || m.cur == nil {
		return
	}
	if m.cur.epoch != m.gaveUpIn || m.newest() != m.cur {
		m.gaveUpIn, m.gaveUpEpoch, m.gaveUpRoot = 0, 0, core.None
		return
	}
	via := core.None
	list := m.cur.list()
	for range list {
		id := list[m.gaveUpVia%len(list)]
		m.gaveUpVia++
		if id != m.self && id != m.gaveUpRoot {
			via = id
			break
		}
	}
	m.mergeEpoch, m.mergeRoot, m.mergeVia, m.mergeTries = m.gaveUpEpoch, m.gaveUpRoot, via, 0
	m.mergeRetried = true
	m.sendJoin()
}

// stopMerging ends a merge: done, or given up.
func (js *joins) stopMerging() {
	js.mergeRoot, js.mergeVia, js.mergeEpoch, js.mergeTries = core.None, core.None, 0, 0
	js.mergeRetried = false
}

// addJoin queues the join of j, or renews a queued join of j's id by
// another incarnation.
func (js *joins) addJoin(j Joiner, recovered bool, now time.Duration) {
	for i := range js.pendingJoins {
		if js.pendingJoins[i].ID == j.ID {
			if js.pendingJoins[i].Inc != j.Inc {
				js.pendingJoins[i] = pendingJoin{j, recovered, now}
			}
			return
		}
	}
	js.pendingJoins = append(js.pendingJoins, pendingJoin{j, recovered, now})
}

// forwardJoins hands the pending joins of a node that is no longer the root
// to the root.
func (m *Member) forwardJoins() {
	if len(m.pendingJoins) == 0 {
		return
	}
	root := m.rootOf(m.newest())
	for _, j := range m.pendingJoins {
		m.send(root, &JoinRequest{Alive: j.recovered, From: j.ID, Epoch: m.newest().epoch, Joiners: []Joiner{j.Joiner}})
	}
	m.pendingJoins = nil
}
