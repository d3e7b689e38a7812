package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
