package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire/internal/gmac"
)

// The kinds of relaying (transport/tcp): frames between two nodes whose
// direct link is down go through a third. Append only: the numbers are
// on the wire.
var (
	// KindRelay carries a frame of one node's stream to another through a
	// relay: a [Relay] header, the frame (or its sealed form) and an end-to-end
	// tag (see [SealRelay]). On each hop it is an ordinary frame of that
	// hop's pair stream; the relay forwards its payload unchanged.
	KindRelay = core.MakeKind(core.ProtoCore, 9)
	// KindRoute tells a peer which nodes the sender cannot reach directly
	// now: a [Route].
	KindRoute = core.MakeKind(core.ProtoCore, 10)
)

// The flags of a [Relay] header. RelaySealed: the inner frame is
// encrypted (the job runs with TLS); without it the inner frame is only
// authenticated. RelayControl: the frame is a control frame (an
// acknowledgement) that a relay forwards in its control lane.
const (
	RelaySealed  uint8 = 1
	RelayControl uint8 = 2
)

// RelayNonceSize and RelayTagSize are the sizes, in bytes, of a relayed
// frame's nonce and of its end-to-end tag (AES-GCM's or GMAC's).
const (
	RelayNonceSize = 12
	RelayTagSize   = 16
)

// Relay is the header of a [KindRelay] frame: which stream of which pair
// the frame inside belongs to. The header is covered by the end-to-end
// tag, so no relay can move a frame to another pair, stream or place in
// it.
type Relay struct {
	// Origin wrote the inner frame; Final is the node it is for.
	Origin, Final core.NodeID
	// SrcStream is Origin's stream id for Final (wire.Resume's Stream);
	// DstStream is Final's stream id as Origin knows it (0: unknown).
	SrcStream, DstStream uint64
	// Seq is the inner frame's number in Origin's stream to Final; 0 for
	// a frame outside the count (an acknowledgement).
	Seq uint64
	// Flags: RelaySealed, RelayControl, or 0.
	Flags uint8
	// Nonce is the tag's AES-GCM (or GMAC) nonce, random per frame.
	Nonce [RelayNonceSize]byte
}

// AppendRelayHeader appends h's encoding: the node ids, streams and
// sequence number as uvarints, the flags byte and the nonce.
func AppendRelayHeader(b []byte, h Relay) []byte {
	b = binary.AppendUvarint(b, uint64(h.Origin))
	b = binary.AppendUvarint(b, uint64(h.Final))
	b = binary.AppendUvarint(b, h.SrcStream)
	b = binary.AppendUvarint(b, h.DstStream)
	b = binary.AppendUvarint(b, h.Seq)
	b = append(b, h.Flags)
	return append(b, h.Nonce[:]...)
}

// DecodeRelay splits a KindRelay payload into its header, the header's
// encoded length, the body (the inner frame, sealed if the header says
// so) and the tag. It checks the form only: [OpenRelay] checks the tag.
// The body and tag alias the payload.
func DecodeRelay(payload []byte) (h Relay, headLen int, body, tag []byte, err error) {
	d := NewDecoder(payload)
	h.Origin = d.NodeID()
	h.Final = d.NodeID()
	h.SrcStream = d.Uvarint()
	h.DstStream = d.Uvarint()
	h.Seq = d.Uvarint()
	h.Flags = d.Uint8()
	copy(h.Nonce[:], d.Fixed(RelayNonceSize))
	switch {
	case d.Err() != nil:
	case h.SrcStream == 0:
		d.Fail("relay source stream", ErrInvalid)
	case h.Origin == h.Final:
		d.Fail("relay origin and destination", ErrInvalid)
	case h.Flags&^(RelaySealed|RelayControl) != 0:
		d.Fail("relay flags", ErrInvalid)
	case d.Remaining() < RelayTagSize:
		d.Fail("relay tag", ErrTruncated)
	}
	if err := d.Err(); err != nil {
		return Relay{}, 0, nil, nil, err
	}
	headLen = d.Offset()
	rest := payload[headLen:]
	return h, headLen, rest[:len(rest)-RelayTagSize], rest[len(rest)-RelayTagSize:], nil
}

// ErrRelayTag: a relayed frame's end-to-end tag does not verify (altered
// or forged on the way, or tagged with another job's secret).
var ErrRelayTag = errors.New("wire: relayed frame fails its end-to-end check")

// RelayCipher is the end-to-end key of one ordered pair's relayed frames
// ([RelayKey]). It is safe for concurrent use.
type RelayCipher struct {
	// aead seals and opens the frames of a job under TLS (RelaySealed).
	aead cipher.AEAD
	// mac tags and checks the frames only authenticated: GMAC, whose
	// tag is aead's Seal with nothing to encrypt and the data as
	// additional data, computed with a faster GHASH where the processor
	// has one (package gmac).
	mac *gmac.MAC
}

// RelayKey derives the end-to-end key of relayed frames from origin src
// to destination dst of job: HKDF-SHA256 of the job secret, salted with
// the job id, for the ordered pair, as an AES-256 key. Each ordered pair
// has its own key.
func RelayKey(secret []byte, job string, src, dst core.NodeID) (*RelayCipher, error) {
	var info [len("cohort relay ") + 8]byte
	copy(info[:], "cohort relay ")
	binary.BigEndian.PutUint32(info[len("cohort relay "):], uint32(src))
	binary.BigEndian.PutUint32(info[len("cohort relay ")+4:], uint32(dst))
	key, err := hkdf.Key(sha256.New, secret, []byte(job), string(info[:]), 32)
	if err != nil {
		return nil, fmt.Errorf("wire: relay key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("wire: relay key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("wire: relay key: %w", err)
	}
	mac, err := gmac.New(key)
	if err != nil {
		return nil, fmt.Errorf("wire: relay key: %w", err)
	}
	return &RelayCipher{aead: aead, mac: mac}, nil
}

// SealRelay appends to b a KindRelay payload for h and the inner frame's
// encoding (frame, as AppendFrame writes it): the header, then, if
// h.Flags has RelaySealed, the frame encrypted with AES-256-GCM (the
// header as additional data) and its tag, else the frame and the GMAC of
// header and frame (AES-256-GCM's tag with nothing to encrypt and header
// and frame as additional data). k is RelayKey(secret, job, h.Origin,
// h.Final); h.Nonce must be fresh for it.
func SealRelay(b []byte, k *RelayCipher, h Relay, frame []byte) []byte {
	start := len(b)
	b = AppendRelayHeader(b, h)
	headEnd := len(b)
	if h.Flags&RelaySealed != 0 {
		return k.aead.Seal(b, headNonce(b[start:headEnd]), frame, b[start:headEnd])
	}
	b = append(b, frame...)
	return k.appendMAC(b, b[start:], headEnd-start)
}

// appendMAC appends to b the GMAC of data, which starts with a header of
// headLen bytes, under the header's nonce.
func (k *RelayCipher) appendMAC(b, data []byte, headLen int) []byte {
	return k.mac.AppendSum(b, headNonce(data[:headLen]), data)
}

// headNonce returns the nonce of an encoded header, its last bytes. The
// ciphers are given it there rather than from a Relay's field: what they
// take through an interface escapes, and a small frame would pay for the
// copy of its header on the heap.
func headNonce(head []byte) []byte { return head[len(head)-RelayNonceSize:] }

// AppendRelay appends to b the KindRelay payload SealRelay(b, k, h,
// AppendFrame(nil, f)) would, and returns it with the offset, from the
// start of what it appended, of the inner frame's encoding. An
// authenticated-only frame's payload is copied and hashed a piece at a
// time, each piece hashed while it is still in the processor's cache,
// where the fast GHASH is available. b needs room for the payload and
// RelayTagSize more, or it is reallocated as append does.
func AppendRelay(b []byte, k *RelayCipher, h Relay, f Frame) (out []byte, headLen int) {
	start := len(b)
	b = AppendRelayHeader(b, h)
	headLen = len(b) - start
	if h.Flags&RelaySealed != 0 {
		b = AppendFrame(b, f)
		frame := b[start+headLen:]
		return k.aead.Seal(b[:start+headLen], headNonce(b[start:start+headLen]), frame, b[start:start+headLen]), headLen
	}
	if !gmac.Fast() || len(f.Payload) < relayPieceSize {
		b = AppendFrame(b, f)
		return k.appendMAC(b, b[start:], headLen), headLen
	}
	head := f
	head.Payload = nil
	b = head.AppendHead(b, len(f.Payload))
	var hs gmac.Hash
	k.mac.Start(&hs)
	hs.Write(b[start:])
	for p := f.Payload; len(p) > 0; {
		n := min(len(p), relayPieceSize)
		b = append(b, p[:n]...)
		hs.Write(b[len(b)-n:])
		p = p[n:]
	}
	var tag [gmac.TagSize]byte
	hs.Sum(&tag, &h.Nonce)
	return append(b, tag[:]...), headLen
}

// AppendRelayTag appends to b the end-to-end tag of an authenticated-only
// KindRelay payload held in two pieces, head then body: head is h's
// header (AppendRelayHeader) and the start of the inner frame's encoding,
// body the rest of it. It is SealRelay's tag over their concatenation,
// for a caller that writes the frame from where its payload is (a
// vectored write) instead of copying it behind its header. It reports
// false, having appended nothing, where the fast GHASH is missing
// ([RelayTagInPieces]).
func AppendRelayTag(b []byte, k *RelayCipher, h Relay, head, body []byte) ([]byte, bool) {
	if !gmac.Fast() || h.Flags&RelaySealed != 0 {
		return b, false
	}
	var hs gmac.Hash
	k.mac.Start(&hs)
	hs.Write(head)
	hs.Write(body)
	var tag [gmac.TagSize]byte
	hs.Sum(&tag, &h.Nonce)
	return append(b, tag[:]...), true
}

// RelayTagInPieces reports whether [AppendRelayTag] can tag a payload
// held in pieces on this processor.
func RelayTagInPieces() bool { return gmac.Fast() }

// relayPieceSize is the piece AppendRelay copies and hashes at a time:
// well within a core's second-level cache.
const relayPieceSize = 64 << 10

// SealRelayTail seals, in place, a KindRelay payload that b holds up to
// its tag: the header (headLen bytes) then the inner frame's encoding, as
// AppendRelayHeader and AppendFrame write them; it returns the payload
// with its tag. It is SealRelay without a copy of the frame: the caller
// builds the frame where it goes. b needs RelayTagSize bytes of spare
// capacity, or the payload is copied.
func SealRelayTail(b []byte, k *RelayCipher, h Relay, headLen int) []byte {
	if h.Flags&RelaySealed == 0 {
		return k.appendMAC(b, b, headLen)
	}
	if cap(b)-len(b) < RelayTagSize {
		b = append(make([]byte, 0, len(b)+RelayTagSize), b...)
	}
	ct := k.aead.Seal(b[headLen:headLen], headNonce(b[:headLen]), b[headLen:], b[:headLen])
	return b[:headLen+len(ct)]
}

// OpenRelay checks a KindRelay payload's tag with k (the key of its
// header's pair) and returns the inner frame's encoding: the body itself
// when it was only authenticated, or its decryption appended to dst when
// it was sealed. It returns ErrRelayTag if the check fails. h, headLen
// and body are what DecodeRelay returned for payload.
func OpenRelay(dst []byte, k *RelayCipher, payload []byte, h Relay, headLen int, body []byte) ([]byte, error) {
	if h.Flags&RelaySealed != 0 {
		out, err := k.aead.Open(dst, headNonce(payload[:headLen]), payload[headLen:], payload[:headLen])
		if err != nil {
			return nil, ErrRelayTag
		}
		return out, nil
	}
	end := headLen + len(body)
	if !k.mac.Check(headNonce(payload[:headLen]), payload[:end], payload[end:]) {
		return nil, ErrRelayTag
	}
	return body, nil
}

// Route is the payload of a [KindRoute] frame: the nodes its sender cannot
// reach directly now (a dial failed or a connection died, and none is in
// use since), sorted, under a version that grows with each change, so
// that a receiver keeps the latest.
type Route struct {
	Version uint64
	Down    []core.NodeID
}

// Kind returns KindRoute.
func (Route) Kind() core.Kind { return KindRoute }

// MarshalWire appends the version as a uvarint and the node ids.
func (r Route) MarshalWire(e *Encoder) {
	e.Uvarint(r.Version)
	e.NodeIDs(r.Down)
}

// DecodeRoute decodes a Route payload.
func DecodeRoute(payload []byte) (Route, error) {
	d := NewDecoder(payload)
	r := Route{Version: d.Uvarint(), Down: d.NodeIDs()}
	if err := d.Finish(); err != nil {
		return Route{}, err
	}
	return r, nil
}
