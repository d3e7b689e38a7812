package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/core"
)

// The handshake's message kinds, in protocol core. Append only: the
// numbers are on the wire. Kind 0 of protocol core is reserved (see
// [Frame]).
var (
	KindHello = core.MakeKind(core.ProtoCore, 1)
	KindProof = core.MakeKind(core.ProtoCore, 2)
	// KindGoodbye, with an empty payload, tells the peer that the sender
	// closes an idle connection: it writes nothing more on it and shuts
	// its writing side; the peer stops writing to it too, shuts its own
	// side, and both read until the end of stream, so no frame is lost and
	// neither end mistakes the close for a failure (transport/tcp,
	// Config.IdleTimeout).
	// In the handshake, carrying the acceptor's [Proof] in place of a
	// [KindProof] frame, it refuses a connection whose initiator has
	// proved the secret (see the package doc, step 3).
	KindGoodbye = core.MakeKind(core.ProtoCore, 3)
	// KindPad is padding: a frame whose payload means nothing, written
	// before a large frame so that the large payload starts on the stream
	// at the same offset modulo 64 as it sits in memory, which lets the
	// kernel copy it at full speed (see AppendPad). Readers skip it.
	KindPad = core.MakeKind(core.ProtoCore, 4)
	// KindRing ends the handshake of a connection between two processes of
	// one host that may move its frames to shared memory (transport/tcp's
	// shared-memory path): each side first sends a [Ring] offer (with the
	// memory passed beside the frame, or none), then a [Ring] answer to the
	// peer's offer.
	KindRing = core.MakeKind(core.ProtoCore, 5)
)

// Version is the version of the wire format this package speaks. Peers must
// speak the same version; it changes whenever an encoding changes
// incompatibly.
const Version uint16 = 3

// MaxJobIDLen is the longest job id, in bytes, a Hello may carry.
const MaxJobIDLen = 128

// NonceSize is the size of a Hello's nonce in bytes.
const NonceSize = 16

// ProofSize is the size of a handshake proof (an HMAC-SHA256) in bytes.
const ProofSize = sha256.Size

// MaxHandshakeFrameSize is a frame limit, in bytes, that fits every
// handshake frame: a host sets it on its FrameReader until the handshake is
// done, so an unauthenticated peer cannot make it buffer more.
const MaxHandshakeFrameSize = 256

// helloMagic opens every Hello, so that a peer speaking another protocol is
// told apart from a peer speaking another version of this one.
const helloMagic = "cohort"

// proofLabel opens the input of every proof; its "v1" is bumped if the
// proof's construction ever changes.
const proofLabel = "cohort-v1"

// Handshake errors.
var (
	// ErrVersion: the peer speaks another wire version (see [VersionError]).
	ErrVersion = errors.New("wire: wire version mismatch")
	// ErrJob: the peer belongs to another job.
	ErrJob = errors.New("wire: job id mismatch")
	// ErrAuth: the peer's proof is wrong (it does not know the job secret),
	// or its Hello is a reflection of ours.
	ErrAuth = errors.New("wire: authentication failed")
	// ErrNotHello: the payload does not start with the Hello magic: the peer
	// does not speak cohort.
	ErrNotHello = errors.New("wire: not a cohort hello")
)

// VersionError reports a version mismatch with both versions. It matches
// [ErrVersion] with errors.Is.
type VersionError struct {
	Local, Remote uint16
}

// Error names both versions.
func (e *VersionError) Error() string {
	return fmt.Sprintf("%v: we speak %d, the peer speaks %d", ErrVersion, e.Local, e.Remote)
}

// Unwrap returns ErrVersion.
func (e *VersionError) Unwrap() error { return ErrVersion }

// Hello is the first message each side of a connection sends.
type Hello struct {
	Version uint16          // the sender's wire Version
	JobID   string          // the job the sender belongs to; at most MaxJobIDLen bytes
	Node    core.NodeID     // the sender's node id (not core.None)
	Nonce   [NonceSize]byte // fresh random bytes, never reused, chosen by the caller
	// Integrity asks that the connection's frames go in authenticated
	// records once the proofs have verified (see RecordKeys): they do if
	// either side's Hello asks. The proofs cover it, so no one on the path
	// can take the request out.
	Integrity bool
}

// Kind returns KindHello.
func (Hello) Kind() core.Kind { return KindHello }

// MarshalWire appends the encoding: the magic "cohort", the version as two
// big-endian bytes (at a fixed place, so that every version can read it),
// then the job id, the node id, the 16 nonce bytes and Integrity as a
// bool.
func (h Hello) MarshalWire(e *Encoder) {
	e.B = append(e.B, helloMagic...)
	e.B = append(e.B, byte(h.Version>>8), byte(h.Version))
	e.String(h.JobID)
	e.NodeID(h.Node)
	e.Raw(h.Nonce[:])
	e.Bool(h.Integrity)
}

// DecodeHello decodes a Hello payload. A Hello of another [Version] is not
// decoded past its version, since its layout may differ: the result then
// holds only the Version and the error is a [*VersionError].
func DecodeHello(payload []byte) (Hello, error) {
	d := NewDecoder(payload)
	h, err := decodeHello(d)
	if err == nil {
		err = d.Finish()
	}
	if err != nil {
		return Hello{Version: h.Version}, err
	}
	return h, nil
}

func decodeHello(d *Decoder) (Hello, error) {
	var h Hello
	if string(d.Fixed(len(helloMagic))) != helloMagic {
		if d.Err() != nil {
			return h, fmt.Errorf("%w: %w", ErrNotHello, d.Err())
		}
		return h, ErrNotHello
	}
	v := d.Fixed(2)
	if d.Err() != nil {
		return h, d.Err()
	}
	h.Version = uint16(v[0])<<8 | uint16(v[1])
	if h.Version != Version {
		return h, &VersionError{Local: Version, Remote: h.Version}
	}
	h.JobID = d.StringMax(MaxJobIDLen)
	h.Node = d.NodeID()
	copy(h.Nonce[:], d.Fixed(NonceSize))
	h.Integrity = d.Bool()
	return h, d.Err()
}

// decodeHelloMsg is the DecodeFunc of KindHello.
func decodeHelloMsg(d *Decoder) (core.Msg, error) {
	h, err := decodeHello(d)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// CheckHello checks the peer's Hello against ours, in this order: same
// version ([*VersionError]), same job ([ErrJob]), a valid job id length and
// node id, and a nonce other than ours ([ErrAuth]: a peer that echoes our
// own Hello back is reflecting it).
func CheckHello(local, remote Hello) error {
	if remote.Version != local.Version {
		return &VersionError{Local: local.Version, Remote: remote.Version}
	}
	if len(remote.JobID) > MaxJobIDLen {
		return fmt.Errorf("%w: job id of %d bytes, limit %d", ErrTooLong, len(remote.JobID), MaxJobIDLen)
	}
	if remote.JobID != local.JobID {
		return fmt.Errorf("%w: we run %q, the peer runs %q", ErrJob, local.JobID, remote.JobID)
	}
	if remote.Node == core.None {
		return fmt.Errorf("%w: the peer claims node id none", ErrInvalid)
	}
	if remote.Nonce == local.Nonce {
		return fmt.Errorf("%w: the peer's nonce equals ours (a reflected hello)", ErrAuth)
	}
	return nil
}

// Proof is the second message each side sends: an HMAC that proves
// knowledge of the job secret, bound to this connection's two Hellos and to
// the direction.
type Proof struct {
	MAC [ProofSize]byte
}

// Kind returns KindProof.
func (Proof) Kind() core.Kind { return KindProof }

// MarshalWire appends the 32 MAC bytes.
func (p Proof) MarshalWire(e *Encoder) { e.Raw(p.MAC[:]) }

// DecodeProof decodes a Proof payload (exactly ProofSize bytes).
func DecodeProof(payload []byte) (Proof, error) {
	d := NewDecoder(payload)
	p := decodeProof(d)
	if err := d.Finish(); err != nil {
		return Proof{}, err
	}
	return p, nil
}

func decodeProof(d *Decoder) Proof {
	var p Proof
	copy(p.MAC[:], d.Fixed(ProofSize))
	return p
}

func decodeProofMsg(d *Decoder) (core.Msg, error) {
	p := decodeProof(d)
	return p, d.Err()
}

// RegisterHandshake registers KindHello and KindProof in c.
func RegisterHandshake(c *Codec) error {
	if err := c.Register(KindHello, "wire.Hello", decodeHelloMsg); err != nil {
		return err
	}
	return c.Register(KindProof, "wire.Proof", decodeProofMsg)
}

// Direction labels of the proof input: whose proof it is.
const (
	labelFromInitiator = "initiator->acceptor"
	labelFromAcceptor  = "acceptor->initiator"
)

// proofMAC computes the proof of one direction: helloMAC with the
// direction's label. Hi and Ha are the encodings of the initiator's and the
// acceptor's Hello, each preceded by its length as a uvarint; the lengths
// keep the concatenation unambiguous, and the encodings are canonical, so
// both sides compute the same bytes from the decoded values.
func proofMAC(secret []byte, initiator, acceptor Hello, fromInitiator bool) [ProofSize]byte {
	label := labelFromAcceptor
	if fromInitiator {
		label = labelFromInitiator
	}
	return helloMAC(secret, initiator, acceptor, label)
}

// helloMAC computes HMAC-SHA256(secret, "cohort-v1" || len(Hi) || Hi ||
// len(Ha) || Ha || label): proofMAC's construction with any label.
func helloMAC(secret []byte, initiator, acceptor Hello, label string) [ProofSize]byte {
	var buf [128 + 2*(2+len(helloMagic)+2+2+MaxJobIDLen+5+NonceSize+1)]byte
	e := Encoder{B: buf[:0]}
	e.B = append(e.B, proofLabel...)
	for _, h := range [2]Hello{initiator, acceptor} {
		e.Uvarint(uint64(helloSize(&h)))
		h.MarshalWire(&e)
	}
	e.B = append(e.B, label...)
	mac := hmac.New(sha256.New, secret)
	mac.Write(e.B)
	var out [ProofSize]byte
	mac.Sum(out[:0])
	return out
}

// helloSize is the length of h's encoding.
func helloSize(h *Hello) int {
	return len(helloMagic) + 2 + uvarintSize(uint64(len(h.JobID))) + len(h.JobID) +
		uvarintSize(uint64(h.Node)) + NonceSize + 1
}

// ComputeProof returns the proof that this side sends: local is our Hello,
// remote the peer's, and initiator says whether we opened the connection.
func ComputeProof(secret []byte, local, remote Hello, initiator bool) [ProofSize]byte {
	if initiator {
		return proofMAC(secret, local, remote, true)
	}
	return proofMAC(secret, remote, local, false)
}

// VerifyProof reports whether proof is the one the peer must send: local
// and remote are the two Hellos as for ComputeProof, initiator says whether
// WE opened the connection (so the peer's proof carries the other
// direction's label). The comparison takes constant time.
func VerifyProof(secret []byte, local, remote Hello, initiator bool, proof [ProofSize]byte) bool {
	var want [ProofSize]byte
	if initiator {
		want = proofMAC(secret, local, remote, false)
	} else {
		want = proofMAC(secret, remote, local, true)
	}
	return hmac.Equal(want[:], proof[:])
}

// CheckProof is VerifyProof returning [ErrAuth] on failure.
func CheckProof(secret []byte, local, remote Hello, initiator bool, proof Proof) error {
	if !VerifyProof(secret, local, remote, initiator, proof.MAC) {
		return fmt.Errorf("%w: node %v's proof does not match the job secret", ErrAuth, remote.Node)
	}
	return nil
}
