package master

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrDecode is returned for a malformed message.
var ErrDecode = errors.New("master: malformed message")

// maxEntries bounds the entries of one decoded message (a job never has more
// tasks than this).
const maxEntries = 1 << 20

// AppendBinary appends the wire form of m to dst: the kind byte, then
// uvarints: task+1, count, number of entries, and each entry's task and count.
func (m Msg) AppendBinary(dst []byte) []byte {
	dst = append(dst, byte(m.Kind))
	dst = binary.AppendUvarint(dst, uint64(m.Task+1))
	dst = binary.AppendUvarint(dst, m.Count)
	dst = binary.AppendUvarint(dst, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		dst = binary.AppendUvarint(dst, uint64(e.Task))
		dst = binary.AppendUvarint(dst, e.Count)
	}
	return dst
}

// DecodeMsg parses a message written by AppendBinary. It never panics.
func DecodeMsg(b []byte) (Msg, error) {
	if len(b) == 0 {
		return Msg{}, fmt.Errorf("%w: empty", ErrDecode)
	}
	m := Msg{Kind: Kind(b[0])}
	if m.Kind < KindRequest || m.Kind > KindDone {
		return Msg{}, fmt.Errorf("%w: unknown kind %d", ErrDecode, b[0])
	}
	b = b[1:]
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, fmt.Errorf("%w: %s", ErrDecode, what)
		}
		b = b[n:]
		return v, nil
	}
	task, err := next("task")
	if err != nil {
		return Msg{}, err
	}
	if task > maxEntries {
		return Msg{}, fmt.Errorf("%w: task %d", ErrDecode, task)
	}
	m.Task = int(task) - 1
	if m.Count, err = next("count"); err != nil {
		return Msg{}, err
	}
	n, err := next("entries")
	if err != nil {
		return Msg{}, err
	}
	if n > maxEntries || n > uint64(len(b)) {
		return Msg{}, fmt.Errorf("%w: %d entries in %d bytes", ErrDecode, n, len(b))
	}
	if n > 0 {
		m.Entries = make([]Entry, n)
	}
	for i := range m.Entries {
		t, err := next("entry task")
		if err != nil {
			return Msg{}, err
		}
		if t >= maxEntries {
			return Msg{}, fmt.Errorf("%w: entry task %d", ErrDecode, t)
		}
		c, err := next("entry count")
		if err != nil {
			return Msg{}, err
		}
		m.Entries[i] = Entry{Task: int(t), Count: c}
	}
	if len(b) != 0 {
		return Msg{}, fmt.Errorf("%w: %d trailing bytes", ErrDecode, len(b))
	}
	return m, nil
}
