package tcp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// lineOf returns f's encoding at the start of a line, its padding filled
// with fill (what a ring's line may hold past a frame).
func lineOf(t *testing.T, f wire.Frame, fill byte) ([]byte, int) {
	t.Helper()
	enc := wire.AppendFrame(nil, f)
	if len(enc) > lineFrameMax {
		t.Fatalf("frame of %d bytes, over a line's %d", len(enc), lineFrameMax)
	}
	line := bytes.Repeat([]byte{fill}, lineFrameMax)
	copy(line, enc)
	return line, len(enc)
}

// TestLineHead checks readLineShm's header memory against the frame
// decoder: a frame with the remembered header bytes decodes to the same
// frame, whatever the padding past it; one byte of the header changed,
// or a header that the frame is too short for, is not a hit. Headers of
// 4 to 16 bytes (the epoch's varint makes them longer) and payloads of 0
// to 20 bytes.
func TestLineHead(t *testing.T) {
	kind := core.MakeKind(core.ProtoComm, 3)
	for _, epoch := range []uint64{0, 1, 300, 1 << 20, 1 << 40, 1 << 62} {
		for _, size := range []int{0, 1, 3, 8, 11, 20} {
			t.Run(fmt.Sprintf("epoch=%d/payload=%d", epoch, size), func(t *testing.T) {
				payload := bytes.Repeat([]byte{0x5a}, size)
				f := wire.Frame{Kind: kind, Src: 7, Dst: 2, Epoch: epoch, Payload: payload}
				line, fl := lineOf(t, f, 0xff)
				got, _, err := wire.DecodeFrame(line[:fl])
				if err != nil {
					t.Fatal(err)
				}
				var h lineHead
				var g wire.Frame
				if h.hit(&g, line, fl) {
					t.Fatal("hit with nothing remembered")
				}
				h.remember(&got, line, fl)
				n := fl - wire.LengthSize - size
				if n > 16 {
					if h.n != 0 {
						t.Fatalf("remembered a header of %d bytes", n)
					}
					return
				}
				if h.n != n {
					t.Fatalf("remembered %d header bytes, want %d", h.n, n)
				}
				// The same header, another payload and padding.
				f2 := f
				f2.Payload = bytes.Repeat([]byte{0xa5}, size)
				line2, fl2 := lineOf(t, f2, 0x00)
				if !h.hit(&g, line2, fl2) {
					t.Fatal("no hit on the same header")
				}
				want, _, _ := wire.DecodeFrame(line2[:fl2])
				if g.Kind != want.Kind || g.Src != want.Src || g.Dst != want.Dst || g.Epoch != want.Epoch || !bytes.Equal(g.Payload, want.Payload) {
					t.Fatalf("got %v %x, want %v %x", g, g.Payload, want, want.Payload)
				}
				// Each header byte changed.
				for i := range n {
					bad := bytes.Clone(line2)
					bad[wire.LengthSize+i] ^= 0x01
					if h.hit(&g, bad, fl2) {
						t.Fatalf("hit with header byte %d changed", i)
					}
				}
				// Too short for the header.
				if h.hit(&g, line2, wire.LengthSize+n-1) {
					t.Fatal("hit on a frame shorter than the header")
				}
			})
		}
	}
}
