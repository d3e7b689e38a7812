package fd

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

func gossipWireLen(t *testing.T, m wire.Message) int {
	t.Helper()
	var e wire.Encoder
	m.MarshalWire(&e)
	return len(e.B)
}

func gossipCodec(t testing.TB) *wire.Codec {
	t.Helper()
	c := wire.NewCodec()
	if err := RegisterGossipCodecs(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGossipMsgRoundTrip encodes random tables (increasing and shuffled
// ids, heartbeats spread over the whole uint32 range or clustered as in a
// live system) and checks decode(encode(m)) == m and WireSize.
func TestGossipMsgRoundTrip(t *testing.T) {
	seed := uint64(20261122)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	c := gossipCodec(t)
	for trial := range 300 {
		n := rng.IntN(70)
		members := make([]core.NodeID, n)
		beats := make([]uint32, n)
		for i := range members {
			switch trial % 3 {
			case 0:
				members[i] = core.NodeID(i)
			case 1:
				members[i] = core.NodeID(rng.Uint32N(math.MaxUint32)) // anything but None
			default:
				members[i] = core.NodeID(rng.IntN(100000))
			}
			if trial%2 == 0 {
				beats[i] = 1000 + rng.Uint32N(4)
			} else {
				beats[i] = rng.Uint32()
			}
		}
		m, err := NewGossipMsg(rng.Uint64(), members, beats)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if m.WireSize() != len(b) {
			t.Fatalf("trial %d: WireSize %d, encoded %d", trial, m.WireSize(), len(b))
		}
		got, err := c.Unmarshal(KindGossip, b)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		g := got.(*GossipMsg)
		if g.Epoch != m.Epoch || !slices.Equal(g.Members, m.Members) || !slices.Equal(g.Beats, m.Beats) {
			t.Fatalf("trial %d: round trip changed the message", trial)
		}
		if g.WireSize() != len(b) {
			t.Fatalf("trial %d: decoded WireSize %d, want %d", trial, g.WireSize(), len(b))
		}
	}
	for _, m := range []wire.Message{GossipPing{Seq: 0}, GossipPing{Seq: math.MaxUint32}, GossipPong{Seq: 300}} {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != core.MsgSize(m) {
			t.Fatalf("%T: WireSize %d, encoded %d", m, core.MsgSize(m), len(b))
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil || got != m {
			t.Fatalf("%T round trip: got %v, %v", m, got, err)
		}
	}
}

// TestGossipMsgWireSizeLive pins the size of a table in a live system: ids
// 0..n-1 and heartbeats within a few units of each other cost one byte per
// id and one per heartbeat.
func TestGossipMsgWireSizeLive(t *testing.T) {
	n := 1024
	beats := make([]uint32, n)
	for i := range beats {
		beats[i] = 1200 + uint32(i%3)
	}
	m, err := NewGossipMsg(0, gfirst(n), beats)
	if err != nil {
		t.Fatal(err)
	}
	// header: epoch 1 byte + count 2 bytes; ids 1+1023; beats 2+1023.
	if got, want := m.WireSize(), 3+1024+1025; got != want {
		t.Fatalf("WireSize = %d, want %d", got, want)
	}
	if _, err := NewGossipMsg(0, gfirst(3), beats[:2]); err == nil {
		t.Fatal("NewGossipMsg accepted 3 members with 2 heartbeats")
	}
}

// TestGossipMsgDecodeErrors: malformed payloads are errors wrapping the
// wire sentinels, never panics.
func TestGossipMsgDecodeErrors(t *testing.T) {
	c := gossipCodec(t)
	enc := func(f func(e *wire.Encoder)) []byte {
		var e wire.Encoder
		f(&e)
		return e.B
	}
	for _, tc := range []struct {
		name string
		kind core.Kind
		b    []byte
		want error
	}{
		{"empty", KindGossip, nil, wire.ErrTruncated},
		{"count too large", KindGossip, enc(func(e *wire.Encoder) { e.Uvarint(0); e.Uvarint(10); e.Uvarint(1) }), wire.ErrTooLong},
		{"truncated beats", KindGossip, enc(func(e *wire.Encoder) { e.Uvarint(0); e.Uvarint(2); e.Uvarint(1); e.Varint(1); e.Uvarint(300) }), wire.ErrTruncated},
		{"first id above uint32", KindGossip, enc(func(e *wire.Encoder) { e.Uvarint(0); e.Uvarint(1); e.Uvarint(1 << 32); e.Uvarint(0) }), wire.ErrOverflow},
		{"id None", KindGossip, enc(func(e *wire.Encoder) { e.Uvarint(0); e.Uvarint(1); e.Uvarint(uint64(core.None)); e.Uvarint(0) }), wire.ErrInvalid},
		{"negative id", KindGossip, enc(func(e *wire.Encoder) {
			e.Uvarint(0)
			e.Uvarint(2)
			e.Uvarint(1)
			e.Varint(-2)
			e.Uvarint(0)
			e.Varint(0)
		}), wire.ErrInvalid},
		{"heartbeat above uint32", KindGossip, enc(func(e *wire.Encoder) {
			e.Uvarint(0)
			e.Uvarint(2)
			e.Uvarint(1)
			e.Varint(1)
			e.Uvarint(math.MaxUint32)
			e.Varint(1)
		}), wire.ErrOverflow},
		{"negative heartbeat", KindGossip, enc(func(e *wire.Encoder) {
			e.Uvarint(0)
			e.Uvarint(2)
			e.Uvarint(1)
			e.Varint(1)
			e.Uvarint(0)
			e.Varint(-1)
		}), wire.ErrOverflow},
		{"trailing", KindGossip, enc(func(e *wire.Encoder) { e.Uvarint(0); e.Uvarint(0); e.Uint8(0) }), wire.ErrTrailing},
		{"ping seq above uint32", KindGossipPing, enc(func(e *wire.Encoder) { e.Uvarint(1 << 32) }), wire.ErrOverflow},
		{"pong empty", KindGossipPong, nil, wire.ErrTruncated},
		{"probe empty", KindGossipProbeReq, nil, wire.ErrTruncated},
		{"probe seq above uint32", KindGossipProbeReq, enc(func(e *wire.Encoder) { e.Uvarint(1 << 32); e.Uvarint(1); e.Uint8(0) }), wire.ErrOverflow},
		{"probe of None", KindGossipProbeReq, enc(func(e *wire.Encoder) { e.Uvarint(1); e.Uvarint(uint64(core.None)); e.Uint8(0) }), wire.ErrInvalid},
		{"probe no hops", KindGossipProbeReq, []byte{1, 1}, wire.ErrTruncated},
		{"probe trailing", KindGossipProbeReq, []byte{1, 1, 0, 2, 1, 0}, wire.ErrTrailing},
		{"probe origin without its seq", KindGossipProbeReq, []byte{1, 1, 0, 2}, wire.ErrTruncated},
		{"probe origin seq 0", KindGossipProbeReq, []byte{1, 1, 0, 2, 0}, wire.ErrInvalid},
		{"probe origin None", KindGossipProbeReq, enc(func(e *wire.Encoder) {
			e.Uvarint(1)
			e.Uvarint(1)
			e.Uint8(0)
			e.Uvarint(uint64(core.None))
			e.Uvarint(1)
		}), wire.ErrInvalid},
		{"relay to None", KindGossipProbeRelay, enc(func(e *wire.Encoder) { e.Uvarint(uint64(core.None)); e.Uvarint(1); e.Uvarint(1) }), wire.ErrInvalid},
		{"relay no beat", KindGossipProbeRelay, []byte{1, 1}, wire.ErrTruncated},
		{"relay trailing", KindGossipProbeRelay, []byte{1, 1, 1, 1}, wire.ErrTrailing},
		{"probe ack no beat", KindGossipProbeAck, []byte{1, 1}, wire.ErrTruncated},
		{"probe ack no pong", KindGossipProbeAck, []byte{1, 1, 1}, wire.ErrTruncated},
		{"probe ack pong 2", KindGossipProbeAck, []byte{1, 1, 1, 2}, wire.ErrInvalid},
		{"probe ack beat above uint32", KindGossipProbeAck, enc(func(e *wire.Encoder) { e.Uvarint(1); e.Uvarint(1); e.Uvarint(1 << 32); e.Bool(true) }), wire.ErrOverflow},
	} {
		m, err := c.Unmarshal(tc.kind, tc.b)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Unmarshal = %v, %v; want %v", tc.name, m, err, tc.want)
		}
	}
	if err := RegisterGossipCodecs(c); !errors.Is(err, wire.ErrDuplicateKind) {
		t.Errorf("registering twice: %v, want ErrDuplicateKind", err)
	}
}

// fuzzDecode is the property every gossip decoder must have: no panic, and
// whatever decodes re-encodes to exactly the input (the encoding is
// canonical) with WireSize equal to its length, even once the input is
// overwritten (the kinds are detached: the host decodes straight from the
// transport's buffer). A table is decoded into the table decoded before
// (reused), as the host decodes into the tables the detector hands back.
func fuzzGossipDecode(t *testing.T, c *wire.Codec, kind core.Kind, b []byte) {
	if !c.Detached(kind) {
		t.Fatalf("%v is not registered as detached", kind)
	}
	in := bytes.Clone(b)
	m, err := c.Decode(new(wire.Decoder), kind, in, reused[kind])
	if err != nil {
		return
	}
	if c.Reusable(kind) {
		reused[kind] = m
	}
	for i := range in {
		in[i] = 0xa5
	}
	out, err := c.Marshal(m)
	if err != nil {
		t.Fatalf("re-encoding %v: %v", m, err)
	}
	if !bytes.Equal(out, b) {
		t.Fatalf("decode→encode changed the bytes:\n in %x\nout %x", b, out)
	}
	if got := core.MsgSize(m); got != len(b) {
		t.Fatalf("WireSize %d for %d bytes", got, len(b))
	}
}

// reused holds the last message the fuzz targets decoded of each reusable
// kind, for the next input to be decoded into (the targets run one input
// at a time).
var reused = map[core.Kind]core.Msg{}

func FuzzDecodeGossipMsg(f *testing.F) {
	c := gossipCodec(f)
	for _, m := range []*GossipMsg{
		{Epoch: 0},
		{Epoch: 3, Members: gfirst(4), Beats: []uint32{10, 11, 10, 9}},
		{Epoch: 1 << 40, Members: gids(7, 3, 2, 5), Beats: []uint32{0, math.MaxUint32, 1, 1 << 20}},
	} {
		b, err := c.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzGossipDecode(t, c, KindGossip, b) })
}

func FuzzDecodeGossipPing(f *testing.F) {
	c := gossipCodec(f)
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzGossipDecode(t, c, KindGossipPing, b) })
}

func FuzzDecodeGossipPong(f *testing.F) {
	c := gossipCodec(f)
	f.Add([]byte{1})
	f.Add([]byte{0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzGossipDecode(t, c, KindGossipPong, b) })
}

func FuzzDecodeGossipProbeReq(f *testing.F) {
	c := gossipCodec(f)
	f.Add([]byte{1, 7, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x80, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzGossipDecode(t, c, KindGossipProbeReq, b) })
}

func FuzzDecodeGossipProbeRelay(f *testing.F) {
	c := gossipCodec(f)
	f.Add([]byte{1, 7, 9})
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0x0f, 0x80, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzGossipDecode(t, c, KindGossipProbeRelay, b) })
}

func FuzzDecodeGossipProbeAck(f *testing.F) {
	c := gossipCodec(f)
	f.Add([]byte{1, 7, 9, 1})
	f.Add([]byte{0x80, 0x01, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0})
	f.Fuzz(func(t *testing.T, b []byte) { fuzzGossipDecode(t, c, KindGossipProbeAck, b) })
}

// TestGossipProbeCodecRoundTrip: the indirect probe's messages survive
// encode → decode, and WireSize is their encoded size.
func TestGossipProbeCodecRoundTrip(t *testing.T) {
	c := gossipCodec(t)
	for _, m := range []wire.Message{
		GossipProbeReq{},
		GossipProbeReq{Seq: math.MaxUint32, Subject: core.None - 1, Hops: 255},
		GossipProbeReq{Seq: 3, Subject: 4, Origin: core.None - 1, OriginSeq: math.MaxUint32},
		GossipProbeAck{},
		GossipProbeAck{Seq: 300, Subject: 70_000, Beat: math.MaxUint32, Pong: true},
		GossipProbeRelay{},
		GossipProbeRelay{To: core.None - 1, Seq: math.MaxUint32, Beat: 12},
	} {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if got != core.Msg(m) {
			t.Errorf("round trip of %v gave %v", m, got)
		}
		if sz := core.MsgSize(m); sz != len(b) {
			t.Errorf("%v: WireSize %d, encoded %d bytes", m, sz, len(b))
		}
	}
}

// TestGossipMsgDecodeInto checks the reuse of handed-back tables: a table
// decoded into an earlier one (larger or smaller than it) equals the table
// decoded afresh, and decoding into a table as large allocates nothing.
func TestGossipMsgDecodeInto(t *testing.T) {
	c := gossipCodec(t)
	var payloads [][]byte
	for _, m := range []*GossipMsg{
		{Epoch: 9, Members: gfirst(40), Beats: make([]uint32, 40)},
		{Epoch: 2, Members: gids(7, 3), Beats: []uint32{5, 6}},
		{Epoch: 0},
		{Epoch: 3, Members: gfirst(4), Beats: []uint32{10, 11, 10, 9}},
		{Epoch: 1 << 40, Members: gids(7, 3, 2, 5, 100, 1), Beats: []uint32{0, math.MaxUint32, 1, 1 << 20, 3, 3}},
	} {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, b)
	}
	var old core.Msg
	d := new(wire.Decoder)
	for round := range 3 {
		for i, b := range payloads {
			fresh, err := DecodeGossipMsg(wire.NewDecoder(b))
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.Decode(d, KindGossip, b, old)
			if err != nil {
				t.Fatal(err)
			}
			if old != nil && m != old {
				t.Errorf("round %d, table %d: not decoded into the table handed back", round, i)
			}
			old = m
			f, g := fresh.(*GossipMsg), m.(*GossipMsg)
			if f.Epoch != g.Epoch || !slices.Equal(f.Members, g.Members) || !slices.Equal(f.Beats, g.Beats) || f.WireSize() != g.WireSize() {
				t.Errorf("round %d, table %d: decoded into a released table %v %v %v, afresh %v %v %v", round, i, g.Epoch, g.Members, g.Beats, f.Epoch, f.Members, f.Beats)
			}
		}
	}
	b := payloads[3]
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.Decode(d, KindGossip, b, old); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("decoding into a handed-back table: %.1f allocations, want 0", n)
	}
}
