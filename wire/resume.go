package wire

import (
	"encoding/binary"

	"github.com/cohort-mp/cohort/core"
)

// The kinds that keep a pair's stream whole across connections
// (transport/tcp). Append only: the numbers are on the wire.
var (
	// KindResume is sent by each side once both proofs have verified: a
	// [Resume], which names the sender's stream and tells how much of the
	// peer's it has delivered.
	KindResume = core.MakeKind(core.ProtoCore, 6)
	// KindSeq opens the frames of a connection: its payload, one uvarint,
	// is the sequence number of the next counted frame on it (the first
	// one is 1). Every frame after it but KindPad, KindGoodbye, KindSeq,
	// KindAck and KindRelay takes the next number (a relayed frame is
	// counted in its origin's stream to its destination instead).
	KindSeq = core.MakeKind(core.ProtoCore, 7)
	// KindAck acknowledges a pair's stream: its payload, one uvarint, is
	// how many of the peer's counted frames the sender has delivered
	// (cumulative). The peer forgets those frames.
	KindAck = core.MakeKind(core.ProtoCore, 8)
)

// Resume is the last message of the handshake, sent by each side once the
// proofs have verified. Each end names its half of a pair's streams with
// a random stream id, drawn when it first meets the peer (a restarted
// process, or one that forgot the peer, draws a new one): the pair's
// streams live as long as both ids do, across any number of connections,
// and start afresh when either changes.
type Resume struct {
	// Stream is the sender's stream id for the receiver (never 0).
	Stream uint64
	// PeerStream is the receiver's stream id as the sender last knew it
	// (0: none): the stream Received counts.
	PeerStream uint64
	// Received is how many counted frames of that stream the sender has
	// delivered.
	Received uint64
	// DialOutOnly: the sender accepts no connection (a host behind NAT or
	// a firewall that drops inbound ones): the receiver must not dial it,
	// nor close its connections for being idle, and waits for it to dial.
	DialOutOnly bool
}

// Kind returns KindResume.
func (Resume) Kind() core.Kind { return KindResume }

// MarshalWire appends the three counts as uvarints, then DialOutOnly as
// a bool.
func (r Resume) MarshalWire(e *Encoder) {
	e.Uvarint(r.Stream)
	e.Uvarint(r.PeerStream)
	e.Uvarint(r.Received)
	e.Bool(r.DialOutOnly)
}

// DecodeResume decodes a Resume payload. A stream id of 0 is malformed.
func DecodeResume(payload []byte) (Resume, error) {
	d := NewDecoder(payload)
	r := Resume{Stream: d.Uvarint(), PeerStream: d.Uvarint(), Received: d.Uvarint(), DialOutOnly: d.Bool()}
	if d.Err() == nil && r.Stream == 0 {
		d.Fail("stream id", ErrInvalid)
	}
	if err := d.Finish(); err != nil {
		return Resume{}, err
	}
	return r, nil
}

// AppendCount appends the payload of a KindSeq or KindAck frame.
func AppendCount(b []byte, n uint64) []byte { return binary.AppendUvarint(b, n) }

// DecodeCount decodes the payload of a KindSeq or KindAck frame.
func DecodeCount(payload []byte) (uint64, error) {
	d := NewDecoder(payload)
	n := d.Uvarint()
	if err := d.Finish(); err != nil {
		return 0, err
	}
	return n, nil
}
