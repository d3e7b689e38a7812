package fd

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// departing holds the members that announced they leave
// (core.Departing): both detectors keep watching them, as the membership
// has not excluded them yet, but declare none of them failed. A member
// that finished stops its heartbeats, and its monitors, before the view
// without it, would take it for a crash; the membership excludes a
// leaver without a verdict.
type departing []core.NodeID

// add records id as leaving.
func (d *departing) add(id core.NodeID) {
	if !slices.Contains(*d, id) {
		*d = append(*d, id)
	}
}

// has reports whether id announced that it leaves.
func (d departing) has(id core.NodeID) bool { return slices.Contains(d, id) }

// keep forgets the leavers a new member list no longer holds, or holds
// as a new incarnation (renewed): a process that comes back under the
// id is judged again.
func (d *departing) keep(members, renewed []core.NodeID) {
	*d = slices.DeleteFunc(*d, func(id core.NodeID) bool {
		return !slices.Contains(members, id) || slices.Contains(renewed, id)
	})
}
