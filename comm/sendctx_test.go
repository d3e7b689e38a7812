package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// A blocking Send whose deadline passes while the destination's kernel
// takes no more bytes (its process reads none: here its reader waits for
// the session's lock, which the test holds) fails with an error wrapping
// context.DeadlineExceeded, though its message went out eagerly, within
// the destination's credit, on the transport's direct path; the job then
// goes on: once the destination reads again it receives every message
// whole and in order, the one whose Send failed included (its frame was
// partly written, and the transport completed it), and both ranks
// exchange messages as before.
func TestSendEndsWithItsDeadline(t *testing.T) {
	ss := tcpJob(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0, w1 := ss[0].World(), ss[1].World()
	msg := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, EagerMax) }
	// A first exchange: the connection and rank 0's queue to rank 1 exist.
	if err := w0.Send(ctx, []byte("hello"), 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Recv(ctx, make([]byte, 8), 0, 0); err != nil {
		t.Fatal(err)
	}

	// Rank 1's reader stops at the first data frame, on the lock.
	ss[1].mu.Lock()
	locked := true
	defer func() {
		if locked {
			ss[1].mu.Unlock()
		}
	}()
	maxEager := DefaultEagerCredit / eagerCharge(EagerMax) // sends within the credit
	sent := 0
	var failed error
	for ; sent < maxEager; sent++ {
		dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := w0.Send(dctx, msg(sent), 1, 1)
		dcancel()
		if err != nil {
			failed = err
			break
		}
	}
	if failed == nil {
		t.Skipf("the kernel took %d messages of %d bytes: the buffers outgrow the credit", sent, EagerMax)
	}
	if !errors.Is(failed, context.DeadlineExceeded) {
		t.Fatalf("Send %d: got %v, want an error wrapping %v", sent, failed, context.DeadlineExceeded)
	}
	t.Logf("Send %d (of %d bytes each) ended with its deadline: %v", sent, EagerMax, failed)
	ss[1].mu.Unlock()
	locked = false

	// The message whose Send failed is delivered, after those before it.
	buf := make([]byte, EagerMax)
	for i := range sent + 1 {
		st, err := w1.Recv(ctx, buf, 0, 1)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if st.Count != EagerMax || !bytes.Equal(buf, msg(i)) {
			t.Fatalf("message %d: %d bytes, intact %v", i, st.Count, bytes.Equal(buf, msg(i)))
		}
	}
	each(t, ss, func(ctx context.Context, c *Comm) error {
		peer, in := 1-c.Rank(), make([]byte, EagerMax)
		for i := range 10 {
			if err := c.Send(ctx, msg(i), peer, 2); err != nil {
				return err
			}
			if st, err := c.Recv(ctx, in, peer, 2); err != nil || !bytes.Equal(in[:st.Count], msg(i)) {
				return fmt.Errorf("message %d: %d bytes, %v", i, st.Count, err)
			}
		}
		return Barrier(ctx, c)
	})
}

// A blocking rendezvous Send (a message over EagerMax) whose deadline
// passes after the clear-to-send, while the destination's process reads
// nothing (its reader waits for the session's lock, which the test takes
// as it posts the receive), fails with an error wrapping
// context.DeadlineExceeded, its buffer free: the test clears it, then
// breaks the connection, and the receive still gets the message whole,
// resent from the transport's copy; both ranks go on.
func TestRendezvousSendEndsWithItsDeadline(t *testing.T) {
	ss := tcpJob(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0, w1 := ss[0].World(), ss[1].World()
	if err := w0.Send(ctx, []byte("hello"), 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Recv(ctx, make([]byte, 8), 0, 0); err != nil {
		t.Fatal(err)
	}
	const size = 4 << 20
	msg := bytes.Repeat([]byte("rendezvous"), size/10+1)[:size]
	in := make([]byte, size)
	const deadline = time.Second
	sent := make(chan error, 1)
	go func() {
		dctx, dcancel := context.WithTimeout(ctx, deadline)
		defer dcancel()
		out := slices.Clone(msg)
		err := w0.Send(dctx, out, 1, 1)
		clear(out) // the buffer is the caller's again once Send returns
		sent <- err
	}()

	// The ready-to-send waits at rank 1 for a receive; the test posts
	// it, which sends the clear-to-send, and at once takes rank 1's lock,
	// and keeps it: the reader stops at the data, on the lock (or, if the
	// data came first, before delivering it, so that the frame is never
	// acknowledged).
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for unexpected := 0; unexpected == 0; {
		ss[1].mu.Lock()
		for _, q := range ss[1].queues {
			unexpected += len(q.unexpected)
		}
		ss[1].mu.Unlock()
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the ready-to-send never came")
		}
	}
	rreq := w1.Irecv(in, 0, 1)
	ss[1].mu.Lock()
	locked := true
	defer func() {
		if locked {
			ss[1].mu.Unlock()
		}
	}()
	// The path under test: rank 0 had its clear-to-send before the
	// deadline passed.
	for {
		ss[0].mu.Lock()
		waiting := len(ss[0].rdvOut)
		ss[0].mu.Unlock()
		if waiting == 0 {
			break
		}
		select {
		case err := <-sent:
			t.Skipf("the Send ended (%v) before its clear-to-send came: the machine is too slow for its %v deadline", err, deadline)
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("rank 0 never had its clear-to-send")
		}
	}
	var err error
	select {
	case err = <-sent:
	case <-ctx.Done():
		t.Fatal("the Send outlived its deadline while the receiver read nothing")
	}
	if err == nil {
		t.Skipf("the kernel took the whole %d bytes before the deadline", size)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send: got %v, want an error wrapping %v", err, context.DeadlineExceeded)
	}
	t.Logf("the rendezvous Send ended with its deadline: %v", err)
	// The connection breaks: the data goes again from the resend log,
	// which must hold a copy of the buffer cleared meanwhile.
	ss[0].tcpTr.BreakConns(1)
	ss[1].mu.Unlock()
	locked = false

	st, err := rreq.Wait(ctx)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if st.Count != size || !bytes.Equal(in, msg) {
		t.Fatalf("receive: %d bytes, intact %v", st.Count, bytes.Equal(in, msg))
	}
	each(t, ss, func(ctx context.Context, c *Comm) error {
		peer, buf := 1-c.Rank(), make([]byte, size)
		for i := range 4 {
			if i%2 == c.Rank() {
				if err := c.Send(ctx, msg, peer, 2); err != nil {
					return err
				}
			} else if st, err := c.Recv(ctx, buf, peer, 2); err != nil || !bytes.Equal(buf[:st.Count], msg) {
				return fmt.Errorf("message %d: %d bytes, %v", i, st.Count, err)
			}
		}
		return Barrier(ctx, c)
	})
}

// BenchmarkLargeSendContext streams 1 MiB blocking Sends over loopback
// TCP with a context that cannot end and with one that can, whose data's
// write watches it: both lend the data to the transport, and the second
// costs the registration with the context where the socket is full.
func BenchmarkLargeSendContext(b *testing.B) {
	b.Setenv(unixEnv, "off")
	ss := tcpJob(b, 2)
	for _, kind := range []string{"ctx=cannot-end", "ctx=can-end"} {
		b.Run(kind, func(b *testing.B) {
			const size = 1 << 20
			out, in := make([]byte, size), make([]byte, size)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sendCtx := ctx
			if kind == "ctx=cannot-end" {
				sendCtx = context.WithoutCancel(ctx)
			}
			done := make(chan error, 1)
			go func() {
				for range b.N {
					if _, err := ss[1].World().Recv(ctx, in, 0, 5); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				if err := ss[0].World().Send(sendCtx, out, 1, 5); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
