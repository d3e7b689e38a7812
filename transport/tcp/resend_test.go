package tcp_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

var resetMessages = flag.Int("reset-messages", 0,
	"messages each way in TestBrokenConnectionsLoseNothing (0: 1,000,000, or 20,000 with -short)")

// streamCheck checks that a receiver gets 0, 1, ..., n-1 once each, in
// order, in the first 8 bytes of the payloads.
type streamCheck struct {
	n    uint64
	mu   sync.Mutex
	next uint64
	bad  error
	done chan struct{}
}

func newStreamCheck(n int) *streamCheck {
	return &streamCheck{n: uint64(n), done: make(chan struct{})}
}

func (s *streamCheck) Deliver(f wire.Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bad != nil || s.next == s.n {
		if s.bad == nil {
			s.bad = fmt.Errorf("a frame after the last one: %v", f)
		}
		return
	}
	if len(f.Payload) < 8 {
		s.bad = fmt.Errorf("short payload: %v", f)
		return
	}
	if got := binary.LittleEndian.Uint64(f.Payload); got != s.next {
		s.bad = fmt.Errorf("got message %d, want %d: lost, duplicated or reordered", got, s.next)
		close(s.done)
		return
	}
	s.next++
	if s.next == s.n {
		close(s.done)
	}
}

func (s *streamCheck) Hint(core.PeerHint) {}

func (s *streamCheck) result() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next, s.bad
}

// TestBrokenConnectionsLoseNothing streams numbered messages both ways
// between two transports through Send, SendDirect and SendNow while the
// pair's connection in use is broken 100 times, at moments drawn from
// the seed, on either side: every message arrives once and in order (the
// pair's stream, resend.go). Over the Unix socket, shared memory and TCP.
func TestBrokenConnectionsLoseNothing(t *testing.T) {
	t.Logf("seed %d (replay: go test -run TestBrokenConnectionsLoseNothing -seed %d)", *seed, *seed)
	n := *resetMessages
	switch {
	case n > 0:
	case testing.Short():
		n = 20_000
	default:
		n = 1_000_000
	}
	forPaths(t, func(t *testing.T, path pathKind) { testBrokenConnections(t, path, n) })
}

func testBrokenConnections(t *testing.T, path pathKind, n int) {
	rng := rand.New(rand.NewPCG(*seed, 46))
	const breaks = 100
	a, c := pathPair(t, path, nil)
	ca, cc := newStreamCheck(n), newStreamCheck(n)
	c.SetHandler(ca) // what a sends
	a.SetHandler(cc) // what c sends
	at := make([]int, breaks)
	for i := range at {
		at[i] = rng.IntN(n)
	}
	slices.Sort(at)
	sides := make([]bool, breaks)
	for i := range sides {
		sides[i] = rng.IntN(2) == 0
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	send := func(tr *tcp.Transport, to core.NodeID, seed uint64, hook func(i int)) error {
		r := rand.New(rand.NewPCG(seed, 1))
		buf := make([]byte, 8+64)
		for i := range n {
			if hook != nil {
				hook(i)
			}
			size := 8 + r.IntN(57)
			binary.LittleEndian.PutUint64(buf, uint64(i))
			f := wire.Frame{Kind: seqKind}
			var err error
			switch r.IntN(3) {
			case 0:
				f.Payload = buf[:size]
				if !tr.SendNow(to, f) {
					err = tr.SendCopy(ctx, to, f)
				}
			case 1:
				err = tr.SendDirect(ctx, to, f, buf[:size])
			default:
				f.Payload = slices.Clone(buf[:size])
				err = tr.Send(ctx, to, f)
			}
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	broke := 0
	go func() {
		defer wg.Done()
		k := 0
		errs <- send(a, 2, *seed+1, func(i int) {
			// A break that finds no connection (the last one is being
			// replaced) waits for the next message.
			for k < len(at) && at[k] <= i {
				var m int
				if sides[k] {
					m = a.BreakConns(2)
				} else {
					m = c.BreakConns(1)
				}
				if m == 0 {
					break
				}
				broke += m
				k++
			}
		})
	}()
	go func() {
		defer wg.Done()
		errs <- send(c, 1, *seed+2, nil)
	}()
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		name string
		chk  *streamCheck
	}{{"a→c", ca}, {"c→a", cc}} {
		select {
		case <-s.chk.done:
		case <-ctx.Done():
		}
		got, err := s.chk.result()
		if err != nil || got != uint64(n) {
			t.Fatalf("%s: %d of %d messages in order; %v\nstats a %+v\nstats c %+v", s.name, got, n, err, a.Stats(), c.Stats())
		}
	}
	sa, sc := a.Stats(), c.Stats()
	t.Logf("%d messages each way, %d connections broken; a: %d connections, %d frames resent, %d duplicates dropped, %d acks; c: %d connections, %d resent, %d duplicates, %d acks",
		n, broke, sa.Established, sa.Resent, sa.Duplicates, sa.Acks, sc.Established, sc.Resent, sc.Duplicates, sc.Acks)
	if broke < breaks || sa.Lost+sc.Lost < breaks {
		t.Fatalf("%d connections broken, %d and %d lost; want at least %d", broke, sa.Lost, sc.Lost, breaks)
	}
	checkPath(t, a, path)
}

var _ transport.Handler = (*streamCheck)(nil)
