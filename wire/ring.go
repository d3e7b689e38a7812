package wire

import (
	"crypto/hmac"
	"fmt"

	"github.com/cohort-mp/cohort/core"
)

// Ring is the last message of a handshake between two processes of one
// host that may carry their frames over shared memory (transport/tcp's
// shared-memory path). Each side sends two, in this order:
//
//   - an offer (Answer false): Size is the data size in bytes of the ring
//     the sender will write to the peer, whose memory travels beside the
//     frame (a file descriptor over the Unix socket), or 0 for no ring;
//   - an answer (Answer true) to the peer's offer: Size 1 if the sender
//     maps the peer's ring and will read the peer's frames from it, 0 if
//     it refuses it (the peer then goes on writing to the socket).
//
// The ring's memory is checked by its reader, not trusted: its header
// carries [RingTag], which only a holder of the job secret can compute for
// this connection and direction.
type Ring struct {
	Answer bool
	Size   uint64
}

// MaxRingSize bounds a ring offer's size: 1 GiB.
const MaxRingSize = 1 << 30

// Kind returns KindRing.
func (Ring) Kind() core.Kind { return KindRing }

// MarshalWire appends the step (1 offer, 2 answer) and the size.
func (r Ring) MarshalWire(e *Encoder) {
	step := byte(1)
	if r.Answer {
		step = 2
	}
	e.B = append(e.B, step)
	e.Uvarint(r.Size)
}

// DecodeRing decodes a Ring payload and checks it: a known step, an offer
// of at most MaxRingSize, an answer of 0 or 1.
func DecodeRing(payload []byte) (Ring, error) {
	d := NewDecoder(payload)
	step := d.Fixed(1)
	size := d.Uvarint()
	if err := d.Finish(); err != nil {
		return Ring{}, err
	}
	r := Ring{Answer: step[0] == 2, Size: size}
	switch {
	case step[0] != 1 && step[0] != 2:
		return Ring{}, fmt.Errorf("%w: ring step %d", ErrInvalid, step[0])
	case !r.Answer && size > MaxRingSize:
		return Ring{}, fmt.Errorf("%w: ring of %d bytes, limit %d", ErrTooLong, size, MaxRingSize)
	case r.Answer && size > 1:
		return Ring{}, fmt.Errorf("%w: ring answer %d", ErrInvalid, size)
	}
	return r, nil
}

// Ring tag labels: whose ring it is.
const (
	ringFromInitiator = "ring initiator->acceptor"
	ringFromAcceptor  = "ring acceptor->initiator"
)

// RingTag returns the tag that the header of a shared-memory ring of this
// connection carries: an HMAC of the job secret over both Hellos (as the
// proofs) and the direction. local and remote are our Hello and the
// peer's, initiator says whether we opened the connection, and ours
// whether the ring is the one we write (else the peer's). A ring of
// another job, another connection or the other direction has another tag.
func RingTag(secret []byte, local, remote Hello, initiator, ours bool) [ProofSize]byte {
	i, a := local, remote
	if !initiator {
		i, a = remote, local
	}
	label := ringFromAcceptor
	if initiator == ours {
		label = ringFromInitiator
	}
	return helloMAC(secret, i, a, label)
}

// CheckRingTag reports whether tag is RingTag's (in constant time).
func CheckRingTag(secret []byte, local, remote Hello, initiator, ours bool, tag []byte) bool {
	want := RingTag(secret, local, remote, initiator, ours)
	return hmac.Equal(want[:], tag)
}
