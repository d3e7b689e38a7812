package tcp

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
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
