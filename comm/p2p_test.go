package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group/stack"
)

// testTimeout bounds every test job: a hang is a failure, never a stuck CI.
const testTimeout = 15 * time.Second

// job starts an n-rank Local job that ends with the test.
func job(t *testing.T, n int, opts ...Option) []*Session {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ss, err := Local(ctx, n, append([]Option{quiet}, opts...)...)
	if err != nil {
		cancel()
		t.Fatalf("Local(%d): %v", n, err)
	}
	t.Cleanup(func() {
		cancel()
		for _, s := range ss {
			s.Finalize(context.Background())
		}
	})
	return ss
}

// quiet comes first in the options of every test job (job, tcpJobWith,
// collRun): the detectors send their traffic, but their verdicts wait an
// hour (stack.QuietDelay). On one loaded host a detector's timeouts (a few
// hundred milliseconds, stack.DefaultLocalConfig) pass while a live rank
// waits for a CPU, and the rank excluded fails a test that is not about
// failures. A failure such a test needs is injected (core.Failed).
var quiet Option = func(o *options) { o.quietDetector = true }

// detecting undoes quiet, for tests in which a rank crashes and the
// survivors' detectors must find out. Its timeouts are loadTolerant's.
var detecting Option = func(o *options) { o.quietDetector, o.editStack = false, loadTolerant }

// loadTolerant gives a detecting job's detector and membership timeouts
// that a live rank meets under -race beside other packages' tests on a
// loaded 2-core machine. With stack.DefaultLocalConfig's (suspected
// after 200 ms of silence, declared 100 ms later; 200 ms to acknowledge
// a view change, after which a child is reported failed) a live rank that
// waits that long for a CPU is excluded, and the test fails naming it
// beside the rank it killed. A crash is still declared within about
// 1.6 s, well inside every test's deadline.
func loadTolerant(c *stack.Config) {
	c.SuspectTimeout = time.Second
	c.FailTimeout = 500 * time.Millisecond
	c.PingTimeout = time.Second
	c.AckTimeout = 2 * time.Second
}

// noDetector runs a job without failure detectors, for tests that count
// allocations: a detector's heartbeats allocate, which they would count.
var noDetector = WithDetector("off")

// each runs f for every session concurrently and fails the test with every
// rank's error.
func each(t *testing.T, ss []*Session, f func(ctx context.Context, c *Comm) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(ss))
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(ctx, s.World())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
	}
}

// MPI-3.1 §3.5 "Semantics of point-to-point communication": messages between
// a pair are non-overtaking, whatever their tags, when they match the same
// receives.
func TestOrderingBetweenPairs(t *testing.T) {
	const n, msgs = 6, 200
	ss := job(t, n)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		// Every rank sends msgs numbered messages to every other rank,
		// then receives from each with AnyTag and AnySource.
		for i := range msgs {
			for d := range c.Size() {
				if d == c.Rank() {
					continue
				}
				if err := c.Send(ctx, []byte(fmt.Sprint(i)), d, i%3); err != nil {
					return err
				}
			}
		}
		next := make([]int, c.Size())
		buf := make([]byte, 16)
		for range msgs * (c.Size() - 1) {
			st, err := c.Recv(ctx, buf, AnySource, AnyTag)
			if err != nil {
				return err
			}
			got := string(buf[:st.Count])
			if want := fmt.Sprint(next[st.Source]); got != want || st.Tag != next[st.Source]%3 {
				return fmt.Errorf("from %d: got %q tag %d, want %q tag %d", st.Source, got, st.Tag, want, next[st.Source]%3)
			}
			next[st.Source]++
		}
		return nil
	})
}

// MPI-3.1 §3.7: non-blocking operations complete independently; WaitAny
// returns the one that completed; Test does not block.
func TestNonBlocking(t *testing.T) {
	ss := job(t, 4)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 0 {
			reqs := make([]*Request, 3)
			bufs := make([][]byte, 3)
			for i := range reqs {
				bufs[i] = make([]byte, 4)
				reqs[i] = c.Irecv(bufs[i], i+1, 7)
			}
			if _, done, _ := reqs[0].Test(); done {
				return errors.New("Test: a receive completed before anything was sent")
			}
			// Release the ranks one by one, in the order 3, 1, 2, and
			// check that WaitAny reports them in that order.
			for _, r := range []int{3, 1, 2} {
				if err := c.Send(ctx, nil, r, 1); err != nil {
					return err
				}
				i, st, err := WaitAny(ctx, reqs...)
				if err != nil {
					return err
				}
				if i != r-1 || st.Source != r || string(bufs[i][:st.Count]) != fmt.Sprint("r", r) {
					return fmt.Errorf("WaitAny = %d (%+v, %q), want %d", i, st, bufs[i][:st.Count], r-1)
				}
				reqs[i] = c.Irecv(make([]byte, 1), r, 99) // never sent: keeps WaitAny honest
				defer reqs[i].Cancel()
			}
			return nil
		}
		if _, err := c.Recv(ctx, nil, 0, 1); err != nil {
			return err
		}
		s1 := c.Isend([]byte(fmt.Sprint("r", c.Rank())), 0, 7)
		return WaitAll(ctx, s1)
	})
}

// Communicator isolation (MPI-3.1 §6.1): messages on a duplicate never match
// receives on the original, even with wildcards.
func TestCommunicatorIsolation(t *testing.T) {
	ss := job(t, 2)
	each(t, ss, func(ctx context.Context, w *Comm) error {
		d, err := w.Dup()
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			if err := d.Send(ctx, []byte("dup"), 1, 5); err != nil {
				return err
			}
			if err := w.Send(ctx, []byte("world"), 1, 5); err != nil {
				return err
			}
			return nil
		}
		buf := make([]byte, 8)
		st, err := w.Recv(ctx, buf, AnySource, AnyTag)
		if err != nil {
			return err
		}
		if string(buf[:st.Count]) != "world" {
			return fmt.Errorf("world received %q", buf[:st.Count])
		}
		st, err = d.Recv(ctx, buf, AnySource, AnyTag)
		if err != nil {
			return err
		}
		if string(buf[:st.Count]) != "dup" {
			return fmt.Errorf("dup received %q", buf[:st.Count])
		}
		return nil
	})
}

// Bad input gets a clear error, never a panic: ranks out of range, negative
// tags, a buffer too small (MPI_ERR_TRUNCATE: the message is consumed).
func TestBadInput(t *testing.T) {
	ss := job(t, 2)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		if err := c.Send(ctx, nil, 2, 0); !errors.Is(err, ErrRank) {
			return fmt.Errorf("Send to rank 2 of 2: %v", err)
		}
		if err := c.Send(ctx, nil, -1, 0); !errors.Is(err, ErrRank) {
			return fmt.Errorf("Send to rank -1: %v", err)
		}
		if err := c.Send(ctx, nil, 0, -3); !errors.Is(err, ErrTag) {
			return fmt.Errorf("Send with tag -3: %v", err)
		}
		if _, err := c.Recv(ctx, nil, 5, 0); !errors.Is(err, ErrRank) {
			return fmt.Errorf("Recv from 5: %v", err)
		}
		if _, err := c.Recv(ctx, nil, 0, -2); !errors.Is(err, ErrTag) {
			return fmt.Errorf("Recv with tag -2: %v", err)
		}
		if _, err := c.Isend(nil, 9, 0).Wait(ctx); !errors.Is(err, ErrRank) {
			return fmt.Errorf("Isend to 9: %v", err)
		}
		if err := WaitAll(ctx, nil); !errors.Is(err, ErrBadArg) {
			return fmt.Errorf("WaitAll(nil): %v", err)
		}
		if c.Rank() == 0 {
			if err := c.Send(ctx, []byte("0123456789"), 1, 1); err != nil {
				return err
			}
			return c.Send(ctx, []byte("ok"), 1, 2)
		}
		buf := make([]byte, 4)
		_, err := c.Recv(ctx, buf, 0, 1)
		var te *TruncateError
		if !errors.As(err, &te) || !errors.Is(err, ErrTruncated) || te.Need != 10 || te.Have != 4 || string(buf) != "0123" {
			return fmt.Errorf("Recv of 10 bytes into 4: %v, buffer %q", err, buf)
		}
		st, err := c.Recv(ctx, buf, 0, AnyTag)
		if err != nil || string(buf[:st.Count]) != "ok" {
			return fmt.Errorf("the message after a truncated one: %v %q", err, buf[:st.Count])
		}
		return nil
	})
}

// A receive whose context ends is withdrawn: a later message goes to the
// next receive.
func TestRecvContextWithdraws(t *testing.T) {
	ss := job(t, 2)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 1 {
			short, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := c.Recv(short, make([]byte, 4), 0, 0); !errors.Is(err, context.Canceled) {
				return fmt.Errorf("Recv with a done context: %v", err)
			}
			if err := c.Send(ctx, nil, 0, 1); err != nil {
				return err
			}
			buf := make([]byte, 4)
			st, err := c.Recv(ctx, buf, 0, 0)
			if err != nil || !bytes.Equal(buf[:st.Count], []byte("m")) {
				return fmt.Errorf("Recv after a withdrawn one: %v %q", err, buf[:st.Count])
			}
			return nil
		}
		if _, err := c.Recv(ctx, nil, 1, 1); err != nil {
			return err
		}
		return c.Send(ctx, []byte("m"), 1, 0)
	})
}

// The typed API moves elements without conversion and counts in elements;
// Go values travel through gob.
func TestTypedAndValues(t *testing.T) {
	type point struct {
		X, Y int
		Name string
	}
	ss := job(t, 2)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		if c.Rank() == 0 {
			if err := Send(ctx, c, []float64{1.5, -2, 3e100}, 1, 1); err != nil {
				return err
			}
			if err := WaitAll(ctx, Isend(c, []int32{7, 8}, 1, 2)); err != nil {
				return err
			}
			if err := Send(ctx, c, []byte{1, 2, 3}, 1, 3); err != nil {
				return err
			}
			return SendValue(ctx, c, map[string]point{"a": {1, 2, "p"}}, 1, 4)
		}
		f := make([]float64, 4)
		st, err := Recv(ctx, c, f, 0, 1)
		if err != nil || st.Count != 3 || f[0] != 1.5 || f[1] != -2 || f[2] != 3e100 {
			return fmt.Errorf("float64s: %v %+v %v", err, st, f)
		}
		i := make([]int32, 2)
		r := Irecv(c, i, 0, 2)
		if st, err = r.Wait(ctx); err != nil || st.Count != 2 || i[0] != 7 || i[1] != 8 {
			return fmt.Errorf("int32s: %v %+v %v", err, st, i)
		}
		u := make([]uint16, 4)
		if _, err := Recv(ctx, c, u, 0, 3); !errors.Is(err, ErrElemSize) {
			return fmt.Errorf("3 bytes into uint16s: %v", err)
		}
		var m map[string]point
		if _, err := RecvValue(ctx, c, &m, 0, 4); err != nil || m["a"] != (point{1, 2, "p"}) {
			return fmt.Errorf("value: %v %v", err, m)
		}
		return nil
	})
}

// Messages that arrive before their receive (kept in pooled buffers of
// size classes up to EagerMax, announced by a ready-to-send above it) come
// out whole and in order, of every size from 0 to past the largest class,
// twice over so that buffers are used again; and a steady ping-pong of
// blocking calls over TCP allocates nothing.
func TestUnexpectedBuffersAndNoAllocations(t *testing.T) {
	ss := tcpJobWith(t, 2, []Option{noDetector})
	sizes := []int{0, 1, 63, 64, 65, 1000, 4096, 65535, 65536, 65537, 200000}
	payload := func(round, i, n int) []byte {
		b := make([]byte, n)
		for k := range b {
			b[k] = byte(round*31 + i*7 + k)
		}
		return b
	}
	each(t, ss, func(ctx context.Context, c *Comm) error {
		for round := range 2 {
			if c.Rank() == 0 {
				reqs := make([]*Request, len(sizes))
				for i, n := range sizes {
					reqs[i] = c.Isend(payload(round, i, n), 1, i)
				}
				if _, err := c.Recv(ctx, nil, 1, 99); err != nil { // all sent before rank 1 receives
					return err
				}
				if err := WaitAll(ctx, reqs...); err != nil {
					return err
				}
				continue
			}
			if _, err := c.Probe(ctx, 0, len(sizes)-1); err != nil { // the last one is in
				return err
			}
			if err := c.Send(ctx, nil, 0, 99); err != nil {
				return err
			}
			for i, n := range sizes {
				buf := make([]byte, n)
				st, err := c.Recv(ctx, buf, 0, i)
				if err != nil {
					return err
				}
				if st.Count != n || !bytes.Equal(buf, payload(round, i, n)) {
					return fmt.Errorf("round %d message %d: %d bytes, not the %d sent", round, i, st.Count, n)
				}
			}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0, w1 := ss[0].World(), ss[1].World()
	buf0, buf1 := make([]byte, 64), make([]byte, 64)
	echo := make(chan error, 1)
	const rounds = 200
	go func() {
		for range rounds + 2 { // AllocsPerRun calls once more than rounds, and one warm-up here
			if _, err := w1.Recv(ctx, buf1, 0, 1); err != nil {
				echo <- err
				return
			}
			if err := w1.Send(ctx, buf1, 0, 1); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	pingPong := func() {
		if err := w0.Send(ctx, buf0, 1, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := w0.Recv(ctx, buf0, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	pingPong() // warm the pools
	if a := testing.AllocsPerRun(rounds, pingPong); a > 0.5 && !raceEnabled {
		t.Errorf("%.2f allocations per round trip of blocking Send and Recv, want 0", a)
	}
	if err := <-echo; err != nil {
		t.Fatal(err)
	}
}

// Non-blocking sends and receives whose requests are given back with Free
// once complete allocate nothing per message, and a freed request used
// again reports its own message: every status and payload checked. Free
// of a request not yet complete does nothing (it still completes).
func TestFreedRequestsNoAllocations(t *testing.T) {
	ss := tcpJobWith(t, 2, []Option{noDetector})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	w0, w1 := ss[0].World(), ss[1].World()
	const window, rounds = 8, 100
	sbuf := make([][]byte, window)
	rbuf := make([][]byte, window)
	for j := range window {
		sbuf[j], rbuf[j] = make([]byte, 64), make([]byte, 64)
	}
	sreqs, rreqs := make([]*Request, window), make([]*Request, window)
	// One acknowledgement buffer per rank: the ranks share this process's
	// memory but not a buffer, or the race detector, which does not see
	// the socket order a send and the receive of its bytes, reports one.
	ack0, ack1 := make([]byte, 1), make([]byte, 1)
	echo := make(chan error, 1)
	go func() {
		for round := range rounds + 2 { // AllocsPerRun runs once more than rounds, and one warm-up
			for j := range rreqs {
				rreqs[j] = w1.Irecv(rbuf[j], 0, j)
			}
			if err := WaitAll(ctx, rreqs...); err != nil {
				echo <- err
				return
			}
			for j, r := range rreqs {
				st, err := r.Wait(ctx)
				if err != nil || st.Source != 0 || st.Tag != j || st.Count != 64 || rbuf[j][0] != byte(round) || rbuf[j][63] != byte(j) {
					echo <- fmt.Errorf("round %d message %d: %+v %v, payload %d %d", round, j, st, err, rbuf[j][0], rbuf[j][63])
					return
				}
				r.Free()
			}
			if err := w1.Send(ctx, ack1, 0, 99); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	round := 0
	burst := func() {
		for j := range sreqs {
			sbuf[j][0], sbuf[j][63] = byte(round), byte(j)
			sreqs[j] = w0.Isend(sbuf[j], 1, j)
		}
		if err := WaitAll(ctx, sreqs...); err != nil {
			t.Fatal(err)
		}
		for _, r := range sreqs {
			r.Free()
		}
		if _, err := w0.Recv(ctx, ack0, 1, 99); err != nil {
			t.Fatal(err)
		}
		round++
	}
	burst() // warm the pools
	if a := testing.AllocsPerRun(rounds, burst) / window; a > 0.05 && !raceEnabled {
		t.Errorf("%.2f allocations per message of Isend and Irecv with freed requests, want 0", a)
	}
	if err := <-echo; err != nil {
		t.Fatal(err)
	}

	// Requests of large messages (through the rendezvous) freed and used
	// again carry their own messages too.
	big := func(round, j int) []byte {
		b := make([]byte, 3*EagerMax/2)
		for k := range b {
			b[k] = byte(round*7 + j*13 + k)
		}
		return b
	}
	for round := range 6 {
		for j := range 4 {
			sreqs[j] = w0.Isend(big(round, j), 1, j)
			rbuf[j] = make([]byte, 3*EagerMax/2)
			rreqs[j] = w1.Irecv(rbuf[j], 0, j)
		}
		if err := WaitAll(ctx, rreqs[:4]...); err != nil {
			t.Fatal(err)
		}
		if err := WaitAll(ctx, sreqs[:4]...); err != nil {
			t.Fatal(err)
		}
		for j := range 4 {
			if !bytes.Equal(rbuf[j], big(round, j)) {
				t.Fatalf("large message %d of round %d differs", j, round)
			}
			sreqs[j].Free()
			rreqs[j].Free()
		}
	}

	// Free before completion does nothing: the receive still completes.
	rbuf[0] = make([]byte, 64)
	r := w1.Irecv(rbuf[0], 0, 5)
	r.Free()
	if err := w0.Send(ctx, sbuf[0], 1, 5); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(ctx); err != nil || st.Tag != 5 || st.Count != 64 {
		t.Fatalf("a receive freed before it completed: %+v %v", st, err)
	}
	var nilReq *Request
	nilReq.Free()
}
