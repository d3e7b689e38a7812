package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/cohort-mp/cohort/core"
)

// Frame layout constants.
const (
	// LengthSize is the size of a frame's length prefix: a big-endian
	// uint32 (see the package doc for why it is fixed rather than a varint).
	LengthSize = 4
	// MinFrameBody is the smallest length a frame can declare: four
	// one-byte varints (kind, source, destination, epoch) and no payload.
	MinFrameBody = 4
	// MaxHeaderSize is the largest header: kind (3 bytes), source and
	// destination (5 each) and epoch (10) as varints.
	MaxHeaderSize = 3 + 5 + 5 + 10
	// DefaultMaxFrameSize is the default limit, in bytes, on a frame's
	// declared length (header and payload, not counting the prefix).
	DefaultMaxFrameSize = 16 << 20
)

// Frame errors. [ErrShortFrame] means "read more bytes"; every other frame
// error means the stream is corrupt or hostile and the connection must be
// closed, because the frame boundaries can no longer be trusted.
var (
	// ErrShortFrame: the buffer holds only part of a frame.
	ErrShortFrame = errors.New("wire: incomplete frame")
	// ErrFrameTooLarge: a frame's declared length exceeds the limit.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrMalformedFrame: the length or header is invalid.
	ErrMalformedFrame = errors.New("wire: malformed frame")
	// ErrWouldBlock: what a reader given to [FrameReader.TryReadFrame]
	// returns when it has no more bytes at hand, and what TryReadFrame
	// returns when the next frame is not whole at hand (or is large).
	ErrWouldBlock = errors.New("wire: no whole frame at hand")
)

// Frame is one message on a stream: who sends it to whom, under which view
// epoch, and the encoded message. Kind 0 (core/0) is reserved and never
// valid, so a zeroed buffer is not a frame. Source and Dst are node ids up to
// 2^32-1; core.None is allowed (the handshake frames are sent before the
// acceptor knows its peer) and it is the host's job to check that, once a
// connection is authenticated, Src is the peer and Dst is itself.
type Frame struct {
	Kind  core.Kind
	Src   core.NodeID
	Dst   core.NodeID
	Epoch uint64 // view epoch the sender was in; 0 before any view
	// Payload is the message encoding. Frames returned by DecodeFrame and
	// FrameReader alias their input buffer: see their docs for how long.
	Payload []byte
}

// String formats the header (not the payload) for logs.
func (f Frame) String() string {
	return fmt.Sprintf("%v %v→%v epoch %d, %d bytes", f.Kind, f.Src, f.Dst, f.Epoch, len(f.Payload))
}

// headerSize returns the encoded size of f's header.
func headerSize(f *Frame) int {
	return uvarintSize(uint64(f.Kind)) + uvarintSize(uint64(f.Src)) + uvarintSize(uint64(f.Dst)) + uvarintSize(f.Epoch)
}

func uvarintSize(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// EncodedSize returns the number of bytes AppendFrame appends for f.
func EncodedSize(f Frame) int { return LengthSize + headerSize(&f) + len(f.Payload) }

// appendHeader appends the length prefix for a body of bodyLen bytes and
// f's header.
func appendHeader(b []byte, f *Frame, bodyLen int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(bodyLen))
	if f.Src < 0x80 && f.Dst < 0x80 && f.Kind >= 0x80 && f.Kind < 0x4000 {
		// The common header: a kind of two bytes (a protocol's kinds
		// start at 256) and node ids of one.
		b = append(b, byte(f.Kind)|0x80, byte(f.Kind>>7), byte(f.Src), byte(f.Dst))
	} else {
		b = binary.AppendUvarint(b, uint64(f.Kind))
		b = binary.AppendUvarint(b, uint64(f.Src))
		b = binary.AppendUvarint(b, uint64(f.Dst))
	}
	return binary.AppendUvarint(b, f.Epoch)
}

// AppendFrame appends f, length prefix included, to b and returns the
// extended slice; with a b of sufficient capacity it does not allocate.
// AppendFrame does not enforce a frame size limit (the writer and the reader
// do); it panics if the frame cannot be represented at all (a body of 4 GiB
// or more), which is a programming error.
func AppendFrame(b []byte, f Frame) []byte { return f.AppendHead(b, 0) }

// AppendHead appends f, length prefix included, to b as if its payload
// were f.Payload followed by extra more bytes, which the caller writes
// right after (a vectored write of the head and the caller's buffer, with
// no copy of the latter). It panics as AppendFrame does. (A method on a
// pointer: a send's path passes the frame down several calls, and a
// Frame with a slice and extra arguments no longer fits the registers.)
func (f *Frame) AppendHead(b []byte, extra int) []byte {
	// The header first, then its length in front of it: the varints are
	// measured by writing them.
	start := len(b)
	b = appendHeader(b, f, 0)
	body := len(b) - start - LengthSize + len(f.Payload) + extra
	if uint64(body) > math.MaxUint32 || extra < 0 {
		panic(fmt.Sprintf("wire: frame body of %d bytes does not fit the 32-bit length", body))
	}
	binary.BigEndian.PutUint32(b[start:], uint32(body))
	return append(b, f.Payload...)
}

// PadMax is the largest padding AppendPad is asked for: a residue modulo
// 64 plus room for the smallest pad frame.
const PadMax = 64 + padMin

// padMin is the largest smallest pad frame: a length prefix and a header
// of one-byte kind and epoch and five-byte node ids.
const padMin = LengthSize + 1 + 5 + 5 + 1

// PadFor returns how many bytes of padding (0, or a whole pad frame of
// at most PadMax bytes) to write before head, a frame's beginning, so that
// the payload bytes that follow head start on the stream at an offset
// congruent to addr modulo 64, addr being their address in memory; the
// stream offset is counted from the start of the write that carries pad,
// head and the payload. Copies between user memory and the kernel's
// buffers run several times faster when both sides share their alignment
// (measured on loopback: a 1 MiB frame after a 16-byte head from a
// 64-byte aligned buffer took 2–3× as long as after a 64-byte head).
func PadFor(headLen int, addr uintptr) int {
	p := int((addr - uintptr(headLen)) % 64)
	if p != 0 && p < padMin {
		p += 64
	}
	return p
}

// AppendPad appends a KindPad frame of exactly n bytes, length prefix
// included, from src to dst; n is PadFor's result, 0 (nothing appended)
// or between padMin and PadMax.
func AppendPad(b []byte, src, dst core.NodeID, n int) []byte {
	if n == 0 {
		return b
	}
	f := Frame{Kind: KindPad, Src: src, Dst: dst}
	zeros := n - LengthSize - headerSize(&f)
	if zeros < 0 || n > PadMax {
		panic(fmt.Sprintf("wire: a pad frame of %d bytes", n))
	}
	b = appendHeader(b, &f, n-LengthSize)
	for range zeros {
		b = append(b, 0)
	}
	return b
}

// DecodeFrame decodes the frame at the start of b, with the default size
// limit. It returns the frame (whose Payload aliases b) and the number of
// bytes it took. If b holds only part of a frame the error is
// [ErrShortFrame] and the int is the total buffer length needed to make
// progress (LengthSize while the prefix is incomplete, then the whole
// frame's size): read more and call again. Any other error is fatal to the
// stream: [ErrFrameTooLarge] or [ErrMalformedFrame], the latter wrapping the
// [*DecodeError] that says which header field is wrong.
func DecodeFrame(b []byte) (Frame, int, error) {
	return decodeFrame(b, DefaultMaxFrameSize)
}

// HeadCache decodes frames as DecodeFrameMax does, remembering the last
// header it decoded. A frame whose body starts with the same bytes has
// the same kind, source, destination and epoch (the header's varints are
// canonical and end themselves), so it is decoded by one comparison:
// between two peers exchanging messages of one kind in one view, as a
// connection's reader mostly sees, every frame but the first. The zero
// value is ready to use; a HeadCache is for one goroutine at a time.
type HeadCache struct {
	n    int // the length of head (0: nothing cached)
	head [MaxHeaderSize]byte
	f    Frame // head decoded, without a payload
}

// Decode is DecodeFrameMax through the cache, into *f (a zero Frame on
// error). The frame goes by pointer: a Frame returned with two more
// results no longer fits the registers, and its copies from the stack
// would wait for the stores that made it.
func (c *HeadCache) Decode(f *Frame, b []byte, max int) (int, error) {
	body, total, err := frameBody(b, max)
	if err != nil {
		*f = Frame{}
		return total, err
	}
	if n := c.n; n > 0 && len(body) >= n && string(body[:n]) == string(c.head[:n]) {
		*f = c.f
		if n < len(body) {
			f.Payload = body[n:len(body):len(body)]
		}
		return total, nil
	}
	d, n, err := decodeBody(body)
	if err != nil {
		*f = Frame{}
		return 0, err
	}
	if n > 0 && n <= len(c.head) {
		c.n = copy(c.head[:], body[:n])
		c.f = d
		c.f.Payload = nil
	}
	*f = d
	return total, nil
}

// DecodeFrameMax is DecodeFrame with a limit of max bytes on the declared
// length.
func DecodeFrameMax(b []byte, max int) (Frame, int, error) {
	return decodeFrame(b, max)
}

// frameLength checks the length prefix at the start of b (which must hold
// LengthSize bytes) and returns the frame's total size.
func frameLength(b []byte, max int) (int, error) {
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(max) || n < MinFrameBody {
		return 0, badLength(n, max)
	}
	return LengthSize + int(n), nil
}

// badLength is frameLength's error, built out of line: the common path
// stays short.
func badLength(n uint32, max int) error {
	if uint64(n) > uint64(max) {
		return fmt.Errorf("%w: declared length %d, limit %d", ErrFrameTooLarge, n, max)
	}
	return fmt.Errorf("%w: declared length %d is shorter than any header", ErrMalformedFrame, n)
}

// frameBody returns the body of the frame at the start of b (what follows
// its length prefix) and the frame's size, or, when b holds no whole
// frame, what decodeFrame returns: the size to read (ErrShortFrame) or
// 0 and the length prefix's error.
func frameBody(b []byte, max int) ([]byte, int, error) {
	if len(b) < LengthSize {
		return nil, LengthSize, ErrShortFrame
	}
	total, err := frameLength(b, max)
	if err != nil {
		return nil, 0, err
	}
	if len(b) < total {
		return nil, total, ErrShortFrame
	}
	return b[LengthSize:total], total, nil
}

func decodeFrame(b []byte, max int) (Frame, int, error) {
	body, total, err := frameBody(b, max)
	if err != nil {
		return Frame{}, total, err
	}
	f, _, err := decodeBody(body)
	if err != nil {
		return Frame{}, 0, err
	}
	return f, total, nil
}

// decodeBody decodes a frame's header and payload (the bytes after the
// length prefix). Errors carry offsets relative to the start of the body.
// n is the header's length when the fast decoder took it, 0 when the
// full one did.
func decodeBody(body []byte) (f Frame, n int, err error) {
	if f, n, ok := decodeHeaderFast(body); ok {
		return f, n, nil
	}
	f, err = decodeBodyFull(body)
	return f, 0, err
}

// decodeBodyFull is decodeBody by the Decoder, which says what is wrong.
func decodeBodyFull(body []byte) (Frame, error) {
	d := Decoder{b: body}
	var f Frame
	k := d.uvarint("frame kind")
	if d.err == nil && k > math.MaxUint16 {
		d.fail(0, "frame kind", fmt.Sprintf("%d", k), ErrOverflow)
	}
	if d.err == nil && k == 0 {
		d.fail(0, "frame kind", "kind 0 is reserved", ErrInvalid)
	}
	f.Kind = core.Kind(k)
	f.Src = d.frameNode("frame source")
	f.Dst = d.frameNode("frame destination")
	f.Epoch = d.uvarint("frame epoch")
	if d.err != nil {
		return Frame{}, fmt.Errorf("%w: %w", ErrMalformedFrame, d.err)
	}
	f.Payload = d.take(len(body) - d.off)
	return f, nil
}

// decodeHeaderFast is decodeBody for a well-formed header, without the
// Decoder's error bookkeeping (every frame pays for its header, and most
// are small). It reports false for anything the full decoder must judge
// (which then also finds the error to report): a truncated, too long or
// non-canonical varint, kind 0 or above 16 bits, a node id above 32 bits.
// n is the header's length.
func decodeHeaderFast(body []byte) (f Frame, n int, ok bool) {
	var v [4]uint64
	off := 0
	for k := range v {
		b := body[off:]
		var u uint64
		var n int
		switch {
		case len(b) >= 1 && b[0] < 0x80: // node ids, most kinds
			u, n = uint64(b[0]), 1
		case len(b) >= 2 && b[1] < 0x80 && b[1] != 0: // kinds of two bytes
			u, n = uint64(b[0]&0x7f)|uint64(b[1])<<7, 2
		default: // epochs: a view counter above 32 bits
			if u, n = uvarint8(b); n == 0 {
				if u, n = uvarintSlow(b); n == 0 {
					return Frame{}, 0, false
				}
			}
		}
		v[k], off = u, off+n
	}
	if v[0] == 0 || v[0] > math.MaxUint16 || v[1] > math.MaxUint32 || v[2] > math.MaxUint32 {
		return Frame{}, 0, false
	}
	f = Frame{Kind: core.Kind(v[0]), Src: core.NodeID(v[1]), Dst: core.NodeID(v[2]), Epoch: v[3]}
	if off < len(body) {
		f.Payload = body[off:len(body):len(body)]
	}
	return f, off, true
}

// uvarint8 reads the canonical varint at the start of b when it is at
// most 8 bytes long and b holds 8 bytes: one load, the end found by the
// first byte without its high bit, the 7-bit groups gathered by shifts.
// n is 0 otherwise (uvarintSlow then decides).
func uvarint8(b []byte) (u uint64, n int) {
	if len(b) < 8 {
		return 0, 0
	}
	x := binary.LittleEndian.Uint64(b)
	stop := ^x & 0x8080808080808080
	if stop == 0 {
		return 0, 0
	}
	n = bits.TrailingZeros64(stop)/8 + 1
	if n > 1 && b[n-1] == 0 {
		return 0, 0 // not canonical: a shorter encoding exists
	}
	x &= ^uint64(0) >> (64 - 8*n)
	u = x&0x7f | x>>1&(0x7f<<7) | x>>2&(0x7f<<14) | x>>3&(0x7f<<21) |
		x>>4&(0x7f<<28) | x>>5&(0x7f<<35) | x>>6&(0x7f<<42) | x>>7&(0x7f<<49)
	return u, n
}

// uvarintSlow reads the canonical varint at the start of b a byte at a
// time; n is 0 if there is none (truncated, over 64 bits, not canonical).
func uvarintSlow(b []byte) (u uint64, n int) {
	for shift := uint(0); n < len(b) && shift <= 63; shift += 7 {
		c := b[n]
		n++
		if c < 0x80 {
			if c == 0 && shift > 0 || shift == 63 && c > 1 {
				return 0, 0
			}
			return u | uint64(c)<<shift, n
		}
		u |= uint64(c&0x7f) << shift
	}
	return 0, 0
}

// frameNode reads a header node id: any uint32, core.None included.
func (d *Decoder) frameNode(what string) core.NodeID {
	off := d.off
	u := d.uvarint(what)
	if d.err == nil && u > math.MaxUint32 {
		d.fail(off, what, fmt.Sprintf("%d", u), ErrOverflow)
	}
	return core.NodeID(u)
}

// FrameReader reads frames from a byte stream. It reads in large chunks
// into one buffer that it reuses, so several small frames cost one Read, and
// it never allocates for a frame whose declared length is over its limit.
// It is not safe for concurrent use; the host runs one reader goroutine per
// connection.
type FrameReader struct {
	r          io.Reader
	buf        []byte
	start, end int // unread bytes are buf[start:end]
	max        int
	grow       int // the buffer's size for the next refill (initialBufferSize doubling up to DefaultReadBufferSize)
	err        error
}

// DefaultReadBufferSize is the buffer a busy FrameReader reads into, in
// bytes; it grows beyond it to fit the largest frame read. A reader starts
// with initialBufferSize and doubles up to it when a read fills its buffer
// (a stream with data waiting), so that a quiet connection holds little.
const DefaultReadBufferSize = 64 << 10

// initialBufferSize is the first buffer of a FrameReader or FrameWriter.
const initialBufferSize = 4 << 10

// NewFrameReader returns a reader of frames from r with the default
// limit ([DefaultMaxFrameSize]).
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: r, max: DefaultMaxFrameSize, grow: initialBufferSize}
}

// SetMaxFrameSize sets the limit, in bytes, on a frame's declared length
// (header and payload). A host sets a small limit until the handshake is
// done, then raises it. Values below [MinFrameBody] are raised to it.
func (fr *FrameReader) SetMaxFrameSize(n int) {
	fr.max = max(n, MinFrameBody)
}

// MaxFrameSize returns the current limit.
func (fr *FrameReader) MaxFrameSize() int { return fr.max }

// SetReader makes fr read the rest of the stream from r (the same stream,
// read another way): bytes already buffered are returned first.
func (fr *FrameReader) SetReader(r io.Reader) { fr.r = r }

// Buffered returns the number of bytes read from the stream but not yet
// returned as frames.
func (fr *FrameReader) Buffered() int { return fr.end - fr.start }

// TakeBuffered returns a copy of the bytes read from the stream but not
// yet returned as frames, and forgets them: a caller that reads the rest
// of the stream another way (the records that follow a handshake) hands
// them to that reader.
func (fr *FrameReader) TakeBuffered() []byte {
	b := append([]byte(nil), fr.buf[fr.start:fr.end]...)
	fr.start, fr.end = 0, 0
	return b
}

// Err returns the error that stopped the reader (sticky, see ReadFrame),
// or nil.
func (fr *FrameReader) Err() error { return fr.err }

// ReadFrame returns the next frame. Its Payload aliases the reader's buffer
// and is valid only until the next call to ReadFrame: a caller that keeps it
// (or a message decoded from it that aliases it) must copy it.
//
// At a clean end of stream between frames it returns io.EOF; an end of
// stream inside a frame is io.ErrUnexpectedEOF. A frame over the limit is
// [ErrFrameTooLarge] and a bad header [ErrMalformedFrame]. Errors are
// sticky: once ReadFrame has failed it keeps returning the same error, and
// the connection should be closed.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	if fr.err != nil {
		return Frame{}, fr.err
	}
	f, err := fr.readFrame()
	if err != nil {
		fr.err = err
	}
	return f, err
}

// TryReadFrame is ReadFrame for a caller that must not wait: it reads
// from r, which returns ErrWouldBlock when it has no byte at hand (instead
// of waiting), rather than from the stream's own reader. It returns the
// next frame if it is smaller than limit bytes (length prefix included)
// and r yields it whole; otherwise ErrWouldBlock, and what was read stays
// buffered for the next call of either method, so the two can alternate
// on one stream. Any other error is sticky, as for ReadFrame. r must read
// the same stream as the reader's own.
func (fr *FrameReader) TryReadFrame(r io.Reader, limit int) (Frame, error) {
	if fr.err != nil {
		return Frame{}, fr.err
	}
	own := fr.r
	fr.r = r
	f, err := fr.readFrameUnder(limit)
	fr.r = own
	if err != nil && err != ErrWouldBlock {
		fr.err = err
	}
	return f, err
}

func (fr *FrameReader) readFrame() (Frame, error) { return fr.readFrameUnder(0) }

// readFrameUnder reads the next frame; with a limit > 0, a frame of at
// least limit bytes is left unread (ErrWouldBlock).
func (fr *FrameReader) readFrameUnder(limit int) (Frame, error) {
	if err := fr.fill(LengthSize); err != nil {
		if err == io.ErrUnexpectedEOF && fr.start == fr.end {
			return Frame{}, io.EOF
		}
		return Frame{}, err
	}
	total, err := frameLength(fr.buf[fr.start:fr.end], fr.max)
	if err != nil {
		return Frame{}, err
	}
	if limit > 0 && total >= limit {
		return Frame{}, ErrWouldBlock
	}
	if err := fr.fill(total); err != nil {
		return Frame{}, err
	}
	f, _, err := decodeBody(fr.buf[fr.start+LengthSize : fr.start+total])
	if err != nil {
		return Frame{}, err
	}
	fr.start += total
	if fr.start == fr.end {
		fr.start, fr.end = 0, 0
	}
	return f, nil
}

// PlaceMin is the smallest frame (length prefix included) that
// [FrameReader.ReadFramePlaced] offers to its place function: below it, a
// copy out of the reader's buffer costs less than the call.
const PlaceMin = 16 << 10

// placePeek is how much of a large frame ReadFramePlaced reads before it
// asks where the payload goes: the header and the first bytes of the
// payload (a protocol's own header, such as comm's context and tag).
const placePeek = 128

// A PlaceFunc chooses where the payload of a large frame goes. It is given
// the frame with Payload holding the payload's first bytes (at least
// min(n, 64) of them, more if already read) and n, the payload's whole
// length. It returns skip, how many of the first bytes it wants in
// Payload as usual, and dst, of exactly n−skip bytes, where the rest of the
// payload is to be read; or a nil dst to take the frame as ReadFrame
// would.
type PlaceFunc func(f Frame, n int) (skip int, dst []byte)

// ReadFramePlaced is ReadFrame, except that a frame of at least
// [PlaceMin] bytes is first offered to place; if place gives a
// destination, the payload after its first skip bytes is read straight
// from the stream into it (what the reader had buffered is copied), so a
// large message lands in its final buffer without a second copy and
// without growing the reader's buffer. The frame returned then has
// Payload = the first skip bytes (valid until the next read), and placed
// is true. If the stream fails in the middle of a placed payload, the
// frame is returned with placed true and the error (dst holds part of the
// payload); the caller must treat the frame as lost. A place function
// that returns a destination of the wrong length is a programming error
// reported as an error, and the stream is then unusable.
func (fr *FrameReader) ReadFramePlaced(place PlaceFunc) (f Frame, placed bool, err error) {
	if fr.err != nil {
		return Frame{}, false, fr.err
	}
	f, placed, err = fr.readFramePlaced(place)
	if err != nil {
		fr.err = err
	}
	return f, placed, err
}

func (fr *FrameReader) readFramePlaced(place PlaceFunc) (Frame, bool, error) {
	if place == nil {
		f, err := fr.readFrame()
		return f, false, err
	}
	if err := fr.fill(LengthSize); err != nil {
		if err == io.ErrUnexpectedEOF && fr.start == fr.end {
			return Frame{}, false, io.EOF
		}
		return Frame{}, false, err
	}
	total, err := frameLength(fr.buf[fr.start:fr.end], fr.max)
	if err != nil {
		return Frame{}, false, err
	}
	if total < PlaceMin {
		f, err := fr.readFrame()
		return f, false, err
	}
	if err := fr.fill(min(total, LengthSize+placePeek)); err != nil {
		return Frame{}, false, err
	}
	avail := min(fr.end, fr.start+total) // this frame's bytes in the buffer
	f, _, err := decodeBody(fr.buf[fr.start+LengthSize : avail])
	if err != nil {
		// Read it whole and fail as ReadFrame does (a stream that ends
		// first is cut off, not malformed).
		f, err := fr.readFrame()
		return f, false, err
	}
	head := f.Payload
	n := total - (avail - fr.start) + len(head) // the payload's whole length
	skip, dst := place(f, n)
	if dst == nil {
		f, err := fr.readFrame()
		return f, false, err
	}
	if skip < 0 || skip > len(head) || len(dst) != n-skip {
		return Frame{}, false, fmt.Errorf("wire: place gave skip %d and %d bytes for a payload of %d with %d at hand", skip, len(dst), n, len(head))
	}
	f.Payload = head[:skip:skip]
	got := copy(dst, head[skip:])
	fr.start = avail
	if fr.start == fr.end {
		fr.start, fr.end = 0, 0
	}
	_, err = readAtLeast(fr.r, dst[got:], len(dst)-got)
	return f, true, err
}

// maxEmptyReads is how many consecutive (0, nil) results from the
// underlying reader are tolerated before reporting io.ErrNoProgress, as
// bufio does.
const maxEmptyReads = 100

// fill makes at least n bytes available in buf[start:end], reading as much
// as the stream offers. n is at most the limit plus the prefix, so the
// buffer never grows past that.
func (fr *FrameReader) fill(n int) error {
	if fr.end-fr.start >= n {
		return nil
	}
	// The buffer holds at least the default size (or a whole frame at the
	// limit, if smaller: a handshake-sized limit keeps it small) and grows
	// to fit the frame being read, doubling up to the limit so that a run of
	// growing frames does not reallocate each time.
	if want := max(n, min(fr.grow, fr.max+LengthSize)); len(fr.buf) < want {
		size := max(want, min(2*len(fr.buf), fr.max+LengthSize))
		nb := make([]byte, size)
		fr.end = copy(nb, fr.buf[fr.start:fr.end])
		fr.start = 0
		fr.buf = nb
	} else if len(fr.buf)-fr.start < n {
		fr.end = copy(fr.buf, fr.buf[fr.start:fr.end])
		fr.start = 0
	}
	m, err := readAtLeast(fr.r, fr.buf[fr.end:], n-(fr.end-fr.start))
	fr.end += m
	if fr.end == len(fr.buf) && fr.grow < DefaultReadBufferSize {
		fr.grow *= 2 // a read filled the buffer: more may be waiting
	}
	return err
}

// readAtLeast reads from r into p until it holds at least min bytes, as
// much as r offers, and returns how many it read. An end of stream before
// min is io.ErrUnexpectedEOF; maxEmptyReads reads in a row of nothing are
// io.ErrNoProgress; a count r should not return is an error.
func readAtLeast(r io.Reader, p []byte, min int) (int, error) {
	got, empty := 0, 0
	for got < min {
		m, err := r.Read(p[got:])
		if m < 0 || m > len(p)-got {
			return got, fmt.Errorf("wire: reader returned an invalid count %d", m)
		}
		got += m
		if got >= min {
			return got, nil
		}
		if err != nil {
			if err == io.EOF {
				return got, io.ErrUnexpectedEOF
			}
			return got, err
		}
		if m == 0 {
			if empty++; empty >= maxEmptyReads {
				return got, io.ErrNoProgress
			}
		} else {
			empty = 0
		}
	}
	return got, nil
}

// DefaultWriteBufferSize is the default coalescing buffer of a FrameWriter,
// in bytes.
const DefaultWriteBufferSize = 64 << 10

// FrameWriter coalesces frames into a buffer and writes the buffer to the
// stream when it fills or when Flush is called, so a burst of small frames
// costs one Write (one system call, few packets with TCP_NODELAY). A frame
// whose payload alone is at least the buffer size is written straight from
// the caller's slice after the buffered bytes, without being copied.
//
// The host's writer goroutine calls WriteFrame for each queued frame and
// Flush when its queue is empty. A FrameWriter is not safe for concurrent
// use. Write errors are sticky.
type FrameWriter struct {
	w    io.Writer
	buf  []byte
	size int
	max  int
	enc  Encoder
	err  error
}

// VectorWriter is an io.Writer that can also write two slices, one after
// the other, with one call (a socket's writev). A FrameWriter to one
// writes a large part of WriteFrameParts with the bytes buffered before
// it that way.
type VectorWriter interface {
	io.Writer
	// WriteVectored writes a, then b; n counts the bytes of both
	// written.
	WriteVectored(a, b []byte) (n int, err error)
}

// NewFrameWriter returns a writer to w whose buffer holds size bytes
// ([DefaultWriteBufferSize] if size ≤ 0) and whose frame limit is
// [DefaultMaxFrameSize].
func NewFrameWriter(w io.Writer, size int) *FrameWriter {
	if size <= 0 {
		size = DefaultWriteBufferSize
	}
	// The buffer starts small and grows (by append) to size as bursts
	// need it: a process with connections to hundreds of peers, most of
	// them quiet, must not hold size bytes for each.
	return &FrameWriter{w: w, buf: make([]byte, 0, min(size, initialBufferSize)), size: size, max: DefaultMaxFrameSize}
}

// SetMaxFrameSize sets the limit on the declared length of frames written;
// larger ones are refused with [ErrFrameTooLarge] (and nothing is written).
func (fw *FrameWriter) SetMaxFrameSize(n int) { fw.max = n }

// Buffered returns the number of bytes waiting for Flush.
func (fw *FrameWriter) Buffered() int { return len(fw.buf) }

// Err returns the sticky write error, or nil.
func (fw *FrameWriter) Err() error { return fw.err }

// WriteFrame queues f, writing the buffer out if it is full. f.Payload is
// copied (or written) before WriteFrame returns, so the caller may reuse it.
func (fw *FrameWriter) WriteFrame(f Frame) error {
	if fw.err != nil {
		return fw.err
	}
	body := headerSize(&f) + len(f.Payload)
	if body > fw.max {
		return fmt.Errorf("%w: %v has a body of %d bytes, limit %d", ErrFrameTooLarge, f.Kind, body, fw.max)
	}
	if len(f.Payload) >= fw.size {
		fw.buf = appendHeader(fw.buf, &f, body)
		if err := fw.flush(); err != nil {
			return err
		}
		return fw.write(f.Payload)
	}
	if len(fw.buf)+LengthSize+body > fw.size {
		if err := fw.flush(); err != nil {
			return err
		}
	}
	fw.buf = appendHeader(fw.buf, &f, body)
	fw.buf = append(fw.buf, f.Payload...)
	return nil
}

// WriteFrameParts is WriteFrame for the frame whose payload is f.Payload
// followed by parts: a part of the buffer's size or more is written from
// where it is, not copied into the buffer first, with what the buffer
// holds before it (the frame's header at least) in one vectored write if
// the destination is a [VectorWriter] (one write after the other
// otherwise).
func (fw *FrameWriter) WriteFrameParts(f Frame, parts ...[]byte) error {
	if fw.err != nil {
		return fw.err
	}
	body := headerSize(&f) + len(f.Payload)
	for _, p := range parts {
		body += len(p)
	}
	if body > fw.max {
		return fmt.Errorf("%w: %v has a body of %d bytes, limit %d", ErrFrameTooLarge, f.Kind, body, fw.max)
	}
	if body < fw.size && len(fw.buf)+LengthSize+body > fw.size {
		if err := fw.flush(); err != nil {
			return err
		}
	}
	fw.buf = appendHeader(fw.buf, &f, body)
	for i := -1; i < len(parts); i++ {
		p := f.Payload
		if i >= 0 {
			p = parts[i]
		}
		switch {
		case len(p) >= fw.size:
			if err := fw.writeAfter(p); err != nil {
				return err
			}
		case len(fw.buf)+len(p) > fw.size:
			if err := fw.flush(); err != nil {
				return err
			}
			fallthrough
		default:
			fw.buf = append(fw.buf, p...)
		}
	}
	return nil
}

// WriteMessage queues a frame with f's header and m's encoding as payload
// (f.Kind and f.Payload are ignored: the kind is m.Kind()). m is encoded
// straight into the buffer, with no intermediate slice.
func (fw *FrameWriter) WriteMessage(f Frame, m Message) error {
	if fw.err != nil {
		return fw.err
	}
	f.Kind = m.Kind()
	f.Payload = nil
	start := len(fw.buf)
	fw.buf = appendHeader(fw.buf, &f, 0)
	fw.enc.B = fw.buf
	m.MarshalWire(&fw.enc)
	fw.buf, fw.enc.B = fw.enc.B, nil
	body := len(fw.buf) - start - LengthSize
	if body > fw.max || uint64(body) > math.MaxUint32 {
		fw.buf = fw.buf[:start]
		return fmt.Errorf("%w: %v has a body of %d bytes, limit %d", ErrFrameTooLarge, f.Kind, body, fw.max)
	}
	binary.BigEndian.PutUint32(fw.buf[start:], uint32(body))
	if len(fw.buf) >= fw.size {
		return fw.flush()
	}
	return nil
}

// Flush writes the buffered frames.
func (fw *FrameWriter) Flush() error {
	if fw.err != nil {
		return fw.err
	}
	return fw.flush()
}

func (fw *FrameWriter) flush() error {
	if len(fw.buf) == 0 {
		return nil
	}
	err := fw.write(fw.buf)
	fw.buf = fw.buf[:0]
	if cap(fw.buf) > 4*fw.size {
		// A large message was encoded in place; do not keep its memory.
		fw.buf = make([]byte, 0, fw.size)
	}
	return err
}

// writeAfter writes the buffer, then p, and empties the buffer.
func (fw *FrameWriter) writeAfter(p []byte) error {
	vw, ok := fw.w.(VectorWriter)
	if len(fw.buf) == 0 || !ok {
		if err := fw.flush(); err != nil {
			return err
		}
		return fw.write(p)
	}
	want := len(fw.buf) + len(p)
	n, err := vw.WriteVectored(fw.buf, p)
	fw.buf = fw.buf[:0]
	if err == nil && n != want {
		err = io.ErrShortWrite
	}
	if err != nil {
		fw.err = fmt.Errorf("wire: writing frames: %w", err)
	}
	return fw.err
}

func (fw *FrameWriter) write(b []byte) error {
	n, err := fw.w.Write(b)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		fw.err = fmt.Errorf("wire: writing frames: %w", err)
	}
	return fw.err
}
