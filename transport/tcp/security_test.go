package tcp_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// claimHello connects to addr over TCP, sends a hello naming node, reads
// the server's hello, and then sends nothing more: a process of the job
// that does not know the secret, posing as node. It returns the
// connection, which the caller leaves open.
func claimHello(t *testing.T, addr string, node core.NodeID) net.Conn {
	t.Helper()
	c := dialRaw(t, "tcp", addr)
	c.sendMsg(t, wire.Frame{Src: node, Dst: core.None}, hello(node))
	if _, err := c.fr.ReadFrame(); err != nil {
		t.Fatalf("reading the server's hello: %v", err)
	}
	// A server that sends its proof before reading ours has taken our
	// hello in by then; one that reads ours first sends nothing, and the
	// wait ends on the deadline. (This orders the test's steps; nothing is
	// asserted on it.)
	c.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	c.fr.ReadFrame()
	return c.nc
}

// TestUnauthenticatedClaimDoesNotStall checks that connections claiming a
// peer's node id and never proving the secret do not keep a node from
// sending to that peer: node 1 knows node 2, three such connections to
// node 1 name node 2 and stay open (for longer than the test, by the
// handshake timeout), and node 1's frames to node 2 all arrive.
func TestUnauthenticatedClaimDoesNotStall(t *testing.T) {
	cfgA := config(1, nil)
	cfgA.NoUnix = true
	cfgA.HandshakeTimeout = 10 * transporttest.Timeout
	a := listen(t, cfgA)
	b := listen(t, config(2, nil))
	a.SetHandler(transporttest.NewRecorder())
	rb := transporttest.NewRecorder()
	b.SetHandler(rb)
	a.SetPeer(2, b.Addr())
	b.SetPeer(1, a.Addr())
	for range 3 {
		claimHello(t, a.Addr(), 2)
	}
	const n = 100
	for i := range n {
		if err := a.Send(context.Background(), 2, frame(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	rb.Wait(t, transporttest.Timeout, "node 1's frames", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) >= n })
	if got := len(rb.Frames()); got != n {
		t.Fatalf("node 2 got %d frames, want %d", got, n)
	}
	if st := a.Stats(); st.Accepted != 0 || st.Established != 1 {
		t.Fatalf("node 1's stats %+v: want its own connection only, none accepted", st)
	}
}

// dialFrom connects to addr over TCP from the local IP from (a loopback
// address other than 127.0.0.1 stands for another host).
func dialFrom(t *testing.T, from, addr string) *rawClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %s: %v", from, err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(transporttest.Timeout))
	return &rawClient{nc: nc, fr: wire.NewFrameReader(nc), fw: wire.NewFrameWriter(nc, 0)}
}

// served reports whether the server answered c with its hello (else it
// closed the connection at once).
func served(t *testing.T, c *rawClient) bool {
	t.Helper()
	f, err := c.fr.ReadFrame()
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server neither answered nor closed: %v", err)
		}
		return false
	}
	if f.Kind != wire.KindHello {
		t.Fatalf("the server's first frame is %v, not a hello", f.Kind)
	}
	return true
}

// TestHandshakeBounds checks Config.MaxHandshakes and
// MaxHandshakesPerSource: connections that never complete their handshake
// fill a source's share, and the next from that source is closed at once
// (no hello), while a genuine peer from another address still connects;
// then they fill the listener's bound, and the next from anywhere is closed
// at once; once some of them end, connections are served again. The
// refusals of one source are logged once.
func TestHandshakeBounds(t *testing.T) {
	var logs logBuffer
	cfg := config(1, &logs)
	cfg.NoUnix = true
	cfg.HandshakeTimeout = 10 * transporttest.Timeout
	cfg.MaxHandshakes, cfg.MaxHandshakesPerSource = 6, 3
	srv := listen(t, cfg)
	rec := transporttest.NewRecorder()
	srv.SetHandler(rec)
	addr := srv.Addr()

	var first []*rawClient
	for i := range 3 {
		c := dialFrom(t, "127.0.0.2", addr)
		if !served(t, c) {
			t.Fatalf("connection %d from 127.0.0.2 closed at once, below the bound", i)
		}
		first = append(first, c)
	}
	start := time.Now()
	const extra = 5
	for i := range extra {
		if served(t, dialFrom(t, "127.0.0.2", addr)) {
			t.Fatalf("connection %d from 127.0.0.2 beyond its source's bound was served", 3+i)
		}
	}
	if st := srv.Stats(); st.Shed != extra {
		t.Fatalf("stats %+v: want %d shed", st, extra)
	}
	lines := strings.Count(logs.String(), "too many handshakes")
	if allowed := 1 + int(time.Since(start)/(10*time.Second)); lines == 0 || lines > allowed {
		t.Fatalf("%d log lines for %d connections of one source turned away, want 1:\n%s", lines, extra, logs.String())
	}

	// A genuine peer (from 127.0.0.1) connects meanwhile.
	pcfg := config(2, nil)
	pcfg.NoUnix = true
	peer := listen(t, pcfg)
	peer.SetHandler(transporttest.NewRecorder())
	peer.SetPeer(1, addr)
	if err := peer.Send(context.Background(), 1, frame(0)); err != nil {
		t.Fatal(err)
	}
	rec.Wait(t, transporttest.Timeout, "the genuine peer's frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) > 0 })

	// Three more from another address fill the listener's bound.
	for i := range 3 {
		if !served(t, dialFrom(t, "127.0.0.3", addr)) {
			t.Fatalf("connection %d from 127.0.0.3 closed at once, below the bounds", i)
		}
	}
	if served(t, dialFrom(t, "127.0.0.4", addr)) {
		t.Fatal("a connection beyond the listener's bound was served")
	}
	// The first three end; connections are served again.
	for _, c := range first {
		c.nc.Close()
	}
	deadline := time.Now().Add(transporttest.Timeout)
	for srv.Stats().Refused < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !served(t, dialFrom(t, "127.0.0.4", addr)) {
		t.Fatalf("a connection was closed at once after the handshakes in progress ended; stats %+v", srv.Stats())
	}
}

// TestShedPastBudget checks the bounds once a flood has spent the
// listener's budget of refusals, which then paces its accepts: every one
// of twice the budget's burst of connections beyond the bound is still
// shed (no hello, counted), none is served, and once the handshakes in
// progress end a connection is served again.
func TestShedPastBudget(t *testing.T) {
	cfg := config(1, nil)
	cfg.NoUnix = true
	cfg.HandshakeTimeout = 10 * transporttest.Timeout
	cfg.MaxHandshakes = 2
	srv := listen(t, cfg)
	addr := srv.Addr()
	var held []*rawClient
	for i := range 2 {
		c := dialRaw(t, "tcp", addr)
		if !served(t, c) {
			t.Fatalf("connection %d closed at once, below the bound", i)
		}
		held = append(held, c)
	}
	n := 2 * tcp.RefusalBurst
	for i := range n {
		c := dialRaw(t, "tcp", addr)
		if served(t, c) {
			t.Fatalf("connection %d beyond the bound was served", i)
		}
		c.nc.Close()
	}
	if st := srv.Stats(); st.Shed != uint64(n) {
		t.Fatalf("stats %+v: want %d shed", st, n)
	}
	for _, c := range held {
		c.nc.Close()
	}
	deadline := time.Now().Add(transporttest.Timeout)
	for srv.Stats().Refused < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !served(t, dialRaw(t, "tcp", addr)) {
		t.Fatalf("a connection was shed after the handshakes in progress ended; stats %+v", srv.Stats())
	}
}

// TestIntroduceNeedsProvenRefusal checks that a listener without the
// secret cannot pass for a node that refuses our connection for the
// tie-break (which Introduce takes as an answer, recording the address):
// one that names itself and closes the connection after our proof, and
// one that answers with a goodbye carrying no valid proof, both make
// Introduce fail, and no address is recorded for the node they claim.
func TestIntroduceNeedsProvenRefusal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		goodbye bool
	}{{"closes", false}, {"forged goodbye", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(transporttest.Timeout))
				fr, fw := wire.NewFrameReader(nc), wire.NewFrameWriter(nc, 0)
				fw.WriteMessage(wire.Frame{Src: 7, Dst: core.None}, hello(7))
				fw.Flush()
				fr.ReadFrame() // the hello
				fr.ReadFrame() // the proof
				if tc.goodbye {
					fw.WriteFrame(wire.Frame{Kind: wire.KindGoodbye, Src: 7, Dst: 3, Payload: make([]byte, wire.ProofSize)})
					fw.Flush()
				}
			}()
			cfg := config(3, nil)
			cfg.NoUnix = true
			b := listen(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), transporttest.Timeout)
			defer cancel()
			if id, err := b.Introduce(ctx, ln.Addr().String()); err == nil {
				t.Fatalf("Introduce to a listener without the secret returned node %v", id)
			}
			for _, id := range b.Peers() {
				t.Fatalf("node %v recorded after a failed Introduce", id)
			}
			<-done
		})
	}
}
