package stack

import (
	"cmp"
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// Decide is a starting node's rule (package group probes the seeds,
// then decides): given the nodes it knows — those it probed, with the
// state they answered, and those that probed it while it was undecided
// (StateUndecided) — node self forms a group if none of them is a member
// and its id is the lowest; otherwise it joins, asking the members first,
// then the others, lowest id first. Package group's boot.go says why
// nodes that list each other form one group.
func Decide(self core.NodeID, known map[core.NodeID]uint8) (form bool, contacts []core.NodeID) {
	lowest, members := true, false
	for id, state := range known {
		lowest = lowest && self < id
		members = members || state == StateMember
	}
	if lowest && !members {
		return true, nil
	}
	for id := range known {
		contacts = append(contacts, id)
	}
	slices.SortFunc(contacts, func(a, b core.NodeID) int {
		if c := cmp.Compare(known[b], known[a]); c != 0 {
			return c // members first
		}
		return cmp.Compare(a, b)
	})
	return false, contacts
}
