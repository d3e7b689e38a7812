package tcp

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// directHead writes the pad frame that aligns the body, then the frame's
// head, for every alignment of the body in memory, into the array of the
// buffer it is given, which it keeps whole: called again and again with
// what it returned, it writes into the same array.
func TestDirectHeadKeepsItsArray(t *testing.T) {
	var tr Transport
	f := wire.Frame{Kind: core.Kind(0x7f01), Src: 3, Dst: 70000, Epoch: 9, Payload: []byte("header")}
	mem := make([]byte, padFrom+64)
	var hdr []byte
	for off := range 64 {
		body := mem[off : off+padFrom]
		hdr = tr.directHead(hdr, &f, body, 0)
		head := f.AppendHead(nil, len(body))
		pad := wire.PadFor(len(head), uintptr(unsafe.Pointer(unsafe.SliceData(body))))
		if want := append(wire.AppendPad(nil, f.Src, f.Dst, pad), head...); !bytes.Equal(hdr, want) {
			t.Fatalf("body at offset %d: head % x, want % x", off, hdr, want)
		}
	}
	// Every later call writes into the array of the first.
	first := unsafe.SliceData(hdr)
	for off := range 64 {
		hdr = tr.directHead(hdr, &f, mem[off:off+padFrom], 0)
		if unsafe.SliceData(hdr) != first {
			t.Fatalf("body at offset %d: the head moved to another array", off)
		}
	}
}
