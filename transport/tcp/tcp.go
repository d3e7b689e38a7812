package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/internal/slot"
	"github.com/cohort-mp/cohort/wire"
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
	rings   atomic.Pointer[[]*conn]
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

	// byID is a copy of peers for the lock-free lookup of a send's
	// connection (current), made again when it misses a peer that
	// peers has; nil once the transport is closed.
	byID atomic.Pointer[map[core.NodeID]*peer]

	mu     sync.Mutex
	closed bool
	peers  map[core.NodeID]*peer
	// spareQueues are the empty queues of writers that ended, kept for
	// the next peer to become active: making them (QueueLen frames, about
	// 50 KiB) on the sending goroutine, often an event loop, cost
	// zeroed pages on the critical path of a membership's view change.
	spareQueues []peerQueues
	live        map[net.Conn]struct{} // every open socket, closed by Close
}

// A peer's writer goroutine and queues exist only while it has something to
// do: Send starts them (activateLocked) and the writer ends, releasing its
// queues, once the peer has no connection in use and nothing queued
// (manage). With idle connections closed (Config.IdleTimeout), a process
// that has talked to many nodes over time keeps a goroutine and queues only
// for those it still talks to.

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Limited   = (*Transport)(nil)
)

// peer is the state of one remote node. Fields below mu are guarded by the
// transport's mu.
type peer struct {
	id core.NodeID
	// q and hq exist while active: Send creates them (under t.mu) and
	// starts the writer, which alone receives from them and drops them
	// (under t.mu) as it ends.
	q chan queued
	// hq is the failure detector's lane (frames of core.ProtoFD): the
	// writer takes it before q, so a heartbeat never waits behind a
	// backlog of data frames (only behind the frame being written and what
	// the kernel holds). The detector's frames need no order with the
	// other protocols'.
	hq      chan queued
	wake    chan struct{} // capacity 1: the connection or the address changed
	removed chan struct{}

	addr string
	cur  *conn // the connection in use, nil if none (set by setCur)
	// live mirrors cur for current's lock-free lookup.
	live atomic.Pointer[conn]
	// draining is the connection most recently retired (closed for being
	// idle) whose reader may still deliver frames; a new connection's
	// reader waits for it, so frames of one sender stay in order.
	draining *conn
	active   bool // the writer goroutine runs (and q, hq exist)
	// kept: a connection to the peer is kept open (Keep): dialled with
	// nothing to send, never retired for being idle.
	kept    bool
	wasKept bool // Keep's scratch: kept before the call
	dialing bool // our writer is dialing
	inbound int  // inbound handshakes admitted and not finished
	// unreachable: the last dial failed or the last connection died, and
	// no connection has been put in use since (see Flush).
	unreachable bool

	// accepted counts the frames Send has put in q (and SendNow has
	// taken); written counts those written to a connection, and flushed
	// the value written had when the writer last found q empty and its
	// buffer flushed, or when SendNow last wrote (see Flush). SendDirect's
	// frames, written before it returns, are in none of them.
	accepted atomic.Uint64
	flushed  atomic.Uint64
	// senders counts the Sends that hold q or hq (taken under t.mu): the
	// writer does not drop the queues while one may still put a frame in.
	senders atomic.Int32

	// wmu is held by whoever writes to the connection: the writer while it
	// drains q into its buffer and flushes it, SendDirect for its one
	// vectored write (on a shared-memory connection SendDirect takes that
	// connection's own write lock instead: writeDirectShm). It guards
	// written and the scratch buffers.
	wmu     sync.Mutex
	written uint64
	hdr     []byte      // SendDirect's padding, length prefix, header and small payload
	bufs    net.Buffers // SendDirect's vectored write (its two slices)
	wbufs   net.Buffers // what WriteTo consumes (a field: no allocation)
	// now is SendNow's encoded frame; rest is what the socket of
	// connection restConn did not take of it, which the writer writes
	// first (woken by kick, capacity 1). See now.go.
	now      []byte
	rest     []byte
	restConn *conn
	kick     chan struct{}
	// restPending: rest is not empty (set and cleared with it, under
	// wmu), for writeDirectShm, which does not take wmu.
	restPending atomic.Bool
}

// peerQueues are a peer's two queues (see peer.q and hq).
type peerQueues struct{ q, hq chan queued }

// queued is a frame in a peer's queue. buf, if not nil, holds its payload:
// the transport's copy of the payload of a SendCopy, which the writer
// puts back in copyBufs once the frame is written. (A frame lost with its
// connection, or handed to the next one, leaves its buffer to the
// collector.)
type queued struct {
	f   wire.Frame
	buf *[]byte
}

// copyBufs are the payload buffers of SendCopy, for frames of at most
// maxCopyBuf bytes (the host's control and detector frames), which then
// cost no allocation each. Not a sync.Pool, which every garbage
// collection empties: a job's background would allocate again after each.
var copyBufs struct {
	mu   sync.Mutex
	free []*[]byte
}

// maxCopyBuf bounds the payloads SendCopy copies into copyBufs; larger
// ones get a buffer of their own, so that no large array is kept.
// maxCopyBufs bounds the buffers kept: a process has that many small
// frames queued only in a burst, which may then allocate.
const (
	maxCopyBuf  = 4 << 10
	maxCopyBufs = 64
)

func getCopyBuf() *[]byte {
	copyBufs.mu.Lock()
	defer copyBufs.mu.Unlock()
	n := len(copyBufs.free)
	if n == 0 {
		return new([]byte)
	}
	b := copyBufs.free[n-1]
	copyBufs.free[n-1] = nil
	copyBufs.free = copyBufs.free[:n-1]
	return b
}

func putCopyBuf(b *[]byte) {
	if b == nil {
		return
	}
	copyBufs.mu.Lock()
	if len(copyBufs.free) < maxCopyBufs {
		if copyBufs.free == nil {
			copyBufs.free = make([]*[]byte, 0, maxCopyBufs)
		}
		copyBufs.free = append(copyBufs.free, b)
	}
	copyBufs.mu.Unlock()
}

// maxSpareQueues bounds Transport.spareQueues.
const maxSpareQueues = 16

// take returns a queued frame without waiting: the detector's lane first.
func (p *peer) take() (queued, bool) {
	select {
	case f := <-p.hq:
		return f, true
	default:
	}
	select {
	case f := <-p.q:
		return f, true
	default:
	}
	return queued{}, false
}

func (p *peer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Listen starts a transport listening on cfg.ListenAddr.
func Listen(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	lc := net.ListenConfig{KeepAliveConfig: keepAlive(cfg), Control: bufferControl(cfg)}
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
	t.uln = t.listenUnix(ln.Addr())
	t.wg.Add(1)
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

// SetPeer records the address of node id; a writer waiting for it dials.
func (t *Transport) SetPeer(id core.NodeID, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || id == t.self {
		return
	}
	p := t.peerLocked(id)
	p.addr = addr
	p.signal()
}

// Peers returns the nodes the transport knows (an address, a connection or
// a queue), sorted by id.
func (t *Transport) Peers() []core.NodeID {
	t.mu.Lock()
	ids := make([]core.NodeID, 0, len(t.peers))
	for id := range t.peers {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// RemovePeer forgets node id, closes its connection and drops its queue.
func (t *Transport) RemovePeer(id core.NodeID) {
	t.mu.Lock()
	p := t.peers[id]
	if p == nil {
		t.mu.Unlock()
		return
	}
	delete(t.peers, id)
	close(p.removed)
	c, d := p.cur, p.draining
	p.setCur(nil)
	p.draining = nil
	t.mu.Unlock()
	for _, c := range []*conn{c, d} {
		if c != nil {
			c.close(true, nil)
		}
	}
}

// peerLocked returns the state of node id, creating it if needed (without
// queues or writer: Send starts them). t.mu is held and the transport is
// open.
func (t *Transport) peerLocked(id core.NodeID) *peer {
	if p := t.peers[id]; p != nil {
		return p
	}
	p := &peer{
		id:      id,
		wake:    make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
		removed: make(chan struct{}),
	}
	t.peers[id] = p
	return p
}

// detectorLaneLen bounds the failure detector's lane (peer.hq), in frames:
// its frames are small and few per peer and interval, so a backlog of this
// many means the peer has not been writable for that many intervals, and
// the memory of a process with connections to hundreds of peers stays
// small.
const detectorLaneLen = 64

// activateLocked gives p its queues and starts its writer if it has none.
// t.mu is held and the transport is open.
func (t *Transport) activateLocked(p *peer) {
	if p.active {
		return
	}
	p.active = true
	if n := len(t.spareQueues); n > 0 {
		q := t.spareQueues[n-1]
		t.spareQueues[n-1] = peerQueues{}
		t.spareQueues = t.spareQueues[:n-1]
		p.q, p.hq = q.q, q.hq
	} else {
		p.q = make(chan queued, t.cfg.QueueLen)
		p.hq = make(chan queued, min(t.cfg.QueueLen, detectorLaneLen))
	}
	t.wg.Add(1)
	go t.manage(p)
}

// Send queues f for node to; see [transport.Transport].
func (t *Transport) Send(ctx context.Context, to core.NodeID, f wire.Frame) error {
	return t.send(ctx, to, f, nil)
}

// SendCopy is Send, except that the caller may reuse f.Payload when it
// returns (transport.Copier): the payload is copied, into a buffer the
// transport reuses once the frame is written when it is small.
func (t *Transport) SendCopy(ctx context.Context, to core.NodeID, f wire.Frame) error {
	if len(f.Payload) > maxCopyBuf {
		f.Payload = bytes.Clone(f.Payload)
		return t.send(ctx, to, f, nil)
	}
	b := getCopyBuf()
	*b = append((*b)[:0], f.Payload...)
	f.Payload = *b
	err := t.send(ctx, to, f, b)
	if err != nil {
		putCopyBuf(b) // not queued: still ours
	}
	return err
}

// send queues f (whose payload is buf's, if buf is not nil) for node to.
func (t *Transport) send(ctx context.Context, to core.NodeID, f wire.Frame, buf *[]byte) error {
	if to == t.self {
		return fmt.Errorf("%w: %v", transport.ErrSelf, to)
	}
	f.Src, f.Dst = t.self, to
	if body := wire.EncodedSize(f) - wire.LengthSize; body > t.cfg.MaxFrameSize {
		return fmt.Errorf("%w: %v has a body of %d bytes, limit %d", transport.ErrFrameTooLarge, f.Kind, body, t.cfg.MaxFrameSize)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return transport.ErrClosed
	}
	p := t.peers[to]
	if p == nil && t.cfg.QueueUnknown {
		p = t.peerLocked(to)
	}
	if p == nil {
		t.mu.Unlock()
		return fmt.Errorf("%w: %v", transport.ErrUnknownPeer, to)
	}
	t.activateLocked(p)
	q := p.q
	if f.Kind.Proto() == core.ProtoFD {
		q = p.hq
	}
	p.senders.Add(1)
	t.mu.Unlock()
	defer p.senders.Add(-1) // after the push: see manage
	p.accepted.Add(1)       // before the writer can see f, so flushed ≤ accepted
	x := queued{f: f, buf: buf}
	select {
	case q <- x:
		return nil
	default:
	}
	select {
	case q <- x:
		return nil
	case <-ctx.Done():
		p.accepted.Add(^uint64(0))
		return fmt.Errorf("%w: to %v: %w", transport.ErrQueueFull, to, ctx.Err())
	case <-t.closing:
		p.accepted.Add(^uint64(0))
		return transport.ErrClosed
	case <-p.removed:
		p.accepted.Add(^uint64(0))
		return fmt.Errorf("%w: %v was removed", transport.ErrUnknownPeer, to)
	}
}

// setCur puts c in use for p (nil: none); t.mu is held.
func (p *peer) setCur(c *conn) {
	p.cur = c
	p.live.Store(c)
}

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

// setOptions sets a new socket's options: TCP_NODELAY on TCP, and the
// kernel buffers (Config.SocketBuffer) on a Unix socket, which has no
// window to announce and whose accepted end does not inherit its
// listener's buffers; a TCP socket has had them since before its
// handshake (bufferControl). (Keep-alive is the dialer's and listener's,
// TCP only: a Unix peer's end is always seen.)
func (t *Transport) setOptions(nc net.Conn) {
	switch c := nc.(type) {
	case *net.TCPConn:
		c.SetNoDelay(true)
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
// of frames as large as the buffer or more crawled at tens of KB/s and
// looked stalled (TestSmallSocketBuffers).
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
		})
		if cerr != nil {
			return cerr
		}
		return os.NewSyscallError("setsockopt", err)
	}
}

func (t *Transport) hint(id core.NodeID, reason string) {
	t.hintOf(core.PeerHint{Node: id, Reason: reason})
}

func (t *Transport) hintOf(h core.PeerHint) {
	if hd := t.slot.Get(); hd != nil {
		hd.Hint(h)
	}
}

func (t *Transport) isClosing() bool { return isClosed(t.closing) }

// Keep makes the transport keep a connection open to each node of ids
// whose address it knows: it dials one now if there is none, with nothing
// to send, and does not retire it for being idle (Config.IdleTimeout), so
// that a frame sent later does not wait for a dial and a handshake. The
// set replaces the previous one: the connections to nodes no longer in it
// become ordinary ones again. A membership keeps its tree's links this way
// (package group).
func (t *Transport) Keep(ids []core.NodeID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for _, p := range t.peers {
		p.wasKept, p.kept = p.kept, false
	}
	for _, id := range ids {
		p := t.peers[id]
		if id == t.self || p == nil || p.addr == "" {
			continue
		}
		p.kept = true
		if p.cur == nil {
			t.activateLocked(p)
			p.signal()
		}
	}
	for _, p := range t.peers {
		if p.wasKept && !p.kept && p.cur == nil && p.active {
			// Its writer may be waiting to dial it again: with nothing
			// to send, it ends instead.
			p.signal()
		}
	}
}

// Connected reports whether a connection to node id is in use.
func (t *Transport) Connected(id core.NodeID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	return p != nil && p.cur != nil
}
