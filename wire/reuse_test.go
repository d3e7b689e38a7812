package wire

import (
	"errors"
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// reusedMsg is a message whose decoder fills a handed-back one.
type reusedMsg struct{ IDs []core.NodeID }

var reusedKind = core.MakeKind(core.ProtoTest, 7)

func (*reusedMsg) Kind() core.Kind          { return reusedKind }
func (m *reusedMsg) MarshalWire(e *Encoder) { e.NodeIDs(m.IDs) }

func decodeReused(d *Decoder, old core.Msg) (core.Msg, error) {
	m, _ := old.(*reusedMsg)
	if m == nil {
		m = new(reusedMsg)
	}
	n := d.Uvarint()
	if n > uint64(d.Remaining()) {
		d.Fail("count", ErrTooLong)
		return nil, d.Err()
	}
	m.IDs = m.IDs[:0]
	for range n {
		m.IDs = append(m.IDs, d.NodeID())
	}
	return m, d.Err()
}

// TestCodecReusable checks RegisterReusable, RegisterDetached and Decode:
// Decode fills the message it is given for a reusable kind, checks the
// trailing bytes, leaves its decoder reset, and with a decoder and a
// message going round it allocates nothing; Detached and Reusable report
// how each kind was registered.
func TestCodecReusable(t *testing.T) {
	c := NewCodec()
	if err := c.RegisterReusable(reusedKind, "test.Reused", decodeReused); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterReusable(reusedKind, "again", decodeReused); !errors.Is(err, ErrDuplicateKind) {
		t.Errorf("duplicate RegisterReusable: %v, want ErrDuplicateKind", err)
	}
	if err := c.RegisterReusable(core.MakeKind(core.ProtoTest, 8), "nil", nil); err == nil {
		t.Error("RegisterReusable accepted a nil decoder")
	}
	if err := c.RegisterDetached(testKind, "test.Msg", decodeTestMsg); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDetached(testKind, "again", decodeTestMsg); !errors.Is(err, ErrDuplicateKind) {
		t.Errorf("duplicate RegisterDetached: %v, want ErrDuplicateKind", err)
	}
	plain, unknown := core.MakeKind(core.ProtoTest, 9), core.MakeKind(core.ProtoTest, 99)
	if err := c.Register(plain, "test.Plain", decodeTestMsg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		k                  core.Kind
		detached, reusable bool
	}{{reusedKind, true, true}, {testKind, true, false}, {plain, false, false}, {unknown, false, false}} {
		if c.Detached(tc.k) != tc.detached || c.Reusable(tc.k) != tc.reusable {
			t.Errorf("%v: Detached %v, Reusable %v; want %v, %v", tc.k, c.Detached(tc.k), c.Reusable(tc.k), tc.detached, tc.reusable)
		}
	}
	enc := func(ids ...core.NodeID) []byte {
		b, err := c.Marshal(&reusedMsg{IDs: ids})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := new(Decoder)
	first, err := c.Decode(d, reusedKind, enc(1, 2, 3), nil)
	if err != nil || !slices.Equal(first.(*reusedMsg).IDs, []core.NodeID{1, 2, 3}) {
		t.Fatalf("Decode without a message: %v, %v", first, err)
	}
	if d.Remaining() != 0 || d.Offset() != 0 || d.Err() != nil {
		t.Errorf("Decode left its decoder at offset %d with %d bytes and %v", d.Offset(), d.Remaining(), d.Err())
	}
	second, err := c.Decode(d, reusedKind, enc(4), first)
	if err != nil || second != first || !slices.Equal(second.(*reusedMsg).IDs, []core.NodeID{4}) {
		t.Fatalf("Decode into a message: %v, %v; same message %v", second, err, second == first)
	}
	if _, err := c.Decode(d, reusedKind, append(enc(5), 0), first); !errors.Is(err, ErrTrailing) {
		t.Errorf("trailing byte: %v, want ErrTrailing", err)
	}
	if _, err := c.Decode(d, unknown, enc(5), nil); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: %v, want ErrUnknownKind", err)
	}
	if m, err := c.Decode(d, testKind, []byte{7, 0}, nil); err != nil || m.(testMsg).N != 7 {
		t.Errorf("Decode of a kind that is not reusable: %v, %v", m, err)
	}
	b := enc(8, 9)
	if n := testing.AllocsPerRun(100, func() {
		m, err := c.Decode(d, reusedKind, b, first)
		if err != nil || m != first {
			t.Fatal(m, err)
		}
	}); n != 0 {
		t.Errorf("Decode into a message with a kept decoder: %.1f allocations, want 0", n)
	}
}
