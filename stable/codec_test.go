package stable_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/wire"
)

func codec(t testing.TB) *wire.Codec {
	t.Helper()
	c := wire.NewCodec()
	if err := stable.RegisterCodecs(c); err != nil {
		t.Fatal(err)
	}
	return c
}

var samples = []wire.Message{
	stable.Start{Epoch: 0, Round: 1},
	stable.Start{Epoch: math.MaxUint64, Round: math.MaxUint64, Failed: []core.NodeID{3, 0, 99999}},
	stable.Ack{Epoch: 2, Round: 7, Vector: []uint64{0, 1, math.MaxUint64}},
	stable.Ack{Epoch: 2, Round: 7},
	stable.Info{Epoch: 1 << 40, Round: 3, Vector: []uint64{5, 5, 5, 5}},
	stable.AckInfo{Epoch: 9, Round: 1},
	stable.Row{Epoch: 1, Round: 2, Vector: []uint64{1, 2}, Pull: true},
	stable.Row{Epoch: 1, Round: 2, Vector: []uint64{1, 2}},
	stable.Gossip{Epoch: 4, Round: 12, Iter: 3, G: []byte{0xff, 0x01}, M: []uint64{7, 8, 9}, Pull: true},
	stable.Gossip{Epoch: 4, Round: 1},
}

// Every message survives encode → decode, and its WireSize is the paper's
// accounting (§4.1): 32 bytes of header plus 4 per vector entry.
func TestCodecRoundTrip(t *testing.T) {
	c := codec(t)
	for _, m := range samples {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if !reflect.DeepEqual(got, core.Msg(m)) {
			t.Errorf("round trip of %v gave %v", m, got)
		}
		if stable.KindName(m.Kind()) != c.Name(m.Kind()) {
			t.Errorf("kind name %q vs codec %q", stable.KindName(m.Kind()), c.Name(m.Kind()))
		}
	}
	if err := stable.RegisterCodecs(c); !errors.Is(err, wire.ErrDuplicateKind) {
		t.Errorf("registering twice: %v", err)
	}
	v := make([]uint64, 50)
	for _, tc := range []struct {
		m    core.Msg
		want int
	}{
		{stable.Ack{Vector: v}, 232},
		{stable.Info{Vector: v}, 232},
		{stable.Row{Vector: v}, 232},
		{stable.Gossip{M: v, G: make([]byte, 238)}, 232},
		{stable.Start{}, 32},
		{stable.AckInfo{}, 32},
	} {
		if got := core.MsgSize(tc.m); got != tc.want {
			t.Errorf("%T size %d, want %d", tc.m, got, tc.want)
		}
	}
	for k := core.Kind(core.ProtoStable)<<8 | 1; k <= stable.KindGossip; k++ {
		if k.Proto() != core.ProtoStable {
			t.Fatalf("kind %v outside ProtoStable", k)
		}
	}
	if stable.KindGossip != core.MakeKind(core.ProtoStable, 6) || stable.KindStart != core.MakeKind(core.ProtoStable, 1) {
		t.Fatal("kind numbers moved: they are on the wire")
	}
}

// Malformed payloads are errors, never panics.
func TestCodecRejects(t *testing.T) {
	c := codec(t)
	for _, tc := range []struct {
		name    string
		k       core.Kind
		payload []byte
		want    error
	}{
		{"round 0", stable.KindAck, []byte{1, 0, 0}, stable.ErrMessage},
		{"empty", stable.KindStart, nil, wire.ErrTruncated},
		{"trailing", stable.KindAckInfo, []byte{1, 1, 0}, wire.ErrTrailing},
		{"vector longer than payload", stable.KindInfo, []byte{1, 1, 50, 1}, wire.ErrTooLong},
		{"bad bool", stable.KindRow, []byte{1, 1, 0, 2}, wire.ErrInvalid},
		{"padded varint", stable.KindGossip, []byte{0x80, 0x00, 1, 0, 0, 0, 0}, wire.ErrNonCanonical},
	} {
		_, err := c.Unmarshal(tc.k, tc.payload)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func fuzzDecode(t *testing.T, c *wire.Codec, k core.Kind, b []byte) {
	m, err := c.Unmarshal(k, b)
	if err != nil {
		return
	}
	again, err := c.Marshal(m)
	if err != nil {
		t.Fatalf("re-encoding %v: %v", m, err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("%v: decoded from %x, encodes as %x", m, b, again)
	}
}

func fuzzSeeds(f *testing.F, c *wire.Codec, k core.Kind) {
	for _, m := range samples {
		if m.Kind() == k {
			b, err := c.Marshal(m)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, c, k, b) })
}

func FuzzDecodeStart(f *testing.F)   { fuzzSeeds(f, codec(f), stable.KindStart) }
func FuzzDecodeAck(f *testing.F)     { fuzzSeeds(f, codec(f), stable.KindAck) }
func FuzzDecodeInfo(f *testing.F)    { fuzzSeeds(f, codec(f), stable.KindInfo) }
func FuzzDecodeAckInfo(f *testing.F) { fuzzSeeds(f, codec(f), stable.KindAckInfo) }
func FuzzDecodeRow(f *testing.F)     { fuzzSeeds(f, codec(f), stable.KindRow) }
func FuzzDecodeGossip(f *testing.F)  { fuzzSeeds(f, codec(f), stable.KindGossip) }

// A decoded message of any shape (wrong vector length, bitmap of another
// view's size, absurd iteration) is handled without panic and ignored.
func FuzzDetectorReceive(f *testing.F) {
	c := codec(f)
	for _, m := range samples {
		b, _ := c.Marshal(m)
		f.Add(uint8(m.Kind()&0xff), uint8(0), b)
	}
	f.Fuzz(func(t *testing.T, kind, proto uint8, b []byte) {
		k := core.Kind(core.ProtoStable)<<8 | core.Kind(kind%7)
		m, err := c.Unmarshal(k, b)
		if err != nil {
			return
		}
		p := stable.Protocols()[int(proto)%4]
		nw := newNet(t, stableCfg(p), haves(1, 5, 5))
		for i := range nw.dets {
			nw.dets[i].Receive(core.NodeID((i+1)%5), m)
		}
		nw.collect()
		nw.run(nil)
	})
}

func stableCfg(p stable.Protocol) stable.Config {
	return stable.Config{Protocol: p, Period: 1e6, Resend: 1e5}
}
