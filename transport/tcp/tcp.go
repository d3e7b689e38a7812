package tcp

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/internal/slot"
)

// Transport is a TCP [transport.Transport]. Its methods are safe for
// concurrent use.
type Transport struct {
	cfg     Config
	self    core.NodeID
	ln      net.Listener
	uln     net.Listener // the same-host Unix socket; nil without one
	log     *slog.Logger
	slot    *slot.Slot
	dialCtx context.Context
	cancel  context.CancelFunc
	closing chan struct{}
	wg      sync.WaitGroup
	stats   stats
	// rt is the reachability state that relaying chooses by (route.go).
	rt routeTable
	// refusals limits the logs of refused connections (admission.go).
	refusals logLimiter
	// writerRuns counts the writers' runs over a connection (writeLoop
	// calls): the tests check that a writer waits, rather than spins, while
	// its connection is closed but not yet cleared, or the transport closes.
	writerRuns atomic.Uint64
	// nowPartial counts the frames SendNow wrote in part (tests).
	nowPartial atomic.Uint64
	// spin is the connections' polling time, in ns (SetSpin, poll.go).
	spin atomic.Int64
	// pollers counts the callers polling the shared-memory connections,
	// which are listed in rings, and keeps their rings mapped while they
	// do (progress.go).
	pollers pollGuard
	// lazyReads is the period of the rings' lazy reads, in ns; 0: off
	// (shmlazy.go).
	lazyReads atomic.Int64
	rings     atomic.Pointer[[]*conn]
	// working counts the goroutines of this transport that move frames
	// of shared-memory connections besides the callers' progress: reader
	// goroutines reading, writes of a ring's slice or more, and Reads and
	// Writes waiting for the peer's doorbell. A stretched poll ends for them (progress.go). window is
	// the callers' stretched polling window (ns; 0: the polling time
	// asked for), vainAt when a poll last ended in vain (monoNow; 0: none
	// since).
	working atomic.Int32
	window  atomic.Int64
	vainAt  atomic.Int64
	// single is the state of single-copy reads (singlecopy.go).
	single singleCopy
	// acks holds acknowledgements for HoldAcks (ackhold.go).
	acks ackHold
	// suspects are the failure detector's (Suspect, linktimeout.go).
	suspects suspectSet

	// byID is a copy of peers for the lock-free lookup of a send's
	// connection (current), made again when it misses a peer that
	// peers has; nil once the transport is closed.
	byID atomic.Pointer[map[core.NodeID]*peer]

	mu     sync.Mutex
	closed bool
	peers  map[core.NodeID]*peer
	// announced holds the stream id our handshakes gave a node we have
	// no state for yet, which its state takes when made (handshake.go,
	// ourResume): one entry per node that got that far in a handshake
	// (for an inbound one, past its proof). Made at its first entry.
	announced map[core.NodeID]uint64
	// spareQueues are the empty queues of writers that ended, kept for
	// the next peer to become active: making them (QueueLen frames, about
	// 50 KiB) on the sending goroutine, often an event loop, would cost
	// zeroed pages on the critical path of a membership's view change.
	spareQueues []peerQueues
	live        map[net.Conn]struct{} // every open socket, closed by Close
}

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Limited   = (*Transport)(nil)
)

// Listen starts a transport listening on cfg.ListenAddr.
func Listen(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	lc := net.ListenConfig{KeepAliveConfig: keepAlive(cfg), Control: socketControl(cfg)}
	ln, err := lc.Listen(context.Background(), "tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen on %s: %w", cfg.ListenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:     cfg,
		self:    cfg.Node,
		ln:      ln,
		log:     cfg.Logger.With("node", uint32(cfg.Node)),
		slot:    slot.New(),
		dialCtx: ctx,
		cancel:  cancel,
		closing: make(chan struct{}),
		peers:   map[core.NodeID]*peer{},
		live:    map[net.Conn]struct{}{},
	}
	t.rt.of = map[core.NodeID]peerRoute{}
	t.rt.blocked = map[core.NodeID]bool{}
	t.rt.changed = make(chan struct{}, 1)
	t.suspects.kick = make(chan struct{}, 1)
	t.uln = t.listenUnix(ln.Addr())
	t.wg.Add(2)
	go t.routeLoop()
	go t.acceptLoop(ln)
	if t.uln != nil {
		t.wg.Add(1)
		go t.acceptLoop(t.uln)
	}
	if cfg.IdleTimeout > 0 {
		t.wg.Add(1)
		go t.sweepIdle()
	}
	t.log.Info("tcp: listening", "addr", t.Addr(), "unix", t.UnixAddr())
	return t, nil
}

// newStreamID returns a random stream id (wire.Resume), not 0.
func newStreamID() uint64 {
	for {
		var b [8]byte
		rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

func keepAlive(cfg Config) net.KeepAliveConfig {
	if cfg.KeepAlive < 0 {
		return net.KeepAliveConfig{Enable: false}
	}
	return net.KeepAliveConfig{Enable: true, Idle: cfg.KeepAlive, Interval: cfg.KeepAlive, Count: 3}
}

// Self returns this node's id.
func (t *Transport) Self() core.NodeID { return t.self }

// Addr returns the listening address, "ip:port".
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// MaxFrameSize is Config.MaxFrameSize (see [transport.Limited]).
func (t *Transport) MaxFrameSize() int { return t.cfg.MaxFrameSize }

// UnixAddr returns the name of the same-host Unix socket the transport
// listens on ("@cohort/…", an abstract name), or "" if it has none
// (Config.NoUnix, not Linux, or the name could not be bound).
func (t *Transport) UnixAddr() string {
	if t.uln == nil {
		return ""
	}
	return t.uln.Addr().String()
}

// SetHandler installs the inbound path.
func (t *Transport) SetHandler(h transport.Handler) { t.slot.Set(h) }

// Close closes every connection and the listener, and waits for every
// goroutine of the transport to end (a handler blocked in Deliver delays
// it). Frames still queued are dropped.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.byID.Store(nil) // current takes the lock, which sees closed
	close(t.closing)
	live := make([]net.Conn, 0, len(t.live))
	for nc := range t.live {
		live = append(live, nc)
	}
	t.mu.Unlock()
	t.cancel()
	err := t.ln.Close()
	if t.uln != nil {
		if uerr := t.uln.Close(); err == nil {
			err = uerr
		}
	}
	for _, nc := range live {
		nc.Close()
	}
	t.wg.Wait()
	t.mu.Lock()
	logs := make([]*sendLog, 0, len(t.peers))
	for _, p := range t.peers {
		logs = append(logs, p.log)
	}
	t.mu.Unlock()
	for _, l := range logs {
		l.drop() // what was lent goes back
	}
	t.log.Info("tcp: closed")
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("tcp: closing the listener: %w", err)
	}
	return nil
}

// track registers an open socket so that Close closes it; it closes nc and
// returns false if the transport is closed.
func (t *Transport) track(nc net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		nc.Close()
		return false
	}
	t.live[nc] = struct{}{}
	return true
}

func (t *Transport) untrack(nc net.Conn) {
	t.mu.Lock()
	delete(t.live, nc)
	t.mu.Unlock()
	nc.Close()
}

// setOptions sets a new socket's options: TCP_NODELAY on TCP, Reno
// congestion control on TCP over loopback (setLoopbackCongestion), and
// the kernel buffers (Config.SocketBuffer) on a Unix socket, which has no
// window to announce and whose accepted end does not inherit its
// listener's buffers; a TCP socket has had them since before its
// handshake (bufferControl). (Keep-alive is the dialer's and listener's,
// TCP only: a Unix peer's end is always seen.)
func (t *Transport) setOptions(nc net.Conn) {
	switch c := nc.(type) {
	case *net.TCPConn:
		c.SetNoDelay(true)
		setLoopbackCongestion(c)
	case *net.UnixConn:
		if b := t.cfg.SocketBuffer; b > 0 {
			c.SetReadBuffer(b)
			c.SetWriteBuffer(b)
		}
	}
}

// bufferControl returns the Control of the TCP listener and dialer, which
// sets the kernel buffers (Config.SocketBuffer) on the socket before it
// listens or connects; an accepted socket inherits its listener's.
//
// They must be set before the handshake: TCP chooses its window scale
// and announces its first window then, from the receive buffer, and the
// peer bounds its segments by half the largest window it has seen (32 KiB
// on loopback with the default buffers). A buffer shrunk afterwards
// offers a window smaller than such a segment, into which Linux sends
// nothing but its persist timer's probes, one window per probe: a stream
// of frames as large as the buffer or more crawls at tens of KB/s and
// looks stalled (TestSmallSocketBuffers).
//
// The window also falls by itself after the handshake: Linux sizes it
// from the buffer by the ratio of bytes to memory of the segments it
// received, which small segments lower. With a small buffer it can
// fall below half its largest, and so below the peer's segment size;
// then an acknowledgement that leaves it too small starts the persist
// timer again, and a peer writing more often than the timer's 200 ms (a
// heartbeat) keeps every probe from going: the stream stops for good
// (TestShrunkWindowKeepsFlowing). The segments are therefore bounded too,
// by smallBufferSegment, far below any window such a buffer offers.
func bufferControl(cfg Config) func(network, address string, rc syscall.RawConn) error {
	b := cfg.SocketBuffer
	if b <= 0 {
		return nil
	}
	return func(_, _ string, rc syscall.RawConn) error {
		var err error
		cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, b)
			if err == nil {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, b)
			}
			if err == nil {
				err = setSegmentMax(fd, smallBufferSegment(b))
			}
		})
		if cerr != nil {
			return cerr
		}
		return os.NewSyscallError("setsockopt", err)
	}
}

func (t *Transport) hintOf(h core.PeerHint) {
	if hd := t.slot.Get(); hd != nil {
		hd.Hint(h)
	}
}

func (t *Transport) isClosing() bool { return isClosed(t.closing) }
