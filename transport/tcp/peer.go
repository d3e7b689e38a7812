package tcp

import (
	"context"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// A peer's writer goroutine and queues exist only while it has something to
// do: Send starts them (activateLocked) and the writer ends, releasing its
// queues, once the peer has no connection in use and nothing queued
// (manage). With idle connections closed (Config.IdleTimeout), a process
// that has talked to many nodes over time keeps a goroutine and queues only
// for those it still talks to.

// peer is the state of one remote node. The fields from addr to
// unreachable, except live, are guarded by the transport's mu.
type peer struct {
	id core.NodeID
	// q and hq exist while active: Send creates them (under t.mu) and
	// starts the writer, which alone receives from them and drops them
	// (under t.mu) as it ends.
	q chan queued
	// hq is the control lane (frames of the protocols controlFrame
	// names: the failure detector, the membership and its agreement, the
	// directory): the writer takes it before q, so a control frame never
	// waits behind a backlog of data frames (only behind the frame being
	// written and what the kernel holds), and a data queue kept full by
	// a fast producer never refuses one. The control protocols need no
	// order with the data protocols'; their frames keep their order
	// among themselves.
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
	// stream is our id of the pair's streams (wire.Resume), drawn with p;
	// peerStream is the peer's (0: none yet), and rs the stream of its
	// frames we deliver (recvstream.go).
	stream     uint64
	peerStream uint64
	rs         *recvStream
	// dialOutOnly: the peer said it accepts no connection
	// (Config.DialOutOnly): we wait for its dial instead of dialling.
	dialOutOnly bool

	// log holds the frames written to the peer and not yet acknowledged
	// (resend.go); it lives as long as p.
	log *sendLog
	// rl is the relaying state (relay.go).
	rl relayState

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
	wmu     hotsync.Mutex
	written uint64
	hdr     []byte      // SendDirect's padding, length prefix, header and small payload
	heads   headEncoder // writeDirectShm's encoder of small frames' heads
	bufs    net.Buffers // SendDirect's vectored write (its two slices)
	wbufs   net.Buffers // what WriteTo consumes (a field: no allocation)
	// now is SendNow's encoded frame; rest is what the socket of
	// connection restConn did not take of it, which the writer writes
	// first (woken by kick, capacity 1). See now.go.
	now      []byte
	nowW     nowWriter    // writeNow's
	dw       directWriter // writeAllCtx's first pass
	rest     []byte
	restConn *conn
	kick     chan struct{}
	// restPending: rest is not empty (set and cleared with it, under
	// wmu), for writeDirectShm, which does not take wmu.
	restPending atomic.Bool
	// directLines counts the frames writeLineShm wrote (Stats.Direct), by
	// a release store under wmu: a count of the transport's would be an
	// atomic add, a locked instruction per message. RemovePeer adds it
	// to the transport's count.
	directLines atomic.Uint64
}

// peerQueues are a peer's two queues (see peer.q and hq).
type peerQueues struct{ q, hq chan queued }

// queued is a frame in a peer's queue. buf, if not nil, holds its payload:
// the transport's copy of the payload of a SendCopy, which the writer
// puts back in copyBufs once the frame is written. (A frame lost with its
// connection, or handed to the next one, leaves its buffer to the
// collector.) body, if not nil, is the middle of a relayed frame's
// payload, its origin's frame payload, not copied (relayWrap): the
// payload is f.Payload up to its last wire.RelayTagSize bytes, body,
// then those bytes (the tag).
type queued struct {
	f    wire.Frame
	buf  *[]byte
	body []byte
}

// write writes x to fw. A relayed frame goes through WriteFrameParts,
// whose vectored write puts a large payload on the socket with its
// header in one system call: a relayed frame crosses two hops, each of
// which would otherwise pay a write, and wake its reader, for the header
// alone.
func (x *queued) write(fw *wire.FrameWriter) error {
	if x.f.Kind != wire.KindRelay {
		return fw.WriteFrame(x.f)
	}
	if x.body == nil {
		f := x.f
		f.Payload = nil
		return fw.WriteFrameParts(f, x.f.Payload)
	}
	f := x.f
	split := len(f.Payload) - wire.RelayTagSize
	f.Payload = f.Payload[:split]
	return fw.WriteFrameParts(f, x.body, x.f.Payload[split:])
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
	if cap(*b) > maxCopyBuf {
		putBigBuf(b) // a relayed frame's (relay.go)
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

// take returns a queued frame without waiting: the control lane first.
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

// SetPeer records the address of node id; a writer waiting for it dials.
func (t *Transport) SetPeer(id core.NodeID, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || id == t.self {
		return
	}
	p := t.peerLocked(id)
	p.addr = addr
	if t.cfg.DialOutOnly && addr != "" {
		// Nobody can dial us: we dial, now, and keep the connection.
		p.kept = true
		t.activateLocked(p)
	}
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
	// A frame written while the peer is removed may go uncounted: the
	// writer does not wait for this.
	t.stats.direct.Add(p.directLines.Load())
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
	p.log.drop() // its frames are never resent: what was lent goes back
}

// peerLocked returns the state of node id, creating it if needed (without
// queues or writer: Send starts them). A new state's stream is the one a
// handshake already announced to id, if any (ourResume). t.mu is held and
// the transport is open.
func (t *Transport) peerLocked(id core.NodeID) *peer {
	if p := t.peers[id]; p != nil {
		return p
	}
	stream := t.announced[id]
	if stream == 0 {
		stream = newStreamID()
	}
	delete(t.announced, id)
	p := &peer{
		id:      id,
		wake:    make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
		removed: make(chan struct{}),
		log:     newSendLog(t.cfg.ResendBuffer),
		stream:  stream,
	}
	p.rl.via = core.None
	p.rs = t.newRecvStream(p, 0)
	t.peers[id] = p
	return p
}

// controlLaneLen bounds the control lane (peer.hq), in frames. Its frames
// are small and few per peer: a heartbeat or two per interval, a handful
// per view change. A backlog of this many means the peer has not been
// writable for many intervals (it is dead or unreachable, which the
// detector hears about): Send then refuses the frame as for a full data
// queue, and the protocols retry or act on the silence. The bound keeps
// the memory of a process with connections to hundreds of peers small.
const controlLaneLen = 128

// controlFrame reports whether frames of kind k go in the control lane:
// those of the protocols that keep the job together (core, the failure
// detector, the membership and its stabilization agreement, the
// directory), comm's revocations, agreement steps and welcomes, which
// may overtake its data (package comm, "Control frames"), and every frame
// of the replication protocol but its data (acknowledgements, commits,
// decisions, the end of a program: package replica relies on no order
// between them and data). The protocols that carry the program's data
// (the rest of comm, replica's data, vsync, application protocols, tests)
// go in the data queue, in order with each other.
func controlFrame(k core.Kind) bool {
	switch k.Proto() {
	case core.ProtoCore, core.ProtoFD, core.ProtoMember, core.ProtoStable, core.ProtoGroup:
		return true
	case core.ProtoReplica:
		return k != replicaData
	}
	return k == commRevoke || k == commAgree || k == commWelcome
}

// commRevoke, commAgree and commWelcome are comm's kindRevoke, kindAgree
// and kindWelcome (comm's wire.go and newcomer.go), replicaData is
// replica.KindData: the numbers are on the wire, so they stay. A welcome
// shares the agreement's lane because the agreement's steps on the
// communicator it announces must not overtake it.
const (
	commRevoke  = core.Kind(core.ProtoComm)<<8 | 3
	commAgree   = core.Kind(core.ProtoComm)<<8 | 4
	commWelcome = core.Kind(core.ProtoComm)<<8 | 12
	replicaData = core.Kind(core.ProtoReplica)<<8 | 1
)

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
		p.hq = make(chan queued, controlLaneLen)
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
	return t.sendCopied(ctx, to, f, f.Payload, nil)
}

// sendCopied queues f with head and body, copied, as its payload: a small
// one in a pooled buffer that goes back once the frame is written, a
// larger one in a buffer of its own.
func (t *Transport) sendCopied(ctx context.Context, to core.NodeID, f wire.Frame, head, body []byte) error {
	if n := len(head) + len(body); n > maxCopyBuf {
		f.Payload = append(append(make([]byte, 0, n), head...), body...)
		return t.send(ctx, to, f, nil)
	}
	b := getCopyBuf()
	*b = append(append((*b)[:0], head...), body...)
	f.Payload = *b
	err := t.send(ctx, to, f, b)
	if err != nil {
		putCopyBuf(b) // not queued: still ours
	}
	return err
}

// send queues f (whose payload is buf's, if buf is not nil) for node to.
func (t *Transport) send(ctx context.Context, to core.NodeID, f wire.Frame, buf *[]byte) error {
	if t.relayNow(ctx, to, &f, buf == nil) {
		putCopyBuf(buf) // copied into the relayed frame
		return nil
	}
	return t.enqueue(ctx, to, f, buf, controlFrame(f.Kind))
}

// enqueue is send into the control lane (control) or the data queue. A
// relayed frame (wire.KindRelay) may exceed Config.MaxFrameSize by the
// relay's wrapping.
func (t *Transport) enqueue(ctx context.Context, to core.NodeID, f wire.Frame, buf *[]byte, control bool) error {
	return t.push(ctx, to, queued{f: f, buf: buf}, control)
}

// push is enqueue for x (a relayed frame in pieces: queued.body).
func (t *Transport) push(ctx context.Context, to core.NodeID, x queued, control bool) error {
	f := x.f
	if to == t.self {
		return fmt.Errorf("%w: %v", transport.ErrSelf, to)
	}
	f.Src, f.Dst = t.self, to
	limit := t.cfg.MaxFrameSize
	if f.Kind == wire.KindRelay {
		limit = t.streamMax()
	}
	if body := wire.EncodedSize(f) + len(x.body) - wire.LengthSize; body > limit {
		return fmt.Errorf("%w: %v has a body of %d bytes, limit %d", transport.ErrFrameTooLarge, f.Kind, body, limit)
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
	if control {
		q = p.hq
	}
	p.senders.Add(1)
	t.mu.Unlock()
	defer p.senders.Add(-1) // after the push: see manage
	p.accepted.Add(1)       // before the writer can see f, so flushed ≤ accepted
	x.f = f
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
	if t.cfg.DialOutOnly {
		ids = slices.Clone(ids)
		for id, p := range t.peers {
			if p.addr != "" {
				ids = append(ids, id) // every peer stays kept (SetPeer)
			}
		}
	}
	for _, id := range ids {
		p := t.peers[id]
		if id == t.self || p == nil || p.addr == "" || p.dialOutOnly {
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
