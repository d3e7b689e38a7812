// Package host runs a [core.Machine] (usually a [core.Stack] of protocol
// layers) for one real process: over a [transport.Transport], with real
// timers, a monotonic clock, a seeded random source, structured logs and a
// JSON-lines event stream. It is the real-world counterpart of the
// simulator: the same machines run unchanged in both.
//
//	codec := wire.NewCodec()               // every layer registers its kinds
//	tr, _ := tcp.Listen(tcpCfg)            // or a mem.Hub endpoint in tests
//	tr.SetPeer(...)                        // the address book
//	h, err := host.New(stack, host.Config{Transport: tr, Codec: codec,
//		Seed: 42, Logger: logger, Events: eventsFile})
//	err = h.Run(ctx)                       // until ctx is done
//	tr.Close()                             // the host does not own the transport
//
// # The event loop
//
// Run is the event loop. It runs on the caller's goroutine, which is the
// only one that ever calls the machine (a machine is single-threaded by
// contract), and waits on channels for
//
//   - inbound messages: the transport's reader goroutines decode each frame
//     with the codec and post the message (so decoding costs the loop
//     nothing); a full inbox holds the readers back, and TCP flow control
//     then slows the senders;
//   - timer expirations: Env.SetTimer puts the deadline in a heap owned by
//     the loop, and one time.Timer wakes the loop at the earliest deadline;
//     timers then fire in deadline order (set order for ties) however
//     loaded the process is, never early, and a cancelled timer never
//     reaches the machine;
//   - transport hints ([core.PeerHint]), passed to the machine's Handle;
//   - local requests from other goroutines: [Host.Handle] (inject an event)
//     and [Host.Do] (run a function on the loop).
//
// Messages a machine sends to its own node are delivered through the loop
// too, after the current call returns, without the transport.
//
// # Sending
//
// Env.Send encodes the message with the codec, stamps the frame with the
// epoch of the last view the machine announced ([core.MembersChanged]) and
// hands it to the transport. The encoding goes into one buffer the loop
// reuses: a transport that copies it ([transport.Copier]) or writes it at
// once (SendNow, below) takes it as it is, others get a copy. Send is done
// with the message when it returns (the Env is a [core.SendCopier]), and
// a machine may hand back a received message for the readers to decode
// the next one of its kind into ([core.Recycler], [wire.Codec.Decode]):
// the gossip detector's period then allocates nothing. A transport that can write a frame on the
// loop without waiting (transport/tcp's SendNow, when nothing is queued
// for the peer) is offered the first frame of each loop turn to each peer
// (of at most 16 peers) that way: a view change's message to each child
// then costs one system call on the loop rather than a wake-up of the
// peer's writer goroutine; later frames of the turn to the same peer are
// queued, for the writer to coalesce. The loop must never block on one slow peer, so
// when that peer's send queue is full the host waits at most
// Config.SendWait (default 0: not at all) and then drops the message: it
// counts the drop, logs it once per episode and gives the machine a
// [core.PeerHint] for that peer (also once per episode; the episode ends at
// the next successful send). Protocols above tolerate loss, and a peer that
// cannot drain its queue is exactly what the failure detector should hear
// about. The frames of the detector and the membership do not share that
// queue with the application's data: transport/tcp gives them a control
// lane (128 frames per peer) that its writer drains first, so a data
// queue kept full by a fast sender never costs a heartbeat or a view
// change's message; only a peer that has not been writable for many
// detector intervals fills the control lane, and then its frames are
// dropped as above. The replication layer's frames (package replica)
// carry the program's data and share the data queue: a drop there is
// made good by its retransmission.
//
// # The application data path
//
// Config.DataPath, if set, sees every inbound frame first, on the
// transport's reader goroutine; if it returns true the frame is consumed
// there and never reaches the loop. This is where the communication layer
// hands application messages straight to its matching engine, with no
// goroutine hop (docs/DESIGN.md, "Real host and transport").
//
// # Observability
//
// Every event the machine emits is written as one JSON line to
// Config.Events (see [EventLine]), logged (suspicions, failures, recoveries
// and views at Info, the rest at Debug) and passed to Config.OnEvent.
package host

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// Errors of the host.
var (
	// ErrStopped: the host's Run has returned (or the request was still
	// queued when it did).
	ErrStopped = errors.New("host: stopped")
	// ErrRunning: Run was called twice.
	ErrRunning = errors.New("host: Run called twice")
	// ErrBadConfig: a Config field is missing or invalid.
	ErrBadConfig = errors.New("host: invalid configuration")
)

// Config configures a [Host].
type Config struct {
	// Transport moves the frames. Required. The host installs its handler
	// when Run starts and never closes it: the caller closes it after Run
	// returns.
	Transport transport.Transport
	// Codec decodes inbound payloads and encodes outbound messages; every
	// message kind the machine sends or receives must be registered.
	// Required; it must not be modified once the host is built.
	Codec *wire.Codec
	// Seed seeds the machine's random source (Env.Rand); 0 draws a random
	// seed. Either way the seed is logged when Run starts, so a run can be
	// replayed as far as randomness goes.
	Seed uint64
	// Logger receives the host's structured logs; nil discards them.
	Logger *slog.Logger
	// Events receives one JSON line per event the machine emits; nil
	// writes none. It is written from the loop goroutine only, one Write
	// per line; hosts that share a writer need one that is safe for
	// concurrent use (see [NewLockedWriter]).
	Events io.Writer
	// SendWait is how long Env.Send may wait for room in a peer's full
	// send queue before dropping the message. Default 0: never wait.
	SendWait time.Duration
	// InboxLen is the capacity, in messages, of the inbound channel
	// between the transport's readers and the loop. Default 4096.
	InboxLen int
	// DataPath, if not nil, is offered every inbound frame first, on the
	// transport's reader goroutine (concurrently for different senders, in
	// order for one). The host does not count these frames: a count
	// shared by the readers would cost each message a locked instruction
	// (the transport counts its frames, and the data path may count its
	// own).
	DataPath DataPath
	// Placer, if not nil, is offered the large frames of a stream
	// transport before their payload is read (see transport.Placer): the
	// data path's way to receive a message straight into its buffer.
	Placer transport.Placer
	// OnEvent, if not nil, is called on the loop goroutine with every event
	// the machine emits and the host's time. It must not block, and must
	// not wait for the loop (Do from inside OnEvent deadlocks).
	OnEvent func(at time.Duration, e core.Event)
}

// DefaultInboxLen is the default capacity of the inbound channel.
const DefaultInboxLen = 4096

// Host runs one machine. Build it with New, run it with Run.
type Host struct {
	cfg  Config
	m    core.Machine
	tr   transport.Transport
	self core.NodeID
	log  *slog.Logger
	seed uint64
	rng  *rand.Rand

	inbox chan inbound
	hintC chan core.PeerHint
	reqC  chan func()
	quit  chan struct{} // closed when the loop stops
	ran   atomic.Bool
	try   context.Context // a done context: Send without waiting

	stats  counters
	spares spares // decoders and released messages, for the readers

	// Owned by the loop goroutine.
	start     time.Time
	timerQ    timerQueue // the pending timers, earliest first
	nextTimer core.TimerID
	wake      *time.Timer              // fires at the earliest deadline
	wakeAt    time.Duration            // the deadline wake is armed for; -1 when idle
	local     []func()                 // work queued for after the current machine call
	decoded   bool                     // the machine is receiving a message the readers decoded
	enc       wire.Encoder             // Env.Send's encoding buffer, reused
	now       nowSender                // the transport's SendNow, or nil
	copier    transport.Copier         // the transport's SendCopy, or nil
	suspects  transport.SuspectWatcher // told the detector's suspects, or nil
	nowTo     []core.NodeID            // the peers this loop turn offered a frame to SendNow
	epoch     uint64
	failing   map[core.NodeID]bool // peers whose last send was dropped
	events    *eventWriter
}

type inbound struct {
	from core.NodeID
	m    core.Msg
}

// New returns a host for machine m. It does not start anything.
func New(m core.Machine, cfg Config) (*Host, error) {
	switch {
	case m == nil:
		return nil, fmt.Errorf("%w: nil machine", ErrBadConfig)
	case cfg.Transport == nil:
		return nil, fmt.Errorf("%w: no Transport", ErrBadConfig)
	case cfg.Codec == nil:
		return nil, fmt.Errorf("%w: no Codec", ErrBadConfig)
	case cfg.SendWait < 0 || cfg.InboxLen < 0:
		return nil, fmt.Errorf("%w: negative SendWait or InboxLen", ErrBadConfig)
	}
	if cfg.InboxLen == 0 {
		cfg.InboxLen = DefaultInboxLen
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	seed := cfg.Seed
	for seed == 0 {
		var b [8]byte
		crand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	self := cfg.Transport.Self()
	try, cancel := context.WithCancel(context.Background())
	cancel()
	h := &Host{
		cfg:     cfg,
		m:       m,
		tr:      cfg.Transport,
		self:    self,
		log:     logger.With("node", uint32(self)),
		seed:    seed,
		rng:     rand.New(rand.NewPCG(seed, uint64(self))),
		inbox:   make(chan inbound, cfg.InboxLen),
		hintC:   make(chan core.PeerHint, 256),
		reqC:    make(chan func(), 64),
		quit:    make(chan struct{}),
		try:     try,
		failing: map[core.NodeID]bool{},
	}
	if cfg.Events != nil {
		h.events = &eventWriter{w: cfg.Events}
	}
	// Room for the usual control message from the start: growing the
	// buffer message by message as a job's counters grow costs allocations.
	h.enc.B = make([]byte, 0, 512)
	h.now, _ = cfg.Transport.(nowSender)
	h.copier, _ = cfg.Transport.(transport.Copier)
	h.suspects, _ = cfg.Transport.(transport.SuspectWatcher)
	return h, nil
}

// Self returns the node id (the transport's).
func (h *Host) Self() core.NodeID { return h.self }

// Seed returns the seed of the machine's random source.
func (h *Host) Seed() uint64 { return h.seed }

// Run starts the machine and runs the event loop on the calling goroutine
// until ctx is done. When it returns, the machine is no longer called,
// every timer is stopped and every goroutine the host started has ended;
// it returns nil then. Run may be called once.
func (h *Host) Run(ctx context.Context) error {
	if !h.ran.CompareAndSwap(false, true) {
		return ErrRunning
	}
	h.begin()
	for {
		h.arm()
		select {
		case <-ctx.Done():
			h.stop()
			return nil
		case in := <-h.inbox:
			h.receive(in)
		case <-h.wake.C:
			h.wakeAt = -1
			h.fireDue()
		case p := <-h.hintC:
			h.log.Debug("host: transport hint", "peer", uint32(p.Node), "reason", p.Reason)
			h.m.Handle(p)
		case f := <-h.reqC:
			f()
		}
		h.drain()
		h.nowTo = h.nowTo[:0]
	}
}

// begin installs the handler and starts the machine: Run's first step.
func (h *Host) begin() {
	h.start = time.Now()
	h.log.Info("host: starting", "seed", h.seed, "addr", h.tr.Addr())
	h.tr.SetHandler(handler{h})
	h.wake = time.NewTimer(time.Hour)
	h.wake.Stop()
	h.wakeAt = -1
	h.m.Start(hostEnv{h})
	h.drain()
}

// receive hands an inbound message to the machine.
func (h *Host) receive(in inbound) {
	h.stats.received.Add(1)
	h.decoded = true
	h.m.Receive(in.from, in.m)
	h.decoded = false
}

// drain runs the work queued during machine calls (self-sends, hints from
// failed sends), in order, until none is left.
func (h *Host) drain() {
	for len(h.local) > 0 {
		f := h.local[0]
		h.local[0] = nil
		h.local = h.local[1:]
		f()
	}
	h.local = h.local[:0]
}

// stop ends the loop: no timer fires after it, no reader waits on the loop.
func (h *Host) stop() {
	close(h.quit)
	h.wake.Stop()
	h.timerQ = nil
	h.local = nil
	s := h.Stats()
	h.log.Info("host: stopped", "received", s.Received, "sent", s.Sent, "dropped", s.SendDropped, "events", s.Events)
}

// Handle queues e for the machine's Handle, on the loop. It returns once e
// is queued (not handled), or with ctx's error, or ErrStopped.
func (h *Host) Handle(ctx context.Context, e core.Event) error {
	return h.post(ctx, func() { h.m.Handle(e) })
}

// Do runs f on the loop, with the machine and its Env, and returns when f
// has returned. It fails with ctx's error if f could not be queued before
// ctx was done, and with ErrStopped if the loop stopped before running f.
// f must not call Do or Handle.
func (h *Host) Do(ctx context.Context, f func(m core.Machine, env core.Env)) error {
	done := make(chan struct{})
	if err := h.post(ctx, func() { f(h.m, hostEnv{h}); close(done) }); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-h.quit:
		select {
		case <-done:
			return nil
		default:
			return ErrStopped
		}
	}
}

func (h *Host) post(ctx context.Context, f func()) error {
	select {
	case <-h.quit:
		return ErrStopped
	default:
	}
	select {
	case h.reqC <- f:
		return nil
	case <-h.quit:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats counts what a host has done.
type Stats struct {
	Received    uint64 // messages delivered to the machine from other nodes
	Sent        uint64 // messages handed to the transport
	SendDropped uint64 // messages dropped because the transport refused them
	Undecodable uint64 // inbound frames the codec could not decode
	Timers      uint64 // timers fired into the machine
	Events      uint64 // events emitted by the machine
	HintsLost   uint64 // transport hints dropped because the loop was behind
}

type counters struct {
	received, sent, dropped, undecodable, timers, events, hintsLost atomic.Uint64
}

// Stats returns the current counters; it is safe to call from any
// goroutine.
func (h *Host) Stats() Stats {
	return Stats{
		Received: h.stats.received.Load(), Sent: h.stats.sent.Load(),
		SendDropped: h.stats.dropped.Load(), Undecodable: h.stats.undecodable.Load(),
		Timers: h.stats.timers.Load(),
		Events: h.stats.events.Load(), HintsLost: h.stats.hintsLost.Load(),
	}
}

// DataPath is the application's data path (Config.DataPath). An
// interface rather than a func: the host calls the implementation's
// method itself, where a method value would add a wrapper's call to every
// message.
type DataPath interface {
	// TakeFrame is offered an inbound frame before the loop; returning
	// true consumes it. f.Payload is valid only during the call.
	TakeFrame(f wire.Frame) bool
}

// DataPathFunc adapts a function to DataPath.
type DataPathFunc func(f wire.Frame) bool

// TakeFrame calls d(f).
func (d DataPathFunc) TakeFrame(f wire.Frame) bool { return d(f) }

// handler is the host's transport.Handler; it runs on reader goroutines.
type handler struct{ h *Host }

func (hd handler) Deliver(f wire.Frame) {
	h := hd.h
	if d := h.cfg.DataPath; d != nil && d.TakeFrame(f) {
		return
	}
	m, ok := hd.decode(f)
	if !ok {
		return
	}
	select {
	case <-h.quit:
		return
	default:
	}
	select {
	case h.inbox <- inbound{from: f.Src, m: m}:
	case <-h.quit:
	}
}

// TryDeliver is Deliver on the sender's goroutine (transport.Taker): it
// posts the message to the loop unless the inbox is full. A host with a
// data path or a placer declines: those run on the transport's goroutines.
func (hd handler) TryDeliver(f wire.Frame) bool {
	h := hd.h
	if h.cfg.DataPath != nil || h.cfg.Placer != nil {
		return false
	}
	select {
	case <-h.quit:
		return true // dropped, as Deliver drops it
	default:
	}
	m, ok := hd.decode(f)
	if !ok {
		return true
	}
	select {
	case h.inbox <- inbound{from: f.Src, m: m}:
		return true
	default:
	}
	if h.cfg.Codec.Reusable(f.Kind) {
		h.spares.putMsg(f.Kind, m)
	}
	return false
}

// decode decodes an inbound frame's message, or counts and logs it as
// undecodable and reports false.
func (hd handler) decode(f wire.Frame) (core.Msg, bool) {
	h := hd.h
	// Messages may alias the payload, which the transport reuses, unless
	// their kind's decoder copies what it keeps.
	codec := h.cfg.Codec
	payload := f.Payload
	if !codec.Detached(f.Kind) {
		payload = bytes.Clone(payload)
	}
	d, old := h.spares.take(f.Kind, codec.Reusable(f.Kind))
	m, err := codec.Decode(d, f.Kind, payload, old)
	h.spares.putDecoder(d)
	if err != nil {
		if old != nil {
			h.spares.putMsg(f.Kind, old)
		}
		h.stats.undecodable.Add(1)
		h.log.Warn("host: dropping an undecodable frame", "from", uint32(f.Src), "kind", f.Kind.String(), "err", err)
		return nil, false
	}
	return m, true
}

// spares keeps what the reader goroutines reuse: decoders, and the
// messages of reusable kinds (wire.Codec.RegisterReusable) that the
// machine handed back (core.Recycler), to decode the next ones into. A
// mutex, not a sync.Pool: every garbage collection empties a pool, and
// the job's background would allocate again after each. The messages are
// kept by kind in a short list searched in order: a node has a handful of
// reusable kinds (the membership's ACKs and commits, the gossip table),
// and a decode looks its kind up where a map cost a hash and a probe of
// memory the frame's decoding touches nowhere else.
type spares struct {
	mu       sync.Mutex
	decoders []*wire.Decoder
	msgs     []kindSpares
}

// kindSpares is the messages of one kind kept.
type kindSpares struct {
	k  core.Kind
	ms []core.Msg
}

// maxSpares bounds the decoders and the messages of each kind kept: the
// readers decode one frame each at a time, and the loop hands a message
// back once it has handled it.
const maxSpares = 16

// take returns a decoder and, if reuse, a kept message of kind k (or
// nil), under one lock.
func (s *spares) take(k core.Kind, reuse bool) (*wire.Decoder, core.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m core.Msg
	if ks := s.kind(k); reuse && ks != nil && len(ks.ms) > 0 {
		n := len(ks.ms)
		m = ks.ms[n-1]
		ks.ms[n-1] = nil
		ks.ms = ks.ms[:n-1]
	}
	n := len(s.decoders)
	if n == 0 {
		return new(wire.Decoder), m
	}
	d := s.decoders[n-1]
	s.decoders[n-1] = nil
	s.decoders = s.decoders[:n-1]
	return d, m
}

func (s *spares) putDecoder(d *wire.Decoder) {
	s.mu.Lock()
	if len(s.decoders) < maxSpares {
		s.decoders = append(s.decoders, d)
	}
	s.mu.Unlock()
}

// kind returns the messages kept of kind k, or nil; s.mu is held.
func (s *spares) kind(k core.Kind) *kindSpares {
	for i := range s.msgs {
		if s.msgs[i].k == k {
			return &s.msgs[i]
		}
	}
	return nil
}

// kept returns how many messages of kind k are kept.
func (s *spares) kept(k core.Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.kind(k); ks != nil {
		return len(ks.ms)
	}
	return 0
}

func (s *spares) putMsg(k core.Kind, m core.Msg) {
	s.mu.Lock()
	ks := s.kind(k)
	if ks == nil {
		s.msgs = append(s.msgs, kindSpares{k: k})
		ks = &s.msgs[len(s.msgs)-1]
	}
	if len(ks.ms) < maxSpares {
		ks.ms = append(ks.ms, m)
	}
	s.mu.Unlock()
}

// Place offers a large frame to Config.Placer (transport.Placer).
func (hd handler) Place(f wire.Frame, n int) (int, []byte) {
	if p := hd.h.cfg.Placer; p != nil {
		return p.Place(f, n)
	}
	return 0, nil
}

// Placed ends a frame that Config.Placer took.
func (hd handler) Placed(f wire.Frame, ok bool) {
	hd.h.cfg.Placer.Placed(f, ok)
}

func (hd handler) Hint(p core.PeerHint) {
	select {
	case hd.h.hintC <- p:
	default:
		hd.h.stats.hintsLost.Add(1)
	}
}

// maxKeptEncoding bounds the encoding buffer Env.Send keeps for the next
// message: a rare large message does not hold its memory for good.
const maxKeptEncoding = 64 << 10

// nowSender is a transport that can write a frame on the calling
// goroutine without ever waiting (transport/tcp's SendNow): it reports
// false, having written nothing, when it cannot, and the frame then goes
// through Send. Either way it is done with f.Payload when it returns (it
// has written it, or copied what the socket did not take).
type nowSender interface {
	SendNow(to core.NodeID, f wire.Frame) bool
}

// maxNowPeers bounds the peers a loop turn writes to with SendNow.
const maxNowPeers = 16

// sendNow offers f to the transport's SendNow if it is the turn's first
// frame to peer to: a protocol that sends one message per peer and event
// (a proposal to each child) then costs no wake-up of a writer goroutine
// per message, and the frames of a burst to one peer after the first are
// queued, for the writer to write together.
func (h *Host) sendNow(to core.NodeID, f wire.Frame) bool {
	if len(h.nowTo) >= maxNowPeers || slices.Contains(h.nowTo, to) {
		return false
	}
	h.nowTo = append(h.nowTo, to)
	return h.now.SendNow(to, f)
}

// hostEnv is the machine's Env; its methods run on the loop goroutine.
type hostEnv struct{ h *Host }

func (e hostEnv) Self() core.NodeID  { return e.h.self }
func (e hostEnv) Now() time.Duration { return time.Since(e.h.start) }
func (e hostEnv) Rand() *rand.Rand   { return e.h.rng }

func (e hostEnv) Send(to core.NodeID, m core.Msg) {
	h := e.h
	if to == h.self {
		h.local = append(h.local, func() { h.m.Receive(h.self, m) })
		return
	}
	h.enc.B = h.enc.B[:0]
	err := h.cfg.Codec.Encode(&h.enc, m)
	if err != nil {
		// A kind missing from the codec is a wiring error of the program;
		// the peer could not decode it either.
		h.stats.dropped.Add(1)
		h.log.Error("host: cannot encode a message", "to", uint32(to), "kind", m.Kind().String(), "err", err)
		return
	}
	ctx, cancel := h.try, context.CancelFunc(nil)
	if h.cfg.SendWait > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), h.cfg.SendWait)
	}
	// SendNow and SendCopy are done with the payload when they return;
	// Send keeps it until its writer has written it.
	f := wire.Frame{Kind: m.Kind(), Epoch: h.epoch, Payload: h.enc.B}
	switch {
	case h.now != nil && h.sendNow(to, f):
		err = nil
	case h.copier != nil:
		err = h.copier.SendCopy(ctx, to, f)
	default:
		f.Payload = bytes.Clone(f.Payload)
		err = h.tr.Send(ctx, to, f)
	}
	if cap(h.enc.B) > maxKeptEncoding {
		h.enc.B = nil
	}
	if cancel != nil {
		cancel()
	}
	if err == nil {
		h.stats.sent.Add(1)
		if h.failing[to] {
			delete(h.failing, to)
			h.log.Info("host: sending again", "to", uint32(to))
		}
		return
	}
	h.stats.dropped.Add(1)
	if h.failing[to] {
		return
	}
	h.failing[to] = true
	h.log.Warn("host: dropping messages", "to", uint32(to), "kind", m.Kind().String(), "err", err)
	hint := core.PeerHint{Node: to, Reason: "send: " + err.Error()}
	h.local = append(h.local, func() { h.m.Handle(hint) })
}

// SendCopies reports true: Send encodes a message for another node before
// it returns (core.SendCopier).
func (e hostEnv) SendCopies() bool { return true }

// Recycle keeps a received message of a reusable kind
// (wire.Codec.RegisterReusable) for the readers to decode the next one of
// its kind into. It heeds only the first call made while a message from
// the readers is delivered, which hands back that message: a message the
// node sent itself, or one handed to the machine by Do, was not decoded
// here and may be its sender's still.
func (e hostEnv) Recycle(m core.Msg) {
	h := e.h
	if !h.decoded {
		return
	}
	h.decoded = false
	if m != nil && h.cfg.Codec.Reusable(m.Kind()) {
		h.spares.putMsg(m.Kind(), m)
	}
}

func (e hostEnv) SetTimer(after time.Duration, t core.Timer) core.TimerID {
	h := e.h
	h.nextTimer++
	id := h.nextTimer
	h.timerQ.push(timerEntry{at: time.Since(h.start) + max(after, 0), id: id, t: t})
	return id
}

// CancelTimer removes the timer from the queue. Cancelling a fired or
// unknown timer is a no-op.
func (e hostEnv) CancelTimer(id core.TimerID) { e.h.timerQ.remove(id) }

// The timers of a host live in one heap owned by the loop, with a single
// time.Timer armed for the earliest deadline: timers fire in deadline
// order (set order for equal deadlines) whatever the load, never early,
// and a cancelled timer never reaches the machine. The heap is written
// out for its one element type (container/heap would box every entry
// pushed and popped: an allocation each, for every timer of every
// period), and an entry carries its timer, so that setting and firing a
// timer allocates nothing once the slice has grown to the machine's
// usual number of pending timers.
type timerEntry struct {
	at time.Duration // deadline since h.start
	id core.TimerID  // increasing: breaks ties in set order
	t  core.Timer
}

func (a *timerEntry) before(b *timerEntry) bool {
	return a.at < b.at || (a.at == b.at && a.id < b.id)
}

// timerQueue is a binary min-heap of timer entries by (at, id).
type timerQueue []timerEntry

func (q *timerQueue) push(e timerEntry) {
	*q = append(*q, e)
	q.up(len(*q) - 1)
}

// pop removes and returns the earliest entry; q must not be empty.
func (q *timerQueue) pop() timerEntry {
	e := (*q)[0]
	q.removeAt(0)
	return e
}

// remove removes the entry of timer id, if it is queued. Machines keep
// few timers pending, so a scan is cheaper than an index kept up to date
// on every move.
func (q *timerQueue) remove(id core.TimerID) {
	for i := range *q {
		if (*q)[i].id == id {
			q.removeAt(i)
			return
		}
	}
}

func (q *timerQueue) removeAt(i int) {
	h := *q
	n := len(h) - 1
	if i != n {
		h[i] = h[n]
	}
	h[n] = timerEntry{} // drop the timer value
	*q = h[:n]
	if i < n {
		if !q.down(i) {
			q.up(i)
		}
	}
}

func (q timerQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q[i].before(&q[p]) {
			return
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

// down sifts entry i down and reports whether it moved.
func (q timerQueue) down(i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		c := l
		if r := l + 1; r < len(q) && q[r].before(&q[l]) {
			c = r
		}
		if !q[c].before(&q[i]) {
			break
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
	return i > start
}

// arm points the wake timer at the earliest deadline.
func (h *Host) arm() {
	if len(h.timerQ) == 0 {
		if h.wakeAt >= 0 {
			h.wake.Stop()
			h.wakeAt = -1
		}
		return
	}
	at := h.timerQ[0].at
	if at == h.wakeAt {
		return
	}
	h.wake.Reset(max(at-time.Since(h.start), 0))
	h.wakeAt = at
}

// fireDue fires, in deadline order, every live timer whose deadline has
// passed, running the work each queues before the next.
func (h *Host) fireDue() {
	now := time.Since(h.start)
	for len(h.timerQ) > 0 && h.timerQ[0].at <= now {
		e := h.timerQ.pop()
		h.stats.timers.Add(1)
		h.m.Fire(e.t)
		h.drain()
	}
}

func (e hostEnv) Emit(ev core.Event) {
	h := e.h
	h.stats.events.Add(1)
	at := time.Since(h.start)
	if mc, ok := ev.(core.MembersChanged); ok {
		h.epoch = mc.Epoch
	}
	switch ev := ev.(type) {
	case core.Suspected:
		h.log.Info("host: suspected", "peer", uint32(ev.Node))
		h.suspect(ev.Node, true)
	case core.Unsuspected:
		h.log.Info("host: unsuspected", "peer", uint32(ev.Node))
		h.suspect(ev.Node, false)
	case core.Failed:
		h.log.Info("host: failed", "peer", uint32(ev.Node))
		h.suspect(ev.Node, false)
	case core.Recovered:
		h.log.Info("host: recovered", "peer", uint32(ev.Node))
		h.suspect(ev.Node, false)
	case core.MembersChanged:
		h.log.Info("host: view", "epoch", ev.Epoch, "members", len(ev.Members))
	default:
		// EventType allocates its name: only for a logger that keeps it.
		if h.log.Enabled(context.Background(), slog.LevelDebug) {
			h.log.Debug("host: event", "type", EventType(ev))
		}
	}
	if h.events != nil {
		if err := h.events.write(time.Now(), at, h.self, EventType(ev), ev); err != nil {
			h.log.Error("host: event stream failed; no more events will be written", "err", err)
			h.events = nil
		}
	}
	if h.cfg.OnEvent != nil {
		h.cfg.OnEvent(at, ev)
	}
}
