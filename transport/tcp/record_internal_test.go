package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/wire"
)

// bufConn is a net.Conn whose writes go to a buffer.
type bufConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *bufConn) Write(b []byte) (int, error) { return c.buf.Write(b) }

func (c *bufConn) Bytes() []byte { return c.buf.Bytes() }

var (
	recordSecret = []byte("record test secret")
	recordHelloI = wire.Hello{Version: wire.Version, JobID: "job", Node: 1, Nonce: [16]byte{1}, Integrity: true}
	recordHelloA = wire.Hello{Version: wire.Version, JobID: "job", Node: 2, Nonce: [16]byte{2}}
)

// recordWrites are what recordStream writes: a small record, a large one
// (cut in two records), a head and body written as by SendDirect, and
// small ones after.
var recordWrites = [][2]int{{0, 10}, {0, 3 * wire.PlaceMin}, {40, wire.PlaceMin + 5}, {0, 300}, {0, 1}}

// fuzzWrites are recordWrites made small, for the fuzzer (whose
// mutations of large inputs are slow): a record read straight into the
// caller's buffer still, none cut in two.
var fuzzWrites = [][2]int{{0, 10}, {0, recordDirectMin + 100}, {40, 300}, {0, 1}}

// recordStream returns the initiator's records of writes, the bytes they
// carry, and where each record starts in the stream.
func recordStream(writes [][2]int) (stream, plain []byte, starts []int) {
	c := &bufConn{}
	w := newRecordConn(c, recordSecret, recordHelloI, recordHelloA, true)
	for i, sizes := range writes {
		head, body := make([]byte, sizes[0]), make([]byte, sizes[1])
		for j := range head {
			head[j] = byte(i*7 + j)
		}
		for j := range body {
			body[j] = byte(i*13 + j*5)
		}
		if len(head) > 0 {
			w.writeVectored(head, body)
		} else {
			w.Write(body)
		}
		plain = append(append(plain, head...), body...)
	}
	stream = c.Bytes()
	for off := 0; off < len(stream); {
		starts = append(starts, off)
		off += wire.RecordOverhead + int(binary.BigEndian.Uint32(stream[off:]))
	}
	return stream, plain, starts
}

// readRecords reads stream as the acceptor, sizes[i%len] bytes per Read,
// and returns what it read and the error that ended it.
func readRecords(stream []byte, sizes []int) ([]byte, error) {
	r := newRecordConn(nil, recordSecret, recordHelloA, recordHelloI, false)
	r.src = bytes.NewReader(stream)
	r.startReading(nil)
	r.raiseLimit(4*wire.PlaceMin, 4<<10) // room for recordWrites; a small limit keeps the fuzzing fast
	var out []byte
	buf := make([]byte, max(64<<10, slices.Max(sizes)))
	for i := 0; ; i++ {
		p := buf[:sizes[i%len(sizes)]]
		n, err := r.Read(p)
		if n < 0 || n > len(p) {
			return out, errors.New("a Read returned a bad count")
		}
		out = append(out, p[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// A record stream read whole gives back every byte written, whatever the
// reads' sizes (large ones read a large record straight into the caller's
// buffer); one whose records were replayed, reordered, dropped, cut,
// altered or sent the other way gives back only the records before the
// change, then fails.
func TestRecordStream(t *testing.T) {
	stream, plain, starts := recordStream(recordWrites)
	if len(starts) != 7 {
		t.Fatalf("%d records; want 7 (the large writes cut in two)", len(starts))
	}
	record := func(i int) []byte {
		end := len(stream)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		return stream[starts[i]:end]
	}
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	reads := [][]int{{1}, {7, 100}, {64 << 10}, {wire.PlaceMin - 1, 3 * wire.PlaceMin}}
	for _, sizes := range reads {
		got, err := readRecords(stream, sizes)
		if err != io.EOF || !bytes.Equal(got, plain) {
			t.Fatalf("reads of %v: %d of %d bytes, equal %v, %v", sizes, len(got), len(plain), bytes.Equal(got, plain), err)
		}
	}
	altered := bytes.Clone(stream)
	altered[starts[2]+wire.RecordLengthSize+5] ^= 1
	lengthAltered := bytes.Clone(stream)
	lengthAltered[starts[3]+3] ^= 4
	otherWay := &bufConn{}
	a := newRecordConn(otherWay, recordSecret, recordHelloA, recordHelloI, false)
	a.Write(plain[:10])
	for _, c := range []struct {
		name   string
		stream []byte
		before int // records read before the change
		want   error
	}{
		{"replayed", join(record(0), record(1), record(1)), 2, wire.ErrRecordAuth},
		{"reordered", join(record(0), record(2), record(1)), 1, wire.ErrRecordAuth},
		{"dropped", join(record(0), record(2)), 1, wire.ErrRecordAuth},
		{"altered", altered, 2, wire.ErrRecordAuth},
		{"length altered", lengthAltered, 3, wire.ErrRecordAuth},
		{"cut", stream[:starts[3]+9], 3, io.ErrUnexpectedEOF},
		{"the other direction's", otherWay.Bytes(), 0, wire.ErrRecordAuth},
	} {
		for _, sizes := range reads {
			got, err := readRecords(c.stream, sizes)
			n := 0
			for i := range c.before {
				n += len(record(i)) - wire.RecordOverhead
			}
			if !errors.Is(err, c.want) || !bytes.Equal(got, plain[:n]) {
				t.Errorf("%s, reads of %v: %d bytes (want the %d before the change), %v (want %v)", c.name, sizes, len(got), n, err, c.want)
			}
		}
	}
}

// FuzzRecordReader reads arbitrary streams (the seeds: genuine records,
// and changed ones) with reads of arbitrary sizes: what it returns is
// always a prefix of what the genuine writer wrote, and it never panics.
func FuzzRecordReader(f *testing.F) {
	stream, plain, starts := recordStream(fuzzWrites)
	f.Add(stream, []byte{0})
	f.Add(stream, []byte{1, 200, 3})
	f.Add(stream[:starts[2]+100], []byte{255})
	f.Add(append(bytes.Clone(stream[starts[1]:starts[2]]), stream...), []byte{9})
	f.Add([]byte{0, 0, 0, 0}, []byte{1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}, []byte{1})
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		reads := []int{wire.PlaceMin}
		for _, s := range sizes[:min(len(sizes), 64)] {
			if s%4 == 0 {
				reads = append(reads, 64<<10)
			} else {
				reads = append(reads, 16*int(s))
			}
		}
		got, err := readRecords(stream, reads)
		if err == nil {
			t.Fatal("the reads ended without an error")
		}
		if !bytes.HasPrefix(plain, got) {
			t.Fatalf("read %d bytes that the writer did not write", len(got))
		}
	})
}

// A connection refused at a record is counted as tampered even when it is
// retired after it was closed: closing it ends the peer's side, the peer
// redials at once, and the new connection retires the old one (replaced)
// while its reader may not have reached connDied yet. One retired before
// it was closed ends quietly.
func TestTamperedCountedWhenRetiredAfter(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Node, cfg.JobID, cfg.Secret = 2, "job-tamper", []byte("tamper-secret-0123456789abcdef!!")
	tr, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	died := func(retiredBefore bool) {
		nc, other := net.Pipe()
		defer other.Close()
		c := tr.newConn(nc, nil, 1, false, "pipe")
		if retiredBefore {
			c.retire()
		}
		c.close(false, wire.ErrRecordAuth) // as connDied's own close does
		c.retire()                         // the peer's redial replaced it
		tr.connDied(c, wire.ErrRecordAuth)
	}
	died(false)
	if s := tr.Stats(); s.Lost != 1 || s.Tampered != 1 {
		t.Fatalf("closed at a record, retired after: Lost %d, Tampered %d; want 1, 1", s.Lost, s.Tampered)
	}
	died(true)
	if s := tr.Stats(); s.Lost != 1 || s.Tampered != 1 {
		t.Fatalf("retired, then closed: Lost %d, Tampered %d; want it quiet (1, 1 still)", s.Lost, s.Tampered)
	}
}
