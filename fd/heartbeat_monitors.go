package fd

// The heartbeat detector's peers: who is a member, who is a
// connection (owed insurance), which k members are the monitors (owed
// heartbeats), and how the records of peers are kept.

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// setMembers installs a member list: records of departed peers are
// dropped (a departed peer we sent heartbeats to is told to stop expecting
// them), departed monitors replaced, ring and mesh connections added. The
// record of a renewed member (a new incarnation of a process of the last
// view, core.MembersChanged.Renewed) is dropped too, its verdict with it,
// and made afresh like a joiner's: the new process expects nothing of this
// node, and a ring neighbour or a monitor it chooses watches it from now.
func (h *HeartbeatDetector) setMembers(epoch uint64, members, renewed []core.NodeID, initial bool) {
	if !initial {
		h.noteJoiners(members, renewed)
	}
	h.members, h.epoch = members, epoch
	if h.watchAt < 0 && len(members) > 1 {
		h.watchAt = h.env.Now()
	}
	h.sortedKnown = false
	h.pos = h.indexOf(h.self)
	var gone []*hbPeer
	kept := make([]*hbPeer, 0, len(h.peers))
	keptIDs := make([]core.NodeID, 0, len(h.peers))
	for _, r := range h.peers {
		if h.indexOf(r.id) >= 0 && !slices.Contains(renewed, r.id) {
			kept = append(kept, r)
			keptIDs = append(keptIDs, r.id)
		} else {
			gone = append(gone, r)
		}
	}
	h.peers, h.peerIDs = kept, keptIDs
	for _, r := range gone {
		if r.timer != 0 {
			h.env.CancelTimer(r.timer)
		}
		h.monitors = slices.DeleteFunc(h.monitors, func(id core.NodeID) bool { return id == r.id })
		if r.sentNext > 0 && r.state != HeartbeatFailed && h.indexOf(r.id) < 0 {
			h.stats.InsuranceSent++
			h.send(r.id, HeartbeatMsg{Next: 0}) // stop expecting us
		}
	}
	h.addStructural()
	h.chooseMonitors(initial)
}

// addStructural makes the ring neighbours, and every member in a small
// job, connections. The first insurance heartbeat to a new one is spread
// at random over one T_insurance.
func (h *HeartbeatDetector) addStructural() {
	n := len(h.members)
	if n == 0 {
		return
	}
	if n <= h.cfg.FullMeshMax {
		for _, id := range h.members {
			h.addStructuralPeer(id)
		}
	}
	if h.pos < 0 {
		return
	}
	for d := 1; d <= h.cfg.RingNeighbors && d < n; d++ {
		h.addStructuralPeer(h.members[(h.pos+d)%n])
		h.addStructuralPeer(h.members[(h.pos-d%n+n)%n])
	}
}

// structural reports whether member id is a connection by position: a
// ring neighbour, or any member in a full-mesh job.
func (h *HeartbeatDetector) structural(id core.NodeID) bool {
	n, i := len(h.members), h.indexOf(id)
	if i < 0 {
		return false
	}
	if n <= h.cfg.FullMeshMax {
		return true
	}
	if h.pos < 0 {
		return false
	}
	d := (i - h.pos + n) % n
	return d <= h.cfg.RingNeighbors || n-d <= h.cfg.RingNeighbors
}

// idle reports whether connection r has fallen idle at now and may close:
// made only by traffic, and no message of another layer either way for
// T_insurance.
func (h *HeartbeatDetector) idle(r *hbPeer, now time.Duration) bool {
	return r.flags&hbConn != 0 && h.idleLink(r, now)
}

// idleLink reports whether the link to r is one that either side closes
// when it falls idle, and has: neither side chose the other as a monitor,
// r is no ring neighbour, and no message of another layer went either way
// for T_insurance. Both sides see the same traffic (up to one latency), so
// a process whose deadline for r's insurance passes on an idle link does
// not suspect r: r closed the link, and the heartbeat that said so may
// have been lost.
func (h *HeartbeatDetector) idleLink(r *hbPeer, now time.Duration) bool {
	return r.flags&(hbMonitor|hbMonitoree) == 0 && r.state == HeartbeatAlive &&
		now-r.talkAt >= h.cfg.Insurance && !h.structural(r.id)
}

// close ends idle connection r: r is told to stop waiting for us (if we
// ever announced a period to it) and is owed nothing more.
func (h *HeartbeatDetector) close(r *hbPeer) {
	r.flags &^= hbConn
	if r.sentNext > 0 {
		h.stats.InsuranceSent++
		h.send(r.id, HeartbeatMsg{Next: 0})
		r.sentNext = 0
	}
	h.stats.Closed++
}

func (h *HeartbeatDetector) addStructuralPeer(id core.NodeID) {
	if id == h.self || id == core.None {
		return
	}
	r, created := h.findOrCreate(id)
	now := h.env.Now()
	wait := r.expect == 0 && r.state == HeartbeatAlive
	if wait {
		// A peer waits for nothing it was not told to expect, so a
		// process that stops before its first heartbeat to us would be
		// waited for by nobody if every connection it announced to
		// stopped with it. A structural connection is the exception:
		// it owes us insurance within T_insurance of becoming one, as
		// we owe it, so we wait as if it had announced T_insurance.
		r.expect, r.lastRecv = h.cfg.Insurance, max(r.lastRecv, now)
	}
	if r.flags&hbConn != 0 {
		if wait {
			h.schedule(r)
		}
		return
	}
	r.flags |= hbConn
	if created {
		r.lastSend = now - h.cfg.Insurance + h.jitter(h.cfg.Insurance)
		r.beatAt = r.lastSend
	}
	h.schedule(r)
}

// chooseMonitors tops the monitors up to k. Initial monitors get their
// first heartbeat at a random point of the first interval; a replacement
// gets one at once, so that it starts watching now.
func (h *HeartbeatDetector) chooseMonitors(initial bool) {
	for len(h.monitors) < h.cfg.Monitors {
		id := h.pickMonitor()
		if id == core.None {
			return
		}
		r, _ := h.findOrCreate(id)
		r.flags |= hbMonitor | hbConn
		h.monitors = append(h.monitors, id)
		if initial {
			// At start nothing was sent yet: the first heartbeat goes at a
			// random point of the first interval.
			first := h.env.Now() - h.cfg.Interval + h.jitter(h.cfg.Interval)
			if h.aligned { // at the next point of the shared grid
				first = h.gridFloor(h.env.Now()+h.cfg.Interval-1) - h.cfg.Interval
			}
			r.lastSend, r.beatAt = first, first
		} else {
			r.beatAt = h.env.Now()
			h.beat(r)
		}
		h.schedule(r)
	}
}

// pickMonitor draws a random live member that is not yet a monitor, or
// returns core.None if there is none.
func (h *HeartbeatDetector) pickMonitor() core.NodeID {
	n := len(h.members)
	if n == 0 {
		return core.None
	}
	rng := h.env.Rand()
	for range 16 {
		if id := h.members[rng.IntN(n)]; h.eligibleMonitor(id) {
			return id
		}
	}
	// Most members are ineligible (a small or crippled job): scan.
	start := rng.IntN(n)
	for i := range n {
		if id := h.members[(start+i)%n]; h.eligibleMonitor(id) {
			return id
		}
	}
	return core.None
}

func (h *HeartbeatDetector) eligibleMonitor(id core.NodeID) bool {
	if id == h.self || id == core.None || slices.Contains(h.monitors, id) {
		return false
	}
	r := h.find(id)
	// A member that reaches us only through others would not hear our
	// heartbeats either.
	return r == nil || r.state == HeartbeatAlive && r.viaAt == 0
}

// demote makes monitor r an ordinary connection and tells it to expect
// only insurance from now on.
func (h *HeartbeatDetector) demote(r *hbPeer) {
	r.flags &^= hbMonitor
	h.monitors = slices.DeleteFunc(h.monitors, func(id core.NodeID) bool { return id == r.id })
	if r.state != HeartbeatFailed {
		h.beat(r)
	}
	h.schedule(r)
}

// member returns the record of member id, creating it without making it a
// connection; nil for ourselves and for non-members.
func (h *HeartbeatDetector) member(id core.NodeID) *hbPeer {
	if id == h.self {
		return nil
	}
	if r := h.find(id); r != nil {
		return r
	}
	if h.indexOf(id) < 0 {
		return nil
	}
	r, _ := h.findOrCreate(id)
	return r
}

// connect returns the record of member id as a connection, creating it;
// nil for ourselves and for non-members. The first insurance heartbeat to
// a new connection is due at a random point of the next T_insurance, so
// that connections opened together (every monitor hears from the
// processes that chose it in the first interval) do not all get their
// insurance in the same interval, T_insurance later (the burst of the
// paper's Fig. 2).
func (h *HeartbeatDetector) connect(id core.NodeID) *hbPeer {
	r := h.member(id)
	if r == nil {
		return nil
	}
	if r.flags&hbConn == 0 {
		r.flags |= hbConn
		first := h.env.Now() - h.cfg.Insurance + h.jitter(h.cfg.Insurance)
		if first < r.lastSend {
			r.lastSend, r.beatAt = first, first
		}
		h.schedule(r)
	}
	return r
}

func (h *HeartbeatDetector) find(id core.NodeID) *hbPeer {
	i, ok := slices.BinarySearch(h.peerIDs, id)
	if !ok {
		return nil
	}
	return h.peers[i]
}

// findOrCreate returns id's record, creating a fresh one (no flags, times
// set to now) if needed.
func (h *HeartbeatDetector) findOrCreate(id core.NodeID) (*hbPeer, bool) {
	i, ok := slices.BinarySearch(h.peerIDs, id)
	if ok {
		return h.peers[i], false
	}
	now := h.env.Now()
	r := &hbPeer{id: id, lastSend: now, lastRecv: now, beatAt: now, lossAt: -1, teller: core.None, joinAt: h.joinedAt(id)}
	h.peers = slices.Insert(h.peers, i, r)
	h.peerIDs = slices.Insert(h.peerIDs, i, id)
	return r, true
}

// indexOf returns the position of id in the member list, or -1: O(1) when
// ids are dense and in order, O(log n) when the list is sorted, O(n) only
// for an unsorted list.
func (h *HeartbeatDetector) indexOf(id core.NodeID) int {
	ms := h.members
	if uint64(id) < uint64(len(ms)) && ms[id] == id {
		return int(id)
	}
	if i, ok := slices.BinarySearch(ms, id); ok && ms[i] == id {
		return i
	}
	if !h.sortedKnown {
		h.sorted, h.sortedKnown = slices.IsSorted(ms), true
	}
	if h.sorted {
		return -1
	}
	return slices.Index(ms, id)
}

// jitter draws a random duration in [0, d).
func (h *HeartbeatDetector) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(h.env.Rand().Int64N(int64(d)))
}
