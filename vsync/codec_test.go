package vsync

import (
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
	&Data{Epoch: 1 << 33, Sender: 7, Seq: 42, Payload: []byte("hello")},
	&Data{Epoch: 1, Sender: 0, Seq: 1},
	&Nack{Epoch: 9, Sender: 3, From: 4, To: 10},
	&Digest{Epoch: 9, Sent: 1000},
	&Flush{Target: 12, Old: 9, Vector: []uint64{0, 5, 1 << 40}},
	&Flush{Target: 12, Old: 0},
	&FlushOK{Target: 12, Old: 9},
}

// TestCodecRoundTrip: every kind decodes to what was encoded, and reports
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

// TestCodecRejects: inconsistent fields are errors wrapping ErrMessage;
// truncated input is an error.
func TestCodecRejects(t *testing.T) {
	c := codec(t)
	for _, m := range []core.Msg{
		&Data{Epoch: 1, Sender: 1, Seq: 0},
		&Nack{Epoch: 1, Sender: 1, From: 0, To: 3},
		&Nack{Epoch: 1, Sender: 1, From: 5, To: 3},
		&Flush{Target: 3, Old: 0, Vector: []uint64{1}},
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
// message, never a panic; a decoded message re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	c := codec(f)
	for _, m := range samples {
		b, _ := c.Marshal(m)
		f.Add(uint8(m.Kind()), b)
	}
	f.Fuzz(func(t *testing.T, k uint8, b []byte) {
		kind := core.MakeKind(core.ProtoVsync, k%8)
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
