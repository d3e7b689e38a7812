package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// TestRelayRoundTrip seals a frame both ways (authenticated only, and
// encrypted) and opens it; any altered byte of the payload, or another
// pair's key, fails the check.
func TestRelayRoundTrip(t *testing.T) {
	inner := AppendFrame(nil, Frame{Kind: kindFD1, Src: 1, Dst: 3, Payload: []byte("hello through a relay")})
	for _, flags := range []uint8{0, RelaySealed} {
		h := Relay{Origin: 1, Final: 3, SrcStream: 77, DstStream: 88, Seq: 5, Flags: flags, Nonce: [RelayNonceSize]byte{1, 2, 3}}
		k, _ := RelayKey([]byte("secret"), "job", 1, 3)
		p := SealRelay(nil, k, h, inner)
		if flags == RelaySealed && bytes.Contains(p, []byte("hello through")) {
			t.Fatal("a sealed relayed frame shows its payload")
		}
		got, n, body, tag, err := DecodeRelay(p)
		if err != nil || got != h || len(tag) != RelayTagSize {
			t.Fatalf("DecodeRelay = %+v, %v; want %+v", got, err, h)
		}
		out, err := OpenRelay(nil, k, p, got, n, body)
		if err != nil || !bytes.Equal(out, inner) {
			t.Fatalf("flags %d: OpenRelay = %x, %v; want %x", flags, out, err, inner)
		}
		for i := range p {
			q := bytes.Clone(p)
			q[i] ^= 0x20
			h2, n2, body2, _, err := DecodeRelay(q)
			if err != nil {
				continue // a malformed header is refused before the check
			}
			k2, _ := RelayKey([]byte("secret"), "job", h2.Origin, h2.Final)
			if _, err := OpenRelay(nil, k2, q, h2, n2, body2); !errors.Is(err, ErrRelayTag) {
				t.Fatalf("flags %d: byte %d altered: OpenRelay = %v, want ErrRelayTag", flags, i, err)
			}
		}
		other, _ := RelayKey([]byte("secret"), "job", 3, 1)
		if _, err := OpenRelay(nil, other, p, got, n, body); !errors.Is(err, ErrRelayTag) {
			t.Fatalf("the reverse pair's key opens the frame: %v", err)
		}
		wrong, _ := RelayKey([]byte("other secret"), "job", 1, 3)
		if _, err := OpenRelay(nil, wrong, p, got, n, body); !errors.Is(err, ErrRelayTag) {
			t.Fatalf("another secret's key opens the frame: %v", err)
		}
	}
}

func TestDecodeRelayRefuses(t *testing.T) {
	good := Relay{Origin: 1, Final: 2, SrcStream: 1}
	for name, h := range map[string]Relay{
		"no source stream": {Origin: 1, Final: 2},
		"to itself":        {Origin: 2, Final: 2, SrcStream: 1},
		"unknown flag":     {Origin: 1, Final: 2, SrcStream: 1, Flags: 4},
	} {
		p := append(AppendRelayHeader(nil, h), make([]byte, RelayTagSize)...)
		if _, _, _, _, err := DecodeRelay(p); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	p := append(AppendRelayHeader(nil, good), make([]byte, RelayTagSize-1)...)
	if _, _, _, _, err := DecodeRelay(p); !errors.Is(err, ErrTruncated) {
		t.Errorf("short tag: %v, want ErrTruncated", err)
	}
}

func TestRouteRoundTrip(t *testing.T) {
	for _, r := range []Route{{}, {Version: 9, Down: []core.NodeID{2, 7, 1 << 30}}} {
		var e Encoder
		r.MarshalWire(&e)
		got, err := DecodeRoute(e.B)
		if err != nil || got.Version != r.Version || !equalIDs(got.Down, r.Down) {
			t.Errorf("DecodeRoute(%+v) = %+v, %v", r, got, err)
		}
	}
	if _, err := DecodeRoute([]byte{1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Error("a route naming core.None decoded")
	}
}

func equalIDs(a, b []core.NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzRelay checks that DecodeRelay and OpenRelay never panic, that what
// decodes re-encodes to the same header, and that only the payload
// SealRelay made opens.
func FuzzRelay(f *testing.F) {
	inner := AppendFrame(nil, Frame{Kind: kindFD1, Src: 1, Dst: 2, Payload: []byte("x")})
	for _, flags := range []uint8{0, RelaySealed} {
		k, _ := RelayKey([]byte("secret"), "job", 1, 2)
		f.Add(SealRelay(nil, k, Relay{Origin: 1, Final: 2, SrcStream: 3, DstStream: 4, Seq: 5, Flags: flags}, inner))
	}
	f.Add(AppendRelayHeader(nil, Relay{Origin: 1, Final: 2, SrcStream: 1}))
	f.Add([]byte{1, 2, 0})
	f.Fuzz(func(t *testing.T, payload []byte) {
		h, n, body, tag, err := DecodeRelay(payload)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendRelayHeader(nil, h), payload[:n]) {
			t.Fatalf("header %+v re-encodes to %x, decoded from %x", h, AppendRelayHeader(nil, h), payload[:n])
		}
		if n+len(body)+len(tag) != len(payload) || len(tag) != RelayTagSize {
			t.Fatalf("split %d+%d+%d of %d bytes", n, len(body), len(tag), len(payload))
		}
		k, err := RelayKey([]byte("secret"), "job", h.Origin, h.Final)
		if err != nil {
			t.Fatal(err)
		}
		out, err := OpenRelay(nil, k, payload, h, n, body)
		if err != nil {
			return
		}
		var resealed []byte
		if h.Flags&RelaySealed != 0 {
			resealed = SealRelay(nil, k, h, out)
		} else {
			resealed = SealRelay(nil, k, h, body)
		}
		if !bytes.Equal(resealed, payload) {
			t.Fatalf("an opened relayed frame does not seal back to itself")
		}
	})
}

func FuzzRoute(f *testing.F) {
	for _, r := range []Route{{}, {Version: 3, Down: []core.NodeID{1, 5}}} {
		var e Encoder
		r.MarshalWire(&e)
		f.Add(e.B)
	}
	f.Add([]byte{0, 2, 1})
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := DecodeRoute(payload)
		if err != nil {
			return
		}
		var e Encoder
		r.MarshalWire(&e)
		if !bytes.Equal(e.B, payload) {
			t.Fatalf("route %+v re-encodes to %x, decoded from %x", r, e.B, payload)
		}
	})
}

// TestSealRelayTail checks that sealing in place gives SealRelay's payload.
func TestSealRelayTail(t *testing.T) {
	f := Frame{Kind: kindFD1, Src: 4, Dst: 5, Payload: bytes.Repeat([]byte("z"), 300)}
	for _, flags := range []uint8{0, RelaySealed, RelayControl} {
		k, _ := RelayKey([]byte("secret"), "job", 4, 5)
		h := Relay{Origin: 4, Final: 5, SrcStream: 1, Seq: 2, Flags: flags, Nonce: [RelayNonceSize]byte{9}}
		want := SealRelay(nil, k, h, AppendFrame(nil, f))
		for _, spare := range []int{0, RelayTagSize} {
			b := AppendRelayHeader(make([]byte, 0, 8), h)
			n := len(b)
			b = AppendFrame(b, f)
			b = append(make([]byte, 0, len(b)+spare), b...)
			if got := SealRelayTail(b, k, h, n); !bytes.Equal(got, want) {
				t.Errorf("flags %d, spare %d: SealRelayTail differs from SealRelay", flags, spare)
			}
		}
	}
}

// TestRelayTagIsGCM checks the wire format of an authenticated-only
// relayed frame: its tag is crypto/cipher's AES-GCM Seal with nothing to
// encrypt and header and frame as additional data, for frames below and
// above the size from which the fast GHASH takes over.
func TestRelayTagIsGCM(t *testing.T) {
	k, err := RelayKey([]byte("secret"), "job", 6, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 100, 511, 512, 4096, 1 << 20, 1<<20 + 13} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i*7 + size)
		}
		h := Relay{Origin: 6, Final: 7, SrcStream: 1, Seq: 1, Nonce: [RelayNonceSize]byte{3, byte(size)}}
		p := SealRelay(nil, k, h, AppendFrame(nil, Frame{Kind: kindFD1, Src: 6, Dst: 7, Payload: payload}))
		data := p[:len(p)-RelayTagSize]
		want := k.aead.Seal(nil, h.Nonce[:], nil, data)
		if got := p[len(data):]; !bytes.Equal(got, want) {
			t.Errorf("size %d: tag %x, want AES-GCM's %x", size, got, want)
		}
	}
}

// TestAppendRelay checks that building and sealing in one pass gives
// SealRelay's payload, after a prefix, for frames below and above the
// size hashed in pieces.
func TestAppendRelay(t *testing.T) {
	k, _ := RelayKey([]byte("secret"), "job", 4, 5)
	for _, size := range []int{0, 300, relayPieceSize - 1, relayPieceSize, 3*relayPieceSize + 17, 1 << 20} {
		f := Frame{Kind: kindFD1, Src: 4, Dst: 5, Payload: bytes.Repeat([]byte{byte(size), 1, 2}, size/3+1)[:size]}
		for _, flags := range []uint8{0, RelaySealed, RelayControl} {
			h := Relay{Origin: 4, Final: 5, SrcStream: 1, Seq: 2, Flags: flags, Nonce: [RelayNonceSize]byte{9, byte(size)}}
			want := SealRelay(nil, k, h, AppendFrame(nil, f))
			prefix := []byte("prefix")
			got, headLen := AppendRelay(bytes.Clone(prefix), k, h, f)
			if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Errorf("size %d, flags %d: AppendRelay differs from SealRelay", size, flags)
			}
			if n := len(AppendRelayHeader(nil, h)); headLen != n {
				t.Errorf("size %d, flags %d: header length %d, want %d", size, flags, headLen, n)
			}
		}
	}
}

// TestAppendRelayTag checks that the tag of a payload held in two pieces
// (header and frame head, then the frame's payload) is SealRelay's, for
// pieces of every alignment against the hash's blocks.
func TestAppendRelayTag(t *testing.T) {
	if !RelayTagInPieces() {
		t.Skip("no fast GHASH on this processor")
	}
	k, _ := RelayKey([]byte("secret"), "job", 4, 5)
	for _, size := range []int{4 << 10, 4<<10 + 7, 100_003, 1 << 20} {
		f := Frame{Kind: kindFD1, Src: 4, Dst: 5, Payload: bytes.Repeat([]byte{byte(size), 1, 2}, size/3+1)[:size]}
		h := Relay{Origin: 4, Final: 5, SrcStream: 1, Seq: uint64(size), Nonce: [RelayNonceSize]byte{7, byte(size)}}
		want := SealRelay(nil, k, h, AppendFrame(nil, f))
		head := f
		head.Payload = nil
		b := head.AppendHead(AppendRelayHeader(nil, h), len(f.Payload))
		got, ok := AppendRelayTag(bytes.Clone(b), k, h, b, f.Payload)
		if !ok {
			t.Fatal("AppendRelayTag declined with the fast GHASH")
		}
		if !bytes.Equal(got[:len(b)], b) || !bytes.Equal(got[len(b):], want[len(want)-RelayTagSize:]) {
			t.Errorf("size %d: the tag in pieces differs from SealRelay's", size)
		}
		if _, ok := AppendRelayTag(nil, k, Relay{Flags: RelaySealed}, b, f.Payload); ok {
			t.Error("AppendRelayTag tagged a sealed payload")
		}
	}
}
