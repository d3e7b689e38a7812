package tcp_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/tcp/tcptest"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// waitStats waits until cond holds for tr's counters (a bound for a hung
// test, not a measurement).
func waitStats(t *testing.T, tr *tcp.Transport, what string, cond func(tcp.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(transporttest.Timeout)
	for !cond(tr.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("node %v: %s not reached: %+v", tr.Self(), what, tr.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// An idle connection is closed on both sides, with no hint to the failure
// detector and no connection counted as lost; the peers' writers and queues
// are released, and the next frame dials again. Over the same-host Unix
// socket (whose half-close is shutdown(2) as on TCP) and over TCP, plain
// and TLS.
func TestIdleConnectionRetiredQuietly(t *testing.T) {
	forPaths(t, testIdleConnectionRetiredQuietly)
}

func testIdleConnectionRetiredQuietly(t *testing.T, path pathKind) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			ca, cb := config(1, nil), config(2, nil)
			ca.IdleTimeout, cb.IdleTimeout = 40*time.Millisecond, 40*time.Millisecond
			path.set(&ca)
			path.set(&cb)
			if useTLS {
				tc := tcptest.SelfSignedTLS(t)
				ca.TLS, cb.TLS = tc, tc
			}
			a, b := listen(t, ca), listen(t, cb)
			ra, rb := transporttest.NewRecorder(), transporttest.NewRecorder()
			a.SetHandler(ra)
			b.SetHandler(rb)
			a.SetPeer(2, b.Addr())
			b.SetPeer(1, a.Addr())
			ctx := context.Background()
			for i := range uint64(3) {
				if err := a.Send(ctx, 2, frame(i)); err != nil {
					t.Fatal(err)
				}
				if err := b.Send(ctx, 1, frame(i)); err != nil {
					t.Fatal(err)
				}
			}
			rb.Wait(t, transporttest.Timeout, "a's frames", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 3 })
			ra.Wait(t, transporttest.Timeout, "b's frames", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 3 })
			for _, tr := range []*tcp.Transport{a, b} {
				waitStats(t, tr, "the connection retired and the writer ended", func(s tcp.Stats) bool {
					return s.Conns == 0 && s.Retired > 0 && s.Writers == 0
				})
			}
			// Usually one connection; a second one when a writer was kept
			// from the first for IdleTimeout (a loaded machine under -race)
			// and the peer retired it meanwhile. Either way every one of
			// them is retired, none lost.
			sa, sb := a.Stats(), b.Stats()
			if sa.Retired != sa.Established || sb.Retired != sb.Established || sa.Lost != 0 || sb.Lost != 0 {
				t.Fatalf("stats a %+v, b %+v: want every connection retired and none lost on each side", sa, sb)
			}
			if sa.Established > 1 {
				t.Logf("%d connections before the idle close (stats a %+v)", sa.Established, sa)
			}
			if h := append(ra.Hints(), rb.Hints()...); len(h) != 0 {
				t.Fatalf("hints %v: an idle close is no sign of failure", h)
			}
			if err := a.Send(ctx, 2, frame(3)); err != nil {
				t.Fatal(err)
			}
			rb.Wait(t, transporttest.Timeout, "the frame after the close", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 4 })
			if s := a.Stats(); s.Established != sa.Established+1 {
				t.Fatalf("a's stats %+v: want one more connection than the %d before", s, sa.Established)
			}
			want := path
			switch {
			case useTLS && path.shm:
				want = pathKinds[0] // TLS keeps a connection on its socket
			case useTLS && path.records:
				want = pathKinds[2] // TLS protects the frames: no records
			}
			checkPath(t, a, want)
			checkPath(t, b, want)
		})
	}
}

// Connections retired while both sides send in bursts separated by idle
// gaps, through the queue and the direct path, lose, duplicate and reorder
// nothing, and report nothing to the detector; over the same-host Unix
// socket and over TCP.
func TestIdleRetireLosesNothing(t *testing.T) {
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	forPaths(t, testIdleRetireLosesNothing)
}

func testIdleRetireLosesNothing(t *testing.T, path pathKind) {
	const frames = 600
	var logs logBuffer
	cfgs := []tcp.Config{config(1, &logs), config(2, &logs)}
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	trs := make([]*tcp.Transport, 2)
	recs := make([]*transporttest.Recorder, 2)
	for i := range cfgs {
		cfgs[i].IdleTimeout = 4 * time.Millisecond
		path.set(&cfgs[i])
		trs[i] = listen(t, cfgs[i])
		recs[i] = transporttest.NewRecorder()
		trs[i].SetHandler(recs[i])
	}
	trs[0].SetPeer(2, trs[1].Addr())
	trs[1].SetPeer(1, trs[0].Addr())
	sendBothWays(t, trs, frames, 0, func(tr *tcp.Transport, rng *rand.Rand, seq uint64) {
		if seq%150 == 149 {
			// Wait for a retirement, which the peer's traffic may put off
			// until its own burst ends.
			n := tr.Stats().Retired
			deadline := time.Now().Add(transporttest.Timeout)
			for tr.Stats().Retired == n && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		} else if rng.IntN(20) == 0 {
			time.Sleep(time.Duration(rng.IntN(8000)) * time.Microsecond)
		}
	})
	for i, rec := range recs {
		from := trs[1-i].Self()
		err := rec.WaitErr(transporttest.Timeout, func(fs []wire.Frame, _ []core.PeerHint) bool {
			return transporttest.CountFrom(fs, from) >= frames
		})
		fs := rec.Frames()
		if err != nil {
			missing := []uint64{}
			seen := map[uint64]bool{}
			for _, f := range fs {
				s, _ := transporttest.Seq(f.Payload)
				seen[s] = true
			}
			for s := range uint64(frames) {
				if !seen[s] {
					missing = append(missing, s)
				}
			}
			t.Fatalf("node %v: %v; missing %v; stats here %+v, at the sender %+v", trs[i].Self(), err, missing, trs[i].Stats(), trs[1-i].Stats())
		}
		if len(fs) != frames {
			t.Fatalf("node %v received %d frames, want %d", trs[i].Self(), len(fs), frames)
		}
		for k, f := range fs {
			if s, ok := transporttest.Seq(f.Payload); !ok || s != uint64(k) {
				t.Fatalf("node %v: frame %d carries %d (ok %v): lost, duplicated or reordered", trs[i].Self(), k, s, ok)
			}
		}
		if h := rec.Hints(); len(h) != 0 {
			t.Fatalf("node %v got hints %v", trs[i].Self(), h)
		}
	}
	for _, tr := range trs {
		if s := tr.Stats(); s.Retired < frames/150 || s.Lost != 0 {
			t.Fatalf("node %v stats %+v: want at least %d retirements and no connection lost", tr.Self(), s, frames/150)
		}
		checkPath(t, tr, path)
	}
}

// Keep dials the kept peers with nothing to send, and their connections
// are never retired for being idle while a connection to another peer is;
// once the set no longer holds a peer, its connection is retired as any.
func TestKeepConnections(t *testing.T) {
	cfg := func(id core.NodeID) tcp.Config {
		c := config(id, nil)
		c.IdleTimeout = 30 * time.Millisecond
		return c
	}
	a, b, c := listen(t, cfg(1)), listen(t, cfg(2)), listen(t, cfg(3))
	rc := transporttest.NewRecorder()
	for _, tr := range []*tcp.Transport{a, b, c} {
		tr.SetHandler(transporttest.NewRecorder())
	}
	c.SetHandler(rc)
	a.SetPeer(2, b.Addr())
	a.SetPeer(3, c.Addr())
	b.SetPeer(1, a.Addr())
	c.SetPeer(1, a.Addr())
	a.Keep([]core.NodeID{2, 1, 99}) // itself and an unknown node are ignored
	b.Keep([]core.NodeID{1})
	waitStats(t, a, "a connection to the kept peer", func(tcp.Stats) bool { return a.Connected(2) })
	if err := a.Send(context.Background(), 3, frame(0)); err != nil {
		t.Fatal(err)
	}
	rc.Wait(t, transporttest.Timeout, "the frame to c", func(f []wire.Frame, _ []core.PeerHint) bool { return len(f) == 1 })
	waitStats(t, a, "the connection to the peer not kept retired", func(s tcp.Stats) bool { return s.Retired >= 1 && !a.Connected(3) })
	if !a.Connected(2) || a.Stats().Retired != 1 {
		t.Fatalf("after an idle period: kept connection in use %v, %d retired (want only the other one)", a.Connected(2), a.Stats().Retired)
	}
	a.Keep(nil)
	b.Keep(nil)
	waitStats(t, a, "the connection no longer kept retired", func(s tcp.Stats) bool { return s.Retired >= 2 && !a.Connected(2) })
}

// A kept peer whose connection drops is not dialled again at once (it
// has typically just crashed) but after the first back-off, and a writer
// with nothing to send stops dialling a peer that is no longer kept: a
// crashed node is not dialled for ever by the nodes that once kept it.
func TestKeptPeerLostNotRedialled(t *testing.T) {
	cfg := config(1, nil)
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	a, b := listen(t, cfg), listen(t, config(2, nil))
	a.SetHandler(transporttest.NewRecorder())
	b.SetHandler(transporttest.NewRecorder())
	a.SetPeer(2, b.Addr())
	a.Keep([]core.NodeID{2})
	waitStats(t, a, "a connection to the kept peer", func(tcp.Stats) bool { return a.Connected(2) })
	b.Close()
	waitStats(t, a, "the connection lost", func(s tcp.Stats) bool { return s.Lost == 1 && !a.Connected(2) })
	a.Keep(nil)
	deadline := time.Now().Add(transporttest.Timeout)
	for tcp.WriterActive(a, 2) {
		if time.Now().After(deadline) {
			t.Fatalf("the writer to the peer no longer kept still runs: %+v", a.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if s := a.Stats(); s.Dials != 1 {
		t.Fatalf("%d dials, want 1 (the kept link's; none after the peer closed it): %+v", s.Dials, s)
	}
}
