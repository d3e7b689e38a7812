package fd

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

func heartbeatCodec(t testing.TB) *wire.Codec {
	t.Helper()
	c := wire.NewCodec()
	if err := RegisterHeartbeatCodecs(c); err != nil {
		t.Fatal(err)
	}
	return c
}

var heartbeatSamples = []wire.Message{
	HeartbeatMsg{},
	HeartbeatMsg{Next: 5 * time.Second, Monitor: true},
	HeartbeatMsg{Next: 200 * time.Second},
	HeartbeatMsg{Next: math.MaxInt64, Monitor: true},
	HeartbeatPing{},
	HeartbeatPong{},
	HeartbeatNotice{},
	HeartbeatNotice{Subject: 99_999, Inc: 3},
	HeartbeatNotice{Subject: core.None - 1, Inc: math.MaxUint64, Alive: true},
	HeartbeatNoticeAck{},
	HeartbeatNoticeAck{Subject: 7, Inc: 1 << 40, Alive: true},
	HeartbeatProbeReq{},
	HeartbeatProbeReq{Subject: 12, Inc: 3},
	HeartbeatProbeReq{Subject: 12, Inc: 3, Recheck: true, Hops: 1},
	HeartbeatProbeReq{Subject: 12, Inc: 3, Hops: hbMaxProbeHops},
	HeartbeatProbeAck{},
	HeartbeatProbeAck{Subject: core.None - 1, Inc: math.MaxUint64},
}

// Every message survives encode → decode, and WireSize is its encoded size.
func TestHeartbeatCodecRoundTrip(t *testing.T) {
	c := heartbeatCodec(t)
	for _, m := range heartbeatSamples {
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
		if sz := core.MsgSize(m); sz != len(b) || sz != wire.Size(m) {
			t.Errorf("%v: WireSize %d, encoded %d bytes", m, sz, len(b))
		}
	}
	if err := RegisterHeartbeatCodecs(c); !errors.Is(err, wire.ErrDuplicateKind) {
		t.Errorf("registering twice: %v, want ErrDuplicateKind", err)
	}
}

// Malformed payloads are errors, never panics.
func TestHeartbeatCodecRejects(t *testing.T) {
	c := heartbeatCodec(t)
	var e wire.Encoder
	e.Duration(-time.Second)
	e.Bool(false)
	for _, tc := range []struct {
		name    string
		k       core.Kind
		payload []byte
		want    error
	}{
		{"negative interval", KindHeartbeat, e.B, ErrHeartbeatNegativeInterval},
		{"empty heartbeat", KindHeartbeat, nil, wire.ErrTruncated},
		{"bool 2", KindHeartbeat, []byte{0, 2}, wire.ErrInvalid},
		{"trailing", KindHeartbeat, []byte{0, 1, 7}, wire.ErrTrailing},
		{"ping with payload", KindHeartbeatPing, []byte{0}, wire.ErrTrailing},
		{"pong with payload", KindHeartbeatPong, []byte{1}, wire.ErrTrailing},
		{"notice of None", KindHeartbeatNotice, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0}, wire.ErrInvalid},
		{"notice truncated", KindHeartbeatNotice, []byte{5}, wire.ErrTruncated},
		{"padded varint", KindHeartbeatNotice, []byte{0x85, 0x00, 0, 0}, wire.ErrNonCanonical},
		{"ack bool 3", KindHeartbeatNoticeAck, []byte{1, 1, 3}, wire.ErrInvalid},
		{"ack trailing", KindHeartbeatNoticeAck, []byte{1, 1, 1, 0}, wire.ErrTrailing},
		{"probe of None", KindHeartbeatProbeReq, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0}, wire.ErrInvalid},
		{"probe truncated", KindHeartbeatProbeReq, []byte{5}, wire.ErrTruncated},
		{"probe without recheck", KindHeartbeatProbeReq, []byte{5, 1}, wire.ErrTruncated},
		{"probe recheck 2", KindHeartbeatProbeReq, []byte{5, 1, 2, 0}, wire.ErrInvalid},
		{"probe without hops", KindHeartbeatProbeReq, []byte{5, 1, 0}, wire.ErrTruncated},
		{"probe hops 9", KindHeartbeatProbeReq, []byte{5, 1, 0, 9}, ErrHeartbeatProbeHops},
		{"probe trailing", KindHeartbeatProbeReq, []byte{5, 1, 0, 0, 0}, wire.ErrTrailing},
		{"probe ack truncated", KindHeartbeatProbeAck, nil, wire.ErrTruncated},
		{"probe ack padded", KindHeartbeatProbeAck, []byte{1, 0x81, 0x00}, wire.ErrNonCanonical},
	} {
		_, err := c.Unmarshal(tc.k, tc.payload)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// fuzzHeartbeatDecoder checks that decoding kind k never panics, and that
// whatever decodes re-encodes to the very same bytes (encodings are
// canonical), even once the input is overwritten (the kinds are detached:
// the host decodes them straight from the transport's buffer).
func fuzzHeartbeatDecoder(f *testing.F, k core.Kind) {
	c := heartbeatCodec(f)
	for _, m := range heartbeatSamples {
		if m.Kind() == k {
			b, _ := c.Marshal(m)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !c.Detached(k) {
			t.Fatalf("%v is not registered as detached", k)
		}
		in := bytes.Clone(data)
		m, err := c.Unmarshal(k, in)
		if err != nil {
			return
		}
		for i := range in {
			in[i] = 0xa5
		}
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("decoded %v does not encode: %v", m, err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("%x decodes to %v, which encodes to %x", data, m, b)
		}
		if core.MsgSize(m) != len(data) {
			t.Fatalf("%v: WireSize %d, %d bytes", m, core.MsgSize(m), len(data))
		}
	})
}

func FuzzDecodeHeartbeatMsg(f *testing.F)    { fuzzHeartbeatDecoder(f, KindHeartbeat) }
func FuzzDecodeHeartbeatPing(f *testing.F)   { fuzzHeartbeatDecoder(f, KindHeartbeatPing) }
func FuzzDecodeHeartbeatPong(f *testing.F)   { fuzzHeartbeatDecoder(f, KindHeartbeatPong) }
func FuzzDecodeHeartbeatNotice(f *testing.F) { fuzzHeartbeatDecoder(f, KindHeartbeatNotice) }
func FuzzDecodeHeartbeatNoticeAck(f *testing.F) {
	fuzzHeartbeatDecoder(f, KindHeartbeatNoticeAck)
}
func FuzzDecodeHeartbeatProbeReq(f *testing.F) { fuzzHeartbeatDecoder(f, KindHeartbeatProbeReq) }
func FuzzDecodeHeartbeatProbeAck(f *testing.F) { fuzzHeartbeatDecoder(f, KindHeartbeatProbeAck) }
