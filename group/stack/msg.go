package stack

import (
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Message kinds of the directory layer. Append only: the numbers are on the
// wire.
const (
	KindAddrs     = core.Kind(core.ProtoGroup)<<8 | 1 // addresses of nodes ([Addrs])
	KindAddrQuery = core.Kind(core.ProtoGroup)<<8 | 2 // a request for addresses ([AddrQuery])
	_             = core.Kind(core.ProtoGroup)<<8 | 3 // retired: never reuse
	KindLeft      = core.Kind(core.ProtoGroup)<<8 | 4 // a view without the receiver is installed ([Left])
	KindProbe     = core.Kind(core.ProtoGroup)<<8 | 5 // a starting node's question, or the answer ([Probe])
	KindMeta      = core.Kind(core.ProtoGroup)<<8 | 6 // a node's metadata ([Meta])
	KindMetaView  = core.Kind(core.ProtoGroup)<<8 | 7 // the metadata of a view's members ([MetaView])
)

// Limits of the directory's fields on the wire, in bytes.
const (
	MaxNameLen = 128 // a node's name
	MaxMetaLen = 512 // a node's metadata
)

// The states a [Probe] reports, append only (on the wire).
const (
	StateUndecided = iota // still probing its seeds
	StateJoining          // asking to be admitted
	StateMember           // a member of a view (or forming one)
)

// Probe is a starting node's question to a seed (Reply false) and the
// seed's answer (Reply true): the sender's name and state, by which the
// starting node decides to form a group or to join one.
type Probe struct {
	Reply bool
	Name  string
	State uint8
}

// Meta is node ID's metadata at version Ver (versions only grow). Ask asks
// the receiver for its own Meta in return.
type Meta struct {
	ID   core.NodeID
	Ver  uint64
	Name string
	Meta []byte
	Ask  bool
}

// MetaEntry is one member of a [MetaView].
type MetaEntry struct {
	ID   core.NodeID
	Ver  uint64
	Name string
	Addr string
	Meta []byte
}

// MetaView is the metadata of the members of the view numbered Epoch, in
// view order, as that view's root published it: the only copy for that
// epoch, so every member sees the same.
type MetaView struct {
	Epoch   uint64
	Entries []MetaEntry
}

// Entry is the address of one node.
type Entry struct {
	ID   core.NodeID
	Addr string
}

// Addrs gives addresses of nodes. Reply asks the receiver for its whole
// address book (a joiner's introduction).
type Addrs struct {
	Reply   bool
	Entries []Entry
}

// AddrQuery asks for the addresses of IDs.
type AddrQuery struct{ IDs []core.NodeID }

// Left tells a leaving node that the view numbered Epoch, without it, is
// installed.
type Left struct{ Epoch uint64 }

func (*Addrs) Kind() core.Kind     { return KindAddrs }
func (*AddrQuery) Kind() core.Kind { return KindAddrQuery }
func (*Left) Kind() core.Kind      { return KindLeft }
func (*Probe) Kind() core.Kind     { return KindProbe }
func (*Meta) Kind() core.Kind      { return KindMeta }
func (*MetaView) Kind() core.Kind  { return KindMetaView }

func (m *Probe) MarshalWire(e *wire.Encoder) {
	e.Bool(m.Reply)
	e.String(m.Name)
	e.Uvarint(uint64(m.State))
}

func (m *Meta) MarshalWire(e *wire.Encoder) {
	e.NodeID(m.ID)
	e.Uvarint(m.Ver)
	e.String(m.Name)
	e.String(string(m.Meta))
	e.Bool(m.Ask)
}

func (m *MetaView) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(uint64(len(m.Entries)))
	for _, x := range m.Entries {
		e.NodeID(x.ID)
		e.Uvarint(x.Ver)
		e.String(x.Name)
		e.String(x.Addr)
		e.String(string(x.Meta))
	}
}

func decProbe(d *wire.Decoder) (core.Msg, error) {
	m := &Probe{Reply: d.Bool(), Name: d.StringMax(MaxNameLen)}
	if s := d.Uvarint(); s > StateMember {
		d.Fail("state", wire.ErrInvalid)
	} else {
		m.State = uint8(s)
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return m, nil
}

func decMeta(d *wire.Decoder) (core.Msg, error) {
	m := &Meta{ID: d.NodeID(), Ver: d.Uvarint(), Name: d.StringMax(MaxNameLen), Meta: metaBytes(d.StringMax(MaxMetaLen)), Ask: d.Bool()}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return m, nil
}

func decMetaView(d *wire.Decoder) (core.Msg, error) {
	m := &MetaView{Epoch: d.Uvarint()}
	n := d.Uvarint()
	if d.Err() == nil && n > uint64(d.Remaining())/5 { // an entry takes at least 5 bytes
		d.Fail("entry count", wire.ErrTooLong)
	}
	for i := uint64(0); d.Err() == nil && i < n; i++ {
		m.Entries = append(m.Entries, MetaEntry{ID: d.NodeID(), Ver: d.Uvarint(), Name: d.StringMax(MaxNameLen),
			Addr: d.StringMax(MaxAddrLen), Meta: metaBytes(d.StringMax(MaxMetaLen))})
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return m, nil
}

// metaBytes is s as metadata: nil when empty, so that a round trip keeps
// "no metadata" as nil.
func metaBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func (m *Addrs) MarshalWire(e *wire.Encoder) {
	e.Bool(m.Reply)
	e.Uvarint(uint64(len(m.Entries)))
	for _, x := range m.Entries {
		e.NodeID(x.ID)
		e.String(x.Addr)
	}
}
func (m *AddrQuery) MarshalWire(e *wire.Encoder) { e.NodeIDs(m.IDs) }
func (m *Left) MarshalWire(e *wire.Encoder)      { e.Uvarint(m.Epoch) }

func decAddrs(d *wire.Decoder) (core.Msg, error) {
	m := &Addrs{Reply: d.Bool()}
	n := d.Uvarint()
	if d.Err() == nil && n > uint64(d.Remaining())/2 { // an entry takes at least 2 bytes
		d.Fail("entry count", wire.ErrTooLong)
	}
	for i := uint64(0); d.Err() == nil && i < n; i++ {
		m.Entries = append(m.Entries, Entry{ID: d.NodeID(), Addr: d.StringMax(MaxAddrLen)})
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return m, nil
}

func decAddrQuery(d *wire.Decoder) (core.Msg, error) {
	m := &AddrQuery{IDs: d.NodeIDs()}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return m, nil
}

func decLeft(d *wire.Decoder) (core.Msg, error) {
	m := &Left{Epoch: d.Uvarint()}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return m, nil
}

// RegisterCodecs registers the directory layer's message kinds with c.
func RegisterCodecs(c *wire.Codec) error {
	for _, k := range []struct {
		kind core.Kind
		name string
		f    wire.DecodeFunc
	}{
		{KindAddrs, "group.Addrs", decAddrs},
		{KindAddrQuery, "group.AddrQuery", decAddrQuery},
		{KindLeft, "group.Left", decLeft},
		{KindProbe, "group.Probe", decProbe},
		{KindMeta, "group.Meta", decMeta},
		{KindMetaView, "group.MetaView", decMetaView},
	} {
		if err := c.Register(k.kind, k.name, k.f); err != nil {
			return fmt.Errorf("group: %w", err)
		}
	}
	return nil
}
