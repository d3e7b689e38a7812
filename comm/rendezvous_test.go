package comm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

func rdvPayload(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*37 + k*11)
	}
	return b
}

// Large messages sent ahead of their receives wait at the sender: the
// receiver holds only their ready-to-sends (no data), the sends complete
// only once the receives are posted, a probe sees the size, receives in
// any tag order and from AnySource get the right messages, and a receive
// too small fails with a TruncateError while its send completes. In
// process and over TCP.
func TestRendezvous(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			rendezvous(t, jobOver(t, tr, 2))
		})
	}
}

func rendezvous(t *testing.T, ss []*Session) {
	const k = 12
	size := func(i int) int { return EagerMax + 1 + i*(EagerMax/3) }
	each(t, ss, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 0 {
			reqs := make([]*Request, k+1)
			for i := range k {
				reqs[i] = c.Isend(rdvPayload(i, size(i)), 1, i)
			}
			reqs[k] = c.Isend(rdvPayload(k, 4*EagerMax), 1, k) // will not fit
			if _, err := c.Recv(ctx, nil, 1, 99); err != nil {
				return err
			}
			for i, r := range reqs {
				if _, done, _ := r.Test(); done {
					return fmt.Errorf("send %d completed before its receive was posted", i)
				}
			}
			if err := c.Send(ctx, nil, 1, 98); err != nil {
				return err
			}
			return WaitAll(ctx, reqs...)
		}
		st, err := c.Probe(ctx, 0, k)
		if err != nil {
			return err
		}
		if st.Count != 4*EagerMax {
			return fmt.Errorf("probe of a ready-to-send: count %d, want %d", st.Count, 4*EagerMax)
		}
		s := c.s
		s.mu.Lock()
		held, n := 0, 0
		for _, q := range s.queues {
			for _, m := range q.unexpected {
				held += len(m.data)
				n++
			}
		}
		s.mu.Unlock()
		if n != k+1 || held != 0 {
			return fmt.Errorf("%d messages and %d bytes held before any receive, want %d and 0", n, held, k+1)
		}
		if err := c.Send(ctx, nil, 0, 99); err != nil {
			return err
		}
		if _, err := c.Recv(ctx, nil, 0, 98); err != nil { // the sends are still pending
			return err
		}
		for i := k - 1; i >= 0; i-- {
			buf := make([]byte, size(i)+5)
			src := 0
			if i%3 == 0 {
				src = AnySource
			}
			st, err := c.Recv(ctx, buf, src, i)
			if err != nil {
				return err
			}
			if st.Count != size(i) || st.Source != 0 || !bytes.Equal(buf[:st.Count], rdvPayload(i, size(i))) {
				return fmt.Errorf("message %d: %+v, contents equal %v", i, st, bytes.Equal(buf[:st.Count], rdvPayload(i, size(i))))
			}
		}
		var te *TruncateError
		if _, err := c.Recv(ctx, make([]byte, EagerMax), 0, k); !errors.As(err, &te) || te.Need != 4*EagerMax {
			return fmt.Errorf("a message too large for its buffer: %v", err)
		}
		return nil
	})
}

// A blocking Send that gives up waiting for its receive leaves the
// caller's buffer free (the message was copied) and the receive posted
// later gets the message as it was sent.
func TestRendezvousSendDeadline(t *testing.T) {
	ss := job(t, 2)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		want := rdvPayload(5, 3*EagerMax)
		if c.Rank() == 0 {
			buf := bytes.Clone(want)
			short, cancel := context.WithCancel(ctx)
			cancel()
			if err := c.Send(short, buf, 1, 1); !errors.Is(err, context.Canceled) {
				return fmt.Errorf("Send with a done context: %v", err)
			}
			clear(buf) // free once Send returned
			return c.Send(ctx, nil, 1, 2)
		}
		if _, err := c.Recv(ctx, nil, 0, 2); err != nil {
			return err
		}
		got := make([]byte, len(want))
		if st, err := c.Recv(ctx, got, 0, 1); err != nil || st.Count != len(want) || !bytes.Equal(got, want) {
			return fmt.Errorf("the message of a Send that gave up: %+v, %v, equal %v", st, err, bytes.Equal(got, want))
		}
		return nil
	})
}

// A large send whose receiver fails before taking it fails naming the
// receiver; a ready-to-send whose sender failed fails the receive that
// takes it (its data can never come); a revoked communicator fails a send
// waiting for its clear-to-send.
func TestRendezvousFailures(t *testing.T) {
	rendezvousFailures(t, tcpJobWith(t, 4, []Option{detecting}))
}

func rendezvousFailures(t *testing.T, ss []*Session) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w := func(r int) *Comm { return ss[r].World() }

	toDead := w(0).Isend(rdvPayload(1, 2*EagerMax), 3, 1)
	w(3).Isend(rdvPayload(2, 2*EagerMax), 1, 2)
	if _, err := w(1).Probe(ctx, 3, 2); err != nil { // rank 3's ready-to-send is in
		t.Fatal(err)
	}
	ss[3].kill()
	var pf *ProcFailedError
	if _, err := toDead.Wait(ctx); !errors.As(err, &pf) || pf.Ranks[0] != 3 {
		t.Fatalf("send to a rank that failed: %v", err)
	}
	for _, s := range ss[:3] {
		waitFailure(t, ctx, s, 3)
	}
	if _, err := w(1).Recv(ctx, make([]byte, 2*EagerMax), 3, 2); !errors.As(err, &pf) || pf.Ranks[0] != 3 {
		t.Fatalf("receive of a failed rank's ready-to-send: %v", err)
	}

	// Revoked while waiting for its receive.
	pending := w(0).Isend(rdvPayload(3, 2*EagerMax), 1, 7)
	w(0).Revoke()
	if _, err := pending.Wait(ctx); !errors.Is(err, ErrRevoked) {
		t.Fatalf("send on a revoked communicator: %v", err)
	}
}

func waitFailure(t *testing.T, ctx context.Context, s *Session, rank int) {
	t.Helper()
	for {
		select {
		case f := <-s.Failures():
			if f.Rank == rank {
				return
			}
		case <-ctx.Done():
			t.Fatalf("rank %d's failure not reported", rank)
		}
	}
}

// The rendezvous frames from a peer (ready-to-send with or without an
// address, clear-to-send, the data's id, a withdrawal) are parsed or refused with errMalformed, never a panic, and
// what parses encodes back the same way.
func FuzzRendezvousFrames(f *testing.F) {
	f.Add(binary.AppendUvarint(binary.AppendVarint(binary.AppendUvarint(binary.AppendUvarint(nil, 7), 8), -3), 1<<20))
	f.Add([]byte{7, 0, 0})
	f.Add([]byte{7, 1, 0x80, 0x40})
	f.Add([]byte{7, 2, 0})
	f.Add(binary.AppendUvarint(binary.AppendUvarint(binary.AppendVarint(binary.AppendUvarint(binary.AppendUvarint(nil, 7), 8), -3), 1<<20), 0xc000100000))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, p []byte) {
		if id, ctxID, tag, size, addr, err := parseRTS(p); err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("parseRTS: %v", err)
			}
		} else {
			again := binary.AppendUvarint(binary.AppendVarint(binary.AppendUvarint(binary.AppendUvarint(nil, id), ctxID), int64(tag)), uint64(size))
			if addr != 0 {
				again = binary.AppendUvarint(again, addr)
			}
			if a, b, c, d, e, err := parseRTS(again); err != nil || a != id || b != ctxID || c != tag || d != size || e != addr {
				t.Fatalf("RTS %d %d %d %d %#x re-encoded parses as %d %d %d %d %#x, %v", id, ctxID, tag, size, addr, a, b, c, d, e, err)
			}
		}
		if id, ctxID, err := parseRStop(p); err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("parseRStop: %v", err)
			}
		} else if a, b, err := parseRStop(binary.AppendUvarint(binary.AppendUvarint(nil, id), ctxID)); err != nil || a != id || b != ctxID {
			t.Fatalf("RStop %d %d re-encoded parses as %d %d, %v", id, ctxID, a, b, err)
		}
		if id, data, ok := parseRData(p); ok {
			if again, d2, ok2 := parseRData(append(binary.AppendUvarint(nil, id), data...)); !ok2 || again != id || !bytes.Equal(d2, data) {
				t.Fatalf("RData %d with %d bytes re-encoded parses as %d with %d bytes", id, len(data), again, len(d2))
			}
		}
		if id, flag, credit, err := parseCTS(p); err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("parseCTS: %v", err)
			}
		} else if flag > 2 {
			t.Fatalf("CTS flag %d accepted", flag)
		} else {
			again := binary.AppendUvarint(append(binary.AppendUvarint(nil, id), flag), credit)
			if a, b, c, err := parseCTS(again); err != nil || a != id || b != flag || c != credit {
				t.Fatalf("CTS %d %d %d re-encoded parses as %d %d %d, %v", id, flag, credit, a, b, c, err)
			}
		}
	})
}

// Streams of large messages (rendezvous, read into the receive's buffer)
// with a rank killed in the middle: the survivor's pending send to it, and
// its pending receive from the other one, fail naming the dead rank
// instead of hanging.
func TestLargeStreamPeerKilled(t *testing.T) {
	ss := tcpJobWith(t, 4, []Option{detecting})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	msg := rdvPayload(9, 1<<20)
	stream := func(c *Comm, to int, stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if c.Send(ctx, msg, to, 1) != nil {
				return
			}
		}
	}
	drain := func(c *Comm, from int, stop <-chan struct{}) {
		buf := make([]byte, len(msg))
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Recv(ctx, buf, from, 1); err != nil {
				return
			}
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	go drain(ss[1].World(), 0, stop)  // rank 1 receives from 0, then dies
	go stream(ss[2].World(), 0, stop) // rank 2 sends to 0, then dies
	sendErr, recvErr := make(chan error, 1), make(chan error, 1)
	w0 := ss[0].World()
	go func() {
		n := 0
		for {
			if err := w0.Send(ctx, msg, 1, 1); err != nil {
				sendErr <- fmt.Errorf("after %d messages: %w", n, err)
				return
			}
			n++
		}
	}()
	go func() {
		buf := make([]byte, len(msg))
		n := 0
		for {
			if _, err := w0.Recv(ctx, buf, 2, 1); err != nil {
				recvErr <- fmt.Errorf("after %d messages: %w", n, err)
				return
			}
			if n++; n == 5 {
				ss[1].kill()
				ss[2].kill()
			}
		}
	}()
	var pf *ProcFailedError
	for what, ch := range map[string]chan error{"send to rank 1": sendErr, "receive from rank 2": recvErr} {
		select {
		case err := <-ch:
			if !errors.As(err, &pf) {
				t.Errorf("%s: %v, want a ProcFailedError", what, err)
			}
			t.Logf("%s: %v", what, err)
		case <-ctx.Done():
			t.Fatalf("%s still waiting", what)
		}
	}
}

// A message too large for any frame is refused at once with the
// transport's error, as an eager one is, and never announced: the
// receiver's receive does not match it (it would wait for data that can
// never be written). In process and over TCP.
func TestRendezvousTooLarge(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ss := jobOver(t, tr, 2)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			huge := make([]byte, wire.DefaultMaxFrameSize+1)
			if err := ss[0].World().Send(ctx, huge, 1, 1); !errors.Is(err, transport.ErrFrameTooLarge) {
				t.Fatalf("Send of %d bytes: %v, want ErrFrameTooLarge", len(huge), err)
			}
			if err := ss[0].World().Send(ctx, []byte("next"), 1, 1); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 8)
			if st, err := ss[1].World().Recv(ctx, buf, 0, 1); err != nil || string(buf[:st.Count]) != "next" {
				t.Fatalf("the receiver got %q, %v; want the next message", buf[:st.Count], err)
			}
		})
	}
}
