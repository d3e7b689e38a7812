package wire

import (
	"fmt"
	"io"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// Benchmarks of the encode and decode paths; run with -benchmem. The frame
// paths must not allocate (checked too by TestFramePathsDoNotAllocate).

var benchSizes = []int{0, 64, 1024, 16 << 10}

func BenchmarkAppendFrame(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			f := Frame{Kind: kindFD1, Src: 12345, Dst: 678, Epoch: 99, Payload: make([]byte, size)}
			buf := make([]byte, 0, EncodedSize(f))
			b.SetBytes(int64(EncodedSize(f)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendFrame(buf[:0], f)
			}
		})
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			buf := AppendFrame(nil, Frame{Kind: kindFD1, Src: 12345, Dst: 678, Epoch: 99, Payload: make([]byte, size)})
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := DecodeFrame(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFrameReader(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			var stream []byte
			for range 64 {
				stream = AppendFrame(stream, Frame{Kind: kindFD1, Src: 1, Dst: 2, Payload: make([]byte, size)})
			}
			fr := NewFrameReader(&cycleReader{data: stream})
			b.SetBytes(int64(len(stream) / 64))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fr.ReadFrame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFrameWriter(b *testing.B) {
	// Messages reach the writer as interface values already (from the
	// send queue), so the boxing is done once, outside the loop.
	var m Message = testMsg{N: 1 << 33, IDs: []core.NodeID{1, 2, 3, 4, 5, 6, 7, 8}}
	b.Run("WriteMessage", func(b *testing.B) {
		fw := NewFrameWriter(io.Discard, 0)
		b.ReportAllocs()
		for b.Loop() {
			if err := fw.WriteMessage(Frame{Src: 1, Dst: 2, Epoch: 3}, m); err != nil {
				b.Fatal(err)
			}
		}
		fw.Flush()
	})
	b.Run("WriteFrame", func(b *testing.B) {
		fw := NewFrameWriter(io.Discard, 0)
		f := Frame{Kind: kindFD1, Src: 1, Dst: 2, Payload: make([]byte, 64)}
		b.ReportAllocs()
		for b.Loop() {
			if err := fw.WriteFrame(f); err != nil {
				b.Fatal(err)
			}
		}
		fw.Flush()
	})
}

func BenchmarkCodec(b *testing.B) {
	c := NewCodec()
	c.Register(testKind, "test", decodeTestMsg)
	for _, n := range []int{1, 64, 1024} {
		tm := testMsg{N: 42, IDs: make([]core.NodeID, n)}
		for i := range tm.IDs {
			tm.IDs[i] = core.NodeID(i * 977)
		}
		var m core.Msg = tm
		b.Run(fmt.Sprintf("Encode/ids=%d", n), func(b *testing.B) {
			e := Encoder{B: make([]byte, 0, Size(tm))}
			b.ReportAllocs()
			for b.Loop() {
				e.B = e.B[:0]
				if err := c.Encode(&e, m); err != nil {
					b.Fatal(err)
				}
			}
		})
		payload, _ := c.Marshal(m)
		b.Run(fmt.Sprintf("Unmarshal/ids=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Unmarshal(testKind, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkProof(b *testing.B) {
	hi, ha := hello(1, 10), hello(2, 20)
	b.ReportAllocs()
	for b.Loop() {
		ComputeProof(secret, hi, ha, true)
	}
}

// TestFramePathsDoNotAllocate pins the allocation-free encode and header
// decode paths that the benchmarks above measure.
func TestFramePathsDoNotAllocate(t *testing.T) {
	f := Frame{Kind: kindFD1, Src: 12345, Dst: 678, Epoch: 99, Payload: []byte("payload")}
	buf := make([]byte, 0, 64)
	enc := AppendFrame(nil, f)
	fw := NewFrameWriter(io.Discard, 0)
	var m Message = testMsg{N: 7, IDs: []core.NodeID{1, 2}}
	c := NewCodec()
	c.Register(testKind, "test", decodeTestMsg)
	e := Encoder{B: make([]byte, 0, 64)}
	for name, fn := range map[string]func(){
		"AppendFrame":  func() { buf = AppendFrame(buf[:0], f) },
		"DecodeFrame":  func() { DecodeFrame(enc) },
		"WriteFrame":   func() { fw.WriteFrame(f) },
		"WriteMessage": func() { fw.WriteMessage(f, m) },
		"Codec.Encode": func() { e.B = e.B[:0]; c.Encode(&e, m) },
	} {
		if a := testing.AllocsPerRun(1000, fn); a != 0 {
			t.Errorf("%s: %.1f allocations, want 0", name, a)
		}
	}
}
