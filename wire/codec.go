package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Decoding errors. A [Decoder] reports them wrapped in a [*DecodeError] that
// carries the byte offset; test with errors.Is.
var (
	// ErrTruncated: the input ends inside a value.
	ErrTruncated = errors.New("wire: truncated input")
	// ErrOverflow: a varint does not fit 64 bits, or a value does not fit
	// its Go type (a node id above 2^32-1, a uint8 field above 255).
	ErrOverflow = errors.New("wire: value overflows its type")
	// ErrTooLong: a length or element count is larger than the bytes that
	// remain (so it cannot be honest), or larger than a documented limit.
	ErrTooLong = errors.New("wire: length too long")
	// ErrNonCanonical: a varint is encoded with more bytes than needed.
	// Every value has exactly one encoding, so decode→encode reproduces the
	// input byte for byte and an encoding cannot be altered without changing
	// the value.
	ErrNonCanonical = errors.New("wire: non-canonical varint")
	// ErrInvalid: a value outside its domain (a bool byte other than 0 or 1,
	// the reserved node id core.None).
	ErrInvalid = errors.New("wire: invalid value")
	// ErrTrailing: bytes remain after the message was decoded.
	ErrTrailing = errors.New("wire: trailing bytes")
)

// Codec errors.
var (
	// ErrUnknownKind: no decoder is registered for the kind.
	ErrUnknownKind = errors.New("wire: unknown message kind")
	// ErrDuplicateKind: Register was called twice for one kind.
	ErrDuplicateKind = errors.New("wire: kind registered twice")
	// ErrNotMessage: Marshal was given a core.Msg that does not implement
	// [Message].
	ErrNotMessage = errors.New("wire: message cannot be encoded")
	// ErrKindMismatch: a registered decoder returned a message of another
	// kind, or no message at all.
	ErrKindMismatch = errors.New("wire: decoder returned the wrong kind")
)

// DecodeError is the error a [Decoder] records: which sentinel (Err), at
// which byte offset of the decoder's input, decoding what.
type DecodeError struct {
	Offset int    // byte offset in the decoder's input where the value starts
	What   string // what was being decoded ("uvarint", "bytes length", ...)
	Detail string // optional specifics (declared length, remaining bytes)
	Err    error  // one of the sentinel errors of this package, or the caller's
}

// Error formats the sentinel, the field and the offset.
func (e *DecodeError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%v: %s at offset %d (%s)", e.Err, e.What, e.Offset, e.Detail)
	}
	return fmt.Sprintf("%v: %s at offset %d", e.Err, e.What, e.Offset)
}

// Unwrap returns the sentinel error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Encoder appends encoded values to B. Its methods never fail; the caller
// owns B and may reuse it (e.B = e.B[:0]) between messages.
//
// Integers are varints (encoding/binary, little-endian base 128; signed
// values zig-zag); byte strings and lists are a uvarint count followed by
// the elements.
type Encoder struct{ B []byte }

// Uvarint appends u as an unsigned varint (1 to 10 bytes).
func (e *Encoder) Uvarint(u uint64) { e.B = binary.AppendUvarint(e.B, u) }

// Varint appends i as a zig-zag signed varint (1 to 10 bytes).
func (e *Encoder) Varint(i int64) { e.B = binary.AppendVarint(e.B, i) }

// Uint8 appends one byte.
func (e *Encoder) Uint8(u uint8) { e.B = append(e.B, u) }

// Bool appends one byte, 1 for true and 0 for false.
func (e *Encoder) Bool(b bool) {
	var v byte
	if b {
		v = 1
	}
	e.B = append(e.B, v)
}

// Bytes appends the length of b as a uvarint, then b.
func (e *Encoder) Bytes(b []byte) {
	e.Uvarint(uint64(len(b)))
	e.B = append(e.B, b...)
}

// String appends the length of s as a uvarint, then s.
func (e *Encoder) String(s string) {
	e.Uvarint(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Raw appends b with no length: for fixed-size fields (a nonce) whose size
// both sides know. Decode with [Decoder.Fixed].
func (e *Encoder) Raw(b []byte) { e.B = append(e.B, b...) }

// NodeID appends id as a uvarint. id must not be core.None, which the
// decoder rejects; encode an optional node with [Encoder.OptNodeID].
func (e *Encoder) NodeID(id core.NodeID) { e.Uvarint(uint64(id)) }

// OptNodeID appends id, which may be core.None, as the uvarint 0 for None
// and id+1 otherwise.
func (e *Encoder) OptNodeID(id core.NodeID) {
	if id == core.None {
		e.Uvarint(0)
		return
	}
	e.Uvarint(uint64(id) + 1)
}

// NodeIDs appends the count of ids, then each id as by [Encoder.NodeID].
func (e *Encoder) NodeIDs(ids []core.NodeID) {
	e.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.Uvarint(uint64(id))
	}
}

// Uvarints appends the count of us, then each as a uvarint.
func (e *Encoder) Uvarints(us []uint64) {
	e.Uvarint(uint64(len(us)))
	for _, u := range us {
		e.Uvarint(u)
	}
}

// Duration appends d as a signed varint of nanoseconds.
func (e *Encoder) Duration(d time.Duration) { e.Varint(int64(d)) }

// Decoder reads values from a byte slice in the order an [Encoder] wrote
// them. Its error is sticky: after the first error every method returns the
// zero value and [Decoder.Err] reports that first error, so a message decoder
// reads all its fields and checks the error once at the end. No input makes
// a Decoder panic, and no length or count read from the input makes it
// allocate more than a small multiple of the input's size.
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a decoder reading b. Slices returned by
// [Decoder.Bytes] and [Decoder.Fixed] alias b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Reset makes d read b from the start with no error, so one Decoder can be
// reused without allocating.
func (d *Decoder) Reset(b []byte) { *d = Decoder{b: b} }

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns the number of bytes consumed so far.
func (d *Decoder) Offset() int { return d.off }

// Remaining returns the number of unread bytes (0 after an error).
func (d *Decoder) Remaining() int {
	if d.err != nil {
		return 0
	}
	return len(d.b) - d.off
}

// Finish returns Err, or an [ErrTrailing] error if bytes remain unread.
func (d *Decoder) Finish() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail(d.off, "end of message", fmt.Sprintf("%d bytes unread", len(d.b)-d.off), ErrTrailing)
	}
	return d.err
}

// Fail records err (if no error was recorded yet) at the current offset,
// wrapped in a [*DecodeError]: a message decoder uses it to reject a field
// value that decodes but is out of range, so that the sticky-error rules
// apply to its own checks too.
func (d *Decoder) Fail(what string, err error) {
	d.fail(d.off, what, "", err)
}

func (d *Decoder) fail(off int, what, detail string, err error) {
	if d.err == nil {
		d.err = &DecodeError{Offset: off, What: what, Detail: detail, Err: err}
	}
}

// uvarint reads a canonical uvarint; what names it in errors.
func (d *Decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	u, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		d.fail(d.off, what, "", ErrTruncated)
		return 0
	case n < 0:
		d.fail(d.off, what, "more than 64 bits", ErrOverflow)
		return 0
	case n > 1 && d.b[d.off+n-1] == 0:
		// A final group of zero bits means a shorter encoding exists.
		d.fail(d.off, what, "", ErrNonCanonical)
		return 0
	}
	d.off += n
	return u
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 { return d.uvarint("uvarint") }

// Varint reads a zig-zag signed varint.
func (d *Decoder) Varint() int64 {
	u := d.uvarint("varint")
	i := int64(u >> 1)
	if u&1 != 0 {
		i = ^i
	}
	return i
}

// Uint8 reads one byte.
func (d *Decoder) Uint8() uint8 {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(d.off, "uint8", "", ErrTruncated)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

// Bool reads one byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	off := d.off
	v := d.Uint8()
	if v > 1 {
		d.fail(off, "bool", fmt.Sprintf("byte %#x", v), ErrInvalid)
		return false
	}
	return v == 1
}

// length reads a count or length and checks that at least n*minSize bytes
// remain, so that no caller allocates for a length the input cannot back.
func (d *Decoder) length(what string, minSize int) int {
	off := d.off
	n := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	rem := uint64(len(d.b) - d.off)
	if n > rem/uint64(minSize) {
		d.fail(off, what, fmt.Sprintf("%d declared, %d bytes remain", n, rem), ErrTooLong)
		return 0
	}
	return int(n)
}

// take returns the next n bytes (n already checked) as a slice whose
// capacity ends at its length, so appending to it never overwrites the input.
func (d *Decoder) take(n int) []byte {
	if n == 0 {
		return nil
	}
	b := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// Bytes reads a length-prefixed byte string. The result aliases the input
// (no copy); it is nil when the length is 0.
func (d *Decoder) Bytes() []byte {
	n := d.length("bytes length", 1)
	if d.err != nil {
		return nil
	}
	return d.take(n)
}

// String reads a length-prefixed string (a copy). Note that this makes
// *Decoder look like a fmt.Stringer: formatting a Decoder with %v would
// consume a value.
func (d *Decoder) String() string {
	n := d.length("string length", 1)
	if d.err != nil {
		return ""
	}
	return string(d.take(n))
}

// StringMax reads a length-prefixed string of at most max bytes; a longer
// one is an [ErrTooLong] error.
func (d *Decoder) StringMax(max int) string {
	off := d.off
	n := d.length("string length", 1)
	if d.err != nil {
		return ""
	}
	if n > max {
		d.fail(off, "string length", fmt.Sprintf("%d bytes, limit %d", n, max), ErrTooLong)
		return ""
	}
	return string(d.take(n))
}

// Fixed reads exactly n bytes written by [Encoder.Raw]. The result aliases
// the input.
func (d *Decoder) Fixed(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail(d.off, "fixed bytes", fmt.Sprintf("%d wanted, %d remain", n, len(d.b)-d.off), ErrTruncated)
		return nil
	}
	return d.take(n)
}

// nodeID checks a decoded uvarint as a node id.
func (d *Decoder) nodeID(off int, u uint64) core.NodeID {
	if d.err != nil {
		return 0
	}
	if u > math.MaxUint32 {
		d.fail(off, "node id", fmt.Sprintf("%d", u), ErrOverflow)
		return 0
	}
	if core.NodeID(u) == core.None {
		d.fail(off, "node id", "core.None", ErrInvalid)
		return 0
	}
	return core.NodeID(u)
}

// NodeID reads a node id; a value above 2^32-1 is [ErrOverflow] and
// core.None is [ErrInvalid].
func (d *Decoder) NodeID() core.NodeID {
	off := d.off
	return d.nodeID(off, d.uvarint("node id"))
}

// OptNodeID reads a node id written by [Encoder.OptNodeID]; it may be
// core.None.
func (d *Decoder) OptNodeID() core.NodeID {
	off := d.off
	u := d.uvarint("optional node id")
	if d.err != nil || u == 0 {
		if d.err == nil {
			return core.None
		}
		return 0
	}
	return d.nodeID(off, u-1)
}

// Duration reads a signed varint of nanoseconds.
func (d *Decoder) Duration() time.Duration { return time.Duration(d.Varint()) }

// NodeIDs reads a count and that many node ids. The count is checked against
// the remaining bytes (each id takes at least one) before allocating. The
// result is nil when the count is 0.
func (d *Decoder) NodeIDs() []core.NodeID { return d.AppendNodeIDs(nil) }

// AppendNodeIDs is [Decoder.NodeIDs] appending to dst[:0], which it
// returns: a decoder that keeps a short list inside its message costs
// one allocation fewer. The result is nil when the count is 0 or on error.
func (d *Decoder) AppendNodeIDs(dst []core.NodeID) []core.NodeID {
	n := d.length("node id count", 1)
	if d.err != nil || n == 0 {
		return nil
	}
	ids := slices.Grow(dst[:0], n)[:n]
	for i := range ids {
		ids[i] = d.NodeID()
	}
	if d.err != nil {
		return nil
	}
	return ids
}

// Uvarints reads a count and that many uvarints, checked like
// [Decoder.NodeIDs]. The result is nil when the count is 0.
func (d *Decoder) Uvarints() []uint64 { return d.AppendUvarints(nil) }

// AppendUvarints is [Decoder.Uvarints] appending to dst[:0], like
// [Decoder.AppendNodeIDs].
func (d *Decoder) AppendUvarints(dst []uint64) []uint64 {
	n := d.length("uvarint count", 1)
	if d.err != nil || n == 0 {
		return nil
	}
	us := slices.Grow(dst[:0], n)[:n]
	for i := range us {
		us[i] = d.Uvarint()
	}
	if d.err != nil {
		return nil
	}
	return us
}

// Message is a [core.Msg] that knows its encoding. MarshalWire appends the
// message's fields (not its kind, which the frame carries) to e.
type Message interface {
	core.Msg
	MarshalWire(e *Encoder)
}

// DecodeFunc decodes the fields of one message kind. It reads with d and
// may return d.Err(); the [Codec] checks the sticky error and the trailing
// bytes afterwards anyway, so a DecodeFunc need not call Finish. It must
// not keep d: callers of [Codec.Decode] reuse decoders.
type DecodeFunc func(d *Decoder) (core.Msg, error)

// ReuseFunc decodes the fields of one message kind like a [DecodeFunc],
// into old when old is not nil: a message of that kind that its receiver
// handed back (see [Codec.Decode]), whose memory the function may
// overwrite and keep (its slices' capacity). It returns the message it
// filled. Its messages must never alias the payload (see
// [Codec.RegisterDetached]).
type ReuseFunc func(d *Decoder, old core.Msg) (core.Msg, error)

type codecEntry struct {
	name     string
	decode   DecodeFunc
	reuse    ReuseFunc
	detached bool
}

// Codec maps message kinds to their decoders. The host builds one
// explicitly at start-up, each protocol package registering its kinds
// (there is no global registry, so two hosts in one process, or a test, can
// hold different codecs). Register before use; after that a Codec is only
// read, so it may be shared by several goroutines of the host.
type Codec struct {
	// protos holds the entries by a kind's two bytes, protocol then
	// number: two indexations per message instead of a hash of the kind,
	// which every frame a host sends or receives looks up.
	protos [256]*[256]*codecEntry
	n      int // registered kinds
}

// NewCodec returns an empty codec.
func NewCodec() *Codec { return &Codec{} }

// entry returns kind k's entry, or nil if k is not registered.
func (c *Codec) entry(k core.Kind) *codecEntry {
	t := c.protos[k>>8]
	if t == nil {
		return nil
	}
	return t[k&0xff]
}

// Register adds the decoder of kind k, named name in errors and traces.
// Registering a kind twice is an [ErrDuplicateKind] error.
func (c *Codec) Register(k core.Kind, name string, f DecodeFunc) error {
	if f == nil {
		return fmt.Errorf("wire: nil decoder for kind %v (%s)", k, name)
	}
	if old := c.entry(k); old != nil {
		return fmt.Errorf("%w: %v is %q, cannot also be %q", ErrDuplicateKind, k, old.name, name)
	}
	t := c.protos[k>>8]
	if t == nil {
		t = new([256]*codecEntry)
		c.protos[k>>8] = t
	}
	t[k&0xff] = &codecEntry{name: name, decode: f}
	c.n++
	return nil
}

// RegisterDetached is Register for a decoder whose messages never alias
// the payload: they copy every byte they keep (no [Decoder.Bytes] or
// [Decoder.Fixed] slice), so that the caller of Unmarshal may reuse the
// payload as soon as it returns (see [Codec.Detached]).
func (c *Codec) RegisterDetached(k core.Kind, name string, f DecodeFunc) error {
	if err := c.Register(k, name, f); err != nil {
		return err
	}
	c.entry(k).detached = true
	return nil
}

// RegisterReusable registers a detached decoder (see RegisterDetached)
// that can decode into a message its receiver handed back (see
// [Codec.Decode]; the host keeps such messages): a kind received every
// period then costs no allocation once a message has gone round.
func (c *Codec) RegisterReusable(k core.Kind, name string, f ReuseFunc) error {
	if f == nil {
		return fmt.Errorf("wire: nil decoder for kind %v (%s)", k, name)
	}
	if err := c.Register(k, name, func(d *Decoder) (core.Msg, error) { return f(d, nil) }); err != nil {
		return err
	}
	e := c.entry(k)
	e.reuse, e.detached = f, true
	return nil
}

// Detached reports whether the messages of kind k never alias the payload
// they were decoded from: the kind was registered with RegisterDetached or
// RegisterReusable.
func (c *Codec) Detached(k core.Kind) bool {
	e := c.entry(k)
	return e != nil && e.detached
}

// Reusable reports whether kind k was registered with RegisterReusable:
// [Codec.Decode] can decode it into a message its receiver handed back.
func (c *Codec) Reusable(k core.Kind) bool {
	e := c.entry(k)
	return e != nil && e.reuse != nil
}

// Kinds returns the registered kinds in increasing order.
func (c *Codec) Kinds() []core.Kind {
	ks := make([]core.Kind, 0, c.n)
	for p, t := range c.protos {
		if t == nil {
			continue
		}
		for n, e := range t {
			if e != nil {
				ks = append(ks, core.Kind(p)<<8|core.Kind(n))
			}
		}
	}
	return ks
}

// Name returns the name k was registered with, or k's numeric form.
func (c *Codec) Name(k core.Kind) string {
	if e := c.entry(k); e != nil {
		return e.name
	}
	return k.String()
}

// Marshal returns the payload encoding of m (a new slice). It fails if m
// does not implement [Message] or its kind is not registered (a peer built
// from the same code could not decode it).
func (c *Codec) Marshal(m core.Msg) ([]byte, error) {
	var e Encoder
	if err := c.Encode(&e, m); err != nil {
		return nil, err
	}
	return e.B, nil
}

// Encode appends the payload encoding of m to e.B, checked as by Marshal.
// An Encoder reused across calls (e.B = e.B[:0]) makes it allocation-free.
func (c *Codec) Encode(e *Encoder, m core.Msg) error {
	wm, ok := m.(Message)
	if !ok {
		return fmt.Errorf("%w: %T (kind %v) has no MarshalWire", ErrNotMessage, m, kindOf(m))
	}
	if c.entry(wm.Kind()) == nil {
		return fmt.Errorf("%w: %v (%T)", ErrUnknownKind, wm.Kind(), m)
	}
	wm.MarshalWire(e)
	return nil
}

func kindOf(m core.Msg) any {
	if m == nil {
		return "nil"
	}
	return m.Kind()
}

// Unmarshal decodes payload as a message of kind k: an unknown kind is an
// [ErrUnknownKind] error; the decoder's error, its sticky error and unread
// trailing bytes are errors too. Byte slices in the message may alias
// payload, unless the kind is [Codec.Detached].
func (c *Codec) Unmarshal(k core.Kind, payload []byte) (core.Msg, error) {
	return c.Decode(new(Decoder), k, payload, nil)
}

// Decode is Unmarshal with the caller's decoder d, which it resets to
// payload and leaves reset to nothing (so that a caller can keep one
// decoder, or a few, for every message: a decoder handed to a message's
// decode function escapes to the heap), and, for a kind registered with
// RegisterReusable, old: nil, or a message of that kind that its receiver
// handed back, which is decoded into. When Decode fails, old is still the
// caller's.
func (c *Codec) Decode(d *Decoder, k core.Kind, payload []byte, old core.Msg) (core.Msg, error) {
	e := c.entry(k)
	if e == nil {
		return nil, fmt.Errorf("%w: %v", ErrUnknownKind, k)
	}
	d.Reset(payload)
	var m core.Msg
	var err error
	if e.reuse != nil {
		m, err = e.reuse(d, old)
	} else {
		m, err = e.decode(d)
	}
	if err == nil {
		err = d.Finish()
	}
	d.Reset(nil)
	if err != nil {
		return nil, fmt.Errorf("wire: decoding %s (%v): %w", e.name, k, err)
	}
	if m == nil || m.Kind() != k {
		return nil, fmt.Errorf("%w: %s (%v) decoded as %T (kind %v)", ErrKindMismatch, e.name, k, m, kindOf(m))
	}
	return m, nil
}

// Size returns the encoded size in bytes of m's payload (for the
// simulator's bandwidth models and [core.Sizer] implementations). It
// encodes m to measure it.
func Size(m Message) int {
	var e Encoder
	m.MarshalWire(&e)
	return len(e.B)
}
