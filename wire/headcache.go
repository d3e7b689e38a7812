package wire

import "encoding/binary"

// DecodeHit decodes into *f the frame b, whole (its length prefix and
// the body the prefix declares, which the caller has checked against its
// limit), if the frame's header is the one c remembers, and reports
// whether it was; otherwise it leaves *f alone, and Decode is the way to
// decode b. It is Decode's common case without the checks of the length
// prefix: a reader that took the frame's length from the prefix itself
// (a shared-memory ring's, which copies the frame out whole) has made
// them.
func (c *HeadCache) DecodeHit(f *Frame, b []byte) bool {
	n := c.n
	if n == 0 || len(b) < LengthSize+n {
		return false
	}
	body := b[LengthSize:]
	if n <= 16 && len(body) >= 16 {
		// Two words compared, masked to the header's bytes, instead of
		// a call: a header of a two-byte kind, one-byte node ids and an
		// epoch of up to 11 bytes.
		lo := binary.LittleEndian.Uint64(body) ^ binary.LittleEndian.Uint64(c.head[:])
		hi := binary.LittleEndian.Uint64(body[8:]) ^ binary.LittleEndian.Uint64(c.head[8:])
		if n < 8 {
			lo &= 1<<(8*n) - 1
			hi = 0
		} else {
			hi &= 1<<(8*(n-8)) - 1 // a shift by 64 gives 0: all eight
		}
		if lo|hi != 0 {
			return false
		}
	} else if string(body[:n]) != string(c.head[:n]) {
		return false
	}
	*f = c.f
	if n < len(body) {
		f.Payload = body[n:len(body):len(body)]
	}
	return true
}
