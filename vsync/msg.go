package vsync

import (
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The message kinds of package vsync, in protocol [core.ProtoVsync].
// Append only: the numbers are on the wire. Never renumber, never reuse a
// retired number.
const (
	// KindData carries one multicast message ([Data]).
	KindData = core.Kind(core.ProtoVsync)<<8 | 1
	// KindNack asks for a range of one sender's messages ([Nack]).
	KindNack = core.Kind(core.ProtoVsync)<<8 | 2
	// KindDigest tells how many messages a sender has sent ([Digest]).
	KindDigest = core.Kind(core.ProtoVsync)<<8 | 3
	// KindFlush is a node's flush report for a new view ([Flush]).
	KindFlush = core.Kind(core.ProtoVsync)<<8 | 4
	// KindFlushOK says that its sender holds every message of the cut
	// ([FlushOK]).
	KindFlushOK = core.Kind(core.ProtoVsync)<<8 | 5
)

var kindNames = map[core.Kind]string{
	KindData:    "vsync.Data",
	KindNack:    "vsync.Nack",
	KindDigest:  "vsync.Digest",
	KindFlush:   "vsync.Flush",
	KindFlushOK: "vsync.FlushOK",
}

// KindName returns the name of a vsync message kind ("vsync.Data", …), or
// the kind's numeric form.
func KindName(k core.Kind) string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return k.String()
}

// Data is one multicast message: the Seq-th message (from 1) that Sender
// multicast in the view numbered Epoch. A retransmission by another node
// during a flush carries the original Sender.
type Data struct {
	Epoch   uint64
	Sender  core.NodeID
	Seq     uint64
	Payload []byte
}

// Nack asks the receiver to send again Sender's messages From..To
// (inclusive) of view Epoch.
type Nack struct {
	Epoch    uint64
	Sender   core.NodeID
	From, To uint64
}

// Digest tells the members of view Epoch that its sender has sent Sent
// messages in it (so that a receiver missing the last ones can ask).
type Digest struct {
	Epoch uint64
	Sent  uint64
}

// Flush is a node's report for the flush that ends at view Target: the view
// Old its application is in (0 for a node that had no view yet), and
// Vector[i], how many messages of the sender at position i of view Old it
// has delivered. A node sends one report per Target and never changes it.
type Flush struct {
	Target uint64
	Old    uint64
	Vector []uint64
}

// FlushOK says that its sender, moving from view Old to view Target, holds
// (and has delivered) every message of the flush's cut.
type FlushOK struct {
	Target uint64
	Old    uint64
}

// Kind implements core.Msg.
func (*Data) Kind() core.Kind    { return KindData }
func (*Nack) Kind() core.Kind    { return KindNack }
func (*Digest) Kind() core.Kind  { return KindDigest }
func (*Flush) Kind() core.Kind   { return KindFlush }
func (*FlushOK) Kind() core.Kind { return KindFlushOK }

// MarshalWire implements wire.Message.
func (m *Data) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.NodeID(m.Sender)
	e.Uvarint(m.Seq)
	e.Bytes(m.Payload)
}

// MarshalWire implements wire.Message.
func (m *Nack) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.NodeID(m.Sender)
	e.Uvarint(m.From)
	e.Uvarint(m.To)
}

// MarshalWire implements wire.Message.
func (m *Digest) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(m.Sent)
}

// MarshalWire implements wire.Message.
func (m *Flush) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Target)
	e.Uvarint(m.Old)
	e.Uvarints(m.Vector)
}

// MarshalWire implements wire.Message.
func (m *FlushOK) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Target)
	e.Uvarint(m.Old)
}

// WireSize implements core.Sizer.
func (m *Data) WireSize() int    { return wire.Size(m) }
func (m *Nack) WireSize() int    { return wire.Size(m) }
func (m *Digest) WireSize() int  { return wire.Size(m) }
func (m *Flush) WireSize() int   { return wire.Size(m) }
func (m *FlushOK) WireSize() int { return wire.Size(m) }

func (m *Data) String() string {
	return fmt.Sprintf("data{e%d %v#%d %dB}", m.Epoch, m.Sender, m.Seq, len(m.Payload))
}
func (m *Nack) String() string {
	return fmt.Sprintf("nack{e%d %v#%d..%d}", m.Epoch, m.Sender, m.From, m.To)
}
func (m *Digest) String() string { return fmt.Sprintf("digest{e%d sent %d}", m.Epoch, m.Sent) }
func (m *Flush) String() string {
	return fmt.Sprintf("flush{→e%d from e%d %v}", m.Target, m.Old, m.Vector)
}
func (m *FlushOK) String() string { return fmt.Sprintf("flushok{→e%d from e%d}", m.Target, m.Old) }

// DecodeData decodes a [Data] payload. A zero Seq is an error wrapping
// [ErrMessage]. Payload aliases the decoder's buffer.
func DecodeData(d *wire.Decoder) (core.Msg, error) {
	m := &Data{Epoch: d.Uvarint(), Sender: d.NodeID(), Seq: d.Uvarint(), Payload: d.Bytes()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if m.Seq == 0 {
		return nil, fmt.Errorf("%w: data with sequence number 0", ErrMessage)
	}
	return m, nil
}

// DecodeNack decodes a [Nack]. A range that does not satisfy
// 1 ≤ From ≤ To is an error wrapping [ErrMessage].
func DecodeNack(d *wire.Decoder) (core.Msg, error) {
	m := &Nack{Epoch: d.Uvarint(), Sender: d.NodeID(), From: d.Uvarint(), To: d.Uvarint()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if m.From == 0 || m.From > m.To {
		return nil, fmt.Errorf("%w: nack range %d..%d", ErrMessage, m.From, m.To)
	}
	return m, nil
}

// DecodeDigest decodes a [Digest].
func DecodeDigest(d *wire.Decoder) (core.Msg, error) {
	m := &Digest{Epoch: d.Uvarint(), Sent: d.Uvarint()}
	return m, d.Err()
}

// DecodeFlush decodes a [Flush]. A report with no old view (Old 0) and a
// non-empty vector is an error wrapping [ErrMessage].
func DecodeFlush(d *wire.Decoder) (core.Msg, error) {
	m := &Flush{Target: d.Uvarint(), Old: d.Uvarint(), Vector: d.Uvarints()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if m.Old == 0 && len(m.Vector) > 0 {
		return nil, fmt.Errorf("%w: flush report without an old view carries %d entries", ErrMessage, len(m.Vector))
	}
	return m, nil
}

// DecodeFlushOK decodes a [FlushOK].
func DecodeFlushOK(d *wire.Decoder) (core.Msg, error) {
	m := &FlushOK{Target: d.Uvarint(), Old: d.Uvarint()}
	return m, d.Err()
}

var decoders = []struct {
	kind core.Kind
	f    wire.DecodeFunc
}{
	{KindData, DecodeData},
	{KindNack, DecodeNack},
	{KindDigest, DecodeDigest},
	{KindFlush, DecodeFlush},
	{KindFlushOK, DecodeFlushOK},
}

// RegisterCodecs registers every vsync message kind with c.
func RegisterCodecs(c *wire.Codec) error {
	for _, k := range decoders {
		if err := c.Register(k.kind, KindName(k.kind), k.f); err != nil {
			return err
		}
	}
	return nil
}
