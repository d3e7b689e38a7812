package steal

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/examples/nqueens/internal/queens"
)

// ErrDecode is returned for a malformed message.
var ErrDecode = errors.New("steal: malformed message")

// AppendBinary appends the wire form of m to dst: the kind byte, the gift id
// and the count as uvarints, the prefix (queens.Prefix.AppendBinary), the
// number of units as a uvarint and each unit as a prefix.
func (m Msg) AppendBinary(dst []byte) []byte {
	dst = append(dst, byte(m.Kind))
	dst = binary.AppendUvarint(dst, m.Gift)
	dst = binary.AppendUvarint(dst, m.Count)
	dst = m.Prefix.AppendBinary(dst)
	dst = binary.AppendUvarint(dst, uint64(len(m.Units)))
	for _, u := range m.Units {
		dst = u.AppendBinary(dst)
	}
	return dst
}

// DecodeMsg parses a message written by AppendBinary. It never panics.
func DecodeMsg(b []byte) (Msg, error) {
	if len(b) == 0 {
		return Msg{}, fmt.Errorf("%w: empty", ErrDecode)
	}
	m := Msg{Kind: Kind(b[0])}
	if m.Kind < KindSteal || m.Kind > KindCheckpoint {
		return Msg{}, fmt.Errorf("%w: unknown kind %d", ErrDecode, b[0])
	}
	b = b[1:]
	var n int
	if m.Gift, n = binary.Uvarint(b); n <= 0 {
		return Msg{}, fmt.Errorf("%w: gift id", ErrDecode)
	}
	b = b[n:]
	if m.Count, n = binary.Uvarint(b); n <= 0 {
		return Msg{}, fmt.Errorf("%w: count", ErrDecode)
	}
	b = b[n:]
	p, rest, err := queens.DecodePrefix(b)
	if err != nil {
		return Msg{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	nu, n := binary.Uvarint(rest)
	if n <= 0 || nu > uint64(len(rest)) {
		return Msg{}, fmt.Errorf("%w: unit count", ErrDecode)
	}
	rest = rest[n:]
	for range nu {
		var u queens.Prefix
		if u, rest, err = queens.DecodePrefix(rest); err != nil {
			return Msg{}, fmt.Errorf("%w: unit: %w", ErrDecode, err)
		}
		m.Units = append(m.Units, u)
	}
	if len(rest) != 0 {
		return Msg{}, fmt.Errorf("%w: %d trailing bytes", ErrDecode, len(rest))
	}
	if len(p) > 0 {
		m.Prefix = p
	}
	return m, nil
}
