// Package mem is an in-memory [transport.Transport] for tests: a [Hub]
// connects endpoints in one process, with optional injected latency, jitter,
// loss and cuts, and the same semantics as transport/tcp: FIFO per pair,
// bounded send queues with back-pressure, a handler called from one
// goroutine per sending peer, hints when a peer is not there.
//
//	hub, _ := mem.NewHub(mem.Config{Latency: time.Millisecond})
//	a, _ := hub.Join(1)
//	b, _ := hub.Join(2)
//	a.SetPeer(2, b.Addr())
//	b.SetHandler(h)
//	err := a.Send(ctx, 2, wire.Frame{Kind: k, Payload: p})
//
// An endpoint's address is "mem:<id>". Closing an endpoint and joining the
// same id again models a process restart: frames queued to the old one are
// delivered to the new one, like a TCP transport that reconnects.
//
// Frames are not encoded: the frame value (with a copy of its payload) is
// handed over. Time is real (delays are timers), so this package is for
// tests of real concurrency (host, transports) and for hosts that share a
// process (the in-process membership benchmark); deterministic protocol
// tests use the simulator.
//
// The direct path: on a hub without latency or jitter, a receiver whose
// handler is a [transport.Taker] (package host's is) gets a frame from
// Send itself, on the sender's goroutine, when no earlier frame of the pair
// is still queued and the handler takes it without waiting; nothing is
// copied and no goroutine of the transport is woken. Otherwise the frame is
// copied and queued for the pair's delivery goroutine (started with the
// pair's first queued frame), and later frames queue behind it, so the
// order per pair holds either way.
package mem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/internal/slot"
	"github.com/cohort-mp/cohort/wire"
)

// Config sets the behaviour of a [Hub]. The zero value is a perfect network
// with the default queue length.
type Config struct {
	// QueueLen is the capacity, in frames, of the send queue of each
	// (sender, receiver) pair. Default 1024.
	QueueLen int
	// Latency is added to every frame's delivery.
	Latency time.Duration
	// Jitter adds a uniform random delay in [0, Jitter) per frame; frames
	// of a pair are still delivered in order (a frame never overtakes the
	// one before it).
	Jitter time.Duration
	// Loss is the probability, in [0, 1], that a frame is dropped at Send.
	Loss float64
	// Seed seeds the random draws of loss and jitter.
	Seed uint64
	// MaxFrameSize is the limit, in bytes, on a frame's body (header and
	// payload), as in transport/tcp. Default wire.DefaultMaxFrameSize.
	MaxFrameSize int
}

// DefaultQueueLen is the default send queue length, in frames.
const DefaultQueueLen = 1024

// Validate reports an invalid field.
func (c Config) Validate() error {
	switch {
	case c.QueueLen < 0:
		return fmt.Errorf("%w: mem: QueueLen %d < 0", transport.ErrBadConfig, c.QueueLen)
	case c.Latency < 0 || c.Jitter < 0:
		return fmt.Errorf("%w: mem: negative Latency or Jitter", transport.ErrBadConfig)
	case c.Loss < 0 || c.Loss > 1:
		return fmt.Errorf("%w: mem: Loss %v outside [0, 1]", transport.ErrBadConfig, c.Loss)
	case c.MaxFrameSize < 0:
		return fmt.Errorf("%w: mem: MaxFrameSize %d < 0", transport.ErrBadConfig, c.MaxFrameSize)
	}
	return nil
}

// Hub connects the endpoints of one in-memory network. Its methods are safe
// for concurrent use.
type Hub struct {
	cfg Config

	mu        sync.Mutex
	rng       *rand.Rand
	loss      float64
	endpoints map[string]*Endpoint
	cuts      map[[2]core.NodeID]bool
	// faulty is set while frames may be lost (a loss probability or a
	// cut): Send then asks drops; otherwise it skips the hub's lock.
	faulty atomic.Bool
}

// NewHub returns an empty hub.
func NewHub(cfg Config) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.MaxFrameSize == 0 {
		cfg.MaxFrameSize = wire.DefaultMaxFrameSize
	}
	h := &Hub{
		cfg:       cfg,
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x6d656d)),
		loss:      cfg.Loss,
		endpoints: map[string]*Endpoint{},
		cuts:      map[[2]core.NodeID]bool{},
	}
	h.faulty.Store(cfg.Loss > 0)
	return h, nil
}

// Addr returns the address of node id's endpoint.
func Addr(id core.NodeID) string { return "mem:" + strconv.FormatUint(uint64(id), 10) }

// Join creates the endpoint of node id. It fails with
// transport.ErrAddrInUse if an open endpoint already has that id.
func (h *Hub) Join(id core.NodeID) (*Endpoint, error) {
	if id == core.None {
		return nil, fmt.Errorf("%w: mem: node id none", transport.ErrBadConfig)
	}
	addr := Addr(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.endpoints[addr]; ok {
		return nil, fmt.Errorf("%w: mem: %s", transport.ErrAddrInUse, addr)
	}
	e := &Endpoint{
		hub:   h,
		id:    id,
		addr:  addr,
		slot:  slot.New(),
		book:  map[core.NodeID]string{},
		links: map[core.NodeID]*link{},
		done:  make(chan struct{}),
	}
	h.endpoints[addr] = e
	return e, nil
}

// SetLoss changes the loss probability (clamped to [0, 1]).
func (h *Hub) SetLoss(p float64) {
	h.mu.Lock()
	h.loss = min(max(p, 0), 1)
	h.faulty.Store(h.loss > 0 || len(h.cuts) > 0)
	h.mu.Unlock()
}

// Cut drops every frame between a and b, both ways, from now until Heal.
func (h *Hub) Cut(a, b core.NodeID) {
	h.mu.Lock()
	h.cuts[[2]core.NodeID{a, b}] = true
	h.cuts[[2]core.NodeID{b, a}] = true
	h.faulty.Store(true)
	h.mu.Unlock()
}

// Heal ends a Cut between a and b.
func (h *Hub) Heal(a, b core.NodeID) {
	h.mu.Lock()
	delete(h.cuts, [2]core.NodeID{a, b})
	delete(h.cuts, [2]core.NodeID{b, a})
	h.faulty.Store(h.loss > 0 || len(h.cuts) > 0)
	h.mu.Unlock()
}

// drops decides whether a frame from→to is lost.
func (h *Hub) drops(from, to core.NodeID) bool {
	if !h.faulty.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cuts[[2]core.NodeID{from, to}] {
		return true
	}
	return h.loss > 0 && h.rng.Float64() < h.loss
}

// jitter draws one frame's extra delay.
func (h *Hub) jitter() time.Duration {
	if h.cfg.Jitter <= 0 {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.rng.Int64N(int64(h.cfg.Jitter)))
}

func (h *Hub) lookup(addr string) *Endpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.endpoints[addr]
}

func (h *Hub) remove(e *Endpoint) {
	h.mu.Lock()
	if h.endpoints[e.addr] == e {
		delete(h.endpoints, e.addr)
	}
	h.mu.Unlock()
}

// Endpoint is one node's [transport.Transport] on a [Hub].
type Endpoint struct {
	hub  *Hub
	id   core.NodeID
	addr string
	slot *slot.Slot

	mu     sync.Mutex
	book   map[core.NodeID]string // SetPeer entries
	known  map[core.NodeID]string // nodes that sent to us, for replies
	links  map[core.NodeID]*link
	closed bool
	// gone mirrors closed for senders on the direct path, which do not
	// take this endpoint's lock.
	gone atomic.Bool
	done chan struct{}
	wg   sync.WaitGroup
}

var (
	_ transport.Transport = (*Endpoint)(nil)
	_ transport.Limited   = (*Endpoint)(nil)
)

// link is one (sender, receiver) pair: its queue and delivery goroutine,
// started at the first frame that cannot take the direct path (see
// [Endpoint.Send]), and the state of that path.
type link struct {
	to   core.NodeID
	stop chan struct{}

	// mu orders the pair's frames: a frame takes the direct path, or is
	// counted in backlog and queued, under it.
	mu sync.Mutex
	q  chan item // nil until the first queued frame
	// backlog counts the frames queued and not yet delivered; the direct
	// path is closed while it is not 0, so no frame overtakes another.
	backlog atomic.Int64
	dst     *Endpoint // the receiver the direct path last found, or nil
}

type item struct {
	f      wire.Frame
	queued time.Time
}

// Self returns the endpoint's node id.
func (e *Endpoint) Self() core.NodeID { return e.id }

// Addr returns "mem:<id>".
func (e *Endpoint) Addr() string { return e.addr }

// MaxFrameSize is Config.MaxFrameSize (see [transport.Limited]).
func (e *Endpoint) MaxFrameSize() int { return e.hub.cfg.MaxFrameSize }

// SetPeer records the address of node id.
func (e *Endpoint) SetPeer(id core.NodeID, addr string) {
	e.mu.Lock()
	e.book[id] = addr
	e.mu.Unlock()
}

// RemovePeer forgets node id and drops the frames queued for it.
func (e *Endpoint) RemovePeer(id core.NodeID) {
	e.mu.Lock()
	delete(e.book, id)
	delete(e.known, id)
	if l := e.links[id]; l != nil {
		close(l.stop)
		delete(e.links, id)
	}
	e.mu.Unlock()
}

// SetHandler installs the inbound path.
func (e *Endpoint) SetHandler(h transport.Handler) { e.slot.Set(h) }

// addrOf returns the address frames to id go to, and whether there is one.
func (e *Endpoint) addrOf(id core.NodeID) (string, bool) {
	if a, ok := e.book[id]; ok {
		return a, true
	}
	a, ok := e.known[id]
	return a, ok
}

// Send queues f for node to; see [transport.Transport].
func (e *Endpoint) Send(ctx context.Context, to core.NodeID, f wire.Frame) error {
	if to == e.id {
		return fmt.Errorf("%w: %v", transport.ErrSelf, to)
	}
	f.Src, f.Dst = e.id, to
	if body := wire.EncodedSize(f) - wire.LengthSize; body > e.hub.cfg.MaxFrameSize {
		return fmt.Errorf("%w: %v has a body of %d bytes, limit %d", transport.ErrFrameTooLarge, f.Kind, body, e.hub.cfg.MaxFrameSize)
	}
	l, err := e.link(to)
	if err != nil {
		return err
	}
	if e.hub.drops(e.id, to) {
		return nil
	}
	if e.direct(l, f) {
		return nil
	}
	f.Payload = slices.Clone(f.Payload)
	return e.enqueue(ctx, l, item{f: f, queued: time.Now()})
}

// link returns the pair's link to node to, making it if needed.
func (e *Endpoint) link(to core.NodeID) (*link, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, transport.ErrClosed
	}
	// A pair's link exists only while its peer has an address (RemovePeer
	// removes both), so only a new link needs the address book.
	l := e.links[to]
	if l == nil {
		if _, ok := e.addrOf(to); !ok {
			return nil, fmt.Errorf("%w: %v", transport.ErrUnknownPeer, to)
		}
		l = &link{to: to, stop: make(chan struct{})}
		e.links[to] = l
	}
	return l, nil
}

// Keep readies the links to ids before their first frame, as
// transport/tcp's Keep opens their connections (stack.KeepTreeLinks): each
// link finds its receiver, which learns this endpoint's address, so that
// a view change's first frames on the next tree's links (in one process,
// a stabilization's) cost no more than the next ones. A peer without an
// address, or gone, is passed over; links stay until RemovePeer, kept or
// not.
func (e *Endpoint) Keep(ids []core.NodeID) {
	for _, id := range ids {
		if id == e.id {
			continue
		}
		l, err := e.link(id)
		if err != nil {
			continue
		}
		l.mu.Lock()
		e.receiver(l)
		l.mu.Unlock()
	}
}

// receiver returns the endpoint l's frames go to, found and introduced
// to it if l has none yet (or it left), or nil if it is not there; l.mu is
// held.
func (e *Endpoint) receiver(l *link) *Endpoint {
	if dst := l.dst; dst != nil && !dst.gone.Load() {
		return dst
	}
	e.mu.Lock()
	addr, _ := e.addrOf(l.to)
	e.mu.Unlock()
	dst := e.hub.lookup(addr)
	if dst == nil || dst.id != l.to || !dst.introduce(e) {
		return nil
	}
	l.dst = dst
	return dst
}

// direct hands f to its receiver's handler on the caller's goroutine when
// nothing delays it: no latency or jitter is configured, no earlier frame
// of the pair waits, and the receiver is there and takes it at once
// (transport.Taker). It reports whether it did; f.Payload is not kept.
func (e *Endpoint) direct(l *link, f wire.Frame) bool {
	if e.hub.cfg.Latency > 0 || e.hub.cfg.Jitter > 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.backlog.Load() != 0 {
		return false
	}
	dst := e.receiver(l)
	if dst == nil {
		return false // the queued path hints
	}
	t, ok := dst.slot.Get().(transport.Taker)
	if !ok {
		return false
	}
	select {
	case <-l.stop:
		return true // removed meanwhile: dropped, as the queue would drop it
	default:
	}
	return t.TryDeliver(f)
}

// introduce records that src sends to this endpoint, so that it can
// answer src without an address book entry; it reports false if this
// endpoint is closed.
func (e *Endpoint) introduce(src *Endpoint) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	if e.known == nil {
		e.known = map[core.NodeID]string{}
	}
	e.known[src.id] = src.addr
	return true
}

// enqueue queues it on link l for its delivery goroutine, starting the
// goroutine with the pair's first queued frame.
func (e *Endpoint) enqueue(ctx context.Context, l *link, it item) error {
	l.mu.Lock()
	if l.q == nil {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			l.mu.Unlock()
			return transport.ErrClosed
		}
		l.q = make(chan item, e.hub.cfg.QueueLen)
		e.wg.Add(1)
		go e.run(l)
		e.mu.Unlock()
	}
	l.backlog.Add(1)
	select {
	case l.q <- it:
		l.mu.Unlock()
		return nil
	default:
	}
	l.mu.Unlock()
	// Full: wait for room outside the pair's lock (the goroutine does not
	// need it to drain). A frame queued meanwhile by another sender of the
	// pair may go first, as with two concurrent Sends.
	select {
	case l.q <- it:
		return nil
	case <-ctx.Done():
		l.backlog.Add(-1)
		return fmt.Errorf("%w: to %v: %w", transport.ErrQueueFull, l.to, ctx.Err())
	case <-e.done:
		l.backlog.Add(-1)
		return transport.ErrClosed
	case <-l.stop:
		l.backlog.Add(-1)
		return fmt.Errorf("%w: %v was removed", transport.ErrUnknownPeer, l.to)
	}
}

// SendCopy is Send (transport.Copier): Send copies the payload anyway,
// as a network would.
func (e *Endpoint) SendCopy(ctx context.Context, to core.NodeID, f wire.Frame) error {
	return e.Send(ctx, to, f)
}

// run delivers the frames of one link in order, each no earlier than its
// queueing time plus the latency and its jitter, and no earlier than the
// frame before it.
func (e *Endpoint) run(l *link) {
	defer e.wg.Done()
	var prev time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	down := false
	for {
		var it item
		select {
		case it = <-l.q:
		case <-l.stop:
			return
		case <-e.done:
			return
		}
		at := it.queued.Add(e.hub.cfg.Latency + e.hub.jitter())
		if at.Before(prev) {
			at = prev
		}
		prev = at
		if d := time.Until(at); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-l.stop:
				return
			case <-e.done:
				return
			}
		}
		e.mu.Lock()
		addr, _ := e.addrOf(l.to)
		e.mu.Unlock()
		dst := e.hub.lookup(addr)
		if dst == nil || dst.id != l.to {
			if !down {
				down = true
				if h := e.slot.Get(); h != nil {
					h.Hint(core.PeerHint{Node: l.to, Reason: "mem: no endpoint for " + l.to.String() + " at " + addr})
				}
			}
			l.backlog.Add(-1)
			continue
		}
		down = false
		dst.deliver(e, it.f, l.stop)
		// Only now may a frame take the direct path: it comes after this one.
		l.backlog.Add(-1)
	}
}

// deliver hands f from endpoint src to this endpoint's handler, waiting for
// one to be installed.
func (e *Endpoint) deliver(src *Endpoint, f wire.Frame, stop <-chan struct{}) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	if e.known == nil {
		e.known = map[core.NodeID]string{}
	}
	e.known[src.id] = src.addr
	e.mu.Unlock()
	h := e.slot.Wait(e.done, src.done)
	if h == nil {
		return
	}
	select {
	case <-stop:
		return
	default:
	}
	h.Deliver(f)
}

// Close stops the endpoint's goroutines and removes it from the hub. Frames
// queued by it are dropped. A frame of this endpoint blocked in a
// receiver's handler delays Close until that Deliver returns, as with a TCP
// reader.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.gone.Store(true)
	close(e.done)
	e.mu.Unlock()
	e.hub.remove(e)
	e.wg.Wait()
	return nil
}

// String describes the endpoint for logs.
func (e *Endpoint) String() string { return fmt.Sprintf("mem endpoint %v at %s", e.id, e.addr) }
