package stack

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// TreeLinks returns the members of a view (members, in view order) to
// which self keeps a connection open, so that a view change does not wait
// for dials: its parent and children in the view's radix tree of fan-out
// fanout, and those it would have in the next view if one member left it
// (a departure moves every later member one place up, so self's parent and
// children then change, and a stabilization's proposal would otherwise
// wait at each hop for the new links to be dialled and authenticated).
// That is at most 2 + 2·fanout members, in view order, without self; nil
// when self is not a member or fanout is not a power of two ≥ 2.
//
// Joins need nothing: a joiner takes the next place at the end, where it
// dials its parent itself.
func TreeLinks(members []core.NodeID, self core.NodeID, fanout int) []core.NodeID {
	n := len(members)
	tree, err := topo.NewRadix(n, fanout)
	i := slices.Index(members, self)
	if i < 0 || err != nil {
		return nil
	}
	var pos []int
	add := func(lo, hi int) { // positions lo..hi of the current view
		for p := max(lo, 0); p <= hi && p < n; p++ {
			if p != i {
				pos = append(pos, p)
			}
		}
	}
	// This view: parent and children.
	if p := tree.Parent(i); p != topo.None {
		add(p, p)
	}
	// A member after self leaves: self keeps its place, its children are
	// the next fanout+1 places' members at most.
	add(fanout*i+1, fanout*i+fanout+1)
	// A member before self leaves: self takes place i−1, whose parent is
	// the member at place (i−2)/a of the next view (at place (i−2)/a or
	// the one after it now), and whose children are the members now at
	// places a·(i−1)+2 … a·(i−1)+a+1.
	if i >= 2 {
		q := (i - 2) / fanout
		add(q, q+1)
	}
	if i >= 1 {
		add(fanout*(i-1)+2, fanout*(i-1)+fanout+1)
	}
	slices.Sort(pos)
	pos = slices.Compact(pos)
	out := make([]core.NodeID, len(pos))
	for k, p := range pos {
		out[k] = members[p]
	}
	return out
}

// keeper is implemented by a transport that can keep connections open
// (transport/tcp) or ready its links ahead (transport/mem).
type keeper interface {
	Keep(ids []core.NodeID)
}

// KeepTreeLinks has tr keep the connections of TreeLinks open, if tr can
// (a transport wrapped by Config.WrapTransport usually cannot, and then
// nothing happens). A host that runs a group's stack itself calls it with
// every view it installs; Group does.
func KeepTreeLinks(tr any, members []core.NodeID, self core.NodeID, fanout int) {
	if k, ok := tr.(keeper); ok {
		k.Keep(TreeLinks(members, self, fanout))
	}
}
