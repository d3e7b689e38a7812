package wire

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/wire/internal/gmac"
)

// Records: the integrity layer of a connection between hosts. Once both
// proofs of the handshake have verified, a connection whose Hellos asked
// for it ([Hello].Integrity, either side) carries its bytes in records,
// each direction from its sender's proof on (the initiator's [Resume] is
// its first record, the acceptor's [Resume] its own):
//
//	+-------+-------+-------+-------+------------ ... ---+---- 16 bytes ----+
//	|  N (uint32, big-endian, ≥ 1)  | N bytes of frames   | tag              |
//	+-------+-------+-------+-------+------------ ... ---+------------------+
//
// The tag is AES-256-GCM's over nothing to encrypt, with the N bytes as
// additional data (GMAC, computed by wire/internal/gmac, which multiplies
// four blocks per instruction where the processor has AVX-512): the bytes
// travel in the clear and are authenticated. The key is the direction's (RecordKeys: HKDF-SHA256 of
// the job secret and both Hellos), the nonce the record's number in its
// direction (0, 1, 2, … as 12 big-endian bytes), never sent: a record
// altered, dropped, replayed, moved or taken from another connection or
// direction fails its tag. A reader hands on no byte of a record before
// its tag has verified. The records cut the stream wherever the writer
// wrote (a batch of frames, a large payload), not at frames.

// RecordTagSize is the size of a record's tag, in bytes.
const RecordTagSize = 16

// RecordLengthSize is the size of a record's length prefix, in bytes.
const RecordLengthSize = 4

// RecordOverhead is what a record adds to the bytes it carries.
const RecordOverhead = RecordLengthSize + RecordTagSize

// RecordKeySize is the size of a record key (AES-256), in bytes.
const RecordKeySize = 32

// Record errors.
var (
	// ErrRecordAuth: a record's tag does not verify: the record was
	// altered, replayed, reordered or cut on its way, or comes from a
	// sender without the job secret. The connection must be closed.
	ErrRecordAuth = errors.New("wire: record failed its integrity check")
	// ErrRecordLength: a record's length is 0 or over the reader's limit.
	ErrRecordLength = errors.New("wire: bad record length")
)

// recordLabel opens the HKDF info of the record keys; its "v1" is bumped
// if their derivation ever changes.
const recordLabel = "cohort-v1 records"

// RecordKeys derives a connection's two record keys from the job secret
// and the two Hellos (the initiator's and the acceptor's): HKDF-SHA256
// with the secret as input key, both nonces as salt, and as info the
// label "cohort-v1 records", each Hello's encoding preceded by its length
// (so the job id and both node ids too) and the direction. Both sides
// compute the same pair; fresh nonces make every connection's keys new.
func RecordKeys(secret []byte, initiator, acceptor Hello) (fromInitiator, fromAcceptor [RecordKeySize]byte) {
	salt := make([]byte, 0, 2*NonceSize)
	salt = append(append(salt, initiator.Nonce[:]...), acceptor.Nonce[:]...)
	var e Encoder
	e.B = append(e.B, recordLabel...)
	for _, h := range [2]Hello{initiator, acceptor} {
		e.Uvarint(uint64(helloSize(&h)))
		h.MarshalWire(&e)
	}
	n := len(e.B)
	for i, label := range [2]string{labelFromInitiator, labelFromAcceptor} {
		k, err := hkdf.Key(sha256.New, secret, salt, string(append(e.B[:n], label...)), RecordKeySize)
		if err != nil {
			panic(fmt.Sprintf("wire: deriving a record key: %v", err)) // only for lengths HKDF cannot give
		}
		if i == 0 {
			copy(fromInitiator[:], k)
		} else {
			copy(fromAcceptor[:], k)
		}
	}
	return fromInitiator, fromAcceptor
}

// RecordSealer makes one direction's tags. It is not safe for concurrent
// use: records are numbered in the order they are sealed, which must be
// the order they enter the stream.
type RecordSealer struct{ recordCounter }

// RecordOpener checks one direction's tags, in stream order. It is not
// safe for concurrent use.
type RecordOpener struct{ recordCounter }

type recordCounter struct {
	mac    *gmac.MAC
	failed bool // a record failed (RecordOpener): every later one fails
	seq    uint64
	nonce  [gmac.NonceSize]byte
	tag    [RecordTagSize]byte
}

func newRecordCounter(key [RecordKeySize]byte) recordCounter {
	mac, err := gmac.New(key[:])
	if err != nil {
		panic(fmt.Sprintf("wire: record MAC: %v", err)) // a 32-byte key is always valid
	}
	return recordCounter{mac: mac}
}

// NewRecordSealer returns the sealer of the direction whose key is key.
func NewRecordSealer(key [RecordKeySize]byte) *RecordSealer {
	return &RecordSealer{newRecordCounter(key)}
}

// NewRecordOpener returns the opener of the direction whose key is key.
func NewRecordOpener(key [RecordKeySize]byte) *RecordOpener {
	return &RecordOpener{newRecordCounter(key)}
}

// next returns the GMAC of b under the next record number, which it takes.
func (c *recordCounter) next(b []byte) []byte {
	binary.BigEndian.PutUint64(c.nonce[4:], c.seq)
	c.seq++
	c.mac.Sum(&c.tag, &c.nonce, b)
	return c.tag[:]
}

// Seal returns the tag of the next record, whose bytes are b (1 to
// math.MaxUint32 of them); the tag is valid until the next call.
func (s *RecordSealer) Seal(b []byte) []byte {
	if len(b) == 0 || uint64(len(b)) > 1<<32-1 {
		panic(fmt.Sprintf("wire: a record of %d bytes", len(b)))
	}
	return s.next(b)
}

// Open checks tag against the next record's bytes b. A record that fails
// is [ErrRecordAuth], and so is every one after it: the stream is
// unusable.
func (o *RecordOpener) Open(b, tag []byte) error {
	if o.failed {
		return ErrRecordAuth
	}
	binary.BigEndian.PutUint64(o.nonce[4:], o.seq)
	if len(tag) != RecordTagSize || !o.mac.Verify(&o.nonce, b, tag) {
		o.failed = true
		return fmt.Errorf("%w (record %d)", ErrRecordAuth, o.seq)
	}
	o.seq++
	return nil
}

// RecordsInPieces reports whether this processor can compute a record's
// tag over its bytes given in pieces (RecordSealer.Begin,
// RecordOpener.Begin): it can where the fast GHASH is (AVX-512).
func RecordsInPieces() bool { return gmac.Fast() }

// RecordTag computes or checks the tag of one record over its bytes
// given in pieces, as they are written or as they arrive: a large record
// is hashed while it is in the cache, and its reader and writer overlap.
type RecordTag struct {
	h     gmac.Hash
	nonce [gmac.NonceSize]byte
	tag   [RecordTagSize]byte
}

// Begin starts the tag of the next record in t, taking its number;
// RecordsInPieces must be true.
func (s *RecordSealer) Begin(t *RecordTag) {
	binary.BigEndian.PutUint64(t.nonce[4:], s.seq)
	s.seq++
	s.mac.Start(&t.h)
}

// Write adds the record's next bytes.
func (t *RecordTag) Write(b []byte) { t.h.Write(b) }

// Sum returns the record's tag (valid until t is used again).
func (t *RecordTag) Sum() []byte {
	t.h.Sum(&t.tag, &t.nonce)
	return t.tag[:]
}

// Begin starts checking the next record in t; RecordsInPieces must be
// true. Check ends it.
func (o *RecordOpener) Begin(t *RecordTag) {
	binary.BigEndian.PutUint64(t.nonce[4:], o.seq)
	o.mac.Start(&t.h)
}

// Check checks tag against the bytes written to t since Begin, as Open
// does.
func (o *RecordOpener) Check(t *RecordTag, tag []byte) error {
	if o.failed {
		return ErrRecordAuth
	}
	if len(tag) != RecordTagSize || subtle.ConstantTimeCompare(t.Sum(), tag) != 1 {
		o.failed = true
		return fmt.Errorf("%w (record %d)", ErrRecordAuth, o.seq)
	}
	o.seq++
	return nil
}

// Records reports how many records o has verified.
func (o *RecordOpener) Records() uint64 { return o.seq }

// AppendRecordLength appends the length prefix of a record of n bytes.
func AppendRecordLength(b []byte, n int) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// RecordLength decodes the length prefix at the start of b (at least
// RecordLengthSize bytes): a record of 1 to max bytes, else
// [ErrRecordLength].
func RecordLength(b []byte, max int) (int, error) {
	n := binary.BigEndian.Uint32(b)
	if n == 0 || uint64(n) > uint64(max) {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrRecordLength, n, max)
	}
	return int(n), nil
}
