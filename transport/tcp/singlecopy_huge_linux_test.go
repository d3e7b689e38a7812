package tcp

import (
	"bytes"
	"testing"
	"unsafe"
)

// Advising a buffer's regions to be huge pages keeps its contents and those
// of its neighbours in the regions, marks the regions advised (a buffer
// used again costs no system call) and leaves buffers too small to gain
// from it alone.
func TestAdviseHugeKeepsContents(t *testing.T) {
	heap := make([]byte, 6<<20)
	for i := range heap {
		heap[i] = byte(i*7 + i>>12)
	}
	want := bytes.Clone(heap)
	buf := heap[3<<20-4096 : 4<<20] // straddles a region's border at most once
	adviseHuge(buf)
	if !bytes.Equal(heap, want) {
		t.Fatal("advising huge pages changed the memory's contents")
	}
	base := uintptr(unsafe.Pointer(&buf[0]))
	for r := base &^ (hugeRegion - 1); r < base+uintptr(len(buf)); r += hugeRegion {
		if !hugeKnown(r) {
			t.Errorf("region %#x of the buffer not marked advised", r)
		}
	}
	small := make([]byte, hugeRegion/8)
	adviseHuge(small)
	if r := uintptr(unsafe.Pointer(&small[0])) &^ (hugeRegion - 1); hugeKnown(r) && !regionOverlaps(r, heap) {
		t.Errorf("a %d-byte buffer's region %#x advised; want only buffers of %d bytes or more", len(small), r, hugeRegion/4)
	}
}

func regionOverlaps(r uintptr, b []byte) bool {
	lo := uintptr(unsafe.Pointer(&b[0]))
	return r < lo+uintptr(len(b)) && r+hugeRegion > lo
}
