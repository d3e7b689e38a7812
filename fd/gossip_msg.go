package fd

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// GossipMsg is one gossip message of the P2P-MPI detector (§5.1): the
// sender's whole heartbeat table, with its own heartbeat just incremented.
//
// The table is keyed by node id, not by position, so that nodes whose views
// differ (during a view change) still merge correctly: Beats[i] is the
// heartbeat of Members[i]. A receiver whose member list equals Members
// merges position by position; otherwise it merges id by id and ignores ids
// it does not monitor.
//
// Ownership: Members is the sender's member list, shared read-only with the
// sender (member lists are never mutated once installed); Beats is a copy
// made for this message (copy-on-send) and belongs to the message. Neither
// is mutated after Send, by the sender or by a receiver. Where the Env is
// done with a message when Send returns (core.SendCopier: the real host
// encodes it there), the detector sends a message of its own instead,
// refilled for every table and pointing at its live table; and a table
// decoded by the host goes back to it once merged (core.Recycler), for the
// next table to be decoded into.
//
// Wire format (payload, after the frame's kind):
//
//	uvarint  epoch
//	uvarint  n                      number of entries
//	uvarint  Members[0], then n-1 × zig-zag varint Members[i]-Members[i-1]
//	uvarint  Beats[0],   then n-1 × zig-zag varint Beats[i]-Beats[i-1]
//
// Delta coding keeps both columns at about one byte per entry in the common
// case: ids are dense and mostly increasing in view order, and the live
// nodes' heartbeats advance together (they all count rounds since the job
// started), so neighbouring entries differ by a few units. A table of n
// entries is therefore about 2n bytes plus a few bytes of header (a failed
// node's frozen heartbeat costs up to 4 more bytes, on its entry and on the
// next); [GossipMsg.WireSize] gives the exact size.
type GossipMsg struct {
	// Epoch is the epoch of the sender's view (0 for the initial list given
	// to [NewGossip]). It is informational: merging goes by ids.
	Epoch uint64
	// Members is the sender's member list in view order. Read-only.
	Members []core.NodeID
	// Beats holds the heartbeat counter of each member; len(Beats) ==
	// len(Members).
	Beats []uint32

	size int // encoded payload size, computed when the message is built
}

// GossipPing is the consensus-phase probe of a suspect (P2P-MPI §5.3: "a
// ping of that host"). A node answers every ping with a [GossipPong]
// carrying the same Seq.
type GossipPing struct {
	// Seq identifies the ping among those the sender has outstanding.
	Seq uint32
}

// GossipPong answers a [GossipPing]; Seq echoes the ping's.
type GossipPong struct {
	Seq uint32
}

// Kind returns [KindGossip].
func (*GossipMsg) Kind() core.Kind { return KindGossip }

// GossipProbeReq (kind [KindGossipProbeReq]) asks its receiver, a helper,
// to ping Subject on the sender's behalf: the sender is in the consensus
// phase about Subject, whose silence may be the link's (SWIM's ping-req).
type GossipProbeReq struct {
	// Seq identifies the request among the sender's; the answer echoes it.
	Seq uint32
	// Subject is the suspect.
	Subject core.NodeID
	// Hops is how many more times the request may be passed on: a helper
	// with Hops > 0 also asks helpers of its own (Hops − 1), for a
	// suspect that only members the requester cannot reach still reach.
	Hops uint8
	// Origin and OriginSeq, when OriginSeq is not 0, name the member whose
	// suspicion a passed-on request serves and that member's request: a
	// helper tells the suspect of it, and the suspect answers Origin
	// directly and round (the way back through the helpers may be cut one
	// way). A request straight from the suspecting member leaves them
	// zero. Encoded only when OriginSeq is not 0.
	Origin    core.NodeID
	OriginSeq uint32
}

// GossipProbeAck (kind [KindGossipProbeAck]) answers a [GossipProbeReq]:
// Subject answered the helper's ping (Pong), or the helper holds a
// heartbeat of Subject it does not suspect (Beat, the heartbeat it held:
// news of Subject that reached it by any path, which the requester's
// table may lack when the schedule's routes cross cut links).
type GossipProbeAck struct {
	Seq     uint32
	Subject core.NodeID
	Beat    uint32
	Pong    bool
}

// GossipProbeRelay (kind [KindGossipProbeRelay]) asks its receiver to
// pass an answer on: a suspect asked about itself answers the requester
// directly and also through a few members it heard from lately, since the
// requester's link from it may be the one that is down. The receiver
// sends To a [GossipProbeAck] with Seq, Subject (the sender) and Beat, and
// Pong true.
type GossipProbeRelay struct {
	To   core.NodeID
	Seq  uint32
	Beat uint32
}

// Kind returns [KindGossipProbeRelay].
func (GossipProbeRelay) Kind() core.Kind { return KindGossipProbeRelay }

// MarshalWire appends To, Seq and Beat.
func (m GossipProbeRelay) MarshalWire(e *wire.Encoder) {
	e.NodeID(m.To)
	e.Uvarint(uint64(m.Seq))
	e.Uvarint(uint64(m.Beat))
}

// WireSize is the payload size in bytes (equal to wire.Size(m)).
func (m GossipProbeRelay) WireSize() int {
	return gossipUvarintLen(uint64(m.To)) + gossipUvarintLen(uint64(m.Seq)) + gossipUvarintLen(uint64(m.Beat))
}

func (m GossipProbeRelay) String() string {
	return fmt.Sprintf("gossip-probe-relay{to %v %d beat %d}", m.To, m.Seq, m.Beat)
}

// Kind returns [KindGossipProbeReq].
func (GossipProbeReq) Kind() core.Kind { return KindGossipProbeReq }

// Kind returns [KindGossipProbeAck].
func (GossipProbeAck) Kind() core.Kind { return KindGossipProbeAck }

// MarshalWire appends Seq, Subject and Hops.
func (m GossipProbeReq) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(m.Seq))
	e.NodeID(m.Subject)
	e.Uint8(m.Hops)
	if m.OriginSeq != 0 {
		e.NodeID(m.Origin)
		e.Uvarint(uint64(m.OriginSeq))
	}
}

// WireSize is the payload size in bytes (equal to wire.Size(m)).
func (m GossipProbeReq) WireSize() int {
	n := gossipUvarintLen(uint64(m.Seq)) + gossipUvarintLen(uint64(m.Subject)) + 1
	if m.OriginSeq != 0 {
		n += gossipUvarintLen(uint64(m.Origin)) + gossipUvarintLen(uint64(m.OriginSeq))
	}
	return n
}

// MarshalWire appends Seq, Subject, Beat and Pong.
func (m GossipProbeAck) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(m.Seq))
	e.NodeID(m.Subject)
	e.Uvarint(uint64(m.Beat))
	e.Bool(m.Pong)
}

// WireSize is the payload size in bytes (equal to wire.Size(m)).
func (m GossipProbeAck) WireSize() int {
	return gossipUvarintLen(uint64(m.Seq)) + gossipUvarintLen(uint64(m.Subject)) + gossipUvarintLen(uint64(m.Beat)) + 1
}

func (m GossipProbeReq) String() string {
	if m.OriginSeq != 0 {
		return fmt.Sprintf("gossip-probe-req{%d %v hops %d for %v %d}", m.Seq, m.Subject, m.Hops, m.Origin, m.OriginSeq)
	}
	return fmt.Sprintf("gossip-probe-req{%d %v hops %d}", m.Seq, m.Subject, m.Hops)
}

func (m GossipProbeAck) String() string {
	return fmt.Sprintf("gossip-probe-ack{%d %v beat %d pong %v}", m.Seq, m.Subject, m.Beat, m.Pong)
}

// Kind returns [KindGossipPing].
func (GossipPing) Kind() core.Kind { return KindGossipPing }

// Kind returns [KindGossipPong].
func (GossipPong) Kind() core.Kind { return KindGossipPong }

// NewGossipMsg builds a message from a member list (retained, read-only) and
// a heartbeat column (retained: the caller hands ownership to the message).
// It computes the wire size once. It reports an error if the lengths
// differ.
func NewGossipMsg(epoch uint64, members []core.NodeID, beats []uint32) (*GossipMsg, error) {
	if len(members) != len(beats) {
		return nil, fmt.Errorf("fd: gossip table has %d members but %d heartbeats", len(members), len(beats))
	}
	m := &GossipMsg{Epoch: epoch, Members: members, Beats: beats}
	m.size = gossipHeaderSize(epoch, len(members)) + gossipIDsSize(members) + gossipBeatsSize(beats)
	return m, nil
}

// MarshalWire appends the message in the wire format described on
// [GossipMsg].
func (m *GossipMsg) MarshalWire(e *wire.Encoder) {
	e.Uvarint(m.Epoch)
	e.Uvarint(uint64(len(m.Members)))
	for i, id := range m.Members {
		if i == 0 {
			e.Uvarint(uint64(id))
		} else {
			e.Varint(int64(id) - int64(m.Members[i-1]))
		}
	}
	for i, b := range m.Beats {
		if i == 0 {
			e.Uvarint(uint64(b))
		} else {
			e.Varint(int64(b) - int64(m.Beats[i-1]))
		}
	}
}

// WireSize is the exact encoded payload size in bytes (core.Sizer). For a
// message built by hand rather than by NewGossipMsg or the decoder it is
// computed on each call.
func (m *GossipMsg) WireSize() int {
	if m.size > 0 {
		return m.size
	}
	return gossipHeaderSize(m.Epoch, len(m.Members)) + gossipIDsSize(m.Members) + gossipBeatsSize(m.Beats)
}

func (m *GossipMsg) String() string {
	return fmt.Sprintf("gossip{epoch %d, %d entries, %d bytes}", m.Epoch, len(m.Members), m.WireSize())
}

// MarshalWire appends Seq as a uvarint.
func (m GossipPing) MarshalWire(e *wire.Encoder) { e.Uvarint(uint64(m.Seq)) }

// MarshalWire appends Seq as a uvarint.
func (m GossipPong) MarshalWire(e *wire.Encoder) { e.Uvarint(uint64(m.Seq)) }

// WireSize is the encoded payload size in bytes.
func (m GossipPing) WireSize() int { return gossipUvarintLen(uint64(m.Seq)) }

// WireSize is the encoded payload size in bytes.
func (m GossipPong) WireSize() int { return gossipUvarintLen(uint64(m.Seq)) }

func gossipUvarintLen(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

func gossipVarintLen(i int64) int { return gossipUvarintLen(uint64(i<<1) ^ uint64(i>>63)) }

func gossipHeaderSize(epoch uint64, n int) int {
	return gossipUvarintLen(epoch) + gossipUvarintLen(uint64(n))
}

// gossipIDsSize is the encoded size of the id column.
func gossipIDsSize(ids []core.NodeID) int {
	if len(ids) == 0 {
		return 0
	}
	s := gossipUvarintLen(uint64(ids[0]))
	for i := 1; i < len(ids); i++ {
		s += gossipVarintLen(int64(ids[i]) - int64(ids[i-1]))
	}
	return s
}

// gossipBeatsSize is the encoded size of the heartbeat column. Almost every
// delta fits one byte; the loop only branches (predictably) on the others.
func gossipBeatsSize(beats []uint32) int {
	if len(beats) == 0 {
		return 0
	}
	s := gossipUvarintLen(uint64(beats[0])) + len(beats) - 1
	prev := beats[0]
	for _, b := range beats[1:] {
		d := int64(b) - int64(prev)
		prev = b
		if uint64(d+64) >= 128 {
			s += gossipVarintLen(d) - 1
		}
	}
	return s
}

// DecodeGossipMsg decodes a [GossipMsg] payload. It rejects an entry count
// that the remaining bytes cannot hold (two bytes per entry at least), an id
// or heartbeat outside uint32 (ids also must not be core.None), and never
// allocates more than 4 bytes per input byte. Duplicate ids are accepted:
// merging by maximum is idempotent, so they are harmless.
func DecodeGossipMsg(d *wire.Decoder) (core.Msg, error) {
	return DecodeGossipMsgInto(d, nil)
}

// DecodeGossipMsgInto decodes a [GossipMsg] payload as [DecodeGossipMsg]
// does, into old if it is a *GossipMsg that its receiver handed back (a
// wire.ReuseFunc: see [wire.Codec.RegisterReusable]), whose columns it
// reuses when they are long enough. The message never aliases the payload.
func DecodeGossipMsgInto(d *wire.Decoder, old core.Msg) (core.Msg, error) {
	start := d.Offset()
	m, _ := old.(*GossipMsg)
	if m == nil {
		m = new(GossipMsg)
	}
	m.Epoch = d.Uvarint()
	n64 := d.Uvarint()
	if d.Err() != nil {
		return nil, d.Err()
	}
	if n64 > uint64(d.Remaining()/2) {
		d.Fail("gossip entry count", wire.ErrTooLong)
		return nil, d.Err()
	}
	n := int(n64)
	m.Members = resize(m.Members, n)
	m.Beats = resize(m.Beats, n)
	var prev int64
	for i := range m.Members {
		var v int64
		if i == 0 {
			u := d.Uvarint()
			if u > math.MaxUint32 {
				d.Fail("gossip member id", wire.ErrOverflow)
			}
			v = int64(u)
		} else {
			v = prev + d.Varint()
		}
		if d.Err() != nil {
			return nil, d.Err()
		}
		if v < 0 || v >= int64(core.None) {
			d.Fail("gossip member id", wire.ErrInvalid)
			return nil, d.Err()
		}
		m.Members[i] = core.NodeID(v)
		prev = v
	}
	for i := range m.Beats {
		var v int64
		if i == 0 {
			u := d.Uvarint()
			if u > math.MaxUint32 {
				d.Fail("gossip heartbeat", wire.ErrOverflow)
			}
			v = int64(u)
		} else {
			v = prev + d.Varint()
		}
		if d.Err() != nil {
			return nil, d.Err()
		}
		if v < 0 || v > math.MaxUint32 {
			d.Fail("gossip heartbeat", wire.ErrOverflow)
			return nil, d.Err()
		}
		m.Beats[i] = uint32(v)
		prev = v
	}
	m.size = d.Offset() - start
	return m, nil
}

// resize returns s with length n, reusing its array when it is large
// enough (the caller overwrites every element).
func resize[T any](s []T, n int) []T {
	if s != nil && cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// DecodeGossipPing decodes a [GossipPing] payload.
func DecodeGossipPing(d *wire.Decoder) (core.Msg, error) {
	s, err := decodeGossipSeq(d)
	return GossipPing{Seq: s}, err
}

// DecodeGossipPong decodes a [GossipPong] payload.
func DecodeGossipPong(d *wire.Decoder) (core.Msg, error) {
	s, err := decodeGossipSeq(d)
	return GossipPong{Seq: s}, err
}

// DecodeGossipProbeReq decodes a [GossipProbeReq] payload.
func DecodeGossipProbeReq(d *wire.Decoder) (core.Msg, error) {
	seq, _ := decodeGossipSeq(d)
	m := GossipProbeReq{Seq: seq, Subject: d.NodeID(), Hops: d.Uint8()}
	if d.Err() == nil && d.Remaining() > 0 {
		m.Origin = d.NodeID()
		m.OriginSeq, _ = decodeGossipSeq(d)
		if d.Err() == nil && m.OriginSeq == 0 {
			d.Fail("gossip probe origin seq", wire.ErrInvalid)
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeGossipProbeAck decodes a [GossipProbeAck] payload.
func DecodeGossipProbeAck(d *wire.Decoder) (core.Msg, error) {
	seq, _ := decodeGossipSeq(d)
	m := GossipProbeAck{Seq: seq, Subject: d.NodeID()}
	m.Beat, _ = decodeGossipSeq(d)
	m.Pong = d.Bool()
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeGossipProbeRelay decodes a [GossipProbeRelay] payload.
func DecodeGossipProbeRelay(d *wire.Decoder) (core.Msg, error) {
	m := GossipProbeRelay{To: d.NodeID()}
	m.Seq, _ = decodeGossipSeq(d)
	m.Beat, _ = decodeGossipSeq(d)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func decodeGossipSeq(d *wire.Decoder) (uint32, error) {
	u := d.Uvarint()
	if d.Err() == nil && u > math.MaxUint32 {
		d.Fail("gossip ping seq", wire.ErrOverflow)
	}
	return uint32(u), d.Err()
}

// RegisterGossipCodecs registers the decoders of the gossip detector's kinds
// (KindGossip, KindGossipPing, KindGossipPong, KindGossipProbeReq,
// KindGossipProbeAck, KindGossipProbeRelay) in c. [RegisterCodecs]
// registers every fd kind.
//
// The tables are decoded into the messages the detector hands back
// through core.Recycler (wire.Codec.RegisterReusable), and no kind's
// message aliases its payload (wire.Codec.RegisterDetached).
func RegisterGossipCodecs(c *wire.Codec) error {
	if err := c.RegisterReusable(KindGossip, "fd.GossipMsg", DecodeGossipMsgInto); err != nil {
		return err
	}
	for _, k := range []struct {
		kind core.Kind
		name string
		f    wire.DecodeFunc
	}{
		{KindGossipPing, "fd.GossipPing", DecodeGossipPing},
		{KindGossipPong, "fd.GossipPong", DecodeGossipPong},
		{KindGossipProbeReq, "fd.GossipProbeReq", DecodeGossipProbeReq},
		{KindGossipProbeAck, "fd.GossipProbeAck", DecodeGossipProbeAck},
		{KindGossipProbeRelay, "fd.GossipProbeRelay", DecodeGossipProbeRelay},
	} {
		if err := c.RegisterDetached(k.kind, k.name, k.f); err != nil {
			return err
		}
	}
	return nil
}
