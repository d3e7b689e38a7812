package comm

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

var backlogSeed = flag.Uint64("backlog.seed", 0, "seed of TestSendOrderThroughBacklog (0: from the clock)")

// TestSendOrderThroughBacklog: one rank sends a stream of eager messages
// to another in bursts of 2,500, mixing Isend and blocking Send, over a
// transport whose queue holds 4 frames; the receiver stops for 40 ms
// every 5,000 messages. Frames wait in the destination's backlog when
// the transport's queue is full: halfway through each burst the sender
// queues 8 control frames (empty credit returns, which the transport
// never writes on the caller's goroutine), and the data sends that
// follow find the queue busy or full. (The receiver's pauses alone do
// not do it: its connection's reader goroutine keeps draining the ring or
// socket into unexpected messages, so direct writes rarely wait; only a
// connection not yet up makes them wait, and a run whose connection comes
// up first sees no frame wait.)
// Between bursts the sender lets the backlog drain, and the next sends go
// straight to the connection again. Each send must
// go behind what waits (a blocking eager Send first tries its write
// without the backlog's lock; the test fails when it does not look at
// the backlog, checked). Every message arrives once, intact, in order.
// Over shared memory and TCP.
func TestSendOrderThroughBacklog(t *testing.T) {
	seed := seedOf(t, backlogSeed, "backlog.seed")
	for _, path := range []string{"shm", "tcp"} {
		t.Run(path, func(t *testing.T) {
			// A credit that keeps every message eager: a blocking Send
			// then never waits for the receiver.
			opts := []Option{func(o *options) { o.queueLen = 4 }, WithEagerCredit(64 << 20)}
			if path == "shm" {
				t.Setenv("COHORT_SHM", "on")
				t.Setenv("COHORT_UNIX", "on")
				opts = append(opts, func(o *options) { o.shmInProcess = true })
			} else {
				t.Setenv("COHORT_UNIX", "off")
				// Kernel buffers that a burst overflows while the
				// receiver stops: with the system's, which loopback TCP
				// grows to megabytes, a run under -race once saw no frame
				// wait in the backlog.
				opts = append(opts, func(o *options) { o.sockBuf = 32 << 10 })
			}
			ss := tcpJobWith(t, 2, opts)
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			n := 30000
			if raceEnabled { // ten times slower
				n = 10000
			}
			msg := func(i int, size int) []byte {
				b := binary.AppendUvarint(make([]byte, 0, size+binary.MaxVarintLen64), uint64(i))
				for len(b) < size {
					b = append(b, byte(i))
				}
				return b
			}
			errc := make(chan error, 1)
			go func() {
				w, buf := ss[1].World(), make([]byte, 1024)
				for i := range n {
					if i%5000 == 4999 {
						time.Sleep(40 * time.Millisecond)
					}
					st, err := w.Recv(ctx, buf, 0, 1)
					if err != nil {
						errc <- fmt.Errorf("receive %d: %w", i, err)
						return
					}
					got := buf[:st.Count]
					if v, k := binary.Uvarint(got); k <= 0 || v != uint64(i) || !bytes.Equal(got, msg(i, len(got))) {
						errc <- fmt.Errorf("receive %d: got message %d (%d bytes)", i, v, len(got))
						return
					}
				}
				errc <- nil
			}()
			backlogged := func() bool {
				ss[0].mu.Lock()
				q := ss[0].outqLocked(1)
				ss[0].mu.Unlock()
				return q != nil && q.running.Load()
			}
			rng := rand.New(rand.NewPCG(seed, 0))
			w := ss[0].World()
			var reqs []*Request
			for i := range n {
				if i%2500 == 1250 {
					for range 8 {
						ss[0].sendFrame(1, wire.Frame{Kind: kindCredit, Payload: binary.AppendUvarint(nil, 0)}, nil, nil)
					}
				}
				if i%2500 == 2499 {
					// Between bursts, the backlog drains (the receiver may
					// be stopped meanwhile), then sends go direct again.
					for end := time.Now().Add(5 * time.Second); backlogged() && time.Now().Before(end); {
						time.Sleep(100 * time.Microsecond)
					}
				}
				m := msg(i, 1+rng.IntN(1000))
				if rng.IntN(2) == 0 {
					reqs = append(reqs, w.Isend(m, 1, 1))
					continue
				}
				if err := w.Send(ctx, m, 1, 1); err != nil {
					select {
					case rerr := <-errc: // the receiver stopped first
						t.Fatalf("send %d: %v; receiver: %v", i, err, rerr)
					default:
						t.Fatalf("send %d: %v", i, err)
					}
				}
			}
			if err := WaitAll(ctx, reqs...); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			b, d := ss[0].stats.backlogged.Load(), ss[0].tcpTr.Stats().Direct
			t.Logf("%d of %d frames waited in the backlog, %d were written directly", b, n, d)
			if b == 0 || d == 0 {
				t.Fatal("the test missed its case: it needs both")
			}
		})
	}
}
