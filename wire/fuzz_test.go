package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Fuzz targets for every decoder of the package (docs/DESIGN.md "Wire format":
// every decoder is fuzzed; a malformed frame is an error, never a panic).
// Each checks that no input panics and that an input that decodes is
// reproduced byte for byte by encoding the decoded value, which then decodes
// to the same value. The seed corpus is in testdata/fuzz/<FuzzName>/; it is
// regenerated from the seeds below by
//
//	go test ./wire -run TestSeedCorpus -update-corpus
//
// (files found by fuzzing are added by hand, named after what they found).

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the generated seed corpus files under testdata/fuzz")

// Decoder operations driven by FuzzDecoder's ops bytes.
const (
	opUvarint = iota
	opVarint
	opUint8
	opBool
	opBytes
	opString
	opStringMax // next ops byte is the limit
	opNodeID
	opOptNodeID
	opNodeIDs
	opUvarints
	opDuration
	opFixed // next ops byte (mod 40) is the size
	numOps
)

// step is one decoded value and the op that produced it.
type step struct {
	op  int
	arg int
	v   any
}

// runOps decodes data with the operations named by ops and returns the
// trace.
func runOps(ops, data []byte) ([]step, *Decoder) {
	d := NewDecoder(data)
	var trace []step
	for i := 0; i < len(ops); i++ {
		s := step{op: int(ops[i]) % numOps}
		switch s.op {
		case opUvarint:
			s.v = d.Uvarint()
		case opVarint:
			s.v = d.Varint()
		case opUint8:
			s.v = d.Uint8()
		case opBool:
			s.v = d.Bool()
		case opBytes:
			s.v = d.Bytes()
		case opString:
			s.v = d.String()
		case opStringMax:
			if i+1 < len(ops) {
				i++
				s.arg = int(ops[i])
			}
			s.v = d.StringMax(s.arg)
		case opNodeID:
			s.v = d.NodeID()
		case opOptNodeID:
			s.v = d.OptNodeID()
		case opNodeIDs:
			s.v = d.NodeIDs()
		case opUvarints:
			s.v = d.Uvarints()
		case opDuration:
			s.v = d.Duration()
		case opFixed:
			if i+1 < len(ops) {
				i++
				s.arg = int(ops[i]) % 40
			}
			s.v = d.Fixed(s.arg)
		}
		trace = append(trace, s)
	}
	return trace, d
}

// encodeTrace encodes the values of a trace with the matching Encoder
// methods.
func encodeTrace(trace []step) []byte {
	var e Encoder
	for _, s := range trace {
		switch s.op {
		case opUvarint:
			e.Uvarint(s.v.(uint64))
		case opVarint:
			e.Varint(s.v.(int64))
		case opUint8:
			e.Uint8(s.v.(uint8))
		case opBool:
			e.Bool(s.v.(bool))
		case opBytes:
			e.Bytes(s.v.([]byte))
		case opString, opStringMax:
			e.String(s.v.(string))
		case opNodeID:
			e.NodeID(s.v.(core.NodeID))
		case opOptNodeID:
			e.OptNodeID(s.v.(core.NodeID))
		case opNodeIDs:
			e.NodeIDs(s.v.([]core.NodeID))
		case opUvarints:
			e.Uvarints(s.v.([]uint64))
		case opDuration:
			e.Duration(s.v.(time.Duration))
		case opFixed:
			e.Raw(s.v.([]byte))
		}
	}
	return e.B
}

var sentinels = []error{ErrTruncated, ErrOverflow, ErrTooLong, ErrNonCanonical, ErrInvalid, ErrTrailing}

func FuzzDecoder(f *testing.F) {
	f.Fuzz(func(t *testing.T, ops, data []byte) {
		trace, d := runOps(ops, data)
		if err := d.Err(); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(data) {
				t.Fatalf("error %v is not a DecodeError with an offset in [0, %d]", err, len(data))
			}
			known := false
			for _, s := range sentinels {
				known = known || errors.Is(err, s)
			}
			if !known || !strings.HasPrefix(err.Error(), "wire: ") {
				t.Fatalf("error %q is not one of the package's sentinels", err)
			}
			if d.Uvarint() != 0 || d.Varint() != 0 || d.Uint8() != 0 || d.Bool() || d.Bytes() != nil ||
				d.String() != "" || d.StringMax(9) != "" || d.NodeID() != 0 || d.OptNodeID() != 0 ||
				d.NodeIDs() != nil || d.Uvarints() != nil || d.Duration() != 0 || d.Fixed(0) != nil ||
				d.Remaining() != 0 {
				t.Fatal("a method returned a value after an error")
			}
			if d.Err() != err || d.Finish() != err {
				t.Fatalf("error %v changed to %v", err, d.Err())
			}
			return
		}
		consumed := d.Offset()
		if d.Remaining() != len(data)-consumed {
			t.Fatalf("Offset %d + Remaining %d != %d", consumed, d.Remaining(), len(data))
		}
		if err := d.Finish(); (err == nil) != (consumed == len(data)) || (err != nil && !errors.Is(err, ErrTrailing)) {
			t.Fatalf("Finish = %v with %d of %d bytes consumed", err, consumed, len(data))
		}
		// Decode → encode reproduces the consumed bytes exactly (canonical
		// encodings), and decoding those gives the same values.
		enc := encodeTrace(trace)
		if !bytes.Equal(enc, data[:consumed]) {
			t.Fatalf("re-encoding gives %x, input was %x", enc, data[:consumed])
		}
		again, d2 := runOps(ops, enc)
		if d2.Finish() != nil || !reflect.DeepEqual(again, trace) {
			t.Fatalf("second decode differs: %v", d2.Err())
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, n, err := DecodeFrame(data)
		if errors.Is(err, ErrShortFrame) {
			if n <= len(data) {
				t.Fatalf("ErrShortFrame asks for %d bytes with %d present", n, len(data))
			}
			return
		}
		if err != nil {
			if n != 0 || !(errors.Is(err, ErrMalformedFrame) || errors.Is(err, ErrFrameTooLarge)) {
				t.Fatalf("DecodeFrame = %d, %v", n, err)
			}
			return
		}
		if n > len(data) || n < LengthSize+MinFrameBody {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		enc := AppendFrame(nil, fr)
		if !bytes.Equal(enc, data[:n]) || EncodedSize(fr) != n {
			t.Fatalf("re-encoding gives %x, input was %x", enc, data[:n])
		}
		again, m, err := DecodeFrame(enc)
		if err != nil || m != n || !reflect.DeepEqual(again, fr) {
			t.Fatalf("second decode: %v, %d, %v", again, m, err)
		}
		// Every strict prefix of a frame is short, never malformed.
		for i := range n {
			if _, _, err := DecodeFrame(data[:i]); !errors.Is(err, ErrShortFrame) {
				t.Fatalf("prefix of %d bytes: %v, want ErrShortFrame", i, err)
			}
		}
	})
}

// FuzzHeaderFast checks the header's fast decoder against the full one:
// whatever it accepts, the full decoder decodes to the same frame, and it
// accepts nothing that the full decoder refuses.
func FuzzHeaderFast(f *testing.F) {
	f.Add([]byte{0x81, 0x02, 1, 2, 0, 'x'})
	f.Add([]byte{0x81, 0x02, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x81, 0x02, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02})
	f.Add([]byte{0x80, 0x00, 1, 2, 3})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0x10, 2, 3})
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, _, ok := decodeHeaderFast(body)
		full, err := decodeBodyFull(body)
		switch {
		case ok && err != nil:
			t.Fatalf("fast decoder accepts %x, full one says %v", body, err)
		case ok && !reflect.DeepEqual(fast, full):
			t.Fatalf("%x: fast decoder gives %+v, full one %+v", body, fast, full)
		}
	})
}

// FuzzUvarint8 checks the header's varint readers against binary.Uvarint
// and the canonical rule.
func FuzzUvarint8(f *testing.F) {
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x81, 0x00, 1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wn := binary.Uvarint(b)
		if wn > 1 && b[wn-1] == 0 {
			wn = 0 // not canonical
		}
		if wn <= 0 {
			want, wn = 0, 0
		}
		if u, n := uvarintSlow(b); u != want || n != wn {
			t.Fatalf("%x: uvarintSlow = %d, %d; want %d, %d", b, u, n, want, wn)
		}
		if u, n := uvarint8(b); n != 0 && (u != want || n != wn) {
			t.Fatalf("%x: uvarint8 = %d, %d; want %d, %d", b, u, n, want, wn)
		} else if n == 0 && len(b) >= 8 && wn > 0 && wn <= 8 {
			t.Fatalf("%x: uvarint8 declines a canonical varint of %d bytes", b, wn)
		}
		// The codec's reader, at every offset (its one-byte, 8-byte-load
		// and byte-by-byte cases): the same value and length, or an error.
		for off := range len(b) {
			want, wn := binary.Uvarint(b[off:])
			if wn > 1 && b[off+wn-1] == 0 || wn <= 0 {
				want, wn = 0, 0
			}
			d := NewDecoder(b)
			d.off = off
			u := d.Uvarint()
			switch {
			case wn == 0 && d.Err() == nil:
				t.Fatalf("%x at %d: Decoder.Uvarint = %d, want an error", b, off, u)
			case wn > 0 && (d.Err() != nil || u != want || d.off != off+wn):
				t.Fatalf("%x at %d: Decoder.Uvarint = %d (%v), ends at %d; want %d ending at %d", b, off, u, d.Err(), d.off, want, off+wn)
			}
		}
	})
}

// chunkReader returns data in chunks of at most size bytes.
type chunkReader struct {
	data []byte
	size int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.size)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// tryChunks is a chunkReader's view for TryReadFrame: every other Read
// has nothing at hand (ErrWouldBlock), as has every Read at the end.
type tryChunks struct {
	r    *chunkReader
	gaps int
}

func (t *tryChunks) Read(p []byte) (int, error) {
	if t.gaps++; t.gaps%2 == 0 || len(t.r.data) == 0 {
		return 0, ErrWouldBlock
	}
	return t.r.Read(p)
}

// readAllFramesTrying reads frames until an error as readAllFrames does
// with placing, but through TryReadFrame while it has frames whole at
// hand, taking a frame TryReadFrame leaves (at hand in part, large, or
// after the stream's end) with ReadFramePlaced, or every third time it
// would block.
func readAllFramesTrying(r *FrameReader, c *chunkReader) ([]Frame, error) {
	try := &tryChunks{r: c}
	var got []Frame
	for blocked := 0; ; {
		f, err := r.TryReadFrame(try, PlaceMin)
		if err == nil {
			f.Payload = bytes.Clone(f.Payload)
			got = append(got, f)
			continue
		}
		if err != ErrWouldBlock {
			return got, err
		}
		if blocked++; blocked%3 != 0 && len(c.data) > 0 {
			continue
		}
		more, err := readAllFramesOnce(r)
		got = append(got, more...)
		if err != nil {
			return got, err
		}
	}
}

// readAllFramesOnce reads one frame as readAllFrames does with placing.
func readAllFramesOnce(r *FrameReader) ([]Frame, error) {
	var dst []byte
	place := func(f Frame, n int) (int, []byte) {
		if n == 0 || f.Payload[0]%2 != 0 {
			return 0, nil
		}
		skip := min(int(f.Payload[0]%16), len(f.Payload))
		dst = make([]byte, n-skip)
		return skip, dst
	}
	f, placed, err := r.ReadFramePlaced(place)
	if err != nil {
		return nil, err
	}
	f.Payload = bytes.Clone(f.Payload)
	if placed {
		f.Payload = append(f.Payload, dst...)
	}
	return []Frame{f}, nil
}

// readAllFrames reads frames until an error; with placing, through
// ReadFramePlaced with a place function that takes every payload whose
// first byte is even into a buffer of its own, keeping a few of its first
// bytes in Payload, and the frames returned are put back together.
func readAllFrames(r *FrameReader, placing bool) ([]Frame, error) {
	var got []Frame
	for {
		var dst []byte
		place := func(f Frame, n int) (int, []byte) {
			if len(f.Payload) < min(n, 64) {
				panic(fmt.Sprintf("place given %d of %d payload bytes", len(f.Payload), n))
			}
			if n == 0 || f.Payload[0]%2 != 0 {
				return 0, nil
			}
			skip := min(int(f.Payload[0]%16), len(f.Payload))
			dst = make([]byte, n-skip)
			return skip, dst
		}
		var fr Frame
		var err error
		placed := false
		if placing {
			fr, placed, err = r.ReadFramePlaced(place)
		} else {
			fr, err = r.ReadFrame()
		}
		if err != nil {
			return got, err
		}
		fr.Payload = bytes.Clone(fr.Payload)
		if placed {
			fr.Payload = append(fr.Payload, dst...)
		}
		got = append(got, fr)
	}
}

func FuzzFrameReader(f *testing.F) {
	big := AppendFrame(nil, Frame{Kind: kindFD1, Src: 1, Dst: 2, Payload: bytes.Repeat([]byte{2, 7, 1}, PlaceMin/3+5)})
	f.Add(big, uint8(63), uint16(0))
	f.Add(append(append(big[:len(big):len(big)], big...), big[:PlaceMin/2]...), uint8(17), uint16(0))
	odd := AppendFrame(nil, Frame{Kind: kindFD1, Src: 1, Dst: 2, Payload: bytes.Repeat([]byte{3}, PlaceMin)})
	f.Add(append(odd, big...), uint8(5), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, limit uint16) {
		lim := int(limit)
		if lim == 0 {
			lim = DefaultMaxFrameSize
		}
		lim = max(lim, MinFrameBody)
		// Reference: DecodeFrameMax over the whole input.
		var want []Frame
		var wantErr error
		consumed := 0
		for {
			fr, n, err := DecodeFrameMax(data[consumed:], lim)
			if errors.Is(err, ErrShortFrame) {
				if consumed == len(data) {
					wantErr = io.EOF
				} else {
					wantErr = io.ErrUnexpectedEOF
				}
				break
			}
			if err != nil {
				wantErr = err
				break
			}
			want = append(want, fr)
			consumed += n
		}
		var got []Frame
		for _, mode := range []string{"plain", "placing", "trying"} {
			cr := &chunkReader{data: data, size: int(chunk)%64 + 1}
			r := NewFrameReader(cr)
			r.SetMaxFrameSize(int(limit))
			if limit == 0 {
				r.SetMaxFrameSize(DefaultMaxFrameSize)
			}
			var err error
			if mode == "trying" {
				got, err = readAllFramesTrying(r, cr)
			} else {
				got, err = readAllFrames(r, mode == "placing")
			}
			if len(got) != len(want) {
				t.Fatalf("reader (%s) got %d frames, DecodeFrame %d", mode, len(got), len(want))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("frame %d: reader (%s) %v, DecodeFrame %v", i, mode, got[i], want[i])
				}
			}
			if err.Error() != wantErr.Error() {
				t.Fatalf("reader (%s) ends with %v, DecodeFrame with %v", mode, err, wantErr)
			}
			if _, again := r.ReadFrame(); again != err {
				t.Fatalf("error not sticky: %v then %v", err, again)
			}
		}
		// Writing the frames back gives the bytes they were read from.
		var out bytes.Buffer
		w := NewFrameWriter(&out, int(chunk)+1)
		w.SetMaxFrameSize(lim)
		for _, fr := range got {
			if err := w.WriteFrame(fr); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil || !bytes.Equal(out.Bytes(), data[:consumed]) {
			t.Fatalf("FrameWriter wrote %x, frames were read from %x (%v)", out.Bytes(), data[:consumed], err)
		}
	})
}

func FuzzHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHello(data)
		if err != nil {
			var ve *VersionError
			if errors.As(err, &ve) && (h.Version == Version || ve.Remote != h.Version) {
				t.Fatalf("version error %v for version %d", err, h.Version)
			}
			if h.JobID != "" || h.Node != 0 || h.Nonce != ([NonceSize]byte{}) {
				t.Fatalf("a failed decode returned fields: %+v", h)
			}
			return
		}
		var e Encoder
		h.MarshalWire(&e)
		if !bytes.Equal(e.B, data) {
			t.Fatalf("re-encoding gives %x, input was %x", e.B, data)
		}
		if again, err := DecodeHello(e.B); err != nil || again != h {
			t.Fatalf("second decode: %+v, %v", again, err)
		}
		if len(h.JobID) > MaxJobIDLen || h.Node == core.None {
			t.Fatalf("decoded an invalid hello %+v", h)
		}
		if err := CheckHello(h, h); !errors.Is(err, ErrAuth) {
			t.Fatalf("a hello checked against itself: %v, want ErrAuth", err)
		}
	})
}

// fuzzHellos makes the two Hellos of a connection from fuzzed inputs.
func fuzzHellos(job string, nodeA, nodeB uint32, nonces []byte) (ha, hb Hello) {
	if len(job) > MaxJobIDLen {
		job = job[:MaxJobIDLen]
	}
	ha = Hello{Version: Version, JobID: job, Node: core.NodeID(nodeA)}
	hb = Hello{Version: Version, JobID: job, Node: core.NodeID(nodeB)}
	copy(ha.Nonce[:], nonces)
	if len(nonces) > NonceSize {
		copy(hb.Nonce[:], nonces[NonceSize:])
	}
	return ha, hb
}

func FuzzProof(f *testing.F) {
	f.Fuzz(func(t *testing.T, secret []byte, job string, nodeA, nodeB uint32, nonces, proof []byte) {
		ha, hb := fuzzHellos(job, nodeA, nodeB, nonces)
		fromA := ComputeProof(secret, ha, hb, true)
		fromB := ComputeProof(secret, hb, ha, false)
		if !VerifyProof(secret, hb, ha, false, fromA) || !VerifyProof(secret, ha, hb, true, fromB) {
			t.Fatal("a correct proof does not verify")
		}
		if VerifyProof(secret, ha, hb, true, fromA) || VerifyProof(secret, hb, ha, false, fromB) {
			t.Fatal("a proof verifies when reflected to its sender")
		}
		p, err := DecodeProof(proof)
		if (err == nil) != (len(proof) == ProofSize) {
			t.Fatalf("DecodeProof of %d bytes: %v", len(proof), err)
		}
		if err != nil {
			return
		}
		var e Encoder
		p.MarshalWire(&e)
		if !bytes.Equal(e.B, proof) {
			t.Fatalf("re-encoding gives %x, input was %x", e.B, proof)
		}
		if VerifyProof(secret, hb, ha, false, p.MAC) != (p.MAC == fromA) {
			t.Fatal("VerifyProof disagrees with equality to the correct proof")
		}
		if err := CheckProof(secret, hb, ha, false, p); (err == nil) != (p.MAC == fromA) || (err != nil && !errors.Is(err, ErrAuth)) {
			t.Fatalf("CheckProof: %v", err)
		}
	})
}

// handshakeSecret and handshakeLocal are the fixed side of FuzzHandshake:
// the job secret and our Hello, so that the seed corpus can hold streams
// whose proofs verify.
var (
	handshakeSecret = []byte("fuzz-job-secret-0123456789")
	handshakeLocal  = hello(1, 0x40)
)

// readHandshake reads what the peer sends in a handshake, from stream, as
// transport/tcp does: at most MaxHandshakeFrameSize per frame, a Hello
// checked against local, then a Proof (or, for the initiator, a goodbye
// carrying the acceptor's proof: a refusal after the proof) that must
// verify. The frames it read are returned for the callers' checks.
func readHandshake(stream []byte, secret []byte, local Hello, initiator bool) (peer Hello, refused bool, frames []Frame, err error) {
	fr := NewFrameReader(bytes.NewReader(stream))
	fr.SetMaxFrameSize(MaxHandshakeFrameSize)
	f, err := fr.ReadFrame()
	if err != nil {
		return Hello{}, false, nil, err
	}
	frames = append(frames, f)
	if f.Kind != KindHello {
		return Hello{}, false, frames, ErrNotHello
	}
	if peer, err = DecodeHello(f.Payload); err == nil {
		err = CheckHello(local, peer)
	}
	if err != nil {
		return Hello{}, false, frames, err
	}
	if f, err = fr.ReadFrame(); err != nil {
		return Hello{}, false, frames, err
	}
	frames = append(frames, f)
	refused = f.Kind == KindGoodbye && initiator
	if f.Kind != KindProof && !refused {
		return Hello{}, false, frames, ErrAuth
	}
	p, err := DecodeProof(f.Payload)
	if err == nil {
		err = CheckProof(secret, local, peer, initiator, p)
	}
	if err != nil {
		return Hello{}, false, frames, err
	}
	return peer, refused, frames, nil
}

// handshakeStream is what a peer that knows secret sends to local: its
// Hello (node, nonce byte) and its proof, in a goodbye if goodbye.
func handshakeStream(secret []byte, local Hello, node core.NodeID, nonce byte, localInitiated, goodbye bool) []byte {
	peer := hello(node, nonce)
	p := Proof{MAC: ComputeProof(secret, peer, local, !localInitiated)}
	var e Encoder
	peer.MarshalWire(&e)
	b := AppendFrame(nil, Frame{Kind: KindHello, Src: node, Dst: core.None, Payload: e.B})
	kind := KindProof
	if goodbye {
		kind = KindGoodbye
	}
	e.B = nil
	p.MarshalWire(&e)
	return AppendFrame(b, Frame{Kind: kind, Src: node, Dst: local.Node, Payload: e.B})
}

// FuzzHandshake feeds arbitrary byte streams to the reading side of the
// handshake (the acceptor's, or the initiator's with the goodbye that
// refuses after the proof): no stream panics, no frame of it beyond
// MaxHandshakeFrameSize is read, and a stream is accepted only with a
// Hello that passes CheckHello and the proof the job secret gives for
// both Hellos and the direction; a goodbye is taken for a refusal only by
// the initiator. An accepted stream cut short of its proof is refused.
func FuzzHandshake(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream []byte, initiator bool) {
		peer, refused, frames, err := readHandshake(stream, handshakeSecret, handshakeLocal, initiator)
		for _, fr := range frames {
			if n := EncodedSize(fr) - LengthSize; n > MaxHandshakeFrameSize {
				t.Fatalf("read a frame of %d bytes, over the handshake limit %d", n, MaxHandshakeFrameSize)
			}
		}
		if err != nil {
			if peer != (Hello{}) || refused {
				t.Fatalf("a failed handshake returned %+v, refused %v", peer, refused)
			}
			return
		}
		if len(frames) != 2 {
			t.Fatalf("accepted after %d frames", len(frames))
		}
		if err := CheckHello(handshakeLocal, peer); err != nil {
			t.Fatalf("accepted a hello that does not check: %v", err)
		}
		if refused && (!initiator || frames[1].Kind != KindGoodbye) {
			t.Fatalf("a refusal read by the acceptor (%v) or from a %v frame", !initiator, frames[1].Kind)
		}
		want := ComputeProof(handshakeSecret, peer, handshakeLocal, !initiator)
		if !bytes.Equal(frames[1].Payload, want[:]) {
			t.Fatalf("accepted proof %x, want %x", frames[1].Payload, want)
		}
		end := EncodedSize(frames[0]) + EncodedSize(frames[1])
		if _, _, _, err := readHandshake(stream[:end-1], handshakeSecret, handshakeLocal, initiator); err == nil {
			t.Fatal("the stream cut one byte short of its proof is accepted")
		}
	})
}

// TestHandshakeSeeds checks that FuzzHandshake's seeds reach both ends
// of its checks: the streams of a peer that knows the secret are accepted
// (the goodbye as a refusal), the others are not.
func TestHandshakeSeeds(t *testing.T) {
	accepted := map[string]bool{"valid-acceptor": false, "valid-initiator": false, "refusal": true}
	for name, vals := range seedCorpus()["FuzzHandshake"] {
		_, refused, _, err := readHandshake(vals[0].([]byte), handshakeSecret, handshakeLocal, vals[1].(bool))
		wantRefused, ok := accepted[name]
		if (err == nil) != ok || refused != wantRefused {
			t.Errorf("%s: err %v, refused %v; want accepted %v, refused %v", name, err, refused, ok, wantRefused)
		}
	}
}

// allTypes is a message with one field of every encoded type, for
// FuzzCodecUnmarshal.
type allTypes struct {
	U    uint64
	I    int64
	B    uint8
	T    bool
	Raw  []byte
	S    string
	N    core.NodeID
	Opt  core.NodeID
	IDs  []core.NodeID
	Us   []uint64
	D    time.Duration
	Tail [3]byte
}

var allTypesKind = core.MakeKind(core.ProtoTest, 7)

func (allTypes) Kind() core.Kind { return allTypesKind }

func (m allTypes) MarshalWire(e *Encoder) {
	e.Uvarint(m.U)
	e.Varint(m.I)
	e.Uint8(m.B)
	e.Bool(m.T)
	e.Bytes(m.Raw)
	e.String(m.S)
	e.NodeID(m.N)
	e.OptNodeID(m.Opt)
	e.NodeIDs(m.IDs)
	e.Uvarints(m.Us)
	e.Duration(m.D)
	e.Raw(m.Tail[:])
}

func decodeAllTypes(d *Decoder) (core.Msg, error) {
	m := allTypes{U: d.Uvarint(), I: d.Varint(), B: d.Uint8(), T: d.Bool(), Raw: d.Bytes(), S: d.String(),
		N: d.NodeID(), Opt: d.OptNodeID(), IDs: d.NodeIDs(), Us: d.Uvarints(), D: d.Duration()}
	copy(m.Tail[:], d.Fixed(3))
	return m, d.Err()
}

func fuzzCodec() *Codec {
	c := NewCodec()
	if err := RegisterHandshake(c); err != nil {
		panic(err)
	}
	for _, r := range []struct {
		k    core.Kind
		name string
		f    DecodeFunc
	}{{testKind, "test.Msg", decodeTestMsg}, {allTypesKind, "test.AllTypes", decodeAllTypes}} {
		if err := c.Register(r.k, r.name, r.f); err != nil {
			panic(err)
		}
	}
	return c
}

func FuzzCodecUnmarshal(f *testing.F) {
	c := fuzzCodec()
	f.Fuzz(func(t *testing.T, kind uint16, payload []byte) {
		m, err := c.Unmarshal(core.Kind(kind), payload)
		if err != nil {
			if m != nil {
				t.Fatalf("Unmarshal returned %v with error %v", m, err)
			}
			if !strings.HasPrefix(err.Error(), "wire: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
			return
		}
		if m.Kind() != core.Kind(kind) {
			t.Fatalf("decoded kind %v from kind %v", m.Kind(), core.Kind(kind))
		}
		enc, err := c.Marshal(m)
		if err != nil || !bytes.Equal(enc, payload) {
			t.Fatalf("re-encoding gives %x (%v), input was %x", enc, err, payload)
		}
		if Size(m.(Message)) != len(payload) {
			t.Fatalf("Size = %d, payload is %d bytes", Size(m.(Message)), len(payload))
		}
		again, err := c.Unmarshal(core.Kind(kind), enc)
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("second decode: %v, %v", again, err)
		}
	})
}

// seedCorpus returns the generated seed inputs of every fuzz target, by
// target and entry name.
func seedCorpus() map[string]map[string][]any {
	frame := AppendFrame(nil, Frame{Kind: kindFD1, Src: 1, Dst: 2, Epoch: 3, Payload: []byte("payload")})
	frameNone := AppendFrame(nil, Frame{Kind: KindHello, Src: 7, Dst: core.None, Payload: []byte{1}})
	frameMax := AppendFrame(nil, Frame{Kind: math.MaxUint16, Src: core.None, Dst: core.None - 1, Epoch: math.MaxUint64})
	_, stream := randomFrames(11, 8)
	helloBytes := func(h Hello) []byte {
		var e Encoder
		h.MarshalWire(&e)
		return e.B
	}
	h := hello(3, 1)
	h.JobID = strings.Repeat("j", MaxJobIDLen)
	longHello := helloBytes(h)
	h.JobID += "j"
	tooLongHello := helloBytes(h)
	h = hello(3, 1)
	h.Version = 9
	futureHello := append(helloBytes(h), "future fields"...)
	var all Encoder
	allTypes{U: math.MaxUint64, I: math.MinInt64, B: 255, T: true, Raw: []byte("raw"), S: "s", N: core.None - 1,
		Opt: core.None, IDs: []core.NodeID{0, 1, 1 << 20}, Us: []uint64{math.MaxUint64}, D: -time.Hour,
		Tail: [3]byte{1, 2, 3}}.MarshalWire(&all)
	var small Encoder
	testMsg{N: 300, IDs: []core.NodeID{5}}.MarshalWire(&small)
	b := func(s ...byte) []byte { return s }
	allOps := b(opUvarint, opVarint, opUint8, opBool, opBytes, opString, opStringMax, 3, opNodeID, opOptNodeID,
		opOptNodeID, opNodeIDs, opUvarints, opDuration, opFixed, 2)
	allOpsData := encodeTrace([]step{{opUvarint, 0, uint64(math.MaxUint64)}, {opVarint, 0, int64(-3)},
		{opUint8, 0, uint8(7)}, {opBool, 0, true}, {opBytes, 0, []byte("xy")}, {opString, 0, "str"},
		{opStringMax, 3, "abc"}, {opNodeID, 0, core.NodeID(1 << 31)}, {opOptNodeID, 0, core.None},
		{opOptNodeID, 0, core.NodeID(0)}, {opNodeIDs, 0, []core.NodeID{1, 2}}, {opUvarints, 0, []uint64{0, 1 << 63}},
		{opDuration, 0, -time.Millisecond}, {opFixed, 2, []byte{8, 9}}})
	huge := b(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
	valid := handshakeStream(handshakeSecret, handshakeLocal, 2, 9, false, false)
	helloFrame := valid[:len(valid)-EncodedSize(Frame{Kind: KindProof, Src: 2, Dst: handshakeLocal.Node, Payload: make([]byte, ProofSize)})]
	then := func(f Frame) []byte { return append(bytes.Clone(helloFrame), AppendFrame(nil, f)...) }
	return map[string]map[string][]any{
		"FuzzDecoder": {
			"all-ops":          {allOps, allOpsData},
			"uvarint-max":      {b(0), huge},
			"uvarint-11":       {b(0), append(huge[:9:9], 0x80, 0x01)},
			"padded-varint":    {b(1), b(0x80, 0x00)},
			"bool-2":           {b(3), b(2)},
			"bytes-huge-len":   {b(4), huge},
			"string-limit":     {b(6, 2), b(3, 'a', 'b', 'c')},
			"node-none":        {b(7), b(0xff, 0xff, 0xff, 0xff, 0x0f)},
			"node-over-32":     {b(7), b(0x80, 0x80, 0x80, 0x80, 0x10)},
			"nodeids-count":    {b(9), b(0xff, 0xff, 0x03, 1, 2)},
			"uvarints-cut":     {b(10), b(3, 1, 0x80)},
			"fixed-short":      {b(12, 39), b(1, 2)},
			"trailing":         {b(2), b(1, 2, 3)},
			"opt-node":         {b(8, 8), b(0, 0x80, 0x80, 0x80, 0x80, 0x10)},
			"duration-min":     {b(11), huge},
			"empty":            {b(), b()},
			"many-ops-no-data": {bytes.Repeat(b(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), 4), b()},
		},
		"FuzzDecodeFrame": {
			"valid":          {frame},
			"valid-none-dst": {frameNone},
			"valid-max":      {frameMax},
			"two-frames":     {stream},
			"truncated":      {frame[:len(frame)-1]},
			"prefix-only":    {frame[:3]},
			"huge-length":    {b(0xff, 0xff, 0xff, 0xff, 1, 1, 1, 1)},
			"over-16MiB":     {b(0x01, 0x00, 0x00, 0x01, 1, 1, 1, 1)},
			"zero-length":    {b(0, 0, 0, 0)},
			"kind-zero":      {b(0, 0, 0, 4, 0, 1, 1, 1)},
			"kind-17-bits":   {b(0, 0, 0, 6, 0x80, 0x80, 0x04, 1, 1, 1)},
			"header-overrun": {b(0, 0, 0, 4, 1, 1, 1, 0x80, 0x01)},
			"http":           {[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		},
		"FuzzFrameReader": {
			"stream-1":       {stream, uint8(0), uint16(0)},
			"stream-7":       {stream, uint8(6), uint16(0)},
			"stream-limit":   {stream, uint8(63), uint16(40)},
			"cut-stream":     {stream[:len(stream)-3], uint8(2), uint16(0)},
			"huge-length":    {append(bytes.Clone(frame), 0xff, 0xff, 0xff, 0xff), uint8(3), uint16(0)},
			"malformed-2nd":  {append(bytes.Clone(frame), 0, 0, 0, 4, 0, 1, 1, 1), uint8(5), uint16(0)},
			"empty":          {b(), uint8(0), uint16(0)},
			"limit-below-4":  {frame, uint8(1), uint16(2)},
			"handshake-size": {append(bytes.Clone(frameNone), frame...), uint8(9), uint16(MaxHandshakeFrameSize)},
		},
		"FuzzHello": {
			"valid":        {helloBytes(hello(3, 1))},
			"longest-job":  {longHello},
			"job-too-long": {tooLongHello},
			"future":       {futureHello},
			"node-none":    {helloBytes(Hello{Version: Version, Node: core.None})},
			"cut":          {helloBytes(hello(3, 1))[:20]},
			"magic-only":   {[]byte("cohort")},
			"not-cohort":   {[]byte("SSH-2.0-OpenSSH_9.6\r\n")},
		},
		"FuzzProof": {
			"typical":   {[]byte("secret"), "job-42", uint32(1), uint32(2), bytes.Repeat(b(7), 32), bytes.Repeat(b(1), 32)},
			"empty":     {b(), "", uint32(0), uint32(0), b(), b()},
			"short":     {[]byte("s"), "j", uint32(math.MaxUint32), uint32(5), b(1), b(1, 2, 3)},
			"same-node": {[]byte("s"), "j", uint32(4), uint32(4), bytes.Repeat(b(9), 16), bytes.Repeat(b(0), 33)},
		},
		"FuzzHandshake": {
			"valid-acceptor":      {valid, false},
			"valid-initiator":     {handshakeStream(handshakeSecret, handshakeLocal, 2, 9, true, false), true},
			"refusal":             {handshakeStream(handshakeSecret, handshakeLocal, 2, 9, true, true), true},
			"goodbye-to-acceptor": {handshakeStream(handshakeSecret, handshakeLocal, 2, 9, false, true), false},
			"wrong-direction":     {handshakeStream(handshakeSecret, handshakeLocal, 2, 9, true, false), false},
			"other-secret":        {handshakeStream([]byte("another secret, same length!"), handshakeLocal, 2, 9, false, false), false},
			"reflected":           {handshakeStream(handshakeSecret, handshakeLocal, 1, 0x40, false, false), false},
			"claims-none":         {handshakeStream(handshakeSecret, handshakeLocal, core.None, 9, false, false), false},
			"hello-only":          {helloFrame, false},
			"garbage-proof":       {then(Frame{Kind: KindProof, Src: 2, Dst: 1, Payload: bytes.Repeat(b(0xee), ProofSize)}), false},
			"empty-goodbye":       {then(Frame{Kind: KindGoodbye, Src: 2, Dst: 1}), true},
			"over-limit":          {b(0, 0, 1, 1, 1, 1, 1), false},
			"http":                {[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false},
		},
		"FuzzCodecUnmarshal": {
			"all-types":       {uint16(allTypesKind), all.B},
			"test-msg":        {uint16(testKind), small.B},
			"hello":           {uint16(KindHello), helloBytes(hello(3, 1))},
			"proof":           {uint16(KindProof), bytes.Repeat(b(0xab), 32)},
			"unknown":         {uint16(0x0909), b(1, 2)},
			"trailing":        {uint16(testKind), append(bytes.Clone(small.B), 0)},
			"truncated":       {uint16(allTypesKind), all.B[:len(all.B)-1]},
			"huge-count":      {uint16(testKind), b(1, 0xff, 0xff, 0xff, 0xff, 0x0f)},
			"proof-too-short": {uint16(KindProof), b(1)},
		},
	}
}

// corpusFile renders values in the "go test fuzz v1" format.
func corpusFile(vals []any) []byte {
	var buf bytes.Buffer
	buf.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&buf, "[]byte(%q)\n", v)
		case string:
			fmt.Fprintf(&buf, "string(%q)\n", v)
		default:
			fmt.Fprintf(&buf, "%T(%v)\n", v, v)
		}
	}
	return buf.Bytes()
}

// TestSeedCorpus checks that the committed generated seed files match the
// seeds above (run with -update-corpus to rewrite them), so the corpus
// follows the encoding when it changes.
func TestSeedCorpus(t *testing.T) {
	for target, entries := range seedCorpus() {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, vals := range entries {
			path := filepath.Join(dir, "seed-"+name)
			want := corpusFile(vals)
			if *updateCorpus {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v (run with -update-corpus)", err)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is stale; run go test ./wire -run TestSeedCorpus -update-corpus", path)
			}
		}
	}
}

func FuzzRing(f *testing.F) {
	for _, r := range []Ring{{}, {Size: 256 << 10}, {Answer: true}, {Answer: true, Size: 1}} {
		var e Encoder
		r.MarshalWire(&e)
		f.Add(e.B)
	}
	f.Add([]byte{3, 0})
	f.Add([]byte{2, 2})
	f.Add([]byte{1, 0x80, 0x80, 0x80, 0x80, 0x08})
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := DecodeRing(payload)
		if err != nil {
			return
		}
		if !r.Answer && r.Size > MaxRingSize || r.Answer && r.Size > 1 {
			t.Fatalf("decoded an invalid ring message %+v", r)
		}
		var e Encoder
		r.MarshalWire(&e)
		back, err := DecodeRing(e.B)
		if err != nil || back != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, back, err)
		}
	})
}

func FuzzRingTag(f *testing.F) {
	f.Add([]byte("secret"), "job", uint32(1), uint32(2), []byte("0123456789abcdef0123456789abcdef"), []byte("tag"))
	f.Add([]byte{}, "", uint32(0), uint32(0), []byte{}, bytes.Repeat([]byte{0}, ProofSize))
	f.Fuzz(func(t *testing.T, secret []byte, job string, nodeA, nodeB uint32, nonces, tag []byte) {
		ha, hb := fuzzHellos(job, nodeA, nodeB, nonces)
		// a initiates; each side checks the ring the other writes.
		ofA := RingTag(secret, ha, hb, true, true)
		ofB := RingTag(secret, hb, ha, false, true)
		if !CheckRingTag(secret, hb, ha, false, false, ofA[:]) || !CheckRingTag(secret, ha, hb, true, false, ofB[:]) {
			t.Fatal("a ring's tag does not check at its reader")
		}
		if ofA == ofB {
			t.Fatal("both directions' rings have the same tag")
		}
		if ofA == ComputeProof(secret, ha, hb, true) {
			t.Fatal("a ring's tag equals a proof")
		}
		other := RingTag(append(slices.Clone(secret), 'x'), ha, hb, true, true)
		if CheckRingTag(secret, hb, ha, false, false, other[:]) {
			t.Fatal("a ring tagged with another secret checks")
		}
		// A ring's header is the peer's to write: any tag, of any
		// length, checks only if it is the right one.
		if CheckRingTag(secret, hb, ha, false, false, tag) != bytes.Equal(tag, ofA[:]) {
			t.Fatalf("tag %x checks %v", tag, !bytes.Equal(tag, ofA[:]))
		}
	})
}

// FuzzHeadCache checks HeadCache against DecodeFrameMax: the frames of a
// stream, decoded one after the other through one cache, decode as they
// do alone (the same frame, length and error class), whatever the headers
// the cache saw before; DecodeHit, given a whole frame, decodes it so too
// or declines, and takes a frame just decoded.
func FuzzHeadCache(f *testing.F) {
	a := AppendFrame(nil, Frame{Kind: 0x0401, Src: 1, Dst: 2, Epoch: 7 << 32, Payload: []byte("ab")})
	b := AppendFrame(nil, Frame{Kind: 0x0401, Src: 1, Dst: 2, Epoch: 7 << 32})
	c := AppendFrame(nil, Frame{Kind: 0x0402, Src: 1, Dst: 2, Epoch: 8 << 32, Payload: []byte("x")})
	f.Add(slices.Concat(a, a, b, c, a), 1<<20)
	f.Add(slices.Concat(a, []byte{0, 0, 0, 6}, a[LengthSize:LengthSize+6]), 1<<20)
	f.Add(slices.Concat(a, a[:len(a)-1]), 3)
	// Headers of nine bytes that differ in their last, before payloads
	// long enough for DecodeHit's comparison of words.
	long := []byte("a payload of several words")
	d7 := AppendFrame(nil, Frame{Kind: 0x0401, Src: 1, Dst: 2, Epoch: 7 << 32, Payload: long})
	d6 := AppendFrame(nil, Frame{Kind: 0x0401, Src: 1, Dst: 2, Epoch: 6 << 32, Payload: long})
	f.Add(slices.Concat(d7, d6, d7, d7), 1<<20)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		var cache HeadCache
		for len(data) > 0 {
			want, wn, werr := DecodeFrameMax(data, max)
			var hit Frame
			if werr == nil && cache.DecodeHit(&hit, data[:wn]) && !reflect.DeepEqual(hit, want) {
				t.Fatalf("%x: decoded by the cache's hit %+v, alone %+v", data, hit, want)
			}
			var got Frame
			gn, gerr := cache.Decode(&got, data, max)
			if gn != wn || (gerr == nil) != (werr == nil) || errors.Is(gerr, ErrShortFrame) != errors.Is(werr, ErrShortFrame) {
				t.Fatalf("%x: cached decode %d, %v; alone %d, %v", data, gn, gerr, wn, werr)
			}
			if werr != nil {
				// Skip a byte and go on: the next frames meet a cache
				// that saw this stream's earlier headers.
				data = data[1:]
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%x: cached decode %+v, alone %+v", data, got, want)
			}
			if hit = (Frame{}); !cache.DecodeHit(&hit, data[:wn]) || !reflect.DeepEqual(hit, want) {
				t.Fatalf("%x: the cache's hit of the frame it just decoded: %+v, want %+v", data, hit, want)
			}
			data = data[wn:]
		}
	})
}
