package wire

import (
	"errors"
	"testing"
)

// TestRecordKeys: both ends derive the same pair from the job secret and
// the two Hellos; the directions differ, and so does every input.
func TestRecordKeys(t *testing.T) {
	hi, ha := hello(1, 10), hello(2, 20)
	ha.Integrity = true
	fromI, fromA := RecordKeys(secret, hi, ha)
	if fromI == fromA {
		t.Fatal("both directions have the same key")
	}
	if i2, a2 := RecordKeys(secret, hi, ha); i2 != fromI || a2 != fromA {
		t.Fatal("the keys are not a function of their inputs")
	}
	other := func(name string, s []byte, i, a Hello) {
		t.Helper()
		x, y := RecordKeys(s, i, a)
		if x == fromI || y == fromA || x == fromA || y == fromI {
			t.Errorf("%s: a key is unchanged", name)
		}
	}
	other("another secret", []byte("another secret"), hi, ha)
	other("hellos swapped", secret, ha, hi)
	nonce := hi
	nonce.Nonce[0]++
	other("another nonce", secret, nonce, ha)
	node := ha
	node.Node = 3
	other("another node", secret, hi, node)
	job := hi
	job.JobID = "job-43"
	other("another job", secret, job, ha)
}

// TestRecordsInOrderOnly: an opener takes the sealer's records in their
// order only; one replayed, skipped, reordered, altered or sealed with
// the other direction's key fails, and so does every record after it.
func TestRecordsInOrderOnly(t *testing.T) {
	fromI, fromA := RecordKeys(secret, hello(1, 10), hello(2, 20))
	records := [][]byte{[]byte("first record"), []byte("second record"), []byte("third")}
	seal := func(key [RecordKeySize]byte) [][]byte {
		s := NewRecordSealer(key)
		tags := make([][]byte, len(records))
		for i, r := range records {
			tags[i] = append([]byte(nil), s.Seal(r)...)
		}
		return tags
	}
	tags, wrongKey := seal(fromI), seal(fromA)
	o := NewRecordOpener(fromI)
	for i, r := range records {
		if err := o.Open(r, tags[i]); err != nil {
			t.Fatalf("record %d in order: %v", i, err)
		}
	}
	if o.Records() != 3 {
		t.Fatalf("%d records verified, want 3", o.Records())
	}
	altered := append([]byte(nil), records[0]...)
	altered[3] ^= 1
	for _, c := range []struct {
		name       string
		data, tags [][]byte
	}{
		{"replayed", [][]byte{records[0], records[0]}, [][]byte{tags[0], tags[0]}},
		{"skipped", [][]byte{records[1]}, [][]byte{tags[1]}},
		{"reordered", [][]byte{records[1], records[0]}, [][]byte{tags[1], tags[0]}},
		{"altered", [][]byte{altered}, [][]byte{tags[0]}},
		{"other direction", [][]byte{records[0]}, [][]byte{wrongKey[0]}},
		{"short tag", [][]byte{records[0]}, [][]byte{tags[0][:8]}},
	} {
		o := NewRecordOpener(fromI)
		var err error
		for i := range c.data {
			if err = o.Open(c.data[i], c.tags[i]); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrRecordAuth) {
			t.Errorf("%s: got %v, want ErrRecordAuth", c.name, err)
		}
		if err := o.Open(records[0], tags[0]); !errors.Is(err, ErrRecordAuth) {
			t.Errorf("%s: after a failure, a genuine record gave %v, want ErrRecordAuth (sticky)", c.name, err)
		}
	}
}

func TestRecordLength(t *testing.T) {
	for _, c := range []struct {
		n, max int
		ok     bool
	}{{1, 10, true}, {10, 10, true}, {0, 10, false}, {11, 10, false}, {1<<32 - 1, 1 << 20, false}} {
		b := AppendRecordLength(nil, c.n)
		got, err := RecordLength(b, c.max)
		if c.ok && (err != nil || got != c.n) {
			t.Errorf("length %d, limit %d: got %d, %v", c.n, c.max, got, err)
		}
		if !c.ok && !errors.Is(err, ErrRecordLength) {
			t.Errorf("length %d, limit %d: got %d, %v; want ErrRecordLength", c.n, c.max, got, err)
		}
	}
}

// A record's tag computed over its bytes in pieces is its tag, and an
// opener checking in pieces takes the sealer's records in order only.
func TestRecordTagInPieces(t *testing.T) {
	if !RecordsInPieces() {
		t.Skip("no fast GHASH on this processor")
	}
	key, _ := RecordKeys(secret, hello(1, 10), hello(2, 20))
	records := [][]byte{make([]byte, 1000), []byte("small"), make([]byte, 70_000)}
	for i, r := range records {
		for j := range r {
			r[j] = byte(i + j*3)
		}
	}
	whole, pieces := NewRecordSealer(key), NewRecordSealer(key)
	var tags [][]byte
	for _, r := range records {
		want := append([]byte(nil), whole.Seal(r)...)
		var rt RecordTag
		pieces.Begin(&rt)
		for rest := r; len(rest) > 0; rest = rest[min(len(rest), 333):] {
			rt.Write(rest[:min(len(rest), 333)])
		}
		if got := rt.Sum(); string(got) != string(want) {
			t.Fatalf("%d bytes: tag in pieces %x, whole %x", len(r), got, want)
		}
		tags = append(tags, want)
	}
	o := NewRecordOpener(key)
	check := func(b, tag []byte) error {
		var rt RecordTag
		o.Begin(&rt)
		rt.Write(b)
		return o.Check(&rt, tag)
	}
	if err := check(records[0], tags[0]); err != nil {
		t.Fatal(err)
	}
	if err := check(records[2], tags[2]); !errors.Is(err, ErrRecordAuth) {
		t.Fatalf("a record skipped: %v, want ErrRecordAuth", err)
	}
	if err := check(records[1], tags[1]); !errors.Is(err, ErrRecordAuth) {
		t.Fatalf("after a failure: %v, want ErrRecordAuth (sticky)", err)
	}
}
