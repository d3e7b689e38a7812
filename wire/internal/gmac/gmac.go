// Package gmac computes GMAC (NIST SP 800-38D): AES-GCM's tag over
// additional data alone, with nothing to encrypt. Its tags are those of
// crypto/cipher's GCM Seal(nil, nonce, nil, data); on amd64 processors
// with AVX-512 and VPCLMULQDQ its GHASH multiplies four blocks per
// instruction, three carry-less products per block (Karatsuba), and
// reduces once per thirty-two blocks, about three and a half times
// crypto/cipher's speed over a large input (BenchmarkSum, in processor
// time), which is what the records and relayed frames of package wire pay
// per byte. Elsewhere, and for inputs under 512 bytes, it calls
// crypto/cipher.
//
//	m, err := gmac.New(key) // 16, 24 or 32 bytes
//	m.Sum(&tag, &nonce, data)
//	ok := m.Verify(&nonce, data, tag[:])
//
// A Hash computes the same tag over data given in pieces, where Fast
// reports the fast GHASH. A MAC's Sum and Verify may be called
// concurrently (they change nothing in it); a Hash is not safe for
// concurrent use.
package gmac

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"sync"
)

// smallFrom is the smallest input the fast GHASH takes: below it, a
// call per block left after the groups of sixteen costs more than
// crypto/cipher's own loop.
const smallFrom = 512

// TagSize is the size of a tag, in bytes.
const TagSize = 16

// NonceSize is the size of a nonce, in bytes.
const NonceSize = 12

// MAC computes the tags of one key.
type MAC struct {
	block cipher.Block
	aead  cipher.AEAD
	fast  bool // the fast GHASH, for inputs of smallFrom bytes or more
	// The hash key H, in the form the assembly multiplies by (see
	// fieldOf and star), and its powers.
	h   [2]uint64
	tab table
}

// New returns the MAC of an AES key of 16, 24 or 32 bytes.
func New(key []byte) (*MAC, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	m := &MAC{block: block, aead: aead, fast: fast}
	if !fast {
		return m, nil
	}
	var h [16]byte
	block.Encrypt(h[:], h[:])
	m.h = star(fieldOf(h[:]))
	p := m.h
	for k := len(m.tab.powers) - 1; k >= 0; k-- {
		m.tab.powers[k] = p
		m.tab.mids[k] = [2]uint64{p[0] ^ p[1], p[0] ^ p[1]}
		gfMul(&p, &m.h)
	}
	return m, nil
}

// Sum writes to tag the GMAC of data under nonce.
func (m *MAC) Sum(tag *[TagSize]byte, nonce *[NonceSize]byte, data []byte) {
	if !m.fast || len(data) < smallFrom {
		m.aead.Seal(tag[:0], nonce[:], nil, data)
		return
	}
	m.sumFast(tag, nonce, data)
}

// sumFast is Sum with the fast GHASH, which keeps neither tag nor nonce:
// a caller's arrays stay on its stack.
func (m *MAC) sumFast(tag *[TagSize]byte, nonce *[NonceSize]byte, data []byte) {
	var h Hash
	m.Start(&h)
	h.Write(data)
	h.Sum(tag, nonce)
}

// Fast reports whether this processor has the fast GHASH, without which
// a Hash cannot be used.
func Fast() bool { return fast }

// Hash is a GMAC over data given in pieces: Start, Write each piece,
// Sum. It needs the fast GHASH (Fast). A reader can so hash each piece of
// a large input as it arrives, while it is in the cache, instead of the
// whole once it is all there.
type Hash struct {
	m    *MAC
	y    [2]uint64
	n    uint64 // bytes written
	nbuf int
	buf  [256]byte // the bytes of an incomplete group of sixteen blocks
}

// Start makes h a new hash of m's key.
func (m *MAC) Start(h *Hash) {
	if !m.fast {
		panic("gmac: a Hash without the fast GHASH")
	}
	h.m, h.y, h.n, h.nbuf = m, [2]uint64{}, 0, 0
}

// Write adds b to the data hashed.
func (h *Hash) Write(b []byte) {
	h.n += uint64(len(b))
	if h.nbuf > 0 {
		k := copy(h.buf[h.nbuf:], b)
		h.nbuf += k
		b = b[k:]
		if h.nbuf < len(h.buf) {
			return
		}
		ghash16(&h.y, h.m.powers16(), &h.buf[0], 1)
		h.nbuf = 0
	}
	if pairs := len(b) / 512; pairs > 0 {
		ghash32(&h.y, &h.m.tab, &b[0], pairs)
		b = b[pairs*512:]
	}
	if len(b) >= 256 {
		ghash16(&h.y, h.m.powers16(), &b[0], 1)
		b = b[256:]
	}
	h.nbuf = copy(h.buf[:], b)
}

// powers16 returns H^16 … H^1, ghash16's powers.
func (m *MAC) powers16() *[16][2]uint64 { return (*[16][2]uint64)(m.tab.powers[16:]) }

// table is what ghash32 multiplies by: H^32 … H^1 (powers), and for each
// the sum of its two halves, in both words (mids), for Karatsuba's
// middle product.
type table struct {
	powers [32][2]uint64
	mids   [32][2]uint64
}

// Sum writes to tag the GMAC under nonce of the data written.
func (h *Hash) Sum(tag *[TagSize]byte, nonce *[NonceSize]byte) {
	y := h.y
	rest := h.buf[:h.nbuf]
	for ; len(rest) >= 16; rest = rest[16:] {
		xorBlock(&y, rest[:16])
		gfMul(&y, &h.m.h)
	}
	if len(rest) > 0 {
		var b [16]byte
		copy(b[:], rest)
		xorBlock(&y, b[:])
		gfMul(&y, &h.m.h)
	}
	// The lengths block: the data's length in bits, then the
	// ciphertext's, 0.
	y[1] ^= h.n * 8
	gfMul(&y, &h.m.h)
	j := counterBlocks.Get().(*[16]byte)
	*j = [16]byte{}
	copy(j[:], nonce[:])
	j[15] = 1
	h.m.block.Encrypt(j[:], j[:])
	binary.BigEndian.PutUint64(tag[0:], y[1]^binary.BigEndian.Uint64(j[0:]))
	binary.BigEndian.PutUint64(tag[8:], y[0]^binary.BigEndian.Uint64(j[8:]))
	counterBlocks.Put(j)
}

// counterBlocks holds the blocks Sum encrypts the nonce's counter block
// in: handed to the cipher through an interface, an array of Sum's own
// would be moved to the heap on every call (every record sealed or
// opened from smallFrom bytes on).
var counterBlocks = sync.Pool{New: func() any { return new([16]byte) }}

// Verify reports, in constant time, whether tag is the GMAC of data
// under nonce.
func (m *MAC) Verify(nonce *[NonceSize]byte, data, tag []byte) bool {
	if !m.fast || len(data) < smallFrom {
		// GCM's Open of a tag alone (as Check): a tag of Sum's own,
		// handed to GCM's Seal through an interface, would be moved to
		// the heap on every call.
		if len(tag) != TagSize {
			return false
		}
		_, err := m.aead.Open(nil, nonce[:], tag, data)
		return err == nil
	}
	var want [TagSize]byte
	m.sumFast(&want, nonce, data)
	return subtle.ConstantTimeCompare(want[:], tag) == 1
}

// AppendSum appends to b the GMAC of data under nonce (NonceSize
// bytes). Under smallFrom bytes the tag is written into b's spare
// capacity and nonce is read where it is: Sum's arrays, handed to
// crypto/cipher through an interface, would each be allocated on the
// heap, which costs a small relayed frame about as much as its tag.
func (m *MAC) AppendSum(b, nonce, data []byte) []byte {
	if !m.fast || len(data) < smallFrom {
		return m.aead.Seal(b, nonce, nil, data)
	}
	var tag [TagSize]byte
	m.sumFast(&tag, (*[NonceSize]byte)(nonce), data)
	return append(b, tag[:]...)
}

// Check is Verify for a nonce held in a slice (NonceSize bytes), which,
// as AppendSum's, is not copied to the heap for an input under
// smallFrom bytes.
func (m *MAC) Check(nonce, data, tag []byte) bool {
	if len(tag) != TagSize {
		return false
	}
	if !m.fast || len(data) < smallFrom {
		// GCM's Open of a tag alone: the same tag, compared in
		// constant time.
		_, err := m.aead.Open(nil, nonce, tag, data)
		return err == nil
	}
	return m.Verify((*[NonceSize]byte)(nonce), data, tag)
}

// fieldOf returns a GHASH block as the assembly holds it: its 16 bytes
// reversed (PSHUFB), as two little-endian words.
func fieldOf(b []byte) [2]uint64 {
	return [2]uint64{binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[:8])}
}

// xorBlock adds the block b to y.
func xorBlock(y *[2]uint64, b []byte) {
	y[0] ^= binary.BigEndian.Uint64(b[8:])
	y[1] ^= binary.BigEndian.Uint64(b[:8])
}

// star turns a field element into the form of a multiplier: shifted left
// by one bit and reduced, so that a carry-less product of byte-reversed
// operands needs no shift (Gueron and Kounavis; crypto/cipher's GCM keeps
// its hash key so).
func star(x [2]uint64) [2]uint64 {
	carry := x[1] >> 63
	x[1] = x[1]<<1 | x[0]>>63
	x[0] <<= 1
	if carry == 1 {
		x[0] ^= 1
		x[1] ^= 0xc200000000000000
	}
	return x
}
