package stack

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// Metadata. Each node has a name and a small metadata blob, at a version
// that only grows. A joiner sends its [Meta] to its seeds with its
// introduction, and a seed that is a member floods it like the address (so
// the root has it before it admits the joiner). When the root of a view
// installs it, it publishes the metadata of every member of that view in
// one [MetaView] to all of them: the only copy for that epoch, so every
// member that installs the view sees the same metadata with it. A root
// that lacks a member's metadata asks the member (Meta.Ask) and publishes
// once it has all. A node that changes its metadata ([SetMeta]) tells the
// root, which asks its membership for a new epoch (member.Refresh), whose
// publication carries the change; the node repeats the news to the
// current root every queryEvery until it sees it published.

type metaRec struct {
	ver  uint64
	name string
	meta []byte
}

// SetMeta is the event the runtime hands the stack to change this node's
// metadata (at most MaxMetaLen bytes).
type SetMeta struct{ Meta []byte }

// MetaPublished is emitted when the metadata of the members of the view
// numbered Epoch is known: published by this node as that view's root, or
// received from the root. Entries are in view order.
type MetaPublished struct {
	Epoch   uint64
	Entries []MetaEntry
}

// own is this node's metadata message.
func (d *dir) own(ask bool) *Meta {
	r := d.metas[d.self]
	return &Meta{ID: d.self, Ver: r.ver, Name: r.name, Meta: r.meta, Ask: ask}
}

// learnMeta records what m says of its node; it reports whether that was
// news (a node not known, or a newer version).
func (d *dir) learnMeta(id core.NodeID, r metaRec) bool {
	if id == d.self {
		return false
	}
	if old, ok := d.metas[id]; ok && old.ver >= r.ver {
		return false
	}
	d.metas[id] = r
	return true
}

func (d *dir) receiveMeta(from core.NodeID, m *Meta) {
	fresh := d.learnMeta(m.ID, metaRec{m.Ver, m.Name, m.Meta})
	if m.Ask {
		d.env.Send(from, d.own(false))
	}
	if from != m.ID || !fresh || d.view == nil {
		d.tryPublish()
		return
	}
	if !slices.Contains(d.view, m.ID) {
		// A joiner's introduction: flood it, as its address.
		for _, id := range d.floodTargets() {
			if id != from && id != m.ID {
				d.env.Send(id, m)
			}
		}
		d.tryPublish()
		return
	}
	// A member's change.
	switch {
	case d.publishFor != 0:
		d.tryPublish()
	case d.root == d.self:
		if m.Ver > d.shown[m.ID] {
			d.env.Emit(member.Refresh{})
		}
	case d.root != core.None:
		d.env.Send(d.root, m)
	}
}

func (d *dir) receiveMetaView(from core.NodeID, m *MetaView) {
	if from != member.EpochRoot(m.Epoch) || m.Epoch <= d.lastShown {
		return
	}
	for _, e := range m.Entries {
		d.learnMeta(e.ID, metaRec{e.Ver, e.Name, e.Meta})
	}
	d.shownIn(m.Epoch, m.Entries)
	d.env.Emit(MetaPublished{Epoch: m.Epoch, Entries: m.Entries})
}

// shownIn records the versions published with epoch, and whether this
// node's change is among them.
func (d *dir) shownIn(epoch uint64, es []MetaEntry) {
	d.lastShown = epoch
	clear(d.shown)
	for _, e := range es {
		d.shown[e.ID] = e.Ver
		if e.ID == d.self && e.Ver >= d.wantVer {
			d.wantVer = 0
		}
	}
}

// setMeta changes this node's metadata and asks for a view that shows it.
func (d *dir) setMeta(meta []byte) {
	r := d.metas[d.self]
	r.ver++
	r.meta = slices.Clone(meta)
	d.metas[d.self] = r
	d.wantVer = r.ver
	d.askRefresh()
	d.env.SetTimer(queryEvery, dirMetaTimer)
}

// askRefresh asks the root (this node's membership, at the root) for a
// new epoch that will show this node's metadata.
func (d *dir) askRefresh() {
	switch {
	case d.view == nil:
	case d.root == d.self:
		d.env.Emit(member.Refresh{})
	case d.root != core.None:
		d.env.Send(d.root, d.own(false))
	}
}

// tryPublish publishes the metadata of the view this node installed as its
// root, once it knows every member's; until then it asks those it lacks.
func (d *dir) tryPublish() {
	if d.publishFor == 0 {
		return
	}
	if d.publishFor != d.lastEpoch || d.root != d.self {
		d.publishFor = 0 // a newer view: it is published instead
		return
	}
	var missing []core.NodeID
	for _, id := range d.view {
		if _, ok := d.metas[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		ask := d.own(true)
		for _, id := range missing {
			d.env.Send(id, ask)
		}
		d.env.SetTimer(queryEvery, dirMetaTimer)
		return
	}
	es := make([]MetaEntry, len(d.view))
	for i, id := range d.view {
		r := d.metas[id]
		es[i] = MetaEntry{ID: id, Ver: r.ver, Name: r.name, Addr: d.book[id], Meta: r.meta}
	}
	out := &MetaView{Epoch: d.publishFor, Entries: es}
	for _, id := range d.view {
		if id != d.self {
			d.env.Send(id, out)
		}
	}
	d.publishFor = 0
	d.shownIn(out.Epoch, es)
	d.env.Emit(MetaPublished{Epoch: out.Epoch, Entries: es})
}

// metaTimer repeats what is pending: this node's change, and the root's
// questions for metadata it lacks.
func (d *dir) metaTimer() {
	if d.wantVer != 0 {
		d.askRefresh()
	}
	if d.publishFor != 0 {
		d.tryPublish() // re-arms while members are missing
	} else if d.wantVer != 0 {
		d.env.SetTimer(queryEvery, dirMetaTimer)
	}
}

// probeState is what this node answers a starting node's probe.
func (d *dir) probeState() uint8 {
	if d.view != nil {
		return StateMember
	}
	return StateJoining
}
