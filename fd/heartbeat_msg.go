package fd

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// The heartbeat detector's messages. Each implements [wire.Message] and
// [core.Sizer]; [RegisterHeartbeatCodecs] registers their decoders.

// HeartbeatMsg is a heartbeat (kind [KindHeartbeat]): to a monitor every
// T_interval, to every other connection every T_insurance (§4.2). It
// announces the interval to the sender's next message on this link, so the
// receiver knows when to expect it.
type HeartbeatMsg struct {
	// Next is the longest time until the sender's next message to the
	// receiver: its T_interval if the receiver is one of its monitors, its
	// T_insurance otherwise. 0 means the sender will send nothing more
	// that the receiver should wait for (it dropped the connection). Never
	// negative.
	Next time.Duration
	// Monitor is true when the receiver is one of the sender's monitors.
	Monitor bool
}

// HeartbeatPing asks the receiver to answer with a [HeartbeatPong] (kind
// [KindHeartbeatPing]). A detector sends one on a [core.PeerHint] to probe
// the peer early.
type HeartbeatPing struct{}

// HeartbeatPong answers a [HeartbeatPing] (kind [KindHeartbeatPong]).
type HeartbeatPong struct{}

// HeartbeatNotice (kind [KindHeartbeatNotice]) spreads what one process
// learnt about Subject to every member, as Phoenix's routing tables spread
// unreachability (§4.1, §4.2): a suspicion (Alive false) from a process
// whose timeout expired, or a refutation (Alive true) from Subject itself.
// Notices are ordered per subject by (Inc, suspicion after refutation): a
// process forwards a notice once, when it is newer than what it knew.
type HeartbeatNotice struct {
	// Subject is the process the notice is about.
	Subject core.NodeID
	// Inc is Subject's incarnation the notice is about. Only Subject
	// raises it, to refute a suspicion of its current incarnation.
	Inc uint64
	// Alive is true for a refutation by Subject, false for a suspicion.
	Alive bool
}

// HeartbeatNoticeAck (kind [KindHeartbeatNoticeAck]) acknowledges a
// [HeartbeatNotice] with the same fields. A process retransmits a notice
// to a peer until the peer acknowledges it, the peer is declared failed or
// leaves, or the notice is superseded, so that message loss cannot keep a
// live member from learning of a failure.
type HeartbeatNoticeAck struct {
	Subject core.NodeID
	Inc     uint64
	Alive   bool
}

// HeartbeatProbeReq (kind [KindHeartbeatProbeReq]) asks its receiver, a
// helper, to reach Subject on the sender's behalf: the sender suspects
// Subject and heard nothing from it, maybe only because the link between
// them is down (SWIM's ping-req). The helper sends Subject the suspicion
// ([HeartbeatNotice] at Inc), which Subject, if alive, refutes, and answers
// the sender with a [HeartbeatProbeAck] as soon as anything from Subject
// reaches it.
type HeartbeatProbeReq struct {
	// Subject is the suspect.
	Subject core.NodeID
	// Inc is the incarnation of Subject that the sender suspects.
	Inc uint64
	// Recheck is true when the sender does not suspect Subject: a helper
	// already proved Subject alive while the link from it stays down,
	// and the sender checks again, through helpers, that Subject lives.
	// The helper then pings Subject instead of sending it a suspicion,
	// so that Subject has nothing to refute and nobody else hears of it.
	Recheck bool
	// Hops is how many more times the request may be passed on: a
	// helper that has not heard from Subject a quarter of ProbeTimeout
	// after the request came asks helpers of its own, with Hops − 1, and
	// relays their answer (a suspect that only members the sender
	// cannot reach still reach, two hops away). At most 8.
	Hops uint8
}

// hbMaxProbeHops bounds [HeartbeatProbeReq.Hops]: each hop multiplies
// the requests by up to IndirectProbes.
const hbMaxProbeHops = 8

// ErrHeartbeatProbeHops is the decoding error of a [HeartbeatProbeReq]
// whose Hops is above its bound.
var ErrHeartbeatProbeHops = errors.New("fd: heartbeat probe request passed on too many times")

// HeartbeatProbeAck (kind [KindHeartbeatProbeAck]) answers a
// [HeartbeatProbeReq]: the sender, a helper, heard from Subject after the
// request arrived, so Subject is alive and reachable from it. Inc echoes
// the request's.
type HeartbeatProbeAck struct {
	Subject core.NodeID
	Inc     uint64
}

// ErrHeartbeatNegativeInterval is the decoding error of a [HeartbeatMsg]
// whose Next is negative.
var ErrHeartbeatNegativeInterval = errors.New("fd: heartbeat announces a negative interval")

// Kind is [KindHeartbeat].
func (HeartbeatMsg) Kind() core.Kind { return KindHeartbeat }

// Kind is [KindHeartbeatPing].
func (HeartbeatPing) Kind() core.Kind { return KindHeartbeatPing }

// Kind is [KindHeartbeatPong].
func (HeartbeatPong) Kind() core.Kind { return KindHeartbeatPong }

// Kind is [KindHeartbeatNotice].
func (HeartbeatNotice) Kind() core.Kind { return KindHeartbeatNotice }

// Kind is [KindHeartbeatNoticeAck].
func (HeartbeatNoticeAck) Kind() core.Kind { return KindHeartbeatNoticeAck }

// Kind is [KindHeartbeatProbeReq].
func (HeartbeatProbeReq) Kind() core.Kind { return KindHeartbeatProbeReq }

// Kind is [KindHeartbeatProbeAck].
func (HeartbeatProbeAck) Kind() core.Kind { return KindHeartbeatProbeAck }

// MarshalWire appends Subject, Inc, Recheck and Hops.
func (m HeartbeatProbeReq) MarshalWire(e *wire.Encoder) {
	e.NodeID(m.Subject)
	e.Uvarint(m.Inc)
	e.Bool(m.Recheck)
	e.Uint8(m.Hops)
}

// WireSize is the payload size in bytes (equal to wire.Size(m)).
func (m HeartbeatProbeReq) WireSize() int {
	return uvarintLen(uint64(m.Subject)) + uvarintLen(m.Inc) + 2
}

// MarshalWire appends Subject and Inc.
func (m HeartbeatProbeAck) MarshalWire(e *wire.Encoder) {
	e.NodeID(m.Subject)
	e.Uvarint(m.Inc)
}

// WireSize is the payload size in bytes (equal to wire.Size(m)).
func (m HeartbeatProbeAck) WireSize() int { return uvarintLen(uint64(m.Subject)) + uvarintLen(m.Inc) }

func (m HeartbeatProbeReq) String() string {
	what := ""
	if m.Recheck {
		what = " recheck"
	}
	return fmt.Sprintf("probe-req{%v inc %d%s hops %d}", m.Subject, m.Inc, what, m.Hops)
}

func (m HeartbeatProbeAck) String() string {
	return fmt.Sprintf("probe-ack{%v inc %d}", m.Subject, m.Inc)
}

// MarshalWire appends Next (signed varint of nanoseconds) and Monitor.
func (m HeartbeatMsg) MarshalWire(e *wire.Encoder) {
	e.Duration(m.Next)
	e.Bool(m.Monitor)
}

// MarshalWire appends nothing: a ping has no fields.
func (HeartbeatPing) MarshalWire(*wire.Encoder) {}

// MarshalWire appends nothing: a pong has no fields.
func (HeartbeatPong) MarshalWire(*wire.Encoder) {}

// MarshalWire appends Subject, Inc and Alive.
func (m HeartbeatNotice) MarshalWire(e *wire.Encoder) {
	e.NodeID(m.Subject)
	e.Uvarint(m.Inc)
	e.Bool(m.Alive)
}

// WireSize is the payload size in bytes (equal to wire.Size(m)), computed
// without encoding.
func (m HeartbeatMsg) WireSize() int { return varintLen(int64(m.Next)) + 1 }

// WireSize is 0: a ping has no payload.
func (HeartbeatPing) WireSize() int { return 0 }

// WireSize is 0: a pong has no payload.
func (HeartbeatPong) WireSize() int { return 0 }

// WireSize is the payload size in bytes (equal to wire.Size(m)).
func (m HeartbeatNotice) WireSize() int {
	return uvarintLen(uint64(m.Subject)) + uvarintLen(m.Inc) + 1
}

// MarshalWire appends Subject, Inc and Alive.
func (m HeartbeatNoticeAck) MarshalWire(e *wire.Encoder) { HeartbeatNotice(m).MarshalWire(e) }

// WireSize is the payload size in bytes (equal to wire.Size(m)).
func (m HeartbeatNoticeAck) WireSize() int { return HeartbeatNotice(m).WireSize() }

func (m HeartbeatMsg) String() string {
	return fmt.Sprintf("heartbeat{next %v monitor %v}", m.Next, m.Monitor)
}

func (m HeartbeatNotice) String() string {
	what := "suspect"
	if m.Alive {
		what = "alive"
	}
	return fmt.Sprintf("notice{%s %v inc %d}", what, m.Subject, m.Inc)
}

func uvarintLen(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

func varintLen(i int64) int { return uvarintLen(uint64(i<<1) ^ uint64(i>>63)) }

// DecodeHeartbeatMsg decodes the payload of a [HeartbeatMsg]; a negative
// Next is an error wrapping [ErrHeartbeatNegativeInterval].
func DecodeHeartbeatMsg(d *wire.Decoder) (core.Msg, error) {
	m := HeartbeatMsg{Next: d.Duration()}
	if d.Err() == nil && m.Next < 0 {
		d.Fail("heartbeat next interval", ErrHeartbeatNegativeInterval)
	}
	m.Monitor = d.Bool()
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeHeartbeatPing decodes the (empty) payload of a [HeartbeatPing].
func DecodeHeartbeatPing(d *wire.Decoder) (core.Msg, error) {
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return HeartbeatPing{}, nil
}

// DecodeHeartbeatPong decodes the (empty) payload of a [HeartbeatPong].
func DecodeHeartbeatPong(d *wire.Decoder) (core.Msg, error) {
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return HeartbeatPong{}, nil
}

// DecodeHeartbeatNotice decodes the payload of a [HeartbeatNotice].
func DecodeHeartbeatNotice(d *wire.Decoder) (core.Msg, error) {
	m := HeartbeatNotice{Subject: d.NodeID(), Inc: d.Uvarint(), Alive: d.Bool()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeHeartbeatNoticeAck decodes the payload of a [HeartbeatNoticeAck].
func DecodeHeartbeatNoticeAck(d *wire.Decoder) (core.Msg, error) {
	m := HeartbeatNoticeAck{Subject: d.NodeID(), Inc: d.Uvarint(), Alive: d.Bool()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeHeartbeatProbeReq decodes the payload of a [HeartbeatProbeReq].
func DecodeHeartbeatProbeReq(d *wire.Decoder) (core.Msg, error) {
	m := HeartbeatProbeReq{Subject: d.NodeID(), Inc: d.Uvarint(), Recheck: d.Bool(), Hops: d.Uint8()}
	if d.Err() == nil && m.Hops > hbMaxProbeHops {
		d.Fail("heartbeat probe hops", ErrHeartbeatProbeHops)
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeHeartbeatProbeAck decodes the payload of a [HeartbeatProbeAck].
func DecodeHeartbeatProbeAck(d *wire.Decoder) (core.Msg, error) {
	m := HeartbeatProbeAck{Subject: d.NodeID(), Inc: d.Uvarint()}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// RegisterHeartbeatCodecs registers the decoders of the heartbeat
// detector's seven kinds in c. It fails (wrapping [wire.ErrDuplicateKind])
// if one of them is already registered. No kind's message aliases its
// payload (wire.Codec.RegisterDetached).
func RegisterHeartbeatCodecs(c *wire.Codec) error {
	for _, r := range []struct {
		k    core.Kind
		name string
		f    wire.DecodeFunc
	}{
		{KindHeartbeat, "fd.HeartbeatMsg", DecodeHeartbeatMsg},
		{KindHeartbeatPing, "fd.HeartbeatPing", DecodeHeartbeatPing},
		{KindHeartbeatPong, "fd.HeartbeatPong", DecodeHeartbeatPong},
		{KindHeartbeatNotice, "fd.HeartbeatNotice", DecodeHeartbeatNotice},
		{KindHeartbeatNoticeAck, "fd.HeartbeatNoticeAck", DecodeHeartbeatNoticeAck},
		{KindHeartbeatProbeReq, "fd.HeartbeatProbeReq", DecodeHeartbeatProbeReq},
		{KindHeartbeatProbeAck, "fd.HeartbeatProbeAck", DecodeHeartbeatProbeAck},
	} {
		if err := c.RegisterDetached(r.k, r.name, r.f); err != nil {
			return err
		}
	}
	return nil
}
