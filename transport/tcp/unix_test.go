package tcp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/tcp/tcptest"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// The tests in this file check the same-host path (package doc,
// "Connections"): transports of one host connect over their Unix sockets,
// fall back to TCP when the peer has none, and authenticate exactly as over
// TCP. The tests of idle retirement, the direct path, refused connections
// and the transport contract run over both kinds of connection (forPaths).

// sendBothWays sends frames 0 to n-1 (frame(seq)) from each of trs to the
// other at once, each by Send or SendDirect at random; side i draws from
// rand.NewPCG(*seed, stream+i), and calls pause, if not nil, before each
// frame with its transport, random source and the frame's number.
func sendBothWays(t *testing.T, trs []*tcp.Transport, n int, stream uint64, pause func(tr *tcp.Transport, rng *rand.Rand, seq uint64)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(trs))
	for i, tr := range trs {
		to := trs[1-i].Self()
		rng := rand.New(rand.NewPCG(*seed, stream+uint64(i)))
		wg.Go(func() {
			ctx := context.Background()
			for seq := range uint64(n) {
				if pause != nil {
					pause(tr, rng, seq)
				}
				f := frame(seq)
				var err error
				if rng.IntN(2) == 0 {
					err = tr.Send(ctx, to, f)
				} else {
					err = tr.SendDirect(ctx, to, wire.Frame{Kind: f.Kind}, f.Payload)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// exchange sends n frames each way between a and b at once (sendBothWays)
// and checks that both receive every frame once and in order, and that no
// hint was given.
func exchange(t *testing.T, a, b *tcp.Transport, n int) {
	t.Helper()
	recs := []*transporttest.Recorder{transporttest.NewRecorder(), transporttest.NewRecorder()}
	trs := []*tcp.Transport{a, b}
	for i, tr := range trs {
		tr.SetHandler(recs[i])
	}
	sendBothWays(t, trs, n, 10, nil)
	for i, rec := range recs {
		rec.Wait(t, transporttest.Timeout, "every frame", gotFrames(n))
		for k, f := range rec.Frames() {
			if s, ok := transporttest.Seq(f.Payload); !ok || s != uint64(k) || f.Src != trs[1-i].Self() {
				t.Fatalf("node %v: frame %d carries %d from %v (ok %v): lost, duplicated or reordered", trs[i].Self(), k, s, f.Src, ok)
			}
		}
		if h := rec.Hints(); len(h) != 0 {
			t.Fatalf("node %v got hints %v", trs[i].Self(), h)
		}
	}
}

// Two transports on 127.0.0.1 connect over their Unix sockets, plain and
// TLS, and frames flow both ways in order.
func TestUnixPath(t *testing.T) {
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			ca, cb := config(1, nil), config(2, nil)
			if useTLS {
				tc := tcptest.SelfSignedTLS(t)
				ca.TLS, cb.TLS = tc, tc
			}
			a, b := listen(t, ca), listen(t, cb)
			for _, tr := range []*tcp.Transport{a, b} {
				if !strings.HasPrefix(tr.UnixAddr(), "@cohort/") {
					t.Fatalf("node %v listens on Unix socket %q, want an abstract @cohort/ name", tr.Self(), tr.UnixAddr())
				}
			}
			// Connect first (over a's Unix socket dial, Introduce): two
			// first frames sent at once dial both ways, and on a loaded
			// machine the tie-break's loser may give up waiting for the
			// winner's connection and hint, which is not what this test is
			// about (TestSimultaneousDial is).
			ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
			defer cancel()
			if id, err := a.Introduce(ctx, b.Addr()); err != nil || id != 2 {
				t.Fatalf("Introduce = %v, %v; want n2", id, err)
			}
			b.SetPeer(1, a.Addr())
			exchange(t, a, b, 500)
			checkPath(t, a, pathKinds[0])
			checkPath(t, b, pathKinds[0])
		})
	}
}

// A peer with the path off (Config.NoUnix) has no Unix socket: a dialer
// with the path on falls back to TCP at once, with no failed dial and no
// hint, and the peer itself dials TCP only.
func TestUnixFallbackToTCP(t *testing.T) {
	for _, offDials := range []bool{false, true} {
		t.Run(fmt.Sprintf("dialer off=%v", offDials), func(t *testing.T) {
			on, off := config(1, nil), config(2, nil)
			off.NoUnix = true
			a, b := listen(t, on), listen(t, off)
			if b.UnixAddr() != "" {
				t.Fatalf("a transport with NoUnix listens on %q", b.UnixAddr())
			}
			dialer, acceptor := a, b
			if offDials {
				dialer, acceptor = b, a
			}
			rd, racc := transporttest.NewRecorder(), transporttest.NewRecorder()
			dialer.SetHandler(rd)
			acceptor.SetHandler(racc)
			dialer.SetPeer(acceptor.Self(), acceptor.Addr())
			ctx := context.Background()
			if err := dialer.Send(ctx, acceptor.Self(), frame(0)); err != nil {
				t.Fatal(err)
			}
			racc.Wait(t, transporttest.Timeout, "the frame", gotFrames(1))
			if err := acceptor.Send(ctx, dialer.Self(), frame(1)); err != nil {
				t.Fatal(err)
			}
			rd.Wait(t, transporttest.Timeout, "the reply", gotFrames(1))
			for _, tr := range []*tcp.Transport{a, b} {
				checkPath(t, tr, pathKinds[2])
			}
			if s := dialer.Stats(); s.Dials != 1 || s.DialFailures != 0 || s.Established != 1 {
				t.Fatalf("dialer's stats %+v: want one dial, not failed, one connection", s)
			}
			if h := append(rd.Hints(), racc.Hints()...); len(h) != 0 {
				t.Fatalf("hints %v: a peer without the Unix path is no failure", h)
			}
		})
	}
}

// A peer of the same job with another secret is found on its Unix socket
// and refused there by the handshake, as over TCP would; a peer of another
// job has a Unix socket of another name, is not found there, and refuses
// the dial over TCP. Either way the dialer gets a hint naming it, no
// frame is delivered and no connection is put in use.
func TestUnixRefusedPeers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(*tcp.Config)
		overUnix bool // refused on its Unix socket (else over TCP)
	}{
		{"another secret", func(c *tcp.Config) { c.Secret = []byte("another secret of sixteen+ bytes") }, true},
		{"another job", func(c *tcp.Config) { c.JobID = "another-job" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			other := config(2, &logs)
			tc.edit(&other)
			a, b := listen(t, config(1, nil)), listen(t, other)
			if a.UnixAddr() == "" || b.UnixAddr() == "" {
				t.Fatalf("Unix sockets %q and %q: want both", a.UnixAddr(), b.UnixAddr())
			}
			ra, rb := transporttest.NewRecorder(), transporttest.NewRecorder()
			a.SetHandler(ra)
			b.SetHandler(rb)
			a.SetPeer(2, b.Addr())
			if err := a.Send(context.Background(), 2, frame(0)); err != nil {
				t.Fatal(err)
			}
			ra.Wait(t, transporttest.Timeout, "a hint about node 2", func(_ []wire.Frame, hs []core.PeerHint) bool {
				return len(hs) > 0 && hs[0].Node == 2
			})
			// The refusal is counted, then logged: wait for the log.
			deadline := time.Now().Add(transporttest.Timeout)
			for !strings.Contains(logs.String(), "refused connection") && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if sa, sb := a.Stats(), b.Stats(); sb.Refused == 0 || sa.Established != 0 || sb.Established != 0 || sb.FramesIn != 0 || sa.DialFailures == 0 {
				t.Fatalf("stats a %+v, b %+v: want failed dials, a refusal, no connection and no frame", sa, sb)
			}
			if len(rb.Frames()) != 0 {
				t.Fatalf("node 2 delivered %v from a node it refused", rb.Frames())
			}
			log := logs.String()
			if unix := strings.Contains(log, fmt.Sprintf("unix pid %d", os.Getpid())); !strings.Contains(log, "refused connection") || unix != tc.overUnix {
				t.Fatalf("node 2's log (want a refusal, over its Unix socket: %v):\n%s", tc.overUnix, log)
			}
		})
	}
}
