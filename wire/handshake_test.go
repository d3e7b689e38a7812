package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// The tests in this file check the connection handshake of docs/DESIGN.md
// "Wire format" and "Security" (version, job id, node id and a proof of the
// job secret), as specified step by step in the package doc.

var secret = []byte("job secret: 32 random bytes here")

func hello(node core.NodeID, nonce byte) Hello {
	h := Hello{Version: Version, JobID: "job-42", Node: node}
	for i := range h.Nonce {
		h.Nonce[i] = nonce + byte(i)
	}
	return h
}

// side is one end of a connection running the handshake over frames.
type side struct {
	self      Hello
	secret    []byte
	initiator bool
	r         *FrameReader
	w         *FrameWriter
}

// run performs steps 1 to 4 of the package doc; the two sides run in
// lock step (each step's sends are buffered), so no goroutine is needed.
func handshake(a, b *side) (errA, errB error) {
	step := func(f func(s *side) error) {
		if errA == nil {
			errA = f(a)
		}
		if errB == nil {
			errB = f(b)
		}
	}
	peers := map[*side]Hello{}
	step(func(s *side) error { // 1. send Hello
		s.r.SetMaxFrameSize(MaxHandshakeFrameSize)
		if err := s.w.WriteMessage(Frame{Src: s.self.Node, Dst: core.None}, s.self); err != nil {
			return err
		}
		return s.w.Flush()
	})
	step(func(s *side) error { // 2. read and check the peer's Hello
		f, err := s.r.ReadFrame()
		if err != nil {
			return err
		}
		if f.Kind != KindHello {
			return errors.New("expected a hello")
		}
		h, err := DecodeHello(f.Payload)
		if err != nil {
			return err
		}
		peers[s] = h
		return CheckHello(s.self, h)
	})
	step(func(s *side) error { // 3. send Proof
		p := Proof{MAC: ComputeProof(s.secret, s.self, peers[s], s.initiator)}
		if err := s.w.WriteMessage(Frame{Src: s.self.Node, Dst: peers[s].Node}, p); err != nil {
			return err
		}
		return s.w.Flush()
	})
	step(func(s *side) error { // 4. verify the peer's Proof
		f, err := s.r.ReadFrame()
		if err != nil {
			return err
		}
		p, err := DecodeProof(f.Payload)
		if err != nil {
			return err
		}
		if err := CheckProof(s.secret, s.self, peers[s], s.initiator, p); err != nil {
			return err
		}
		s.r.SetMaxFrameSize(DefaultMaxFrameSize)
		return nil
	})
	return errA, errB
}

func pair(ha, hb Hello, secretA, secretB []byte) (*side, *side) {
	var ab, ba bytes.Buffer
	a := &side{self: ha, secret: secretA, initiator: true, r: NewFrameReader(&ba), w: NewFrameWriter(&ab, 0)}
	b := &side{self: hb, secret: secretB, initiator: false, r: NewFrameReader(&ab), w: NewFrameWriter(&ba, 0)}
	return a, b
}

func TestHandshakeSucceeds(t *testing.T) {
	a, b := pair(hello(1, 10), hello(2, 20), secret, secret)
	if errA, errB := handshake(a, b); errA != nil || errB != nil {
		t.Fatalf("handshake failed: initiator %v, acceptor %v", errA, errB)
	}
}

func TestHandshakeFailures(t *testing.T) {
	otherVersion := hello(2, 20)
	otherVersion.Version = Version + 1
	otherJob := hello(2, 20)
	otherJob.JobID = "job-43"
	for _, tc := range []struct {
		name       string
		hb         Hello
		secretB    []byte
		errA, errB error
	}{
		{"wrong secret", hello(2, 20), []byte("another secret"), ErrAuth, ErrAuth},
		{"empty secret", hello(2, 20), nil, ErrAuth, ErrAuth},
		{"wrong job", otherJob, secret, ErrJob, ErrJob},
		{"wrong version", otherVersion, secret, ErrVersion, ErrVersion},
		{"same nonce", hello(2, 10), secret, ErrAuth, ErrAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(hello(1, 10), tc.hb, secret, tc.secretB)
			errA, errB := handshake(a, b)
			if !errors.Is(errA, tc.errA) || !errors.Is(errB, tc.errB) {
				t.Fatalf("initiator %v (want %v), acceptor %v (want %v)", errA, tc.errA, errB, tc.errB)
			}
		})
	}
}

func TestVersionErrorReportsBoth(t *testing.T) {
	h := hello(2, 20)
	h.Version = 7
	var e Encoder
	h.MarshalWire(&e)
	e.B = append(e.B, "a future layout"...)
	got, err := DecodeHello(e.B)
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Local != Version || ve.Remote != 7 || got.Version != 7 {
		t.Fatalf("DecodeHello of version 7: %+v, %v", got, err)
	}
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), fmt.Sprintf("we speak %d, the peer speaks 7", Version)) {
		t.Errorf("error text %q", err)
	}
	if err := CheckHello(hello(1, 0), h); !errors.As(err, &ve) || ve.Remote != 7 {
		t.Errorf("CheckHello: %v", err)
	}
}

func TestDecodeHelloErrors(t *testing.T) {
	enc := func(h Hello) []byte {
		var e Encoder
		h.MarshalWire(&e)
		return e.B
	}
	good := enc(hello(3, 1))
	long := hello(3, 1)
	long.JobID = strings.Repeat("j", MaxJobIDLen+1)
	none := hello(3, 1)
	none.Node = core.None
	for _, tc := range []struct {
		name string
		in   []byte
		err  error
	}{
		{"http", []byte("GET / HTTP/1.1\r\n"), ErrNotHello},
		{"empty", nil, ErrNotHello},
		{"magic only", good[:6], ErrTruncated},
		{"cut nonce", good[:len(good)-1], ErrTruncated},
		{"trailing", append(bytes.Clone(good), 0), ErrTrailing},
		{"job id too long", enc(long), ErrTooLong},
		{"node none", enc(none), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeHello(tc.in); !errors.Is(err, tc.err) {
				t.Errorf("DecodeHello: %v, want %v", err, tc.err)
			}
		})
	}
	h, err := DecodeHello(good)
	if err != nil || h != hello(3, 1) {
		t.Errorf("DecodeHello(good) = %+v, %v", h, err)
	}
	if len(good) > MaxHandshakeFrameSize-MaxHeaderSize {
		t.Errorf("a Hello (%d bytes) may not fit MaxHandshakeFrameSize", len(good))
	}
	if long := enc(Hello{JobID: strings.Repeat("j", MaxJobIDLen), Node: core.None - 1}); len(long) > MaxHandshakeFrameSize-MaxHeaderSize {
		t.Errorf("the longest Hello (%d bytes) does not fit MaxHandshakeFrameSize", len(long))
	}
}

func TestDecodeProof(t *testing.T) {
	var p Proof
	for i := range p.MAC {
		p.MAC[i] = byte(i)
	}
	var e Encoder
	p.MarshalWire(&e)
	if got, err := DecodeProof(e.B); err != nil || got != p {
		t.Errorf("round trip: %v, %v", got, err)
	}
	if _, err := DecodeProof(e.B[:31]); !errors.Is(err, ErrTruncated) {
		t.Errorf("31 bytes: %v", err)
	}
	if _, err := DecodeProof(append(e.B, 0)); !errors.Is(err, ErrTrailing) {
		t.Errorf("33 bytes: %v", err)
	}
}

// TestProofConstruction recomputes the proof from the package doc's
// definition, independently of proofMAC.
func TestProofConstruction(t *testing.T) {
	hi, ha := hello(1, 10), hello(2, 20)
	hi.Integrity = true // the proofs cover a request for records
	encode := func(h Hello) []byte {
		b := []byte("cohort")
		b = binary.BigEndian.AppendUint16(b, h.Version)
		b = append(b, byte(len(h.JobID)))
		b = append(b, h.JobID...)
		b = append(b, byte(h.Node))
		b = append(b, h.Nonce[:]...)
		if h.Integrity {
			return append(b, 1)
		}
		return append(b, 0)
	}
	input := func(label string) []byte {
		b := []byte("cohort-v1")
		for _, h := range []Hello{hi, ha} {
			eh := encode(h)
			b = append(b, byte(len(eh)))
			b = append(b, eh...)
		}
		return append(b, label...)
	}
	mac := func(msg []byte) (out [32]byte) {
		m := hmac.New(sha256.New, secret)
		m.Write(msg)
		copy(out[:], m.Sum(nil))
		return out
	}
	fromI, fromA := mac(input("initiator->acceptor")), mac(input("acceptor->initiator"))
	if ComputeProof(secret, hi, ha, true) != fromI {
		t.Error("initiator's proof differs from the documented construction")
	}
	if ComputeProof(secret, ha, hi, false) != fromA {
		t.Error("acceptor's proof differs from the documented construction")
	}
	if !VerifyProof(secret, ha, hi, false, fromI) || !VerifyProof(secret, hi, ha, true, fromA) {
		t.Error("VerifyProof rejects correct proofs")
	}
	// A proof verifies only for its own direction and its own hellos.
	if VerifyProof(secret, hi, ha, true, fromI) {
		t.Error("the initiator accepts its own proof reflected back")
	}
	if VerifyProof(secret, ha, hi, false, fromA) {
		t.Error("the acceptor accepts its own proof reflected back")
	}
	for i := range 4 {
		h := ha
		switch i {
		case 0:
			h.Nonce[15]++
		case 1:
			h.Node++
		case 2:
			h.JobID += "x"
		case 3:
			h.Version++
		}
		if VerifyProof(secret, hi, h, true, fromA) {
			t.Errorf("proof still verifies after changing field %d of the acceptor's hello", i)
		}
	}
}

// TestReplayedHandshakeFails replays a recorded initiator's Hello and Proof
// against a fresh acceptor, as the package doc says it must fail.
func TestReplayedHandshakeFails(t *testing.T) {
	a, b := pair(hello(1, 10), hello(2, 20), secret, secret)
	var recorded bytes.Buffer
	a.w = NewFrameWriter(io.MultiWriter(&recorded, b.r.r.(*bytes.Buffer)), 0)
	if errA, errB := handshake(a, b); errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	// The attacker replays both frames without reading; the acceptor has a
	// fresh nonce.
	var sink bytes.Buffer
	b2 := &side{self: hello(2, 30), secret: secret, r: NewFrameReader(bytes.NewReader(recorded.Bytes())), w: NewFrameWriter(&sink, 0)}
	f, _ := b2.r.ReadFrame()
	peer, err := DecodeHello(f.Payload)
	if err != nil || CheckHello(b2.self, peer) != nil {
		t.Fatalf("replayed hello rejected early: %v", err)
	}
	f, _ = b2.r.ReadFrame()
	p, err := DecodeProof(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckProof(secret, b2.self, peer, false, p); !errors.Is(err, ErrAuth) {
		t.Errorf("replayed proof: %v, want ErrAuth", err)
	}
}

func TestCodecHandshakeKinds(t *testing.T) {
	c := NewCodec()
	if err := RegisterHandshake(c); err != nil {
		t.Fatal(err)
	}
	if err := RegisterHandshake(c); !errors.Is(err, ErrDuplicateKind) {
		t.Errorf("second RegisterHandshake: %v", err)
	}
	for _, m := range []Message{hello(5, 1), Proof{MAC: [32]byte{1, 2, 3}}} {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil || got != core.Msg(m) {
			t.Errorf("%s: got %v, %v", c.Name(m.Kind()), got, err)
		}
	}
}

func TestResumeRoundTrip(t *testing.T) {
	for _, r := range []Resume{{Stream: 1}, {Stream: 1 << 63, PeerStream: 7, Received: 1<<40 + 3, DialOutOnly: true}} {
		var e Encoder
		r.MarshalWire(&e)
		got, err := DecodeResume(e.B)
		if err != nil || got != r {
			t.Errorf("DecodeResume(%v) = %v, %v", r, got, err)
		}
	}
	var e Encoder
	Resume{}.MarshalWire(&e)
	if _, err := DecodeResume(e.B); !errors.Is(err, ErrInvalid) {
		t.Errorf("a zero stream id: got %v, want ErrInvalid", err)
	}
	if _, err := DecodeResume(append(e.B, 0)); err == nil {
		t.Error("trailing bytes accepted")
	}
	for _, n := range []uint64{0, 1, 1 << 50} {
		if got, err := DecodeCount(AppendCount(nil, n)); err != nil || got != n {
			t.Errorf("DecodeCount(AppendCount(%d)) = %d, %v", n, got, err)
		}
	}
	if _, err := DecodeCount(nil); err == nil {
		t.Error("an empty count accepted")
	}
}
