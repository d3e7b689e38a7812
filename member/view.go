package member

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// maxAncestry is how many ancestor epochs a view remembers and a proposal
// carries (newest first). A node accepts a proposal only if the view it
// already holds is the proposal's base or one of these ancestors.
const maxAncestry = 8

// View is a numbered member list, as the layers above see it. Members are in
// view order: the initial members by id, then joiners in the order they were
// admitted. Members[0] is the root of the radix tree and EpochRoot(Epoch).
// The slice is shared: never modify it.
type View struct {
	Epoch   uint64
	Members []core.NodeID
}

// Joiner names a node being admitted: its id and its incarnation, a random
// number it drew when it started, so that a recovered process (same id, new
// incarnation) is told apart from a stale request of its former self.
// Initial members have incarnation 0.
type Joiner struct {
	ID  core.NodeID
	Inc uint64
}

var errView = errors.New("member: inconsistent view change")

// view is the immutable internal form of a view: the members, the radix tree
// over them and constant-time position lookups. Views are shared between the
// messages that carry them and the nodes that install them (in the simulator
// one proposal's view serves every node), so nothing here is ever modified
// after newView or apply returns.
type view struct {
	epoch    uint64
	members  []core.NodeID
	ancestry []uint64 // ancestor epochs, newest first, at most maxAncestry
	incs     []uint64 // the members' incarnations by position; nil: all 0
	tree     topo.Radix

	// The change from ancestry[0], when the view was built by apply.
	delta  bool
	failed []core.NodeID
	joined []Joiner

	sorted int         // members[:sorted] is strictly increasing
	tail   []tailEntry // the members after the sorted prefix, by id
}

// newView builds a view from a full member list. It checks the list (not
// empty, no duplicates, the root is the epoch's proposer).
func newView(epoch uint64, members []core.NodeID, ancestry []uint64, incs []Joiner, fanout int) (*view, error) {
	v, err := newViewAt(epoch, members, ancestry, nil, fanout)
	if err != nil || len(incs) == 0 {
		return v, err
	}
	v.incs = make([]uint64, len(members))
	for _, j := range incs {
		if p := v.pos(j.ID); p >= 0 {
			v.incs[p] = j.Inc
		}
	}
	return v, nil
}

// newViewAt is newView with the incarnations by position (nil: all 0).
func newViewAt(epoch uint64, members []core.NodeID, ancestry []uint64, incs []uint64, fanout int) (*view, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: empty member list", errView)
	}
	if members[0] != EpochRoot(epoch) {
		return nil, fmt.Errorf("%w: epoch %s names root %v but the first member is %v", errView, FormatEpoch(epoch), EpochRoot(epoch), members[0])
	}
	t, err := topo.NewRadix(len(members), fanout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errView, err)
	}
	v := &view{epoch: epoch, members: members, ancestry: ancestry, incs: incs, tree: t}
	v.index()
	for i, e := range v.tail {
		if i > 0 && v.tail[i-1].id == e.id || v.searchSorted(e.id) >= 0 {
			return nil, fmt.Errorf("%w: duplicate member %v", errView, e.id)
		}
	}
	return v, nil
}

// index finds the sorted prefix of v.members and sorts the rest by id
// into v.tail. Every view change builds a view at every member, and the
// members that joined since the ids were assigned make a tail as long as
// the view's turnover: a sorted slice costs that build less than a map
// did (no hashing, one allocation), and a lookup is a binary search.
func (v *view) index() {
	v.sorted = 1
	for v.sorted < len(v.members) && v.members[v.sorted] > v.members[v.sorted-1] {
		v.sorted++
	}
	if v.sorted < len(v.members) {
		v.tail = make([]tailEntry, 0, len(v.members)-v.sorted)
		for i := v.sorted; i < len(v.members); i++ {
			v.tail = append(v.tail, tailEntry{v.members[i], int32(i)})
		}
		slices.SortFunc(v.tail, func(a, b tailEntry) int { return cmp.Compare(a.id, b.id) })
	}
}

// tailEntry is the position of a member after the view's sorted prefix.
type tailEntry struct {
	id  core.NodeID
	pos int32
}

func (v *view) searchSorted(id core.NodeID) int {
	i, ok := slices.BinarySearch(v.members[:v.sorted], id)
	if !ok {
		return -1
	}
	return i
}

// pos returns the position of id in the view, or -1.
func (v *view) pos(id core.NodeID) int {
	if v == nil {
		return -1
	}
	if i := v.searchSorted(id); i >= 0 {
		return i
	}
	if i, ok := slices.BinarySearchFunc(v.tail, id, func(e tailEntry, id core.NodeID) int { return cmp.Compare(e.id, id) }); ok {
		return int(v.tail[i].pos)
	}
	return -1
}

func (v *view) has(id core.NodeID) bool { return v.pos(id) >= 0 }

func (v *view) root() core.NodeID { return v.members[0] }

func (v *view) inc(id core.NodeID) uint64 {
	if v == nil {
		return 0
	}
	if v.incs == nil {
		return 0
	}
	if p := v.pos(id); p >= 0 {
		return v.incs[p]
	}
	return 0
}

// base is the epoch this view was derived from (0 for an initial view).
func (v *view) base() uint64 {
	if len(v.ancestry) == 0 {
		return 0
	}
	return v.ancestry[0]
}

// descends reports whether e is this view's epoch or one of its remembered
// ancestors.
func (v *view) descends(e uint64) bool {
	return v.epoch == e || slices.Contains(v.ancestry, e)
}

// parent returns the parent of id in the tree, or core.None.
func (v *view) parent(id core.NodeID) core.NodeID {
	p := v.tree.Parent(v.pos(id))
	if p == topo.None {
		return core.None
	}
	return v.members[p]
}

// children returns the children of id in the tree (a subslice of members).
func (v *view) children(id core.NodeID) []core.NodeID {
	lo, hi := v.tree.Children(v.pos(id))
	return v.members[lo:hi]
}

// levelsBelow returns how many tree levels hang below id (0 for a leaf).
func (v *view) levelsBelow(id core.NodeID) int {
	p := v.pos(id)
	if p < 0 {
		return 0
	}
	return v.tree.Height() - 1 - v.tree.Depth(p)
}

func (v *view) public() View { return View{Epoch: v.epoch, Members: v.members} }

// childAncestry returns the ancestry of a view derived from v.
func (v *view) childAncestry() []uint64 {
	a := make([]uint64, 0, maxAncestry)
	a = append(a, v.epoch)
	for _, e := range v.ancestry {
		if len(a) == maxAncestry {
			break
		}
		a = append(a, e)
	}
	return a
}

// apply derives the view numbered epoch from v: the failed members leave,
// the joiners are appended in order (§3.4's recalculation and §3.7's "adds it
// as a leaf to the bottom of the tree"). A member that is both failed and
// joined is a recovered process re-joining under its id: it leaves its old
// position and is appended with its new incarnation.
func (v *view) apply(epoch uint64, failed []core.NodeID, joined []Joiner, fanout int) (*view, error) {
	// A view change usually removes one or two members: a linear search
	// of failed costs less than a set, which only a long list gets.
	var goneSet map[core.NodeID]bool
	if len(failed) > smallList {
		goneSet = make(map[core.NodeID]bool, len(failed))
	}
	gone := func(id core.NodeID) bool {
		if goneSet != nil {
			return goneSet[id]
		}
		return slices.Contains(failed, id)
	}
	for i, f := range failed {
		if !v.has(f) {
			return nil, fmt.Errorf("%w: failed node %v is not in view %s", errView, f, FormatEpoch(v.epoch))
		}
		if goneSet != nil && goneSet[f] || goneSet == nil && slices.Contains(failed[:i], f) {
			return nil, fmt.Errorf("%w: failed node %v listed twice", errView, f)
		}
		if goneSet != nil {
			goneSet[f] = true
		}
	}
	members := make([]core.NodeID, 0, len(v.members)-len(failed)+len(joined))
	for _, id := range v.members {
		if !gone(id) {
			members = append(members, id)
		}
	}
	// The incarnations, by position: the survivors' in their order, then
	// the joiners'; none (nil) while every one is 0.
	var incs []uint64
	if v.incs != nil || slices.ContainsFunc(joined, func(j Joiner) bool { return j.Inc != 0 }) {
		incs = make([]uint64, 0, cap(members))
		for i, id := range v.members {
			if !gone(id) {
				inc := uint64(0)
				if v.incs != nil {
					inc = v.incs[i]
				}
				incs = append(incs, inc)
			}
		}
	}
	for _, j := range joined {
		if v.has(j.ID) && !gone(j.ID) {
			return nil, fmt.Errorf("%w: joiner %v is already a member of %s", errView, j.ID, FormatEpoch(v.epoch))
		}
		members = append(members, j.ID)
		if incs != nil {
			incs = append(incs, j.Inc)
		}
	}
	nv, err := newViewAt(epoch, members, v.childAncestry(), incs, fanout)
	if err != nil {
		return nil, err
	}
	nv.delta, nv.failed, nv.joined = true, failed, joined
	return nv, nil
}

// smallList is the longest list of failed members apply searches rather
// than indexes.
const smallList = 8

// initialView is the default view every initial member computes alone
// (§3.2): the members sorted by id, counter 1, the lowest id as root. It
// checks the list (see sortedList) and keeps a sorted copy of it.
func initialView(ids []core.NodeID, fanout int) (*view, error) {
	members, err := sortedList(ids)
	if err != nil {
		return nil, err
	}
	return newView(MakeEpoch(1, members[0]), members, nil, nil, fanout)
}

// diff returns who joined and who departed between prev (nil for none) and
// v. For a first view, joined is v's member list itself (shared, like every
// slice of a view).
func diff(prev, v *view) (joined, departed []core.NodeID) {
	if prev == nil {
		return v.members, nil
	}
	if v.delta && v.base() == prev.epoch {
		for _, j := range v.joined {
			joined = append(joined, j.ID)
		}
		return joined, slices.Clone(v.failed)
	}
	for _, id := range v.members {
		if !prev.has(id) || prev.inc(id) != v.inc(id) {
			joined = append(joined, id)
		}
	}
	for _, id := range prev.members {
		if !v.has(id) || prev.inc(id) != v.inc(id) {
			departed = append(departed, id)
		}
	}
	return joined, departed
}
