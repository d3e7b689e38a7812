package wire_test

import (
	"bytes"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// TestAppendHead: the head from Frame.AppendHead (header and the
// frame's own payload) followed by the rest of the payload is byte for byte
// what AppendFrame encodes, and decodes back.
func TestAppendHead(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 70000} {
		payload := bytes.Repeat([]byte{0x5A}, n)
		f := wire.Frame{Kind: core.MakeKind(core.ProtoTest, 3), Src: 7, Dst: 300, Epoch: 1 << 40, Payload: payload}
		want := wire.AppendFrame(nil, f)
		split := n / 3
		fh := wire.Frame{Kind: f.Kind, Src: f.Src, Dst: f.Dst, Epoch: f.Epoch, Payload: payload[:split]}
		head := fh.AppendHead(nil, n-split)
		got := append(head, payload[split:]...)
		if !bytes.Equal(got, want) {
			t.Fatalf("payload %d: header+payload differs from AppendFrame", n)
		}
		back, used, err := wire.DecodeFrame(got)
		if err != nil || used != len(got) || back.Src != 7 || back.Dst != 300 || back.Epoch != 1<<40 || !bytes.Equal(back.Payload, payload) {
			t.Fatalf("payload %d: decoded %v, %d bytes, %v", n, back, used, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a negative payload length did not panic")
		}
	}()
	new(wire.Frame).AppendHead(nil, -1)
}
