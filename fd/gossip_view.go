package fd

import (
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// The gossip detector's view of the membership: installing a view carries
// each member's entry to its new position, and the index finds a member's
// position by id.

// install makes members (epoch) the view: it carries every entry of a
// member that stays (heartbeat, stamp, watch) to its new position, gives new
// members a zero heartbeat and a grace period starting now, drops the
// watches of members that left, and recomputes n-dependent settings.
func (g *Gossip) install(epoch uint64, members []core.NodeID) error {
	byID, err := buildIndex(members)
	if err != nil {
		return err
	}
	n := len(members)
	beats := make([]uint32, n)
	var fresh []int
	// Both lists increasing (the common case: members join at the end of
	// a view with ids above the others'), the old positions are found by
	// one merge rather than a search per member.
	merge := byID == nil && g.byID == nil
	j := 0
	for i, id := range members {
		k := -1
		if merge {
			for j < len(g.members) && g.members[j] < id {
				j++
			}
			if j < len(g.members) && g.members[j] == id {
				k = j
			}
		} else {
			k = g.pos(id)
		}
		if k >= 0 {
			beats[i] = g.beats[k]
		} else if len(g.members) > 0 && !(g.started && id == g.self) {
			fresh = append(fresh, i) // joined the view (not the first view)
		}
	}
	old := g.watches
	g.epoch, g.members, g.byID = epoch, members, byID
	g.beats = beats
	g.flagged = make([]uint64, (n+63)/64)
	g.watches = nil
	for _, w := range old {
		i := g.pos(w.id)
		if i < 0 {
			if w.seq != 0 {
				g.env.CancelTimer(w.timer)
			}
			continue
		}
		w.pos = int32(i)
		g.watches = append(g.watches, w)
		g.setFlag(i)
	}
	// A new member gets a grace period of T_cleanup from now.
	for _, i := range fresh {
		g.grace(i)
	}
	if g.started {
		// Helpers come from the view. A suspicion whose probe found
		// none (this node doubted every other member, as one left
		// alone in a stale view does) asks the new view's members
		// before its verdict.
		// One whose probe runs asks the members new to the view too,
		// as helpers of its probe: they may reach the suspect where the
		// old view's members do not (a member re-admitted after a
		// partition suspected across it has only now the members that
		// joined meanwhile).
		for k := range g.watches {
			w := &g.watches[k]
			switch {
			case w.status != StatusConsensus:
			case w.probeSeq == 0:
				g.probeIndirect(w)
			case len(fresh) > 0:
				g.probeJoined(w, fresh)
			}
		}
	}
	g.idsSize = gossipIDsSize(members)
	g.cleanup = uint32(g.cfg.CleanupRounds(n))
	if g.started {
		g.me = g.pos(g.self)
	}
	g.lowest = g.own
	for i, b := range g.beats {
		if i != g.me && !g.isFlagged(i) {
			g.lowest = min(g.lowest, b)
		}
	}
	return nil
}

// renew watches afresh the members of a new view that are new incarnations
// of members of the last (core.MembersChanged.Renewed): what this node held
// about the former process goes, its verdict too, as it does for a member
// that leaves the view, and the entry gets a joiner's grace period. The
// heartbeat stays: a restarted node adopts the group's count and counts on
// from there, so only a heartbeat counted since the grace began shows the
// new process alive. Without this, a process declared failed that came back
// and died again before any table of its new incarnation arrived would stay
// declared, and never be declared again.
func (g *Gossip) renew(ids []core.NodeID) {
	for _, id := range ids {
		i := g.pos(id)
		if i < 0 || i == g.me {
			continue
		}
		if g.isFlagged(i) {
			g.dropWatch(g.watchAt(i))
		}
		g.grace(i)
	}
}

// buildIndex checks members and returns the positions sorted by id, or nil
// when the ids are strictly increasing (then members itself is searchable).
func buildIndex(members []core.NodeID) ([]int32, error) {
	if len(members) > topo.MaxNodes {
		return nil, fmt.Errorf("%w: %d members", ErrMembers, len(members))
	}
	increasing := true
	for i, id := range members {
		if id == core.None {
			return nil, fmt.Errorf("%w: position %d is core.None", ErrMembers, i)
		}
		if i > 0 && id <= members[i-1] {
			increasing = false
		}
	}
	if increasing {
		return nil, nil
	}
	byID := make([]int32, len(members))
	for i := range byID {
		byID[i] = int32(i)
	}
	slices.SortFunc(byID, func(a, b int32) int {
		return cmpID(members[a], members[b])
	})
	for k := 1; k < len(byID); k++ {
		if members[byID[k]] == members[byID[k-1]] {
			return nil, fmt.Errorf("%w: %v appears twice", ErrMembers, members[byID[k]])
		}
	}
	return byID, nil
}

func cmpID(a, b core.NodeID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pos returns the position of id in the current view, or -1.
func (g *Gossip) pos(id core.NodeID) int {
	if g.byID == nil {
		i, ok := slices.BinarySearch(g.members, id)
		if !ok {
			return -1
		}
		return i
	}
	k, ok := slices.BinarySearchFunc(g.byID, id, func(p int32, id core.NodeID) int {
		return cmpID(g.members[p], id)
	})
	if !ok {
		return -1
	}
	return int(g.byID[k])
}

// sameMembers reports whether a and b are the same list: the same backing
// array (the common case in one process), or equal element by element.
func sameMembers(a, b []core.NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

func (g *Gossip) isFlagged(i int) bool { return g.flagged[i>>6]&(1<<(i&63)) != 0 }
func (g *Gossip) setFlag(i int)        { g.flagged[i>>6] |= 1 << (i & 63) }
func (g *Gossip) clearFlag(i int)      { g.flagged[i>>6] &^= 1 << (i & 63) }
