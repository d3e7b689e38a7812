package replica

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The message kinds of package replica, in protocol [core.ProtoReplica].
// Append only: the numbers are on the wire. Never renumber, never reuse a
// retired number.
const (
	// KindData carries one application message, master → every live
	// replica of the destination rank ([Data]).
	KindData = core.Kind(core.ProtoReplica)<<8 | 1
	// KindAck acknowledges a channel cumulatively, destination replica →
	// the sender rank's master ([Ack]).
	KindAck = core.Kind(core.ProtoReplica)<<8 | 2
	// KindCommit tells the master's fellow replicas which sends of a
	// channel every live destination replica holds ([Commit]).
	KindCommit = core.Kind(core.ProtoReplica)<<8 | 3
	// KindDecision proposes the value of one decision, master → its
	// fellow replicas ([Decision]).
	KindDecision = core.Kind(core.ProtoReplica)<<8 | 4
	// KindDecisionAck acknowledges decisions, replica → master
	// ([DecisionAck]).
	KindDecisionAck = core.Kind(core.ProtoReplica)<<8 | 5
	// KindDecisionCommit makes decisions final, master → its fellow
	// replicas ([DecisionCommit]).
	KindDecisionCommit = core.Kind(core.ProtoReplica)<<8 | 6
	// KindFin says that its sender's program has finished, process →
	// every live process ([Fin]).
	KindFin = core.Kind(core.ProtoReplica)<<8 | 7
	// KindControlData is KindData of a control channel ([Send].Control,
	// [Data].Control): the same encoding, under a kind of its own so that
	// a transport can carry it ahead of data.
	KindControlData = core.Kind(core.ProtoReplica)<<8 | 8
)

var kindNames = map[core.Kind]string{
	KindData:           "replica.Data",
	KindAck:            "replica.Ack",
	KindCommit:         "replica.Commit",
	KindDecision:       "replica.Decision",
	KindDecisionAck:    "replica.DecisionAck",
	KindDecisionCommit: "replica.DecisionCommit",
	KindFin:            "replica.Fin",
	KindControlData:    "replica.ControlData",
}

// KindName returns the name of a replica message kind ("replica.Data", …),
// or the kind's numeric form.
func KindName(k core.Kind) string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return k.String()
}

// Data is one application message: the Seq-th send (from 1) of logical
// rank Src to logical rank Dst on communicator Comm. (Comm, Src, Dst, Tag,
// Seq) is the paper's message identifier (MID). Control says that the
// channel is a control channel ([Send].Control): the message is then of
// kind KindControlData, with the same encoding (Control is its kind, not
// part of its payload).
type Data struct {
	Comm     uint64
	Src, Dst int
	Tag      int64
	Seq      uint64
	Payload  []byte
	Control  bool
}

// Ack says that its sender, a replica of rank Dst, has delivered messages
// 1…Upto of channel (Comm, Src → Dst).
type Ack struct {
	Comm     uint64
	Src, Dst int
	Upto     uint64
}

// Commit says that every live replica of rank Dst has delivered messages
// 1…Upto of channel (Comm, Src → Dst): the fellow replicas of Src drop
// those sends from their backup tables, and skip them when their own
// program reaches them.
type Commit struct {
	Comm     uint64
	Src, Dst int
	Upto     uint64
}

// Decision proposes Value for the K-th decision of the rank, from the
// master whose replica index is Ballot (masters of a rank only ever have
// growing indices, so a higher ballot is a later master).
type Decision struct {
	Ballot int
	K      uint64
	Value  []byte
}

// DecisionAck says that its sender holds, for every decision up to Upto
// that is not final there, the value of the master Ballot; Final is how
// many decisions are final at the sender.
type DecisionAck struct {
	Ballot int
	Upto   uint64
	Final  uint64
}

// DecisionCommit makes decisions 1…Upto final at the receiver. AllFinal
// (≤ Upto) is how many are final at every live replica of the rank, as far
// as the master knows: a new master re-proposes only the later ones.
type DecisionCommit struct {
	Upto     uint64
	AllFinal uint64
}

// Fin says that its sender's program has finished (see [Finish]).
type Fin struct{}

// Kind implements core.Msg: KindControlData for a control channel's
// message, KindData otherwise.
func (m *Data) Kind() core.Kind {
	if m.Control {
		return KindControlData
	}
	return KindData
}

// Kind implements core.Msg.
func (*Fin) Kind() core.Kind            { return KindFin }
func (*Ack) Kind() core.Kind            { return KindAck }
func (*Commit) Kind() core.Kind         { return KindCommit }
func (*Decision) Kind() core.Kind       { return KindDecision }
func (*DecisionAck) Kind() core.Kind    { return KindDecisionAck }
func (*DecisionCommit) Kind() core.Kind { return KindDecisionCommit }

// MarshalWire implements wire.Message.
func (m *Data) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Comm)
	e.Uvarint(uint64(m.Src))
	e.Uvarint(uint64(m.Dst))
	e.Varint(m.Tag)
	e.Uvarint(m.Seq)
	e.Bytes(m.Payload)
}

// AppendHeader appends the encoding of m up to its payload: the
// encoding of m is that header followed by m.Payload, so that a transport
// can write the payload from where it lies, with no copy.
func (m *Data) AppendHeader(b []byte) []byte {
	b = binary.AppendUvarint(b, m.Comm)
	b = binary.AppendUvarint(b, uint64(m.Src))
	b = binary.AppendUvarint(b, uint64(m.Dst))
	b = binary.AppendVarint(b, m.Tag)
	b = binary.AppendUvarint(b, m.Seq)
	return binary.AppendUvarint(b, uint64(len(m.Payload)))
}

// DataHeaderMax bounds the length of [Data.AppendHeader]'s header.
const DataHeaderMax = 6 * binary.MaxVarintLen64

// MarshalWire implements wire.Message.
func (m *Ack) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Comm)
	e.Uvarint(uint64(m.Src))
	e.Uvarint(uint64(m.Dst))
	e.Uvarint(m.Upto)
}

// MarshalWire implements wire.Message.
func (m *Commit) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Comm)
	e.Uvarint(uint64(m.Src))
	e.Uvarint(uint64(m.Dst))
	e.Uvarint(m.Upto)
}

// MarshalWire implements wire.Message.
func (m *Decision) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(m.Ballot))
	e.Uvarint(m.K)
	e.Bytes(m.Value)
}

// MarshalWire implements wire.Message.
func (m *DecisionAck) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(m.Ballot))
	e.Uvarint(m.Upto)
	e.Uvarint(m.Final)
}

// MarshalWire implements wire.Message.
func (m *DecisionCommit) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Upto)
	e.Uvarint(m.AllFinal)
}

// MarshalWire implements wire.Message.
func (m *Fin) MarshalWire(*wire.Encoder) {}

// WireSize implements core.Sizer.
func (m *Fin) WireSize() int            { return 0 }
func (m *Data) WireSize() int           { return wire.Size(m) }
func (m *Ack) WireSize() int            { return wire.Size(m) }
func (m *Commit) WireSize() int         { return wire.Size(m) }
func (m *Decision) WireSize() int       { return wire.Size(m) }
func (m *DecisionAck) WireSize() int    { return wire.Size(m) }
func (m *DecisionCommit) WireSize() int { return wire.Size(m) }

func (m *Fin) String() string { return "fin" }
func (m *Data) String() string {
	name := "data"
	if m.Control {
		name = "cdata"
	}
	return fmt.Sprintf("%s{c%d %d→%d tag %d #%d %dB}", name, m.Comm, m.Src, m.Dst, m.Tag, m.Seq, len(m.Payload))
}
func (m *Ack) String() string {
	return fmt.Sprintf("ack{c%d %d→%d ≤%d}", m.Comm, m.Src, m.Dst, m.Upto)
}
func (m *Commit) String() string {
	return fmt.Sprintf("commit{c%d %d→%d ≤%d}", m.Comm, m.Src, m.Dst, m.Upto)
}
func (m *Decision) String() string {
	return fmt.Sprintf("decision{b%d k%d %q}", m.Ballot, m.K, m.Value)
}
func (m *DecisionAck) String() string {
	return fmt.Sprintf("decack{b%d ≤%d final %d}", m.Ballot, m.Upto, m.Final)
}
func (m *DecisionCommit) String() string {
	return fmt.Sprintf("deccommit{≤%d all %d}", m.Upto, m.AllFinal)
}

// rank reads a logical rank (at most 2^31−1).
func rank(d *wire.Decoder) int {
	u := d.Uvarint()
	if u > math.MaxInt32 {
		d.Fail("rank", fmt.Errorf("%w: rank %d out of range", ErrMessage, u))
		return 0
	}
	return int(u)
}

// DecodeData decodes a [Data]. A zero Seq is an error wrapping
// [ErrMessage]. Payload aliases the decoder's buffer.
func DecodeData(d *wire.Decoder) (core.Msg, error) {
	m := new(Data)
	if err := DecodeDataInto(d, m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeControlData decodes a [Data] of kind KindControlData (Control
// set).
func DecodeControlData(d *wire.Decoder) (core.Msg, error) {
	m := &Data{}
	if err := DecodeDataInto(d, m); err != nil {
		return nil, err
	}
	m.Control = true
	return m, nil
}

// DecodeDataInto is [DecodeData] into m, which a caller that receives
// every message on one goroutine (or under one lock) can reuse for each:
// lent to [Layer.ReceiveBorrowed], which keeps neither m nor its payload,
// a Data then costs no allocation. It does not check that d is consumed
// (wire.Decoder.Finish).
func DecodeDataInto(d *wire.Decoder, m *Data) error {
	*m = Data{Comm: d.Uvarint(), Src: rank(d), Dst: rank(d), Tag: d.Varint(), Seq: d.Uvarint(), Payload: d.Bytes()}
	if err := d.Err(); err != nil {
		return err
	}
	if m.Seq == 0 {
		return fmt.Errorf("%w: data with sequence number 0", ErrMessage)
	}
	return nil
}

// DecodeDataHeader decodes the header of a [Data] (its encoding up to the
// payload, [Data.AppendHeader]) from p, the first bytes of its encoding,
// for a transport that has not read the payload yet: m gets every field
// but Payload, nil. It returns the header's length and the payload's, and
// ok false when p is shorter than the header or the header is malformed.
func DecodeDataHeader(p []byte, m *Data) (header, size int, ok bool) {
	var d wire.Decoder
	d.Reset(p)
	*m = Data{Comm: d.Uvarint(), Src: rank(&d), Dst: rank(&d), Tag: d.Varint(), Seq: d.Uvarint()}
	n := d.Uvarint()
	if d.Err() != nil || m.Seq == 0 || n > math.MaxInt32 {
		return 0, 0, false
	}
	return d.Offset(), int(n), true
}

// DecodeAck decodes an [Ack].
func DecodeAck(d *wire.Decoder) (core.Msg, error) {
	m := new(Ack)
	return m, DecodeAckInto(d, m)
}

// DecodeAckInto is [DecodeAck] into m, which a caller can reuse for every
// Ack it hands the layer: the layer keeps no Ack. It does not check that
// d is consumed (wire.Decoder.Finish).
func DecodeAckInto(d *wire.Decoder, m *Ack) error {
	*m = Ack{Comm: d.Uvarint(), Src: rank(d), Dst: rank(d), Upto: d.Uvarint()}
	return d.Err()
}

// DecodeCommit decodes a [Commit].
func DecodeCommit(d *wire.Decoder) (core.Msg, error) {
	m := new(Commit)
	return m, DecodeCommitInto(d, m)
}

// DecodeCommitInto is [DecodeCommit] into m, which a caller can reuse for
// every Commit it hands the layer: the layer keeps no Commit. It does not
// check that d is consumed (wire.Decoder.Finish).
func DecodeCommitInto(d *wire.Decoder, m *Commit) error {
	*m = Commit{Comm: d.Uvarint(), Src: rank(d), Dst: rank(d), Upto: d.Uvarint()}
	return d.Err()
}

// DecodeDecision decodes a [Decision]. A zero K is an error wrapping
// [ErrMessage]. Value aliases the decoder's buffer.
func DecodeDecision(d *wire.Decoder) (core.Msg, error) {
	m := &Decision{Ballot: rank(d), K: d.Uvarint(), Value: d.Bytes()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if m.K == 0 {
		return nil, fmt.Errorf("%w: decision number 0", ErrMessage)
	}
	return m, nil
}

// DecodeDecisionAck decodes a [DecisionAck].
func DecodeDecisionAck(d *wire.Decoder) (core.Msg, error) {
	m := &DecisionAck{Ballot: rank(d), Upto: d.Uvarint(), Final: d.Uvarint()}
	return m, d.Err()
}

// DecodeDecisionCommit decodes a [DecisionCommit]. AllFinal beyond Upto is
// an error wrapping [ErrMessage].
func DecodeDecisionCommit(d *wire.Decoder) (core.Msg, error) {
	m := &DecisionCommit{Upto: d.Uvarint(), AllFinal: d.Uvarint()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if m.AllFinal > m.Upto {
		return nil, fmt.Errorf("%w: decision commit ≤%d with %d final everywhere", ErrMessage, m.Upto, m.AllFinal)
	}
	return m, nil
}

// DecodeFin decodes a [Fin] (no body).
func DecodeFin(d *wire.Decoder) (core.Msg, error) { return &Fin{}, d.Err() }

var decoders = []struct {
	kind core.Kind
	f    wire.DecodeFunc
}{
	{KindData, DecodeData},
	{KindAck, DecodeAck},
	{KindCommit, DecodeCommit},
	{KindDecision, DecodeDecision},
	{KindDecisionAck, DecodeDecisionAck},
	{KindDecisionCommit, DecodeDecisionCommit},
	{KindFin, DecodeFin},
	{KindControlData, DecodeControlData},
}

// RegisterCodecs registers every replica message kind with c.
func RegisterCodecs(c *wire.Codec) error {
	for _, k := range decoders {
		if err := c.Register(k.kind, KindName(k.kind), k.f); err != nil {
			return err
		}
	}
	return nil
}
