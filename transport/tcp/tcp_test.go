package tcp_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/transport/transporttest"
	"github.com/cohort-mp/cohort/wire"
)

// The tests in this file check docs/DESIGN.md "Real host and transport"
// (transport/tcp: one connection per pair, TCP_NODELAY, write coalescing,
// bounded queues with back-pressure, reconnect with back-off, hints) and
// "Security" (every connection proves the job secret before any frame is
// accepted), on loopback.

var seed = flag.Uint64("seed", 1, "seed of the random frame sizes")

func TestMain(m *testing.M) {
	if addr := os.Getenv(shmPeerEnv); addr != "" {
		runShmPeer(addr) // never returns
	}
	goleak.VerifyTestMain(m)
}

var secret = []byte("test job secret, 32 bytes long!!")

const jobID = "job-test"

// logBuffer collects a transport's logs for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func config(id core.NodeID, logs io.Writer) tcp.Config {
	cfg := tcp.DefaultConfig()
	cfg.Node, cfg.JobID, cfg.Secret = id, jobID, secret
	cfg.BackoffMin, cfg.BackoffMax = 5*time.Millisecond, 100*time.Millisecond
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return cfg
}

func listen(t *testing.T, cfg tcp.Config) *tcp.Transport {
	t.Helper()
	tr, err := tcp.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// pathKinds are the kinds of connection between transports of one host:
// the same-host Unix socket (the default between transports of one
// process), shared memory over it (the default between processes; allowed
// in process here), loopback TCP (Config.NoUnix) and loopback TCP with
// the records of connections between hosts (Config.Integrity). Tests of
// behaviour that must not depend on the kind run over all (forPaths).
var pathKinds = []pathKind{{name: "unix"}, {name: "shm", shm: true}, {name: "tcp", noUnix: true},
	{name: "records", noUnix: true, records: true}}

// benchPathKinds adds each with polling (Transport.SetSpin); the
// benchmarks and TestContractPolling run over them.
var benchPathKinds = append(slices.Clone(pathKinds),
	pathKind{name: "unix-poll", spin: 50 * time.Microsecond},
	pathKind{name: "shm-poll", shm: true, spin: 50 * time.Microsecond},
	pathKind{name: "tcp-poll", noUnix: true, spin: 50 * time.Microsecond})

type pathKind struct {
	name    string
	noUnix  bool
	shm     bool
	records bool          // frames in authenticated records (Config.Integrity)
	tls     bool          // over TLS (set by the test: Config.TLS needs its certificate)
	spin    time.Duration // the shared-memory polling time (benchmarks)
	// callers: goroutines poll each transport (PollUntil) while the test
	// runs, taking frames from its readers.
	callers bool
}

// set makes cfg take the path.
func (k pathKind) set(cfg *tcp.Config) {
	cfg.NoUnix = k.noUnix
	if k.records {
		cfg.Integrity = tcp.IntegrityAlways
	}
	if k.shm {
		tcp.ShmInProcess(cfg)
	}
}

// forPaths runs f as a subtest per kind of connection.
func forPaths(t *testing.T, f func(t *testing.T, path pathKind)) {
	for _, k := range pathKinds {
		t.Run(k.name, func(t *testing.T) { f(t, k) })
	}
}

// checkPath fails unless every connection tr put in use ran over the kind
// path asks for (and there was one).
func checkPath(t *testing.T, tr *tcp.Transport, path pathKind) {
	t.Helper()
	s := tr.Stats()
	wantUnix, wantShm := s.Established, uint64(0)
	switch {
	case path.noUnix:
		wantUnix = 0
	case path.shm:
		wantShm = s.Established
	}
	wantRecords := uint64(0)
	if path.records {
		wantRecords = s.Established
	}
	if s.Established == 0 || s.Unix != wantUnix || s.Shm != wantShm || s.Integrity != wantRecords {
		t.Fatalf("node %v: of %d connections, %d over Unix, %d over shared memory and %d in records; want %d, %d and %d (path %s)",
			tr.Self(), s.Established, s.Unix, s.Shm, s.Integrity, wantUnix, wantShm, wantRecords, path.name)
	}
}

func factory(path pathKind) transporttest.Factory {
	return func(t *testing.T, n int, opt transporttest.Options) []transport.Transport {
		ts := make([]transport.Transport, n)
		for i := range ts {
			cfg := config(core.NodeID(i+1), nil)
			cfg.QueueLen, cfg.MaxFrameSize, cfg.SocketBuffer = opt.QueueLen, opt.MaxFrameSize, opt.SocketBuffer
			path.set(&cfg)
			tr := listen(t, cfg)
			if err := tr.SetSpin(path.spin); err != nil {
				t.Fatal(err)
			}
			if path.callers {
				pollWhileTesting(t, tr, path.spin, uint64(i+1))
			}
			ts[i] = tr
		}
		for _, a := range ts {
			for _, b := range ts {
				if a != b {
					a.SetPeer(b.Self(), b.Addr())
				}
			}
		}
		return ts
	}
}

// TestContract runs the transport contract (package transport doc):
// exchange, FIFO under load, back-pressure, errors, a late handler; over
// the same-host Unix socket and over loopback TCP.
func TestContract(t *testing.T) {
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	forPaths(t, func(t *testing.T, path pathKind) { transporttest.Run(t, factory(path), *seed) })
}

// TestContractPolling runs the contract with the readers polling
// (Transport.SetSpin) on every kind of connection, and over shared memory
// with callers polling the rings too (PollUntil), so that frames are
// delivered by callers and readers in turn.
func TestContractPolling(t *testing.T) {
	t.Logf("seed %d (replay with -seed %d)", *seed, *seed)
	kinds := append(benchPathKinds[len(pathKinds):], pathKind{name: "shm-callers", shm: true, spin: 50 * time.Microsecond, callers: true})
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { transporttest.Run(t, factory(k), *seed) })
	}
}

func frame(seq uint64) wire.Frame {
	return wire.Frame{Kind: transporttest.KindTest, Payload: transporttest.Payload(seq, 0)}
}

// rawClient speaks the wire protocol by hand, to misbehave.
type rawClient struct {
	nc net.Conn
	fr *wire.FrameReader
	fw *wire.FrameWriter
}

func dialRaw(t *testing.T, network, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(transporttest.Timeout))
	return &rawClient{nc: nc, fr: wire.NewFrameReader(nc), fw: wire.NewFrameWriter(nc, 0)}
}

func (c *rawClient) send(t *testing.T, f wire.Frame) {
	t.Helper()
	if err := c.fw.WriteFrame(f); err != nil {
		t.Fatal(err)
	}
	if err := c.fw.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (c *rawClient) sendMsg(t *testing.T, f wire.Frame, m wire.Message) {
	t.Helper()
	if err := c.fw.WriteMessage(f, m); err != nil {
		t.Fatal(err)
	}
	if err := c.fw.Flush(); err != nil {
		t.Fatal(err)
	}
}

// handshake runs the initiator's side with the given Hello and secret and
// returns the server's Hello; it does not read the server's proof and
// resume.
func (c *rawClient) handshake(t *testing.T, h wire.Hello, secret []byte) wire.Hello {
	t.Helper()
	c.sendMsg(t, wire.Frame{Src: h.Node, Dst: core.None}, h)
	f, err := c.fr.ReadFrame()
	if err != nil {
		t.Fatalf("reading the server's hello: %v", err)
	}
	sh, err := wire.DecodeHello(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version == wire.Version && h.JobID == jobID {
		c.sendMsg(t, wire.Frame{Src: h.Node, Dst: sh.Node}, wire.Proof{MAC: wire.ComputeProof(secret, h, sh, true)})
		// The resume follows the proof at once. A server that refused
		// the proof may have closed already: the error is expected then.
		c.fw.WriteMessage(wire.Frame{Src: h.Node, Dst: sh.Node}, wire.Resume{Stream: uint64(h.Node)})
		c.fw.Flush()
	}
	return sh
}

// waitClosed reads until the server closes the connection and returns the
// frames it sent after the hello (if any).
func (c *rawClient) waitClosed(t *testing.T) []wire.Frame {
	t.Helper()
	var got []wire.Frame
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server did not close the connection: %v", err)
			}
			return got
		}
		got = append(got, f)
	}
}

func hello(node core.NodeID) wire.Hello {
	h := wire.Hello{Version: wire.Version, JobID: jobID, Node: node}
	for i := range h.Nonce {
		h.Nonce[i] = byte(i + 1)
	}
	return h
}

// TestRefusedConnections checks docs/DESIGN.md "Security": a connection that
// does not prove the job secret (or has no handshake, another job, another
// version) is refused, logged with its remote address (over the same-host
// Unix socket: its process), and none of its frames is delivered; then a
// proper peer is served. Over TCP and over the Unix socket alike.
func TestRefusedConnections(t *testing.T) {
	forPaths(t, testRefusedConnections)
}

func testRefusedConnections(t *testing.T, path pathKind) {
	overTCP := path.noUnix
	otherJob := hello(7)
	otherJob.JobID = "another-job"
	otherVersion := hello(7)
	otherVersion.Version = wire.Version + 1
	for _, tc := range []struct {
		name    string
		hello   *wire.Hello // nil: no handshake at all
		secret  []byte
		wantLog string
	}{
		{"wrong secret", ptr(hello(7)), []byte("not the job secret"), "authentication failed"},
		{"empty secret", ptr(hello(7)), nil, "authentication failed"},
		{"missing handshake", nil, nil, "not a hello"},
		{"wrong job", &otherJob, secret, "job id mismatch"},
		{"wrong version", &otherVersion, secret, "version mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			srv := listen(t, config(1, &logs))
			rec := transporttest.NewRecorder()
			srv.SetHandler(rec)
			network, addr := "unix", srv.UnixAddr()
			if overTCP {
				network, addr = "tcp", srv.Addr()
			}
			c := dialRaw(t, network, addr)
			remote := c.nc.LocalAddr().String()
			if !overTCP {
				remote = fmt.Sprintf("unix pid %d", os.Getpid())
			}
			data := wire.Frame{Kind: transporttest.KindTest, Src: 7, Dst: 1, Payload: transporttest.Payload(0, 0)}
			if tc.hello != nil {
				c.handshake(t, *tc.hello, tc.secret)
			}
			// Frames right behind the handshake: none may be delivered. (The
			// server may already have closed: write errors are expected.)
			for range 3 {
				c.fw.WriteFrame(data)
			}
			c.fw.Flush()
			c.waitClosed(t)
			if st := srv.Stats(); st.Refused != 1 || st.FramesIn != 0 {
				t.Fatalf("stats %+v: want 1 refused connection and no frame in", st)
			}
			log := logs.String()
			if !strings.Contains(log, "refused connection") || !strings.Contains(log, remote) || !strings.Contains(log, tc.wantLog) {
				t.Fatalf("log does not report the refusal of %s with %q:\n%s", remote, tc.wantLog, log)
			}
			// A proper peer is served afterwards (the check above can fail).
			peer := listen(t, config(2, nil))
			peer.SetHandler(transporttest.NewRecorder())
			peer.SetPeer(1, srv.Addr())
			if err := peer.Send(context.Background(), 1, frame(0)); err != nil {
				t.Fatal(err)
			}
			rec.Wait(t, transporttest.Timeout, "the proper peer's frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) > 0 })
			if fs := rec.Frames(); len(fs) != 1 || fs[0].Src != 2 {
				t.Fatalf("delivered %v, want exactly the frame of node 2", fs)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestMalformedFrameClosesOnlyThatConnection checks that a frame with a bad
// header closes its connection with a logged error while the transport goes
// on serving the others, and that frames whose source is not the
// authenticated peer, or whose destination is not us, are dropped.
func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	var logs logBuffer
	srv := listen(t, config(1, &logs))
	rs := transporttest.NewRecorder()
	srv.SetHandler(rs)
	good := listen(t, config(2, nil))
	rg := transporttest.NewRecorder()
	good.SetHandler(rg)
	good.SetPeer(1, srv.Addr())
	srv.SetPeer(2, good.Addr())
	if err := good.Send(context.Background(), 1, frame(0)); err != nil {
		t.Fatal(err)
	}

	c := dialRaw(t, "tcp", srv.Addr())
	c.handshake(t, hello(3), secret)
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 3, Dst: 1, Payload: transporttest.Payload(100, 0)}) // valid
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 2, Dst: 1, Payload: transporttest.Payload(101, 0)}) // claims to be node 2
	c.send(t, wire.Frame{Kind: transporttest.KindTest, Src: 3, Dst: 9, Payload: transporttest.Payload(102, 0)}) // not for us
	c.send(t, wire.Frame{Kind: wire.KindHello, Src: 3, Dst: 1, Payload: nil})                                   // a stray hello
	if _, err := c.nc.Write([]byte{0, 0, 0, 2, 1, 1}); err != nil {                                             // length 2 < any header
		t.Fatal(err)
	}
	c.waitClosed(t)
	rs.Wait(t, transporttest.Timeout, "a hint about node 3", func(_ []wire.Frame, hs []core.PeerHint) bool {
		return len(hs) > 0 && hs[0].Node == 3
	})
	st := srv.Stats()
	if st.Malformed != 1 || st.Misaddressed != 3 {
		t.Fatalf("stats %+v: want 1 malformed connection and 3 misaddressed frames", st)
	}
	if log := logs.String(); !strings.Contains(log, "malformed frame") || !strings.Contains(log, c.nc.LocalAddr().String()) {
		t.Fatalf("log does not report the malformed frame from %s:\n%s", c.nc.LocalAddr(), log)
	}
	// The transport keeps serving node 2, both ways.
	if err := good.Send(context.Background(), 1, frame(1)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Send(context.Background(), 2, frame(0)); err != nil {
		t.Fatal(err)
	}
	rg.Wait(t, transporttest.Timeout, "the server's frame at node 2", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	rs.Wait(t, transporttest.Timeout, "node 2's frames at the server", func(fs []wire.Frame, _ []core.PeerHint) bool {
		return transporttest.CountFrom(fs, 2) == 2
	})
	var from3 []uint64
	for _, f := range rs.Frames() {
		if f.Src == 3 {
			s, _ := transporttest.Seq(f.Payload)
			from3 = append(from3, s)
		}
		if f.Src == 2 {
			if s, _ := transporttest.Seq(f.Payload); s >= 100 {
				t.Fatalf("a frame forged as node 2 was delivered (seq %d)", s)
			}
		}
	}
	if len(from3) != 1 || from3[0] != 100 {
		t.Fatalf("from node 3 delivered %v, want [100]", from3)
	}
}

// TestReconnectAfterRestart checks that a node that loses its peer gets a
// hint, keeps its frames queued while redialing with back-off, and delivers
// them once the peer listens again at the same address; and that the
// restarted peer can answer without knowing us in advance.
func TestReconnectAfterRestart(t *testing.T) {
	a := listen(t, config(1, nil))
	ra := transporttest.NewRecorder()
	a.SetHandler(ra)
	b, err := tcp.Listen(config(2, nil))
	if err != nil {
		t.Fatal(err)
	}
	rb := transporttest.NewRecorder()
	b.SetHandler(rb)
	a.SetPeer(2, b.Addr())
	if err := a.Send(context.Background(), 2, frame(0)); err != nil {
		t.Fatal(err)
	}
	rb.Wait(t, transporttest.Timeout, "the first frame", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	addr := b.Addr()
	b.Close()
	ra.Wait(t, transporttest.Timeout, "a hint about node 2", func(_ []wire.Frame, hs []core.PeerHint) bool { return len(hs) > 0 })
	if err := a.Send(context.Background(), 2, frame(1)); err != nil {
		t.Fatal(err)
	}
	// While b is down, a redials and fails: more hints.
	ra.Wait(t, transporttest.Timeout, "a failed dial", func(_ []wire.Frame, hs []core.PeerHint) bool {
		for _, h := range hs {
			if h.Node == 2 && strings.HasPrefix(h.Reason, "dial ") {
				return true
			}
		}
		return false
	})
	cfg := config(2, nil)
	cfg.ListenAddr = addr
	b2 := listen(t, cfg)
	rb2 := transporttest.NewRecorder()
	b2.SetHandler(rb2)
	rb2.Wait(t, transporttest.Timeout, "the queued frame at the restarted node", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	if s, _ := transporttest.Seq(rb2.Frames()[0].Payload); s != 1 {
		t.Fatalf("restarted node got seq %d, want 1", s)
	}
	if err := b2.Send(context.Background(), 1, frame(7)); err != nil {
		t.Fatalf("reply over the inbound connection: %v", err)
	}
	ra.Wait(t, transporttest.Timeout, "the reply", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) == 1 })
	if st := a.Stats(); st.DialFailures == 0 || st.Established < 2 {
		t.Fatalf("stats of a: %+v, want failed dials and two connections", st)
	}
}

// TestSimultaneousDial checks the tie-break: two nodes that start sending
// to each other at the same instant end with one connection, and no frame
// is lost or reordered on the way; over the same-host Unix socket and over
// TCP.
func TestSimultaneousDial(t *testing.T) {
	forPaths(t, testSimultaneousDial)
}

func testSimultaneousDial(t *testing.T, path pathKind) {
	const rounds, per = 8, 200
	tieBreaks := uint64(0)
	for round := range rounds {
		ca, cb := config(1, nil), config(2, nil)
		path.set(&ca)
		path.set(&cb)
		a, err := tcp.Listen(ca)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tcp.Listen(cb)
		if err != nil {
			t.Fatal(err)
		}
		ra, rb := transporttest.NewRecorder(), transporttest.NewRecorder()
		a.SetHandler(ra)
		b.SetHandler(rb)
		a.SetPeer(2, b.Addr())
		b.SetPeer(1, a.Addr())
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, p := range [][2]*tcp.Transport{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for s := range uint64(per) {
					if err := p[0].Send(context.Background(), p[1].Self(), frame(s)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, r := range []*transporttest.Recorder{ra, rb} {
			r.Wait(t, transporttest.Timeout, "all frames", func(fs []wire.Frame, _ []core.PeerHint) bool { return len(fs) >= per })
			for i, f := range r.Frames() {
				if s, _ := transporttest.Seq(f.Payload); s != uint64(i) {
					t.Fatalf("round %d: frame %d has seq %d", round, i, s)
				}
			}
		}
		sa, sb := a.Stats(), b.Stats()
		if sa.Conns != 1 || sb.Conns != 1 {
			t.Fatalf("round %d: connections in use a=%d b=%d, want 1 each", round, sa.Conns, sb.Conns)
		}
		checkPath(t, a, path)
		checkPath(t, b, path)
		tieBreaks += sa.TieBreaks + sb.TieBreaks
		a.Close()
		b.Close()
	}
	t.Logf("%d rounds, %d inbound connections refused by the tie-break", rounds, tieBreaks)
}

func TestConfigValidate(t *testing.T) {
	base := config(1, nil)
	for name, mod := range map[string]func(*tcp.Config){
		"no secret":    func(c *tcp.Config) { c.Secret = nil },
		"node none":    func(c *tcp.Config) { c.Node = core.None },
		"long job":     func(c *tcp.Config) { c.JobID = strings.Repeat("j", wire.MaxJobIDLen+1) },
		"backoff":      func(c *tcp.Config) { c.BackoffMin, c.BackoffMax = time.Second, time.Millisecond },
		"negative len": func(c *tcp.Config) { c.QueueLen = -1 },
	} {
		c := base
		mod(&c)
		if _, err := tcp.Listen(c); !errors.Is(err, transport.ErrBadConfig) {
			t.Errorf("%s: got %v, want ErrBadConfig", name, err)
		}
	}
}
