package replica

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

func codec(t testing.TB) *wire.Codec {
	c := wire.NewCodec()
	if err := RegisterCodecs(c); err != nil {
		t.Fatal(err)
	}
	return c
}

var samples = []core.Msg{
	&Data{Comm: 1 << 40, Src: 3, Dst: 7, Tag: -5, Seq: 42, Payload: []byte("hello")},
	&Data{Comm: 0, Src: 0, Dst: 0, Tag: 0, Seq: 1},
	&Data{Comm: 3, Src: 1, Dst: 2, Tag: 4, Seq: 5, Payload: []byte("revoke"), Control: true},
	&Ack{Comm: 2, Src: 1, Dst: 4, Upto: 1000},
	&Commit{Comm: 2, Src: 1, Dst: 4, Upto: 999},
	&Decision{Ballot: 2, K: 17, Value: []byte{1, 2, 3}},
	&Decision{Ballot: 0, K: 1},
	&DecisionAck{Ballot: 1, Upto: 9, Final: 7},
	&DecisionCommit{Upto: 9, AllFinal: 3},
	&Fin{},
}

// TestKindNumbers: the kinds are ProtoReplica's 1–8, on the wire.
func TestKindNumbers(t *testing.T) {
	for i, k := range []core.Kind{KindData, KindAck, KindCommit, KindDecision, KindDecisionAck, KindDecisionCommit, KindFin, KindControlData} {
		if k != core.MakeKind(core.ProtoReplica, uint8(i+1)) {
			t.Fatalf("%s is %v, want replica/%d", KindName(k), k, i+1)
		}
	}
}

// TestCodecRoundTrip: every kind decodes to what was encoded and reports
// its size.
func TestCodecRoundTrip(t *testing.T) {
	c := codec(t)
	for _, m := range samples {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip: got %#v, want %#v", got, m)
		}
		if core.MsgSize(m) != len(b) {
			t.Fatalf("%v: WireSize %d, encoded %d bytes", m, core.MsgSize(m), len(b))
		}
	}
}

// TestDataHeader: a Data's header followed by its payload is its
// encoding, within DataHeaderMax bytes, at the largest field values too.
func TestDataHeader(t *testing.T) {
	c := codec(t)
	for _, m := range []*Data{
		samples[0].(*Data), samples[1].(*Data),
		{Comm: ^uint64(0), Src: 1<<31 - 1, Dst: 1<<31 - 1, Tag: -1 << 63, Seq: ^uint64(0), Payload: make([]byte, 70000)},
	} {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		h := m.AppendHeader(nil)
		if got := append(h, m.Payload...); !bytes.Equal(got, b) {
			t.Fatalf("%v: header and payload are %x…, encoding %x…", m, got[:min(len(got), 40)], b[:min(len(b), 40)])
		}
		if len(h) > DataHeaderMax {
			t.Fatalf("%v: header of %d bytes, DataHeaderMax %d", m, len(h), DataHeaderMax)
		}
		// DecodeDataHeader reads it back from the encoding's first bytes,
		// and refuses fewer bytes than the header.
		var got Data
		n, size, ok := DecodeDataHeader(b[:len(h)], &got)
		want := *m
		want.Payload = nil
		if !ok || n != len(h) || size != len(m.Payload) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%v: DecodeDataHeader = %v, %d, %d, %v; want %v, %d, %d, true", m, got, n, size, ok, want, len(h), len(m.Payload))
		}
		if _, _, ok := DecodeDataHeader(b[:len(h)-1], &got); ok {
			t.Fatalf("%v: DecodeDataHeader took %d of its %d header bytes", m, len(h)-1, len(h))
		}
	}
}

// TestCodecRejects: inconsistent fields are errors wrapping ErrMessage;
// truncated input is an error.
func TestCodecRejects(t *testing.T) {
	c := codec(t)
	for _, m := range []core.Msg{
		&Data{Seq: 0},
		&Decision{K: 0},
		&DecisionCommit{Upto: 3, AllFinal: 4},
		&Ack{Src: 1 << 31},
		&Data{Dst: 1 << 40, Seq: 1},
	} {
		var e wire.Encoder
		m.(wire.Message).MarshalWire(&e)
		if _, err := c.Unmarshal(m.Kind(), e.B); !errors.Is(err, ErrMessage) {
			t.Errorf("%v: got %v, want ErrMessage", m, err)
		}
	}
	for _, m := range samples {
		b, _ := c.Marshal(m)
		for n := range len(b) {
			if got, err := c.Unmarshal(m.Kind(), b[:n]); err == nil {
				t.Errorf("%v truncated to %d bytes decodes as %v", m, n, got)
			}
		}
	}
}

// FuzzDecode feeds arbitrary payloads to every decoder: an error or a
// message, never a panic; a decoded message re-encodes to bytes that
// decode to the same message.
func FuzzDecode(f *testing.F) {
	c := codec(f)
	for _, m := range samples {
		b, _ := c.Marshal(m)
		f.Add(uint8(m.Kind()), b)
	}
	f.Fuzz(func(t *testing.T, k uint8, b []byte) {
		kind := core.MakeKind(core.ProtoReplica, k%8)
		m, err := c.Unmarshal(kind, b)
		if err != nil {
			return
		}
		again, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if m2, err := c.Unmarshal(kind, again); err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decoding %v: %v, %v", m, m2, err)
		}
	})
}

// FuzzReceive feeds decoded arbitrary messages from arbitrary senders to a
// running layer: it drops what makes no sense and never panics.
func FuzzReceive(f *testing.F) {
	c := codec(f)
	for _, m := range samples {
		b, _ := c.Marshal(m)
		f.Add(uint8(m.Kind()), uint8(1), b)
	}
	f.Fuzz(func(t *testing.T, k, from uint8, b []byte) {
		m, err := c.Unmarshal(core.MakeKind(core.ProtoReplica, k%8), b)
		if err != nil {
			return
		}
		cl := newCluster(t, 2, 2, 1)
		cl.send(0, 1, "x")
		cl.decide(0, 1, "v")
		for _, l := range cl.ls {
			l.Receive(core.NodeID(from%6), m)
		}
	})
}
