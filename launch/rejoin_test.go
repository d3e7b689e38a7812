package launch

import (
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/wire"
)

// The late registration's decoders refuse what they cannot read, never
// panic, and read back what was encoded.
func FuzzRejoinMessages(f *testing.F) {
	var e wire.Encoder
	newcomerTableMsg{Addrs: []string{"127.0.0.1:1", "", "127.0.0.1:3"}, Gone: []int{1}}.MarshalWire(&e)
	f.Add(slices.Clone(e.B))
	e.B = e.B[:0]
	joinedMsg{Process: 7, Addr: "10.0.0.1:4000"}.MarshalWire(&e)
	f.Add(slices.Clone(e.B))
	f.Add([]byte{3, 0, 0, 0, 2, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		if m, err := decodeNewcomerTable(p, 2); err == nil {
			var e wire.Encoder
			m.MarshalWire(&e)
			back, err := decodeNewcomerTable(e.B, 2)
			if err != nil || !slices.Equal(back.Addrs, m.Addrs) || !slices.Equal(back.Gone, m.Gone) {
				t.Fatalf("%+v does not read back: %+v, %v", m, back, err)
			}
		}
		if m, err := decodeJoined(p); err == nil {
			var e wire.Encoder
			m.MarshalWire(&e)
			if back, err := decodeJoined(e.B); err != nil || back != m {
				t.Fatalf("%+v does not read back: %+v, %v", m, back, err)
			}
		}
		decodeJoinedAck(p)
	})
}
