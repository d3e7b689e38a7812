package wire

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// The tests in this file check the payload encoding of docs/DESIGN.md "Wire
// format": compact varints, and decoders that return errors, never panic.

func TestUvarintTable(t *testing.T) {
	for _, tc := range []struct {
		u    uint64
		want []byte
	}{
		{0, []byte{0}},
		{1, []byte{1}},
		{127, []byte{0x7f}},
		{128, []byte{0x80, 0x01}},
		{300, []byte{0xac, 0x02}},
		{math.MaxUint32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
		{math.MaxUint64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		var e Encoder
		e.Uvarint(tc.u)
		if !bytes.Equal(e.B, tc.want) {
			t.Errorf("Uvarint(%d) = %x, want %x", tc.u, e.B, tc.want)
		}
		d := NewDecoder(e.B)
		if got := d.Uvarint(); got != tc.u || d.Finish() != nil {
			t.Errorf("decode %x = %d, %v; want %d", e.B, got, d.Err(), tc.u)
		}
	}
}

func TestVarintTable(t *testing.T) {
	for _, tc := range []struct {
		i    int64
		want []byte
	}{
		{0, []byte{0}},
		{-1, []byte{1}},
		{1, []byte{2}},
		{-64, []byte{0x7f}},
		{64, []byte{0x80, 0x01}},
		{math.MaxInt64, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{math.MinInt64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		var e Encoder
		e.Varint(tc.i)
		if !bytes.Equal(e.B, tc.want) {
			t.Errorf("Varint(%d) = %x, want %x", tc.i, e.B, tc.want)
		}
		d := NewDecoder(e.B)
		if got := d.Varint(); got != tc.i || d.Finish() != nil {
			t.Errorf("decode %x = %d, %v; want %d", e.B, got, d.Err(), tc.i)
		}
	}
}

func TestRoundTripAllPrimitives(t *testing.T) {
	var e Encoder
	e.Uvarint(math.MaxUint64)
	e.Varint(-5)
	e.Uint8(255)
	e.Bool(true)
	e.Bool(false)
	e.Bytes([]byte("abc"))
	e.Bytes(nil)
	e.String("héllo")
	e.String("")
	e.NodeID(0)
	e.NodeID(core.None - 1)
	e.OptNodeID(core.None)
	e.OptNodeID(7)
	e.NodeIDs([]core.NodeID{3, 1, 4})
	e.NodeIDs(nil)
	e.Uvarints([]uint64{0, math.MaxUint64})
	e.Uvarints([]uint64{})
	e.Duration(-time.Second)
	e.Duration(math.MaxInt64)
	e.Raw([]byte{9, 8})

	d := NewDecoder(e.B)
	got := []any{d.Uvarint(), d.Varint(), d.Uint8(), d.Bool(), d.Bool(), d.Bytes(), d.Bytes(),
		d.String(), d.String(), d.NodeID(), d.NodeID(), d.OptNodeID(), d.OptNodeID(),
		d.NodeIDs(), d.NodeIDs(), d.Uvarints(), d.Uvarints(), d.Duration(), d.Duration(), d.Fixed(2)}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
	want := []any{uint64(math.MaxUint64), int64(-5), uint8(255), true, false, []byte("abc"), []byte(nil),
		"héllo", "", core.NodeID(0), core.None - 1, core.None, core.NodeID(7),
		[]core.NodeID{3, 1, 4}, []core.NodeID(nil), []uint64{0, math.MaxUint64}, []uint64(nil),
		-time.Second, time.Duration(math.MaxInt64), []byte{9, 8}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
}

func TestDecoderErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     []byte
		read   func(d *Decoder)
		err    error
		offset int
	}{
		{"empty uvarint", nil, func(d *Decoder) { d.Uvarint() }, ErrTruncated, 0},
		{"cut uvarint", []byte{0x80}, func(d *Decoder) { d.Uvarint() }, ErrTruncated, 0},
		{"11-byte uvarint", bytes.Repeat([]byte{0xff}, 11), func(d *Decoder) { d.Uvarint() }, ErrOverflow, 0},
		{"10th byte 2", append(bytes.Repeat([]byte{0xff}, 9), 2), func(d *Decoder) { d.Uvarint() }, ErrOverflow, 0},
		{"non-canonical", []byte{0x80, 0x00}, func(d *Decoder) { d.Uvarint() }, ErrNonCanonical, 0},
		{"non-canonical varint", []byte{5, 0x81, 0x80, 0x00}, func(d *Decoder) { d.Uint8(); d.Varint() }, ErrNonCanonical, 1},
		{"empty uint8", nil, func(d *Decoder) { d.Uint8() }, ErrTruncated, 0},
		{"bool 2", []byte{1, 2}, func(d *Decoder) { d.Bool(); d.Bool() }, ErrInvalid, 1},
		{"bytes too long", []byte{4, 1, 2, 3}, func(d *Decoder) { d.Bytes() }, ErrTooLong, 0},
		{"huge bytes", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, func(d *Decoder) { d.Bytes() }, ErrTooLong, 0},
		{"string too long", []byte{0, 2, 'a'}, func(d *Decoder) { d.Uint8(); _ = d.String() }, ErrTooLong, 1},
		{"string over limit", []byte{3, 'a', 'b', 'c'}, func(d *Decoder) { d.StringMax(2) }, ErrTooLong, 0},
		{"node id > uint32", []byte{0x80, 0x80, 0x80, 0x80, 0x10}, func(d *Decoder) { d.NodeID() }, ErrOverflow, 0},
		{"node id None", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, func(d *Decoder) { d.NodeID() }, ErrInvalid, 0},
		{"opt node id None+1", []byte{0x80, 0x80, 0x80, 0x80, 0x10}, func(d *Decoder) { d.OptNodeID() }, ErrInvalid, 0},
		{"node id count", []byte{3, 1, 2}, func(d *Decoder) { d.NodeIDs() }, ErrTooLong, 0},
		{"node id in list", []byte{2, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, func(d *Decoder) { d.NodeIDs() }, ErrInvalid, 2},
		{"uvarints count", []byte{0xff, 0x01}, func(d *Decoder) { d.Uvarints() }, ErrTooLong, 0},
		{"uvarints element", []byte{2, 1, 0x80}, func(d *Decoder) { d.Uvarints() }, ErrTruncated, 2},
		{"fixed", []byte{1, 2}, func(d *Decoder) { d.Fixed(3) }, ErrTruncated, 0},
		{"trailing", []byte{1, 2}, func(d *Decoder) { d.Uint8(); d.Finish() }, ErrTrailing, 1},
		{"duration", []byte{0x80}, func(d *Decoder) { d.Duration() }, ErrTruncated, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.in)
			tc.read(d)
			err := d.Err()
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset != tc.offset {
				t.Fatalf("error %v: want offset %d", err, tc.offset)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			// Sticky: everything after the error is the zero value.
			if d.Uvarint() != 0 || d.Uint8() != 0 || d.Bool() || d.Bytes() != nil || d.String() != "" ||
				d.NodeID() != 0 || d.NodeIDs() != nil || d.Uvarints() != nil || d.Duration() != 0 || d.Remaining() != 0 {
				t.Error("decoder returned a value after an error")
			}
			if d.Err() != err || d.Finish() != err {
				t.Errorf("error changed from %v to %v", err, d.Err())
			}
		})
	}
}

func TestBytesAliasesWithCappedCapacity(t *testing.T) {
	in := []byte{2, 'a', 'b', 'c'}
	d := NewDecoder(in)
	b := d.Bytes()
	if &b[0] != &in[1] {
		t.Error("Bytes copied instead of aliasing the input")
	}
	_ = append(b, 'X')
	if in[3] != 'c' {
		t.Error("appending to a decoded slice overwrote the input")
	}
}

type testMsg struct {
	N   uint64
	IDs []core.NodeID
}

var testKind = core.MakeKind(core.ProtoTest, 1)

func (testMsg) Kind() core.Kind          { return testKind }
func (m testMsg) MarshalWire(e *Encoder) { e.Uvarint(m.N); e.NodeIDs(m.IDs) }
func decodeTestMsg(d *Decoder) (core.Msg, error) {
	return testMsg{N: d.Uvarint(), IDs: d.NodeIDs()}, d.Err()
}

type plainMsg struct{}

func (plainMsg) Kind() core.Kind { return core.MakeKind(core.ProtoTest, 2) }

func TestCodec(t *testing.T) {
	c := NewCodec()
	if err := c.Register(testKind, "test.Msg", decodeTestMsg); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(testKind, "again", decodeTestMsg); !errors.Is(err, ErrDuplicateKind) {
		t.Errorf("duplicate Register: %v, want ErrDuplicateKind", err)
	}
	m := testMsg{N: 42, IDs: []core.NodeID{1, 2}}
	b, err := c.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if Size(m) != len(b) {
		t.Errorf("Size = %d, encoding is %d bytes", Size(m), len(b))
	}
	got, err := c.Unmarshal(testKind, b)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Errorf("Unmarshal = %v, %v; want %v", got, err, m)
	}
	if _, err := c.Unmarshal(testKind, append(b, 0)); !errors.Is(err, ErrTrailing) {
		t.Errorf("trailing byte: %v, want ErrTrailing", err)
	}
	if _, err := c.Unmarshal(testKind, b[:len(b)-1]); !errors.Is(err, ErrTooLong) {
		t.Errorf("cut payload: %v, want ErrTooLong", err)
	}
	if _, err := c.Unmarshal(core.MakeKind(core.ProtoTest, 9), b); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: %v, want ErrUnknownKind", err)
	}
	if _, err := c.Marshal(plainMsg{}); !errors.Is(err, ErrNotMessage) {
		t.Errorf("Marshal of a non-Message: %v, want ErrNotMessage", err)
	}
	if c.Name(testKind) != "test.Msg" || c.Name(core.MakeKind(core.ProtoFD, 3)) != "fd/3" {
		t.Errorf("Name: %q, %q", c.Name(testKind), c.Name(core.MakeKind(core.ProtoFD, 3)))
	}
	wrong := core.MakeKind(core.ProtoTest, 3)
	if err := c.Register(wrong, "wrong", decodeTestMsg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Unmarshal(wrong, b); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("decoder of the wrong kind: %v, want ErrKindMismatch", err)
	}
}

func TestDecoderResetAndFail(t *testing.T) {
	d := NewDecoder([]byte{5})
	if d.Uvarint() != 5 || d.Uvarint() != 0 || !errors.Is(d.Err(), ErrTruncated) {
		t.Fatalf("setup: %v", d.Err())
	}
	d.Reset([]byte{7, 0x80})
	if d.Err() != nil || d.Offset() != 0 || d.Uvarint() != 7 {
		t.Fatalf("Reset did not clear the decoder: %v", d.Err())
	}
	errRange := errors.New("fd: sequence out of range")
	d.Fail("heartbeat seq", errRange)
	d.Fail("later", ErrInvalid) // the first error sticks
	var de *DecodeError
	if !errors.Is(d.Err(), errRange) || !errors.As(d.Err(), &de) || de.Offset != 1 || de.What != "heartbeat seq" {
		t.Errorf("Fail recorded %v", d.Err())
	}
}

func TestCodecRegistry(t *testing.T) {
	c := NewCodec()
	for _, k := range []core.Kind{core.MakeKind(core.ProtoMember, 2), core.MakeKind(core.ProtoFD, 9), core.MakeKind(core.ProtoFD, 1)} {
		if err := c.Register(k, k.String(), decodeTestMsg); err != nil {
			t.Fatal(err)
		}
	}
	want := []core.Kind{core.MakeKind(core.ProtoFD, 1), core.MakeKind(core.ProtoFD, 9), core.MakeKind(core.ProtoMember, 2)}
	if got := c.Kinds(); !reflect.DeepEqual(got, want) {
		t.Errorf("Kinds = %v, want %v", got, want)
	}
	if err := c.Register(testKind, "nil", nil); err == nil {
		t.Error("Register accepted a nil decoder")
	}
	var e Encoder
	if err := c.Encode(&e, testMsg{}); !errors.Is(err, ErrUnknownKind) || len(e.B) != 0 {
		t.Errorf("Encode of an unregistered kind: %v, %d bytes written", err, len(e.B))
	}
	if _, err := c.Marshal(nil); !errors.Is(err, ErrNotMessage) {
		t.Errorf("Marshal(nil): %v", err)
	}
}
