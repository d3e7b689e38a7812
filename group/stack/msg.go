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
	KindLeave     = core.Kind(core.ProtoGroup)<<8 | 3 // the sender leaves the group ([Leave])
	KindLeft      = core.Kind(core.ProtoGroup)<<8 | 4 // a view without the receiver is installed ([Left])
)

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

// Leave announces that Node leaves the group (sent by Node itself, or
// relayed by a member).
type Leave struct{ Node core.NodeID }

// Left tells a leaving node that the view numbered Epoch, without it, is
// installed.
type Left struct{ Epoch uint64 }

func (*Addrs) Kind() core.Kind     { return KindAddrs }
func (*AddrQuery) Kind() core.Kind { return KindAddrQuery }
func (*Leave) Kind() core.Kind     { return KindLeave }
func (*Left) Kind() core.Kind      { return KindLeft }

func (m *Addrs) MarshalWire(e *wire.Encoder) {
	e.Bool(m.Reply)
	e.Uvarint(uint64(len(m.Entries)))
	for _, x := range m.Entries {
		e.NodeID(x.ID)
		e.String(x.Addr)
	}
}
func (m *AddrQuery) MarshalWire(e *wire.Encoder) { e.NodeIDs(m.IDs) }
func (m *Leave) MarshalWire(e *wire.Encoder)     { e.NodeID(m.Node) }
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

func decLeave(d *wire.Decoder) (core.Msg, error) {
	m := &Leave{Node: d.NodeID()}
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
		{KindLeave, "group.Leave", decLeave},
		{KindLeft, "group.Left", decLeft},
	} {
		if err := c.Register(k.kind, k.name, k.f); err != nil {
			return fmt.Errorf("group: %w", err)
		}
	}
	return nil
}
