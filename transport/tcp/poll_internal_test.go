package tcp

import (
	"bytes"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// A read that returns bytes while the reader polls keeps it polling: the
// body of a large frame streams in over many reads, and the polling time
// counted from the last frame delivered would end in the middle of it.
// A read made once polling ended (a heartbeat into an idle process)
// starts no polling time.
func TestPollReaderProgressExtendsPolling(t *testing.T) {
	w, r := loopbackPair(t)

	var spin atomic.Int64
	spin.Store(int64(time.Hour)) // polling never ends by itself here
	ps := &pollState{spin: &spin}
	pr := newPollReader(r, ps)
	if pr == nil {
		t.Fatal("no poll reader for a TCP connection")
	}
	buf := make([]byte, 8)

	// Polling: the read's bytes restart the polling time.
	ps.last.Store(monoNow() - int64(time.Minute))
	before := ps.last.Load()
	if _, err := w.Write([]byte("abcd")); err != nil {
		t.Fatal(err)
	}
	if n, err := pr.Read(buf); err != nil || n == 0 {
		t.Fatalf("read %d, %v", n, err)
	}
	if got := ps.last.Load(); got <= before {
		t.Fatalf("a read while polling left the polling time at %d (was %d)", got, before)
	}

	// Not polling (the time ran out): the read parks and marks nothing.
	spin.Store(int64(time.Millisecond))
	ps.last.Store(monoNow() - int64(time.Hour))
	before = ps.last.Load()
	if _, err := w.Write([]byte("efgh")); err != nil {
		t.Fatal(err)
	}
	if n, err := pr.Read(buf); err != nil || n == 0 {
		t.Fatalf("read %d, %v", n, err)
	}
	if got := ps.last.Load(); got != before {
		t.Fatalf("a read after polling ended moved the polling time to %d (was %d)", got, before)
	}
}

// loopbackPair returns the two ends of a TCP connection over 127.0.0.1,
// the dialled one first, both closed when the test ends.
func loopbackPair(t *testing.T) (dialled, accepted net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	a := <-acc
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close() })
	return d, a
}

// After a placed frame the reader goroutine calls headFirst: the next read
// takes at most headReadMax bytes, so that a large frame after it is read
// into its place but for its first bytes; the read after that is not
// capped, and no byte is lost.
func TestPollReaderHeadFirst(t *testing.T) {
	w, r := loopbackPair(t)
	var spin atomic.Int64
	pr := newPollReader(r, &pollState{spin: &spin})
	if pr == nil {
		t.Fatal("no poll reader for a TCP connection")
	}
	const size = 256 << 10
	payload := func(i int) []byte {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i + j*7)
		}
		return b
	}
	var stream []byte
	for i := range 2 {
		stream = wire.AppendFrame(stream, wire.Frame{Kind: core.MakeKind(core.ProtoTest, 20), Src: 1, Dst: 2, Payload: payload(i)})
	}
	go w.Write(stream) // more than the socket's buffers may hold at once
	fr := wire.NewFrameReader(pr)
	fr.SetMaxFrameSize(1 << 20)
	for i := range 2 {
		atHand := -1
		var dst []byte
		f, placed, err := fr.ReadFramePlaced(func(f wire.Frame, n int) (int, []byte) {
			atHand = len(f.Payload)
			dst = make([]byte, n)
			return 0, dst
		})
		if err != nil || !placed {
			t.Fatalf("frame %d: placed %v, %v", i, placed, err)
		}
		if f.Kind != core.MakeKind(core.ProtoTest, 20) || !bytes.Equal(dst, payload(i)) {
			t.Fatalf("frame %d: %v, payload not as written", i, f)
		}
		if i == 1 && atHand > headReadMax {
			t.Fatalf("the frame after a placed one had %d bytes of its payload read into the buffer, want at most %d", atHand, headReadMax)
		}
		if fr.Buffered() != 0 {
			t.Fatalf("frame %d: %d bytes left buffered", i, fr.Buffered())
		}
		pr.headFirst()
	}
	// Capped once: the read after the capped one takes what is there.
	w.Write(make([]byte, 3*headReadMax))
	buf := make([]byte, 64<<10)
	got := 0
	n, err := pr.Read(buf)
	if err != nil || n == 0 || n > headReadMax {
		t.Fatalf("first read after headFirst: %d, %v; want 1 to %d bytes", n, err, headReadMax)
	}
	for got = n; got < 3*headReadMax; got += n {
		if n, err = pr.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	if got != 3*headReadMax {
		t.Fatalf("read %d bytes, want %d", got, 3*headReadMax)
	}
}
