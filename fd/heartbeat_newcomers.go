package fd

// The heartbeat detector's newcomers: members that joined the view after
// this detector's first one, or came back as a new incarnation (a
// respawned process, a spare taking a failed rank's place). A process
// that just joined is the one most likely to stall on a loaded host: it
// loads the state it takes over, catches up, faults its pages in and
// collects what it loaded, and the group has seen none of its stalls
// yet. Its suspicions settle as the group's first ones do (settling),
// for twice as long: the group's processes start before the first view
// makes the detectors watch each other, a newcomer's start-up work
// begins when it joins.
//
// Only membership makes a newcomer. A member that this detector watches
// anew because a view change moved the monitors or the ring (it chose
// this process as a monitor, it became a ring neighbour) is an old
// member of the group, and its crash right after the reconfiguration is
// declared as fast as any.

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// hbJoin is a member that joined the view at when this detector
// installed that view.
type hbJoin struct {
	id core.NodeID
	at time.Duration
}

// joinSettle is how long after it joined a newcomer's suspicions settle:
// 2·SettleIntervals T_interval.
func (h *HeartbeatDetector) joinSettle() time.Duration {
	return 2 * time.Duration(h.cfg.SettleIntervals) * h.cfg.Interval
}

// noteJoiners records, as the view changes to members, those that were
// not members of the last view and those renewed. It must run before the
// new view replaces the old one. The first view of this detector has no
// newcomers: its members settle from watchAt.
func (h *HeartbeatDetector) noteJoiners(members, renewed []core.NodeID) {
	now, window := h.env.Now(), h.joinSettle()
	h.joined = slices.DeleteFunc(h.joined, func(j hbJoin) bool { return now-j.at >= window })
	if h.watchAt < 0 || window == 0 || !h.health.on() {
		return
	}
	for _, id := range members {
		if id == h.self || id == core.None || h.indexOf(id) >= 0 && !slices.Contains(renewed, id) {
			continue
		}
		h.joined = append(h.joined, hbJoin{id: id, at: now})
		if r := h.find(id); r != nil {
			r.joinAt = now
		}
	}
}

// joinedAt returns when member id last joined the view, if it did less
// than joinSettle ago (-1: not a newcomer). A record made later than
// that never settles, since its suspicions begin later still.
func (h *HeartbeatDetector) joinedAt(id core.NodeID) time.Duration {
	for i := len(h.joined) - 1; i >= 0; i-- {
		if j := h.joined[i]; j.id == id && h.env.Now()-j.at < h.joinSettle() {
			return j.at
		}
	}
	return -1
}
