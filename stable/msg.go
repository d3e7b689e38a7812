package stable

import (
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The paper's message-size accounting (§4.1), which every message's
// WireSize follows so that the simulator's bandwidth, load and queue figures
// match the paper's setup: a 32-byte header plus 4 bytes (a sequence number)
// per vector entry. CubeFullDist's bitmap G and the round and iteration
// numbers are taken to fit in the header, as the paper counts only "the size
// of the array of stability information" (at most 200 bytes for 50
// senders) and the header. The real encoding (MarshalWire) is varints and is
// usually smaller.
const (
	HeaderBytes = 32
	EntryBytes  = 4
)

// Every message names the view (Epoch) and the round it belongs to. Rounds
// are numbered from 1 within each view. Vectors are indexed by sender
// position (see Config.Senders).

// Start starts round Round (Coord, Figure 1 line 1; S_Coord, Figure 3
// line 1). Under S_Coord, Failed lists the members the root left out of
// this round's tree (members reported failed to the root), so that every
// member builds the same tree for the round; Coord leaves it empty.
type Start struct {
	Epoch, Round uint64
	Failed       []core.NodeID
}

// Ack carries R_i to the coordinator (Coord, line 9) or M_i, the minimum of
// a subtree, to the parent (S_Coord, lines 3 and 10).
type Ack struct {
	Epoch, Round uint64
	Vector       []uint64
}

// Info carries the round's result S from the coordinator or root (Coord
// line 4, S_Coord line 13).
type Info struct {
	Epoch, Round uint64
	Vector       []uint64
}

// AckInfo confirms an [Info] of the same round (§3.5; sent only when
// Config.Resend > 0).
type AckInfo struct {
	Epoch, Round uint64
}

// Row is FullDist's info message (Figure 2, lines 2 and 6): the sender's own
// row of its matrix, that is its vector R when it entered the round. Pull
// marks a retransmission (§3.5): a receiver that already has the sender's
// row for the round, or is in a later round, answers with its own current
// Row.
type Row struct {
	Epoch, Round uint64
	Vector       []uint64
	Pull         bool
}

// Gossip is CubeFullDist's stability message (Figure 5): the sender's gossip
// bitmap G (bit p, in byte p/8 at bit p%8, set when the sender has learned
// the vector of view position p for this round), its minimum array M, the
// round and the iteration of §3.5. Pull marks a retransmission: the
// receiver answers with its own current Gossip (or, when the round is one it
// has finished, with its last message of that round).
type Gossip struct {
	Epoch, Round, Iter uint64
	G                  []byte
	M                  []uint64
	Pull               bool
}

// Kind is [KindStart].
func (Start) Kind() core.Kind { return KindStart }

// Kind is [KindAck].
func (Ack) Kind() core.Kind { return KindAck }

// Kind is [KindInfo].
func (Info) Kind() core.Kind { return KindInfo }

// Kind is [KindAckInfo].
func (AckInfo) Kind() core.Kind { return KindAckInfo }

// Kind is [KindRow].
func (Row) Kind() core.Kind { return KindRow }

// Kind is [KindGossip].
func (Gossip) Kind() core.Kind { return KindGossip }

// WireSize is the paper's size: the header plus 4 bytes per failed member
// listed.
func (m Start) WireSize() int { return HeaderBytes + EntryBytes*len(m.Failed) }

// WireSize is the paper's size: the header plus 4 bytes per entry.
func (m Ack) WireSize() int { return HeaderBytes + EntryBytes*len(m.Vector) }

// WireSize is the paper's size: the header plus 4 bytes per entry.
func (m Info) WireSize() int { return HeaderBytes + EntryBytes*len(m.Vector) }

// WireSize is the header alone.
func (AckInfo) WireSize() int { return HeaderBytes }

// WireSize is the paper's size: the header plus 4 bytes per entry.
func (m Row) WireSize() int { return HeaderBytes + EntryBytes*len(m.Vector) }

// WireSize is the paper's size: the header plus 4 bytes per entry of M (G
// is taken to fit in the header, see [HeaderBytes]).
func (m Gossip) WireSize() int { return HeaderBytes + EntryBytes*len(m.M) }

// MarshalWire appends Epoch, Round and Failed.
func (m Start) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(m.Round)
	e.NodeIDs(m.Failed)
}

// MarshalWire appends Epoch, Round and Vector.
func (m Ack) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(m.Round)
	e.Uvarints(m.Vector)
}

// MarshalWire appends Epoch, Round and Vector.
func (m Info) MarshalWire(e *wire.Encoder) { Ack(m).MarshalWire(e) }

// MarshalWire appends Epoch and Round.
func (m AckInfo) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(m.Round)
}

// MarshalWire appends Epoch, Round, Vector and Pull.
func (m Row) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(m.Round)
	e.Uvarints(m.Vector)
	e.Bool(m.Pull)
}

// MarshalWire appends Epoch, Round, Iter, G, M and Pull.
func (m Gossip) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(m.Round)
	e.Uvarint(m.Iter)
	e.Bytes(m.G)
	e.Uvarints(m.M)
	e.Bool(m.Pull)
}

func (m Start) String() string {
	return fmt.Sprintf("start{e%d r%d failed %v}", m.Epoch, m.Round, m.Failed)
}
func (m Ack) String() string  { return fmt.Sprintf("ack{e%d r%d %v}", m.Epoch, m.Round, m.Vector) }
func (m Info) String() string { return fmt.Sprintf("info{e%d r%d %v}", m.Epoch, m.Round, m.Vector) }
func (m AckInfo) String() string {
	return fmt.Sprintf("ack-info{e%d r%d}", m.Epoch, m.Round)
}
func (m Row) String() string {
	return fmt.Sprintf("row{e%d r%d %v pull %v}", m.Epoch, m.Round, m.Vector, m.Pull)
}
func (m Gossip) String() string {
	return fmt.Sprintf("gossip{e%d r%d it%d G %x M %v pull %v}", m.Epoch, m.Round, m.Iter, m.G, m.M, m.Pull)
}

// roundOf checks the round number shared by every message: rounds are
// numbered from 1.
func roundOf(d *wire.Decoder) uint64 {
	r := d.Uvarint()
	if d.Err() == nil && r == 0 {
		d.Fail("round", fmt.Errorf("%w: round 0 (rounds start at 1)", ErrMessage))
	}
	return r
}

// DecodeStart decodes a [Start]; round 0 is an error wrapping [ErrMessage].
func DecodeStart(d *wire.Decoder) (core.Msg, error) {
	m := Start{Epoch: d.Uvarint(), Round: roundOf(d), Failed: d.NodeIDs()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeAck decodes an [Ack]; round 0 is an error wrapping [ErrMessage].
func DecodeAck(d *wire.Decoder) (core.Msg, error) {
	m := Ack{Epoch: d.Uvarint(), Round: roundOf(d), Vector: d.Uvarints()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeInfo decodes an [Info]; round 0 is an error wrapping [ErrMessage].
func DecodeInfo(d *wire.Decoder) (core.Msg, error) {
	m := Info{Epoch: d.Uvarint(), Round: roundOf(d), Vector: d.Uvarints()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeAckInfo decodes an [AckInfo]; round 0 is an error wrapping
// [ErrMessage].
func DecodeAckInfo(d *wire.Decoder) (core.Msg, error) {
	m := AckInfo{Epoch: d.Uvarint(), Round: roundOf(d)}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeRow decodes a [Row]; round 0 is an error wrapping [ErrMessage].
func DecodeRow(d *wire.Decoder) (core.Msg, error) {
	m := Row{Epoch: d.Uvarint(), Round: roundOf(d), Vector: d.Uvarints(), Pull: d.Bool()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeGossip decodes a [Gossip]; round 0 is an error wrapping
// [ErrMessage]. The bitmap's length is checked against the view when the
// message is handled (a bitmap of the wrong size for the view is ignored).
func DecodeGossip(d *wire.Decoder) (core.Msg, error) {
	m := Gossip{Epoch: d.Uvarint(), Round: roundOf(d), Iter: d.Uvarint()}
	if g := d.Bytes(); len(g) > 0 {
		m.G = append([]byte(nil), g...) // do not alias the frame buffer
	}
	m.M = d.Uvarints()
	m.Pull = d.Bool()
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
