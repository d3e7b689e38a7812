package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/cohort-mp/cohort/core"
)

// The tests in this file check the frame layout of docs/DESIGN.md "Wire format"
// (length-prefixed frames carrying kind, source, destination, epoch and
// payload) as documented in the package doc.

var kindFD1 = core.MakeKind(core.ProtoFD, 1)

func TestFrameLayout(t *testing.T) {
	f := Frame{Kind: core.MakeKind(core.ProtoMember, 3), Src: 1, Dst: 300, Epoch: 7, Payload: []byte("hi")}
	got := AppendFrame([]byte{0xaa}, f)
	want := []byte{0xaa, 0, 0, 0, 8, 0x83, 0x04, 1, 0xac, 0x02, 7, 'h', 'i'}
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendFrame = %x, want %x", got, want)
	}
	if EncodedSize(f) != len(want)-1 {
		t.Errorf("EncodedSize = %d, want %d", EncodedSize(f), len(want)-1)
	}
}

func TestFrameRoundTripTable(t *testing.T) {
	for _, f := range []Frame{
		{Kind: 1, Src: 0, Dst: 0},
		{Kind: math.MaxUint16, Src: core.None, Dst: core.None, Epoch: math.MaxUint64, Payload: []byte{0}},
		{Kind: kindFD1, Src: 5, Dst: 6, Epoch: 1 << 40, Payload: bytes.Repeat([]byte{0xff}, 1000)},
	} {
		b := AppendFrame(nil, f)
		g, n, err := DecodeFrame(append(b, 9, 9, 9))
		if err != nil || n != len(b) {
			t.Fatalf("DecodeFrame(%v) = %d, %v; want %d bytes", f, n, err, len(b))
		}
		if len(f.Payload) == 0 {
			f.Payload = nil
		}
		if !reflect.DeepEqual(g, f) {
			t.Errorf("got %v, want %v", g, f)
		}
	}
}

func TestDecodeFrameShort(t *testing.T) {
	b := AppendFrame(nil, Frame{Kind: kindFD1, Src: 1, Dst: 2, Payload: []byte("payload")})
	for i := 0; i < len(b); i++ {
		_, need, err := DecodeFrame(b[:i])
		if !errors.Is(err, ErrShortFrame) {
			t.Fatalf("prefix of %d bytes: %v, want ErrShortFrame", i, err)
		}
		wantNeed := len(b)
		if i < LengthSize {
			wantNeed = LengthSize
		}
		if need != wantNeed {
			t.Errorf("prefix of %d bytes: need %d, want %d", i, need, wantNeed)
		}
	}
}

func TestDecodeFrameMalformed(t *testing.T) {
	hdr := func(n uint32, rest ...byte) []byte {
		return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, rest...)
	}
	for _, tc := range []struct {
		name  string
		in    []byte
		err   error
		inner error // the field error wrapped by ErrMalformedFrame
	}{
		{"zero length", hdr(0), ErrMalformedFrame, nil},
		{"length 3", hdr(3, 1, 1, 1), ErrMalformedFrame, nil},
		{"length over limit", hdr(DefaultMaxFrameSize + 1), ErrFrameTooLarge, nil},
		{"length 2^32-1", hdr(math.MaxUint32), ErrFrameTooLarge, nil},
		{"kind 0", hdr(4, 0, 1, 1, 1), ErrMalformedFrame, ErrInvalid},
		{"kind > 16 bits", hdr(6, 0x80, 0x80, 0x04, 1, 1, 1), ErrMalformedFrame, ErrOverflow},
		{"src > 32 bits", hdr(8, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 1, 1), ErrMalformedFrame, ErrOverflow},
		{"header past length", hdr(4, 1, 1, 1, 0x80, 1), ErrMalformedFrame, ErrTruncated},
		{"padded varint", hdr(5, 0x81, 0x00, 1, 1, 1), ErrMalformedFrame, ErrNonCanonical},
		{"epoch overflow", hdr(14, 1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrMalformedFrame, ErrOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, n, err := DecodeFrame(tc.in)
			if !errors.Is(err, tc.err) || n != 0 {
				t.Fatalf("DecodeFrame = %d, %v; want 0, %v", n, err, tc.err)
			}
			if tc.inner != nil && !errors.Is(err, tc.inner) {
				t.Errorf("error %v does not wrap %v", err, tc.inner)
			}
			if errors.Is(err, ErrShortFrame) {
				t.Errorf("error %v claims more bytes would help", err)
			}
		})
	}
	if _, _, err := DecodeFrameMax(hdr(11, make([]byte, 11)...), 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("DecodeFrameMax over its limit: %v", err)
	}
}

// randomFrames returns n frames drawn from seed, and their concatenation.
func randomFrames(seed uint64, n int) ([]Frame, []byte) {
	r := rand.New(rand.NewPCG(seed, 1))
	var frames []Frame
	var stream []byte
	for range n {
		f := Frame{
			Kind:  core.Kind(1 + r.IntN(math.MaxUint16)),
			Src:   core.NodeID(r.Uint32() >> r.IntN(32)),
			Dst:   core.NodeID(r.Uint32() >> r.IntN(32)),
			Epoch: r.Uint64() >> r.IntN(64),
		}
		if l := r.IntN(40); l > 0 {
			f.Payload = make([]byte, l)
			for i := range f.Payload {
				f.Payload[i] = byte(r.Uint32())
			}
		}
		frames = append(frames, f)
		stream = AppendFrame(stream, f)
	}
	return frames, stream
}

// splitReader returns its data in two reads, split at a given offset.
type splitReader struct {
	data  []byte
	split int
	off   int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	end := len(r.data)
	if r.off < r.split {
		end = r.split
	}
	n := copy(p, r.data[r.off:end])
	r.off += n
	return n, nil
}

func readAll(t *testing.T, r io.Reader) []Frame {
	t.Helper()
	fr := NewFrameReader(r)
	var out []Frame
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(out), err)
		}
		f.Payload = bytes.Clone(f.Payload)
		out = append(out, f)
	}
}

// TestFrameStreamSplitAtEveryByte feeds one stream of many frames to a
// FrameReader split at every byte boundary, byte by byte, and in halves,
// and to DecodeFrame growing its buffer one byte at a time: every way must
// yield the same frames.
func TestFrameStreamSplitAtEveryByte(t *testing.T) {
	const seed = 20240601
	t.Logf("seed %d", seed)
	want, stream := randomFrames(seed, 60)
	for split := 0; split <= len(stream); split++ {
		got := readAll(t, &splitReader{data: stream, split: split})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d: frames differ", split)
		}
	}
	for name, r := range map[string]io.Reader{
		"one byte": iotest.OneByteReader(bytes.NewReader(stream)),
		"half":     iotest.HalfReader(bytes.NewReader(stream)),
		"data+EOF": iotest.DataErrReader(bytes.NewReader(stream)),
	} {
		if got := readAll(t, r); !reflect.DeepEqual(got, want) {
			t.Errorf("%s reader: frames differ", name)
		}
	}
	// DecodeFrame over a buffer that grows a byte at a time.
	var got []Frame
	start := 0
	for end := 0; end <= len(stream); end++ {
		for {
			f, n, err := DecodeFrame(stream[start:end])
			if errors.Is(err, ErrShortFrame) {
				if start+n <= end {
					t.Fatalf("ErrShortFrame asks for %d bytes but %d are there", n, end-start)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f)
			start += n
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("incremental DecodeFrame: frames differ")
	}
}

func TestFrameReaderEnds(t *testing.T) {
	_, stream := randomFrames(3, 3)
	fr := NewFrameReader(bytes.NewReader(stream))
	for range 3 {
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Errorf("clean end: %v, want io.EOF", err)
	}
	for _, cut := range []int{1, 3, 4, 5, len(stream) - 1} {
		fr := NewFrameReader(bytes.NewReader(stream[:cut]))
		var err error
		for err == nil {
			_, err = fr.ReadFrame()
		}
		if err != io.ErrUnexpectedEOF {
			t.Errorf("stream cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	boom := errors.New("boom")
	fr = NewFrameReader(io.MultiReader(bytes.NewReader(stream[:5]), iotest.ErrReader(boom)))
	if _, err := fr.ReadFrame(); err != boom {
		t.Errorf("read error: %v, want boom", err)
	}
	if _, err := fr.ReadFrame(); err != boom {
		t.Errorf("error not sticky: %v", err)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestFrameReaderNoProgress(t *testing.T) {
	if _, err := NewFrameReader(emptyReader{}).ReadFrame(); err != io.ErrNoProgress {
		t.Errorf("reader that never returns data: %v, want io.ErrNoProgress", err)
	}
}

func TestFrameReaderRefusesOversizeBeforeAllocating(t *testing.T) {
	fr := NewFrameReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 1, 1, 1, 1}))
	if _, err := fr.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("length 2^32-1: %v, want ErrFrameTooLarge", err)
	}
	if len(fr.buf) > DefaultReadBufferSize {
		t.Errorf("buffer grew to %d bytes for a refused frame", len(fr.buf))
	}
	// A handshake-sized limit keeps the buffer small as well.
	f := AppendFrame(nil, Frame{Kind: kindFD1, Payload: make([]byte, MaxHandshakeFrameSize)})
	fr = NewFrameReader(bytes.NewReader(f))
	fr.SetMaxFrameSize(MaxHandshakeFrameSize)
	if _, err := fr.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame over the handshake limit: %v", err)
	}
	if len(fr.buf) > MaxHandshakeFrameSize+LengthSize {
		t.Errorf("buffer is %d bytes under a %d-byte limit", len(fr.buf), MaxHandshakeFrameSize)
	}
}

// TestFrameReaderBufferAfterHandshake checks that raising the limit after a
// handshake lets the buffer grow to its default size on a busy stream, so
// that small frames are still read in large chunks, while a quiet
// connection keeps a small buffer.
func TestFrameReaderBufferAfterHandshake(t *testing.T) {
	_, stream := randomFrames(9, 8000)
	r := &countingReader{r: bytes.NewReader(stream)}
	fr := NewFrameReader(r)
	fr.SetMaxFrameSize(MaxHandshakeFrameSize)
	if _, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	fr.SetMaxFrameSize(DefaultMaxFrameSize)
	for range 7999 {
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	}
	if len(fr.buf) != DefaultReadBufferSize {
		t.Errorf("buffer is %d bytes after a busy stream, want %d", len(fr.buf), DefaultReadBufferSize)
	}
	// A few reads while the buffer grows, then one per full buffer.
	if limit := len(stream)/(DefaultReadBufferSize/2) + 8; r.reads > limit {
		t.Errorf("%d reads for a %d-byte stream, want at most %d", r.reads, len(stream), limit)
	}

	_, quiet := randomFrames(10, 1)
	fq := NewFrameReader(bytes.NewReader(quiet))
	if _, err := fq.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if len(fq.buf) > initialBufferSize {
		t.Errorf("a quiet connection's buffer is %d bytes, want at most %d", len(fq.buf), initialBufferSize)
	}
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

func TestFrameReaderLargeFrameAndReuse(t *testing.T) {
	big := Frame{Kind: kindFD1, Src: 1, Dst: 2, Payload: bytes.Repeat([]byte("x"), 3*DefaultReadBufferSize+17)}
	stream := AppendFrame(nil, Frame{Kind: kindFD1, Payload: []byte("small")})
	stream = AppendFrame(stream, big)
	stream = AppendFrame(stream, Frame{Kind: kindFD1, Payload: []byte("after")})
	got := readAll(t, iotest.HalfReader(bytes.NewReader(stream)))
	if len(got) != 3 || !bytes.Equal(got[1].Payload, big.Payload) || string(got[2].Payload) != "after" {
		t.Fatalf("large frame not read back intact (%d frames)", len(got))
	}
}

// cycleReader returns the same stream forever.
type cycleReader struct {
	data []byte
	off  int
}

func (r *cycleReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off = (r.off + n) % len(r.data)
	return n, nil
}

func TestFrameReaderDoesNotAllocatePerFrame(t *testing.T) {
	_, stream := randomFrames(5, 50)
	fr := NewFrameReader(&cycleReader{data: stream})
	fr.ReadFrame() // allocate the buffer
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := fr.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("ReadFrame allocates %.1f times per frame, want 0", allocs)
	}
}

// recordingWriter records every Write call.
type recordingWriter struct {
	writes [][]byte // copies: the writer reuses its buffer
	first  []*byte  // the first byte of each write's slice, to detect copies
	all    bytes.Buffer
	short  bool
	err    error
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.writes = append(w.writes, bytes.Clone(p))
	w.first = append(w.first, &p[0])
	w.all.Write(p)
	if w.short {
		return len(p) - 1, nil
	}
	return len(p), nil
}

func TestFrameWriterCoalesces(t *testing.T) {
	frames, stream := randomFrames(7, 100)
	w := &recordingWriter{}
	fw := NewFrameWriter(w, 1<<20)
	for _, f := range frames {
		if err := fw.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.writes) != 0 || fw.Buffered() != len(stream) {
		t.Fatalf("%d writes and %d buffered before Flush; want 0 and %d", len(w.writes), fw.Buffered(), len(stream))
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 1 || !bytes.Equal(w.all.Bytes(), stream) {
		t.Fatalf("%d writes after Flush, bytes equal: %v", len(w.writes), bytes.Equal(w.all.Bytes(), stream))
	}
	// A small buffer flushes as it fills, never splitting a small frame.
	w = &recordingWriter{}
	fw = NewFrameWriter(w, 256)
	for _, f := range frames {
		if err := fw.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	fw.Flush()
	if !bytes.Equal(w.all.Bytes(), stream) {
		t.Fatal("bytes differ with a small buffer")
	}
	for i, b := range w.writes {
		if len(b) > 256 {
			t.Errorf("write %d is %d bytes, over the 256-byte buffer", i, len(b))
		}
		if _, err := decodeAllFrames(b); err != nil {
			t.Errorf("write %d does not hold whole frames: %v", i, err)
		}
	}
}

func decodeAllFrames(b []byte) ([]Frame, error) {
	var out []Frame
	for len(b) > 0 {
		f, n, err := DecodeFrame(b)
		if err != nil {
			return out, err
		}
		out = append(out, f)
		b = b[n:]
	}
	return out, nil
}

func TestFrameWriterLargePayloadIsNotCopied(t *testing.T) {
	w := &recordingWriter{}
	fw := NewFrameWriter(w, 64)
	fw.WriteFrame(Frame{Kind: kindFD1, Payload: []byte("a")})
	big := bytes.Repeat([]byte("b"), 64)
	if err := fw.WriteFrame(Frame{Kind: kindFD1, Src: 3, Payload: big}); err != nil {
		t.Fatal(err)
	}
	if len(w.writes) != 2 || w.first[1] != &big[0] {
		t.Fatalf("large payload: %d writes, want the buffered header then the caller's slice", len(w.writes))
	}
	got, err := decodeAllFrames(w.all.Bytes())
	if err != nil || len(got) != 2 || !bytes.Equal(got[1].Payload, big) {
		t.Errorf("stream does not decode back: %v", err)
	}
}

func TestFrameWriterErrors(t *testing.T) {
	w := &recordingWriter{}
	fw := NewFrameWriter(w, 0)
	fw.SetMaxFrameSize(100)
	err := fw.WriteFrame(Frame{Kind: kindFD1, Payload: make([]byte, 96)}) // 5-byte header
	if !errors.Is(err, ErrFrameTooLarge) || fw.Buffered() != 0 {
		t.Errorf("frame over the limit: %v, %d buffered", err, fw.Buffered())
	}
	if err := fw.WriteFrame(Frame{Kind: kindFD1, Payload: make([]byte, 95)}); err != nil {
		t.Errorf("frame at the limit: %v", err)
	}
	before := fw.Buffered()
	err = fw.WriteMessage(Frame{}, testMsg{IDs: make([]core.NodeID, 100)})
	if !errors.Is(err, ErrFrameTooLarge) || fw.Buffered() != before {
		t.Errorf("message over the limit: %v, buffer %d → %d", err, before, fw.Buffered())
	}

	boom := errors.New("boom")
	w = &recordingWriter{err: boom}
	fw = NewFrameWriter(w, 0)
	fw.WriteFrame(Frame{Kind: kindFD1})
	if err := fw.Flush(); !errors.Is(err, boom) {
		t.Errorf("Flush: %v, want boom", err)
	}
	if err := fw.WriteFrame(Frame{Kind: kindFD1}); !errors.Is(err, boom) || !errors.Is(fw.Err(), boom) {
		t.Errorf("error not sticky: %v", err)
	}
	w = &recordingWriter{short: true}
	fw = NewFrameWriter(w, 0)
	fw.WriteFrame(Frame{Kind: kindFD1})
	if err := fw.Flush(); !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("short write: %v, want io.ErrShortWrite", err)
	}
}

func TestFrameWriterWriteMessage(t *testing.T) {
	m := testMsg{N: 1 << 50, IDs: []core.NodeID{9, 8, 7}}
	w := &recordingWriter{}
	fw := NewFrameWriter(w, 0)
	h := Frame{Kind: 999, Src: 4, Dst: 5, Epoch: 6, Payload: []byte("ignored")}
	if err := fw.WriteMessage(h, m); err != nil {
		t.Fatal(err)
	}
	fw.Flush()
	var e Encoder
	m.MarshalWire(&e)
	want := AppendFrame(nil, Frame{Kind: testKind, Src: 4, Dst: 5, Epoch: 6, Payload: e.B})
	if !bytes.Equal(w.all.Bytes(), want) {
		t.Errorf("WriteMessage wrote %x, want %x", w.all.Bytes(), want)
	}
}

func TestFrameString(t *testing.T) {
	got := Frame{Kind: kindFD1, Src: 1, Dst: core.None, Epoch: 3, Payload: []byte("ab")}.String()
	if want := "fd/1 n1→none epoch 3, 2 bytes"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	_ = fmt.Sprint(got)
}

// A pad frame has exactly the size asked for, decodes as KindPad, and puts
// what follows it at the stream offset PadFor promises, for every address
// residue and head length.
func TestPadFor(t *testing.T) {
	for _, ids := range [][2]core.NodeID{{1, 2}, {core.None, core.None}, {300, 70000}} {
		for headLen := range 40 {
			for addr := uintptr(0); addr < 128; addr++ {
				n := PadFor(headLen, addr+4096)
				if n != 0 && (n < padMin || n > PadMax) {
					t.Fatalf("PadFor(%d, %d) = %d, outside 0 or [%d, %d]", headLen, addr, n, padMin, PadMax)
				}
				if (uintptr(n+headLen)-addr)%64 != 0 {
					t.Fatalf("PadFor(%d, %d) = %d: the payload starts at %d, not ≡ %d mod 64", headLen, addr, n, n+headLen, addr%64)
				}
				b := AppendPad([]byte("x"), ids[0], ids[1], n)
				if len(b) != 1+n {
					t.Fatalf("AppendPad(%d) appended %d bytes", n, len(b)-1)
				}
				if n == 0 {
					continue
				}
				f, m, err := DecodeFrame(b[1:])
				if err != nil || m != n || f.Kind != KindPad || f.Src != ids[0] || f.Dst != ids[1] {
					t.Fatalf("pad of %d bytes decodes as %v, %d bytes, %v", n, f, m, err)
				}
			}
		}
	}
}

// TestFrameWriterParts: a frame written in parts reads back as the frame
// of their concatenation, small ones in the buffer beside other frames,
// a part of the buffer's size written from the caller's slice.
func TestFrameWriterParts(t *testing.T) {
	w := &recordingWriter{}
	fw := NewFrameWriter(w, 64)
	fw.WriteFrame(Frame{Kind: kindFD1, Payload: []byte("a")})
	head, big, tail := []byte("head"), bytes.Repeat([]byte("b"), 64), []byte("tail")
	if err := fw.WriteFrameParts(Frame{Kind: kindFD1, Src: 3, Payload: head}, big, tail); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteFrameParts(Frame{Kind: kindFD1, Src: 4, Payload: head}, tail); err != nil {
		t.Fatal(err)
	}
	fw.Flush()
	if len(w.writes) != 3 || w.first[1] != &big[0] {
		t.Fatalf("%d writes; want the buffered heads, the caller's large part, then the rest", len(w.writes))
	}
	got, err := decodeAllFrames(w.all.Bytes())
	if err != nil || len(got) != 3 {
		t.Fatalf("the stream does not decode back: %d frames, %v", len(got), err)
	}
	if want := slices.Concat(head, big, tail); !bytes.Equal(got[1].Payload, want) || got[1].Src != 3 {
		t.Errorf("frame 2: %v, want the parts' concatenation from 3", got[1])
	}
	if want := slices.Concat(head, tail); !bytes.Equal(got[2].Payload, want) || got[2].Src != 4 {
		t.Errorf("frame 3: %v, want the parts' concatenation from 4", got[2])
	}
	fw.SetMaxFrameSize(10)
	if err := fw.WriteFrameParts(Frame{Kind: kindFD1, Payload: head}, big); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("a frame over the limit in parts: %v, want ErrFrameTooLarge", err)
	}
}

// vectorWriter records its writes, a vectored one as one.
type vectorWriter struct{ recordingWriter }

func (w *vectorWriter) WriteVectored(a, b []byte) (int, error) {
	n, err := w.Write(append(slices.Clone(a), b...))
	w.first[len(w.first)-1] = &b[0]
	return n, err
}

// TestFrameWriterPartsVectored: to a VectorWriter, a large part leaves
// with the buffered bytes before it (its frame's header) in one write.
func TestFrameWriterPartsVectored(t *testing.T) {
	w := &vectorWriter{}
	fw := NewFrameWriter(w, 64)
	head, big, tail := []byte("head"), bytes.Repeat([]byte("b"), 64), []byte("tail")
	for i := range 3 {
		if err := fw.WriteFrameParts(Frame{Kind: kindFD1, Src: core.NodeID(i), Payload: head}, big, tail); err != nil {
			t.Fatal(err)
		}
	}
	fw.Flush()
	if len(w.writes) != 4 || w.first[0] != &big[0] {
		t.Fatalf("%d writes; want one vectored write per frame, then the last tail", len(w.writes))
	}
	got, err := decodeAllFrames(w.all.Bytes())
	if err != nil || len(got) != 3 {
		t.Fatalf("the stream does not decode back: %d frames, %v", len(got), err)
	}
	for i, f := range got {
		if want := slices.Concat(head, big, tail); !bytes.Equal(f.Payload, want) || f.Src != core.NodeID(i) {
			t.Errorf("frame %d: %v, want the parts' concatenation from %d", i, f, i)
		}
	}
}
