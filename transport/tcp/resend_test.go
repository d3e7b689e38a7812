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
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

var resetMessages = flag.Int("reset-messages", 0,
	"messages each way in TestBrokenConnectionsLoseNothing (0: 1,000,000, or 100,000 with -short)")

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
// pair's connections are broken on both sides 100 times, at moments drawn
// from the seed, each time once the last break's replacement is in use:
// every message arrives once and in order (the
// pair's stream, resend.go). Over the Unix socket, shared memory and TCP.
func TestBrokenConnectionsLoseNothing(t *testing.T) {
	t.Logf("seed %d (replay: go test -run TestBrokenConnectionsLoseNothing -seed %d)", *seed, *seed)
	n := *resetMessages
	switch {
	case n > 0:
	case testing.Short():
		n = 100_000
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
	send := func(tr *tcp.Transport, to core.NodeID, seed uint64, hook func(i int) error) error {
		r := rand.New(rand.NewPCG(seed, 1))
		buf := make([]byte, 8+64)
		for i := range n {
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
			if hook != nil {
				if err := hook(i); err != nil {
					return err
				}
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
		var established uint64
		err := send(a, 2, *seed+1, func(i int) error {
			// After message i, a break waits for the connection that
			// replaced the last one broken (message i, at least, is
			// there to dial for), then breaks it on both sides (the
			// first one drawn from the seed).
			for ; k < len(at) && at[k] <= i; k++ {
				deadline := time.Now().Add(transporttest.Timeout)
				for {
					est := a.Stats().Established
					if est > established && a.Connected(2) && c.Connected(1) {
						var m int
						if sides[k] {
							m = a.BreakConns(2) + c.BreakConns(1)
						} else {
							m = c.BreakConns(1) + a.BreakConns(2)
						}
						if m > 0 {
							established, broke = est, broke+1
							break
						}
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("break %d: no new connection (connected %v %v; a %+v; c %+v)",
							k, a.Connected(2), c.Connected(1), a.Stats(), c.Stats())
					}
					time.Sleep(50 * time.Microsecond)
				}
			}
			return nil
		})
		if err == nil && k < len(at) {
			err = fmt.Errorf("the stream ended after %d of %d breaks", k, len(at))
		}
		errs <- err
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
	t.Logf("%d messages each way, %d breaks; a: %d connections, %d frames resent, %d duplicates dropped, %d acks; c: %d connections, %d resent, %d duplicates, %d acks",
		n, broke, sa.Established, sa.Resent, sa.Duplicates, sa.Acks, sc.Established, sc.Resent, sc.Duplicates, sc.Acks)
	if broke != breaks || sa.Lost+sc.Lost < breaks {
		t.Fatalf("%d breaks, %d and %d connections lost; want %d breaks and as many losses", broke, sa.Lost, sc.Lost, breaks)
	}
	checkPath(t, a, path)
}

var _ transport.Handler = (*streamCheck)(nil)

// A node that accepts no connection (Config.DialOutOnly) is reached over
// the connection it dials: its peer, whose address for it leads nowhere,
// never dials it, and frames sent while that connection is broken wait
// for the node's next dial and arrive once, in order.
func TestDialOutOnly(t *testing.T) {
	forPaths(t, testDialOutOnly)
}

func testDialOutOnly(t *testing.T, path pathKind) {
	ca, cb := config(1, nil), config(2, nil)
	path.set(&ca)
	path.set(&cb)
	cb.DialOutOnly = true
	a, b := listen(t, ca), listen(t, cb)
	const n = 200
	chk := newStreamCheck(n)
	b.SetHandler(chk)
	a.SetHandler(newStreamCheck(0))
	// An address where nothing listens: a dial to it would fail (and
	// count in DialFailures).
	dead := listen(t, config(9, nil))
	deadAddr := dead.Addr()
	dead.Close()
	a.SetPeer(2, deadAddr)
	b.SetPeer(1, a.Addr())
	waitStats(t, a, "the dial-out-only node's connection", func(tcp.Stats) bool { return a.Connected(2) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			var p [8]byte
			binary.LittleEndian.PutUint64(p[:], uint64(i))
			if err := a.Send(ctx, 2, wire.Frame{Kind: seqKind, Payload: p[:]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(0, n/2)
	a.BreakConns(2)
	send(n/2, n)
	select {
	case <-chk.done:
	case <-ctx.Done():
	}
	if got, err := chk.result(); err != nil || got != n {
		t.Fatalf("%d of %d frames in order: %v (stats a %+v, b %+v)", got, n, err, a.Stats(), b.Stats())
	}
	if s := a.Stats(); s.Dials != 0 || s.DialFailures != 0 {
		t.Fatalf("the peer dialled the dial-out-only node (%d dials, %d failed)", s.Dials, s.DialFailures)
	}
	if s := b.Stats(); s.Dials < 2 || s.Accepted != 0 {
		t.Fatalf("the dial-out-only node made %d dials and accepted %d connections; want at least 2 and none", s.Dials, s.Accepted)
	}
}
