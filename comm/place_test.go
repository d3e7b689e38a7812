package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/cohort-mp/cohort/comm/internal/coll"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// Over TCP, large messages whose receive is posted are read straight into
// the receive's buffer (counted), whatever the receive: a buffer of the
// exact size or larger, AnySource; one that arrives before its receive
// (received as float64s), and one too large for its buffer, are read
// straight into the buffer they wait in (counted apart); every message
// arrives whole and in order.
func TestPlacedReceives(t *testing.T) {
	ss := tcpJob(t, 2)
	sizes := []int{wire.PlaceMin, 3*wire.PlaceMin + 5, 1 << 20, 64 << 10}
	msg := func(i, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i*131 + j*7)
		}
		return b
	}
	each(t, ss, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 0 {
			if _, err := c.Recv(ctx, make([]byte, 1), 1, 99); err != nil { // rank 1's receives are posted
				return err
			}
			for i, n := range sizes {
				if err := c.Send(ctx, msg(i, n), 1, i); err != nil {
					return err
				}
			}
			if err := c.Send(ctx, msg(7, 2*wire.PlaceMin), 1, 7); err != nil { // unexpected
				return err
			}
			return c.Send(ctx, msg(8, 2*wire.PlaceMin), 1, 8) // truncated
		}
		bufs := make([][]byte, len(sizes))
		reqs := make([]*Request, len(sizes))
		for i, n := range sizes {
			bufs[i] = make([]byte, n+i*100) // room to spare but for the first
			src := 0
			if i == 2 {
				src = AnySource
			}
			reqs[i] = c.Irecv(bufs[i], src, i)
		}
		if err := c.Send(ctx, []byte{1}, 0, 99); err != nil {
			return err
		}
		for i, r := range reqs {
			st, err := r.Wait(ctx)
			if err != nil {
				return err
			}
			if st.Count != sizes[i] || st.Source != 0 || st.Tag != i || !bytes.Equal(bufs[i][:st.Count], msg(i, sizes[i])) {
				return fmt.Errorf("message %d: status %+v, contents equal %v", i, st, bytes.Equal(bufs[i][:st.Count], msg(i, sizes[i])))
			}
		}
		if placed := c.s.stats.placed.Load(); placed != uint64(len(sizes)) {
			return fmt.Errorf("%d messages placed, want %d", placed, len(sizes))
		}
		if tr := c.s.tr.(*tcp.Transport).Stats(); tr.Placed < uint64(len(sizes)) {
			return fmt.Errorf("transport placed %d frames, want at least %d", tr.Placed, len(sizes))
		}
		// The unexpected one: wait until it is queued, then receive it.
		if _, err := c.Probe(ctx, 0, 7); err != nil {
			return err
		}
		got := make([]float64, wire.PlaceMin/4)
		if st, err := Recv(ctx, c, got, 0, 7); err != nil || st.Count != len(got) || !bytes.Equal(coll.AsBytes(got), msg(7, 2*wire.PlaceMin)) {
			return fmt.Errorf("unexpected message: %+v, %v", st, err)
		}
		// The truncated one, once it is queued too: a receive posted
		// before it arrives would take it as an expected message.
		if _, err := c.Probe(ctx, 0, 8); err != nil {
			return err
		}
		var te *TruncateError
		if _, err := c.Recv(ctx, make([]byte, wire.PlaceMin), 0, 8); !errors.As(err, &te) || te.Need != 2*wire.PlaceMin {
			return fmt.Errorf("a message larger than its buffer: %v", err)
		}
		if placed := c.s.stats.placed.Load(); placed != uint64(len(sizes)) {
			return fmt.Errorf("%d messages placed at the end, want %d", placed, len(sizes))
		}
		if held := c.s.stats.placedHeld.Load(); held != 2 {
			return fmt.Errorf("%d unexpected messages placed, want 2", held)
		}
		if tr := c.s.tr.(*tcp.Transport).Stats(); tr.Placed != uint64(len(sizes))+2 {
			return fmt.Errorf("transport placed %d frames, want %d", tr.Placed, len(sizes)+2)
		}
		return nil
	})
}

// A receive whose message is being read into its buffer is on no list:
// the sender's failure does not complete it while the read goes on, and
// Cancel waits for the read. When the read fails (the failed sender's
// connection closed), the receive goes back in its place among the posted
// ones and fails as any receive from a failed rank does.
func TestPlacedReceiveFailure(t *testing.T) {
	ss := job(t, 3)
	s := ss[1]
	w := s.World()
	frame := func(tag, n int) (wire.Frame, int) {
		p := appendDataHeader(nil, kindData, dataHeader{ctxID: worldID | subP2P, tag: tag})
		return wire.Frame{Kind: kindData, Src: 0, Dst: 1, Payload: p}, len(p) + n
	}
	pl := placer{s}

	// Cancel waits for the read.
	buf := make([]byte, 100)
	req := w.Irecv(buf, 0, 5)
	f, n := frame(5, 100)
	skip, dst := pl.Place(f, n)
	if dst == nil || skip != len(f.Payload) || len(dst) != 100 {
		t.Fatalf("Place gave skip %d and %d bytes", skip, len(dst))
	}
	canceled := make(chan bool)
	go func() { canceled <- req.Cancel() }()
	for range 100 {
		runtime.Gosched() // give Cancel its chance to return too early
	}
	select {
	case <-canceled:
		t.Fatal("Cancel returned while the message was being read into the buffer")
	default:
	}
	copy(dst, bytes.Repeat([]byte{9}, 100))
	pl.Placed(f, true)
	if <-canceled {
		t.Fatal("Cancel withdrew a receive whose message had arrived")
	}
	if st, err := req.Wait(context.Background()); err != nil || st.Count != 100 || buf[99] != 9 {
		t.Fatalf("receive: %+v, %v", st, err)
	}

	// The sender fails in the middle of the read.
	first := w.Irecv(make([]byte, 100), 0, 6)
	later := w.Irecv(make([]byte, 100), 0, AnyTag)
	f, n = frame(6, 100)
	if _, dst := pl.Place(f, n); dst == nil {
		t.Fatal("Place refused a posted receive")
	}
	s.fail([]int{0}, 1)
	if _, done, _ := first.Test(); done {
		t.Fatal("the receive being read into completed on the sender's failure")
	}
	if _, done, _ := later.Test(); !done {
		t.Fatal("a posted receive from the failed rank did not fail")
	}
	pl.Placed(f, false)
	var pf *ProcFailedError
	if _, err := first.Wait(context.Background()); !errors.As(err, &pf) || len(pf.Ranks) != 1 || pf.Ranks[0] != 0 {
		t.Fatalf("receive after the failed read: %v, want rank 0 failed", err)
	}
	if _, dst := pl.Place(f, n); dst != nil {
		t.Fatal("Place took a frame of a failed rank")
	}

	// A read that fails while the sender lives: the receive is posted
	// again, before one posted after it, and gets the next message.
	again := w.Irecv(make([]byte, 100), 2, AnyTag)
	after := w.Irecv(make([]byte, 100), 2, AnyTag)
	f, n = frame(1, 100)
	f.Src = 2
	if _, dst := pl.Place(f, n); dst == nil {
		t.Fatal("Place refused a posted receive")
	}
	pl.Placed(f, false)
	s.deliver(2, worldID|subP2P, 3, 0, []byte("next"), false)
	if st, err := again.Wait(context.Background()); err != nil || st.Tag != 3 {
		t.Fatalf("the receive put back got %+v, %v; want the next message (tag 3)", st, err)
	}
	if _, done, _ := after.Test(); done {
		t.Fatal("the receive posted later took the message")
	}
}

// An unexpected message being read into its own buffer has not arrived:
// no probe sees it and a receive posted meanwhile waits. Cut off, it is
// lost; read whole, it goes to the receive posted meanwhile, or waits
// for one with its contents.
func TestPlacedUnexpected(t *testing.T) {
	ss := job(t, 2)
	s := ss[1]
	w := s.World()
	pl := placer{s}
	frame := func(tag, n int) (wire.Frame, int) {
		p := appendDataHeader(nil, kindData, dataHeader{ctxID: worldID | subP2P, tag: tag})
		return wire.Frame{Kind: kindData, Src: 0, Dst: 1, Payload: p}, len(p) + n
	}
	probe := func(tag int) bool {
		_, ok, err := w.Iprobe(0, tag)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	f, n := frame(4, 300)
	if _, dst := pl.Place(f, n); len(dst) != 300 {
		t.Fatalf("Place gave %d bytes for an unexpected message of 300", len(dst))
	}
	if probe(4) {
		t.Fatal("a probe saw a message still being read")
	}
	pl.Placed(f, false)
	if probe(4) {
		t.Fatal("a message cut off arrived")
	}

	f, n = frame(5, 300)
	skip, dst := pl.Place(f, n)
	if dst == nil || skip != len(f.Payload) {
		t.Fatalf("Place gave skip %d and %d bytes", skip, len(dst))
	}
	during := w.Irecv(make([]byte, 300), 0, 5)
	copy(dst, bytes.Repeat([]byte{7}, 300))
	if _, done, _ := during.Test(); done {
		t.Fatal("a receive posted during the read completed before its end")
	}
	pl.Placed(f, true)
	if st, err := during.Wait(context.Background()); err != nil || st.Count != 300 {
		t.Fatalf("the receive posted during the read: %+v, %v", st, err)
	}

	f, n = frame(6, 300)
	_, dst = pl.Place(f, n)
	copy(dst, bytes.Repeat([]byte{8}, 300))
	pl.Placed(f, true)
	if !probe(6) {
		t.Fatal("a message read whole is not queued")
	}
	got := make([]byte, 400)
	if st, err := w.Recv(context.Background(), got, 0, 6); err != nil || st.Count != 300 || !bytes.Equal(got[:300], bytes.Repeat([]byte{8}, 300)) {
		t.Fatalf("the queued message: %+v, %v", st, err)
	}
	if h := s.stats.placedHeld.Load(); h != 3 {
		t.Fatalf("%d unexpected messages placed, want 3", h)
	}
}
