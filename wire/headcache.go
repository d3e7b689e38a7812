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
	if n <= 8 && len(body) >= 8 {
		// One comparison of a word, masked to the header's bytes (a
		// shift by 64 gives 0: all eight), instead of a call.
		mask := uint64(1)<<(8*n) - 1
		if (binary.LittleEndian.Uint64(body)^binary.LittleEndian.Uint64(c.head[:]))&mask != 0 {
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
