package stack

import (
	"reflect"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

func testCodec(t testing.TB) *wire.Codec {
	c := wire.NewCodec()
	if err := RegisterCodecs(c); err != nil {
		t.Fatal(err)
	}
	return c
}

var sampleMsgs = []core.Msg{
	&Addrs{Reply: true, Entries: []Entry{{1, "127.0.0.1:7000"}, {9, "[::1]:80"}}},
	&Addrs{},
	&AddrQuery{IDs: []core.NodeID{3, 4}},
	&Left{Epoch: 1<<32 | 5},
	&Probe{Name: "web-1", State: StateUndecided},
	&Probe{Reply: true, Name: "web-2", State: StateMember},
	&Meta{ID: 4, Ver: 9, Name: "web-4", Meta: []byte("zone=a"), Ask: true},
	&Meta{ID: 5, Ver: 1, Name: "web-5"},
	&MetaView{Epoch: 2<<32 | 1, Entries: []MetaEntry{{1, 3, "web-1", "10.0.0.1:7950", []byte{0, 1}}, {4, 9, "web-4", "10.0.0.4:7950", nil}}},
	&MetaView{Epoch: 1},
}

func TestCodecRoundTrip(t *testing.T) {
	c := testCodec(t)
	for _, m := range sampleMsgs {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("got %#v, want %#v", got, m)
		}
	}
}

func TestCodecRejects(t *testing.T) {
	c := testCodec(t)
	long := make([]byte, 0, 300)
	e := wire.Encoder{}
	e.Bool(false)
	e.Uvarint(1)
	e.NodeID(1)
	e.String(string(append(long, make([]byte, 300)...)))
	for name, tc := range map[string]struct {
		k core.Kind
		b []byte
	}{
		"address too long":  {KindAddrs, e.B},
		"entry count":       {KindAddrs, []byte{0, 200}},
		"truncated":         {KindLeft, nil},
		"trailing":          {KindLeft, []byte{1, 2}},
		"bad node id":       {KindAddrQuery, []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		"query count large": {KindAddrQuery, []byte{100}},
		"probe state":       {KindProbe, []byte{0, 0, 3}},
		"meta too long":     {KindMeta, metaTooLong()},
		"meta entry count":  {KindMetaView, []byte{1, 100}},
	} {
		if _, err := c.Unmarshal(tc.k, tc.b); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	c := testCodec(f)
	for _, m := range sampleMsgs {
		b, _ := c.Marshal(m)
		f.Add(uint8(m.Kind()&0xff), b)
	}
	f.Fuzz(func(t *testing.T, k uint8, b []byte) {
		kind := core.Kind(core.ProtoGroup)<<8 | core.Kind(k%8)
		m, err := c.Unmarshal(kind, b)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		again, err := c.Marshal(m)
		if err != nil || string(again) != string(b) {
			t.Fatalf("%v: %x re-encodes as %x (%v)", kind, b, again, err)
		}
	})
}

// metaTooLong encodes a Meta whose metadata is one byte over MaxMetaLen.
func metaTooLong() []byte {
	e := wire.Encoder{}
	e.NodeID(1)
	e.Uvarint(1)
	e.String("n")
	e.String(string(make([]byte, MaxMetaLen+1)))
	e.Bool(false)
	return e.B
}
