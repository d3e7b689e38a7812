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

// view is the internal form of a view: the members, the radix tree over
// them and position lookups. Views are shared between the messages that
// carry them and the nodes that install them (in the simulator one
// proposal's view serves every node), so what a view says never changes
// after newView or apply returns. Its form may: a view that apply derives
// is lazy (see fill) until something needs its whole list.
type view struct {
	epoch    uint64
	ancestry []uint64 // ancestor epochs, newest first, at most maxAncestry
	tree     topo.Radix

	// The change from ancestry[0], when the view was built by apply (or
	// from a full list that came with it); committed: the proposal said
	// that ancestry[0] is a view its root installed (Prepare.Committed).
	delta     bool
	committed bool
	failed    []core.NodeID
	joined    []Joiner
	// left lists the departed nodes (of failed, or of an adopted base's
	// change) that left by announcing it (Prepare.Left).
	left []core.NodeID

	// The list, once filled: the members in view order, their
	// incarnations by position (nil: all 0) and the index.
	mem    []core.NodeID
	incs   []uint64
	sorted int         // mem[:sorted] is strictly increasing
	tail   []tailEntry // the members after the sorted prefix, by id

	// A lazy view (src set, the list not filled) answers from the view
	// it was derived from: src, filled, minus the members at positions
	// gone (increasing) plus the joiners, appended at position survivors.
	src       *view
	gone      []int32
	goneBuf   [smallList]int32
	survivors int
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
	v := &view{epoch: epoch, mem: members, ancestry: ancestry, incs: incs, tree: t}
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
// would (no hashing, one allocation), and a lookup is a binary search.
func (v *view) index() {
	v.sorted = 1
	for v.sorted < len(v.mem) && v.mem[v.sorted] > v.mem[v.sorted-1] {
		v.sorted++
	}
	if v.sorted < len(v.mem) {
		v.tail = make([]tailEntry, 0, len(v.mem)-v.sorted)
		for i := v.sorted; i < len(v.mem); i++ {
			v.tail = append(v.tail, tailEntry{v.mem[i], int32(i)})
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
	i, ok := slices.BinarySearch(v.mem[:v.sorted], id)
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
	if v.src != nil {
		return v.shifted(v.src.pos(id), id)
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

func (v *view) root() core.NodeID { return v.at(0) }

// shifted returns the position in v, lazy, of id, at position p of v's
// base: its position among the survivors, or among the joiners if it
// departed (a re-joining process), or -1.
func (v *view) shifted(p int, id core.NodeID) int {
	if p >= 0 {
		if k, left := slices.BinarySearch(v.gone, int32(p)); !left {
			return p - k
		}
	}
	for i, j := range v.joined {
		if j.ID == id {
			return v.survivors + i
		}
	}
	return -1
}

// size is the number of members.
func (v *view) size() int {
	if v.src != nil {
		return v.survivors + len(v.joined)
	}
	return len(v.mem)
}

// at returns the member at position p (0 ≤ p < size).
func (v *view) at(p int) core.NodeID {
	switch {
	case v.src == nil:
		return v.mem[p]
	case p < v.survivors:
		return v.src.mem[v.basePos(p)]
	}
	return v.joined[p-v.survivors].ID
}

// basePos is the position in base of the survivor at position p of a
// lazy view.
func (v *view) basePos(p int) int {
	for _, g := range v.gone {
		if int(g) > p {
			break
		}
		p++
	}
	return p
}

// list returns the members in view order, filling a lazy view.
func (v *view) list() []core.NodeID {
	v.fill()
	return v.mem
}

func (v *view) inc(id core.NodeID) uint64 {
	if v == nil || v.src == nil && v.incs == nil {
		return 0
	}
	return v.incAt(v.pos(id))
}

// incAt is the incarnation of the member at position p (0 for -1).
func (v *view) incAt(p int) uint64 {
	switch {
	case p < 0:
		return 0
	case v.src == nil:
		if v.incs == nil {
			return 0
		}
		return v.incs[p]
	case p < v.survivors:
		return v.src.incAt(v.basePos(p))
	}
	return v.joined[p-v.survivors].Inc
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
func (v *view) parent(id core.NodeID) core.NodeID { return v.parentAt(v.pos(id)) }

// parentAt is parent by position (-1: not a member).
func (v *view) parentAt(p int) core.NodeID {
	p = v.tree.Parent(p)
	if p == topo.None {
		return core.None
	}
	return v.at(p)
}

// children returns the children of id in the tree (a subslice of members).
func (v *view) children(id core.NodeID) []core.NodeID { return v.childrenAt(v.pos(id)) }

// childrenAt is children by position (-1: not a member). A lazy view
// answers from its base: a subslice of the base's list when the children
// are consecutive there (no departed member or joiner among them), as
// they mostly are, else a list of their own.
func (v *view) childrenAt(p int) []core.NodeID {
	lo, hi := v.tree.Children(p)
	if v.src == nil {
		return v.mem[lo:hi]
	}
	if lo == hi {
		return nil
	}
	if hi <= v.survivors {
		if b := v.basePos(lo); v.basePos(hi-1) == b+hi-1-lo {
			return v.src.mem[b : b+hi-lo]
		}
	}
	cs := make([]core.NodeID, hi-lo)
	for i := range cs {
		cs[i] = v.at(lo + i)
	}
	return cs
}

// levelsBelow returns how many tree levels hang below id (0 for a leaf).
func (v *view) levelsBelow(id core.NodeID) int { return v.levelsBelowAt(v.pos(id)) }

// levelsBelowAt is levelsBelow by position (-1: not a member).
func (v *view) levelsBelowAt(p int) int {
	if p < 0 {
		return 0
	}
	return v.tree.Height() - 1 - v.tree.Depth(p)
}

func (v *view) public() View { return View{Epoch: v.epoch, Members: v.list()} }

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
//
// Every member derives every view, so this is the work of a view change
// at each node, and most of it is done only when it is needed. The
// derived view is lazy: it holds v (filled first) and the departed
// positions, and answers the questions of a stabilization's first phase
// from them (a member's position, incarnation, parent and children, the
// tree). Its list is filled (see fill) when something needs it whole:
// mostly the install, after the root holds every ACK. v's members are
// distinct, so only the joiners are checked.
//
// The new view's ancestry is the given one (a proposal carries it), or,
// when nil, v's epoch followed by v's ancestry.
func (v *view) apply(epoch uint64, ancestry []uint64, failed []core.NodeID, joined []Joiner, fanout int) (*view, error) {
	v.fill()
	nv := &view{epoch: epoch, delta: true, failed: failed, joined: joined, src: v}
	// The departed positions, in increasing order.
	gone := nv.goneBuf[:0]
	for _, f := range failed {
		p := v.pos(f)
		if p < 0 {
			return nil, fmt.Errorf("%w: failed node %v is not in view %s", errView, f, FormatEpoch(v.epoch))
		}
		gone = append(gone, int32(p))
	}
	slices.Sort(gone)
	for i := 1; i < len(gone); i++ {
		if gone[i] == gone[i-1] {
			return nil, fmt.Errorf("%w: failed node %v listed twice", errView, v.mem[gone[i]])
		}
	}
	for _, j := range joined {
		if p := v.pos(j.ID); p >= 0 {
			if _, left := slices.BinarySearch(gone, int32(p)); !left {
				return nil, fmt.Errorf("%w: joiner %v is already a member of %s", errView, j.ID, FormatEpoch(v.epoch))
			}
		}
	}
	if id, dup := duplicate(joined, joinerID); dup {
		return nil, fmt.Errorf("%w: joiner %v listed twice", errView, id)
	}
	nv.gone, nv.survivors = gone, len(v.mem)-len(gone)
	n := nv.size()
	if n == 0 {
		return nil, fmt.Errorf("%w: empty member list", errView)
	}
	t, err := topo.NewRadix(n, fanout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errView, err)
	}
	nv.tree = t
	if root := nv.at(0); root != EpochRoot(epoch) {
		return nil, fmt.Errorf("%w: epoch %s names root %v but the first member is %v", errView, FormatEpoch(epoch), EpochRoot(epoch), root)
	}
	if ancestry == nil {
		ancestry = v.childAncestry()
	}
	nv.ancestry = ancestry
	return nv, nil
}

// fill builds the list of a lazy view from its base: it copies the
// survivors between the departed positions, appends the joiners and
// derives the index from the base's (the survivors of the base's sorted
// prefix stay sorted, its tail keeps its order by id with its positions
// shifted), where building the view afresh would search for duplicates
// and sort the tail again. A view is used by one goroutine at a time (a
// node's loop, or the simulator), which fill relies on.
func (v *view) fill() {
	base := v.src
	if base == nil {
		return
	}
	n := v.size()
	members := make([]core.NodeID, n)
	// The incarnations, by position: none (nil) while every one is 0.
	var incs []uint64
	if base.incs != nil || slices.ContainsFunc(v.joined, func(j Joiner) bool { return j.Inc != 0 }) {
		incs = make([]uint64, n)
	}
	at, from := 0, 0
	for i := 0; i <= len(v.gone); i++ {
		to := len(base.mem)
		if i < len(v.gone) {
			to = int(v.gone[i])
		}
		copy(members[at:], base.mem[from:to])
		if base.incs != nil {
			copy(incs[at:], base.incs[from:to])
		}
		at += to - from
		from = to + 1
	}
	for i, j := range v.joined {
		members[v.survivors+i] = j.ID
		if incs != nil {
			incs[v.survivors+i] = j.Inc
		}
	}
	v.mem, v.incs = members, incs
	v.indexFrom(base, v.gone, v.survivors)
	v.src, v.gone = nil, nil
}

// indexFrom sets the sorted prefix and the tail of v, derived by apply
// from base with the members at positions gone (increasing) departed and
// the joiners appended at position survivors on: the same index
// [view.index] finds.
func (v *view) indexFrom(base *view, gone []int32, survivors int) {
	// shift is how many departed positions precede position p of base.
	shift := func(p int32) int32 {
		k, _ := slices.BinarySearch(gone, p)
		return int32(k)
	}
	// The survivors of base's sorted prefix are still in order; the
	// prefix may now reach further.
	v.sorted = base.sorted - int(shift(int32(base.sorted)))
	if v.sorted == 0 {
		v.sorted = 1
	}
	for v.sorted < len(v.mem) && v.mem[v.sorted] > v.mem[v.sorted-1] {
		v.sorted++
	}
	if v.sorted == len(v.mem) {
		return
	}
	// base's tail, without the departed and the members the prefix took,
	// merged by id with the joiners beyond the prefix.
	var jbuf [smallList]tailEntry
	js := jbuf[:0]
	for p := max(survivors, v.sorted); p < len(v.mem); p++ {
		js = append(js, tailEntry{v.mem[p], int32(p)})
	}
	slices.SortFunc(js, func(a, b tailEntry) int { return cmp.Compare(a.id, b.id) })
	v.tail = make([]tailEntry, 0, len(v.mem)-v.sorted)
	for _, e := range base.tail {
		if _, left := slices.BinarySearch(gone, e.pos); left {
			continue
		}
		e.pos -= shift(e.pos)
		if int(e.pos) < v.sorted {
			continue
		}
		for len(js) > 0 && js[0].id < e.id {
			v.tail = append(v.tail, js[0])
			js = js[1:]
		}
		v.tail = append(v.tail, e)
	}
	v.tail = append(v.tail, js...)
}

// smallList is how many departed positions and tail joiners apply holds
// on the stack before it allocates: a view change usually removes or adds
// one or two members.
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
		return v.list(), nil
	}
	if v.delta && v.base() == prev.epoch {
		for _, j := range v.joined {
			joined = append(joined, j.ID)
		}
		return joined, slices.Clone(v.failed)
	}
	for _, id := range v.list() {
		if !prev.has(id) || prev.inc(id) != v.inc(id) {
			joined = append(joined, id)
		}
	}
	for _, id := range prev.list() {
		if !v.has(id) || prev.inc(id) != v.inc(id) {
			departed = append(departed, id)
		}
	}
	return joined, departed
}
