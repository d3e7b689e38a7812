package stack

import (
	"maps"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// dir is the lowest layer of a group's stack: the address book and the
// graceful leave. It is a deterministic machine like the others (no I/O:
// what it learns it emits as events, which the runtime applies to the
// transport).
//
// Addresses. The membership protocol speaks of node ids; the transport
// needs their addresses. A joiner introduces itself to its seeds with an
// [Addrs] message asking for a reply; a seed that is a member records the
// joiner's address, floods it to the members of its view and the other
// nodes it knows of that have not departed (before its
// membership layer forwards the join request, so by FIFO order the root
// has the address before it admits the joiner), and answers with its whole
// book; the members that learn the address from the flood pass nothing
// on. Whenever a view is installed, its root sends the joiners of that
// view its whole book: the members' addresses, the other joiners' (so
// that joiners admitted together learn each other), and those of nodes
// still waiting to be admitted, whose parent in the next view the new
// member may be. A member that installs a
// view with a member whose address it does not know asks the view's root
// (which always knows: it admitted that member), and asks again every
// queryEvery while any address is missing. Frames for a node whose address
// is not yet known wait in the transport (tcp.Config.QueueUnknown).
//
// Leaves. The membership agrees on them (member.LeaveRequest: the view
// change that excludes a leaver says so, at every member alike); the
// directory only tells the leaver that it is out, so that its Leave can
// return: a member that installs a view excluding a node that the view
// change says left (member.ViewInstalled.Left), or that this member knew
// to be leaving (member.Leaving: its LEAVE came too late for the proposal,
// which counted it failed), sends it [Left]. The leaver asks nothing:
// questions repeated until answered would be traffic from it, which the
// heartbeat detector counts as a sign of life, so a leaver whose LEAVE
// reached nobody would never be excluded.
type dir struct {
	env       core.Env
	self      core.NodeID
	addr      string
	seeds     []core.NodeID // a joiner's contacts
	book      map[core.NodeID]string
	view      []core.NodeID // the installed view; nil before the first
	root      core.NodeID
	lastEpoch uint64               // the installed view's epoch (0 before the first)
	departed  []core.NodeID        // departed nodes whose address is kept, oldest first
	remember  int                  // how many departed nodes to keep
	leavers   map[core.NodeID]bool // members known to leave (member.Leaving)
	leaving   bool                 // this node leaves and waits for a [Left]
	missing   bool                 // some member of the view has no known address

	// Metadata (meta.go).
	metas      map[core.NodeID]metaRec
	publishFor uint64                 // the epoch this root has yet to publish (0: none)
	lastShown  uint64                 // the newest epoch whose metadata this node saw published
	shown      map[core.NodeID]uint64 // the versions published with lastShown
	wantVer    uint64                 // this node's version not yet seen published (0: none)
}

type dirTimer uint8

const (
	dirHelloTimer dirTimer = iota + 1
	dirQueryTimer
	dirMetaTimer
)

// Timings of the directory.
const (
	helloEvery = 500 * time.Millisecond // a joiner re-introduces itself until it has a view
	queryEvery = time.Second            // missing addresses are asked for again
)

// MaxAddrLen bounds an address on the wire, in bytes.
const MaxAddrLen = 255

// AddrLearned is emitted when the directory learns (or changes) the address
// of a node; the runtime gives it to the transport.
type AddrLearned struct {
	Node core.NodeID
	Addr string
}

// AddrForgotten is emitted when the directory forgets a departed node (it
// keeps the remember most recent ones): the runtime removes it from the
// transport, which stops dialling it.
type AddrForgotten struct{ Node core.NodeID }

// LeaveDone is emitted by a leaving node when a member tells it that a view
// without it was installed (Epoch).
type LeaveDone struct{ Epoch uint64 }

func newDir(self core.NodeID, addr string, seeds []core.NodeID, book map[core.NodeID]string, remember int) *dir {
	d := &dir{self: self, addr: addr, seeds: seeds, book: map[core.NodeID]string{}, leavers: map[core.NodeID]bool{}, root: core.None, remember: remember,
		metas: map[core.NodeID]metaRec{self: {ver: 1}}, shown: map[core.NodeID]uint64{}}
	for id, a := range book {
		d.book[id] = a
	}
	d.book[self] = addr
	return d
}

func (d *dir) Protos() []core.Proto { return []core.Proto{core.ProtoGroup} }

func (d *dir) Start(env core.Env) {
	d.env = env
	if len(d.seeds) > 0 {
		d.hello()
		env.SetTimer(helloEvery, dirHelloTimer)
	}
}

// hello introduces a joiner to its seeds: its address, then its metadata.
func (d *dir) hello() {
	for _, s := range d.seeds {
		d.env.Send(s, &Addrs{Reply: true, Entries: []Entry{{d.self, d.addr}}})
		d.env.Send(s, d.own(false))
	}
}

func (d *dir) Fire(t core.Timer) {
	switch t {
	case dirHelloTimer:
		if d.view == nil && !d.leaving {
			d.hello()
			d.env.SetTimer(helloEvery, dirHelloTimer)
		}
	case dirQueryTimer:
		if d.missing {
			d.queryMissing()
		}
	case dirMetaTimer:
		if !d.leaving {
			d.metaTimer()
		}
	}
}

func (d *dir) Receive(from core.NodeID, m core.Msg) {
	switch m := m.(type) {
	case *Addrs:
		fresh := d.learn(m.Entries)
		if m.Reply && d.view != nil && len(fresh) > 0 {
			// A joiner introduces itself: flood its address to the view,
			// so the root and the joiner's future parent know it before
			// the admission, and to the other nodes whose addresses this
			// node knows and that have not departed (nodes admitted since
			// this node's view, or still waiting, which may be that
			// parent). Only an introduction is flooded, by the seed
			// that receives it: the members that learn the address from
			// the flood, or from a book, pass nothing on (when each one
			// did, an address cost n² messages, and a joiner, learning
			// everybody's address at once from the books, sent n of n
			// entries each; the joins of n = 64 nodes in one process sent
			// 69,000 of them, and the floods held up the heartbeats behind
			// them long enough for live members to be declared failed).
			out := &Addrs{Entries: fresh}
			for _, id := range d.floodTargets() {
				if id != from && !slices.ContainsFunc(fresh, func(e Entry) bool { return e.ID == id }) {
					d.env.Send(id, out)
				}
			}
		}
		if m.Reply {
			d.env.Send(from, &Addrs{Entries: d.entries(nil)})
		}
	case *AddrQuery:
		var es []Entry
		for _, id := range m.IDs {
			if a, ok := d.book[id]; ok {
				es = append(es, Entry{id, a})
			}
		}
		if len(es) > 0 {
			d.env.Send(from, &Addrs{Entries: es})
		}
	case *Left:
		if d.leaving {
			d.leaving = false
			d.env.Emit(LeaveDone{Epoch: m.Epoch})
		}
	case *Probe:
		if !m.Reply {
			d.env.Send(from, &Probe{Reply: true, Name: d.metas[d.self].name, State: d.probeState()})
		}
	case *Meta:
		d.receiveMeta(from, m)
	case *MetaView:
		d.receiveMetaView(from, m)
	}
}

// floodTargets lists, sorted, the members of the view and the other nodes
// in the book that have not departed, less this node.
func (d *dir) floodTargets() []core.NodeID {
	ids := slices.Clone(d.view)
	for id := range d.book {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(id core.NodeID) bool {
		return id == d.self || slices.Contains(d.departed, id) && !slices.Contains(d.view, id)
	})
}

// learn records entries and returns those that were new or changed.
func (d *dir) learn(es []Entry) []Entry {
	var fresh []Entry
	for _, e := range es {
		if e.ID == d.self || e.Addr == "" {
			continue
		}
		if d.book[e.ID] != e.Addr {
			d.book[e.ID] = e.Addr
			fresh = append(fresh, e)
			d.env.Emit(AddrLearned{Node: e.ID, Addr: e.Addr})
		}
	}
	return fresh
}

// entries lists the book (or only ids, if not nil) sorted by id.
func (d *dir) entries(ids []core.NodeID) []Entry {
	var es []Entry
	if ids == nil {
		for id, a := range d.book {
			es = append(es, Entry{id, a})
		}
	} else {
		for _, id := range ids {
			if a, ok := d.book[id]; ok {
				es = append(es, Entry{id, a})
			}
		}
	}
	slices.SortFunc(es, func(a, b Entry) int { return int(a.ID) - int(b.ID) })
	return es
}

func (d *dir) Handle(e core.Event) {
	switch e := e.(type) {
	case member.LeaveRequest:
		if d.view != nil {
			d.leaving = true
		}
		return
	case member.Leaving:
		d.leavers[e.Node] = true
		return
	case SetMeta:
		d.setMeta(e.Meta)
		return
	}
	v, ok := e.(member.ViewInstalled)
	if !ok {
		return
	}
	d.view = v.Members
	d.lastEpoch = v.Epoch
	if len(v.Members) > 0 {
		d.root = v.Members[0]
	}
	for _, id := range v.Departed {
		if d.leavers[id] || slices.Contains(v.Left, id) {
			d.env.Send(id, &Left{Epoch: v.Epoch})
		}
	}
	maps.DeleteFunc(d.leavers, func(id core.NodeID, _ bool) bool {
		return !slices.Contains(v.Members, id) || slices.Contains(v.Departed, id)
	})
	d.departed = append(d.departed, v.Departed...)
	// Keep the addresses of the most recently departed nodes: the
	// membership probes them (member.Config.MaxProbes) so that the two
	// sides of a healed partition, or a node excluded while alive, find
	// each other again. Older ones are forgotten, and the transport stops
	// dialling them.
	d.departed = slices.DeleteFunc(d.departed, func(id core.NodeID) bool { return slices.Contains(v.Members, id) })
	if over := len(d.departed) - d.remember; over > 0 {
		for _, id := range d.departed[:over] {
			delete(d.book, id)
			delete(d.metas, id)
			d.env.Emit(AddrForgotten{Node: id})
		}
		d.departed = slices.Delete(d.departed, 0, over)
	}
	if len(v.Joined) > 0 && len(v.Joined) < len(v.Members) && d.root == d.self {
		// The root tells the joiners everything it knows: where the
		// members and the other joiners are, and where the nodes still
		// waiting to be admitted are (a joiner may become the parent of
		// one in the next view, and must reach it). The root knows them
		// all: it admitted them. Only the root: when every member sent
		// its book, each joiner got n books of n entries and a
		// connection from every member, and the joins of a large group
		// in one process spent their time on that. A joiner that misses
		// an address (the root died before telling) asks the root of its
		// view, as any member does.
		out := &Addrs{Entries: d.entries(nil)}
		for _, id := range v.Joined {
			if id != d.self {
				d.env.Send(id, out)
			}
		}
	}
	if d.root == d.self {
		d.publishFor = v.Epoch
		d.tryPublish()
	}
	wasMissing := d.missing
	d.missing = false
	for _, id := range v.Members {
		if _, ok := d.book[id]; !ok {
			d.missing = true
			break
		}
	}
	if d.missing && !wasMissing {
		d.queryMissing() // and every queryEvery while some are missing
	}
}

// queryMissing asks the root (or, from the root, every member) for the
// addresses this node lacks.
func (d *dir) queryMissing() {
	var ids []core.NodeID
	for _, id := range d.view {
		if _, ok := d.book[id]; !ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		d.missing = false
		return
	}
	q := &AddrQuery{IDs: ids}
	if d.root != d.self && d.root != core.None {
		d.env.Send(d.root, q)
	} else {
		for _, id := range d.view {
			if id != d.self && !slices.Contains(ids, id) {
				d.env.Send(id, q)
			}
		}
	}
	d.env.SetTimer(queryEvery, dirQueryTimer)
}
