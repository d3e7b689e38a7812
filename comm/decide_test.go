package comm

import (
	"errors"
	"testing"
)

// FuzzDecodeOutcome: a decision value that is not a well-formed outcome
// is an error, never a panic; a well-formed one decodes to what was
// encoded.
func FuzzDecodeOutcome(f *testing.F) {
	for _, seed := range [][]byte{
		encodeOutcome(2, true, Status{Source: 1, Tag: 7, Count: 64}, nil),
		encodeOutcome(0, false, Status{}, &ProcFailedError{Ranks: []int{3, 5}}),
		encodeOutcome(0, false, Status{}, ErrRevoked),
		encodeOutcome(-1, false, Status{}, errors.New("session ended")),
		{}, {0xff}, {0, 1, 2, 3, 4, 5, 6, 9},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		i, found, st, err := decodeOutcome(b)
		if err != nil && i == -1 && !found {
			return // malformed, or an outcome error
		}
		back := encodeOutcome(i, found, st, err)
		i2, found2, st2, err2 := decodeOutcome(back)
		if i2 != i || found2 != found || st2 != st || (err == nil) != (err2 == nil) {
			t.Fatalf("round trip of %x: (%d %v %+v %v) then (%d %v %+v %v)", b, i, found, st, err, i2, found2, st2, err2)
		}
	})
}
