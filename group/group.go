package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/vsync"
)

// View is a membership view as installed by this node. Every node that
// installs the view numbered Epoch installs the same Members.
type View struct {
	// Epoch numbers the view; the epochs a node installs only grow (they
	// are not consecutive integers: see member.FormatEpoch).
	Epoch uint64
	// Prev is the epoch of the view this node installed before this one (0
	// for its first view). A reader of [Group.Views] sees every view in
	// order: each value's Prev is the Epoch of the value before it, except
	// for the first value read, which is the view current at that time.
	Prev uint64
	// Members are the members in view order; the first is the root of the
	// membership tree.
	Members []NodeID
	// Root is Members[0], the node that coordinates view changes.
	Root NodeID
	// Joined are the members that entered with this view (all of them in a
	// node's first view).
	Joined []NodeID
	// Departed are the members of the previous view that are not in this
	// one: failed, or left.
	Departed []NodeID
	// Left are those of Departed that announced a graceful leave.
	Left []NodeID
}

// Has reports whether id is a member of v.
func (v View) Has(id NodeID) bool { return slices.Contains(v.Members, id) }

// String renders the view as "epoch 3.1 [0 1 2]".
func (v View) String() string {
	return fmt.Sprintf("epoch %s %v", member.FormatEpoch(v.Epoch), v.Members)
}

// SuspicionKind says what a [Suspicion] reports.
type SuspicionKind uint8

// The kinds of suspicion.
const (
	// Suspected: this node's detector suspects Node (it may be slow).
	Suspected SuspicionKind = iota + 1
	// Cleared: a suspicion of Node is withdrawn (it was heard from).
	Cleared
	// Declared: the detector declares Node failed; the membership will
	// exclude it.
	Declared
)

func (k SuspicionKind) String() string {
	switch k {
	case Suspected:
		return "suspected"
	case Cleared:
		return "cleared"
	case Declared:
		return "declared failed"
	}
	return fmt.Sprintf("suspicion(%d)", uint8(k))
}

// Suspicion is what this node's failure detector says about another node.
// Suspicions are local opinions: only views are agreed on.
type Suspicion struct {
	Node NodeID
	Kind SuspicionKind
	At   time.Time
}

// Delivery is a multicast delivered to this node (Config.Multicast): the
// Seq-th message Sender multicast in the view numbered Epoch. A sender's
// messages arrive in Seq order, each once; every member that moves from a
// view to the next delivered the same messages in the first.
type Delivery struct {
	Epoch   uint64
	Sender  NodeID
	Seq     uint64
	Payload []byte
}

// Group is this node's membership in a group. Its methods are safe for
// concurrent use.
type Group struct {
	cfg   Config
	tr    *tcp.Transport
	h     *host.Host
	st    *stack.Stack
	log   *slog.Logger
	addr  string
	stop  context.CancelFunc
	ran   chan struct{} // closed when the host's loop has returned
	first chan struct{} // closed at the first view

	mu          sync.Mutex
	view        View
	closed      bool
	leavers     map[NodeID]bool
	views       *pipe[View]
	suspicions  *pipe[Suspicion]
	deliveries  *pipe[Delivery]
	leaveDone   chan struct{}
	leaveEpoch  uint64
	runErr      error
	firstClosed bool
}

// Start creates a new group whose only member is this node; others join it
// with [Join], naming this node's address as a seed.
func Start(cfg Config) (*Group, error) {
	g, err := newGroup(cfg)
	if err != nil {
		return nil, err
	}
	st, err := stack.New(cfg.stackConfig(), []NodeID{cfg.ID}, stack.Options{Directory: &stack.Directory{Addr: g.addr}})
	if err != nil {
		g.tr.Close()
		return nil, err
	}
	if err := g.run(st); err != nil {
		return nil, err
	}
	<-g.first // a one-member view installs at once
	return g, nil
}

// Join joins the group that the nodes at seeds ("host:port") belong to: it
// connects to each seed (skipping those it cannot reach), asks them in order
// to admit it, and returns once it has installed its first view, or with
// ctx's error (and nothing left running). With no seed reachable it
// returns an error wrapping ErrNoSeed that says why for each.
func Join(ctx context.Context, cfg Config, seeds ...string) (*Group, error) {
	if len(seeds) == 0 {
		return nil, fmt.Errorf("%w: Join needs at least one seed address (use Start for a new group)", ErrConfig)
	}
	g, err := newGroup(cfg)
	if err != nil {
		return nil, err
	}
	var (
		contacts []NodeID
		book     = map[NodeID]string{}
		errs     []error
	)
	for _, s := range seeds {
		if s == g.addr {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, err := g.tr.Introduce(sctx, s)
		cancel()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			g.log.Warn("group: seed unreachable", "seed", s, "err", err)
		case id == cfg.ID:
			errs = append(errs, fmt.Errorf("%s: is node %v, our own id (ids must be unique)", s, id))
		case !slices.Contains(contacts, id):
			contacts = append(contacts, id)
			book[id] = s
		}
	}
	if len(contacts) == 0 {
		g.tr.Close()
		return nil, fmt.Errorf("%w: %w", ErrNoSeed, errors.Join(errs...))
	}
	st, err := stack.New(cfg.stackConfig(), nil, stack.Options{Join: true, Contacts: contacts,
		Directory: &stack.Directory{Addr: g.addr, Book: book}})
	if err != nil {
		g.tr.Close()
		return nil, err
	}
	if err := g.run(st); err != nil {
		return nil, err
	}
	select {
	case <-g.first:
		return g, nil
	case <-g.ran:
		g.Close()
		return nil, fmt.Errorf("group: the node stopped before it was admitted: %v", g.runErr)
	case <-ctx.Done():
		g.Close()
		return nil, fmt.Errorf("group: not admitted by %v: %w", seeds, ctx.Err())
	}
}

// newGroup validates cfg and listens.
func newGroup(cfg Config) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tcfg := tcp.DefaultConfig()
	tcfg.Node = cfg.ID
	tcfg.ListenAddr = cfg.BindAddr
	tcfg.JobID = cfg.Cluster
	tcfg.Secret = cfg.Secret
	tcfg.TLS = cfg.TLS
	tcfg.QueueUnknown = true
	tcfg.IdleTimeout = cfg.IdleTimeout // 0: the transport's default
	tcfg.Logger = logger
	tr, err := tcp.Listen(tcfg)
	if err != nil {
		return nil, fmt.Errorf("group: %w", err)
	}
	addr := cfg.AdvertiseAddr
	if addr == "" {
		addr = tr.Addr()
		if ap, err := net.ResolveTCPAddr("tcp", addr); err == nil && ap.IP.IsUnspecified() {
			tr.Close()
			return nil, fmt.Errorf("%w: BindAddr %s listens on every interface: set AdvertiseAddr to the address other nodes should dial", ErrConfig, cfg.BindAddr)
		}
	}
	g := &Group{cfg: cfg, tr: tr, log: logger.With("node", uint32(cfg.ID)), addr: addr,
		ran: make(chan struct{}), first: make(chan struct{}), leavers: map[NodeID]bool{}}
	if cfg.Multicast {
		g.deliveries = newPipe[Delivery]()
	}
	return g, nil
}

// run starts the host's loop over st.
func (g *Group) run(st *stack.Stack) error {
	codec, err := stack.NewCodec()
	if err != nil {
		g.tr.Close()
		return err
	}
	var tr transport.Transport = g.tr
	if g.cfg.WrapTransport != nil {
		if tr = g.cfg.WrapTransport(g.tr); tr == nil {
			g.tr.Close()
			return fmt.Errorf("%w: WrapTransport returned nil", ErrConfig)
		}
	}
	h, err := host.New(st.Machine, host.Config{
		Transport: tr,
		Codec:     codec,
		Seed:      g.cfg.Seed,
		Logger:    g.log,
		Events:    g.cfg.Events,
		OnEvent:   g.onEvent,
	})
	if err != nil {
		g.tr.Close()
		return err
	}
	g.h, g.st = h, st
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	go func() {
		err := h.Run(ctx)
		g.mu.Lock()
		g.runErr = err
		g.mu.Unlock()
		close(g.ran)
	}()
	return nil
}

// onEvent follows the machines' events, on the loop.
func (g *Group) onEvent(_ time.Duration, e core.Event) {
	m := g.cfg.Metrics
	switch e := e.(type) {
	case member.ViewInstalled:
		g.installed(e)
	case stack.AddrLearned:
		g.tr.SetPeer(e.Node, e.Addr)
	case stack.AddrForgotten:
		g.tr.RemovePeer(e.Node)
	case stack.LeaveAnnounced:
		g.mu.Lock()
		g.leavers[e.Node] = true
		g.mu.Unlock()
	case stack.LeaveDone:
		g.mu.Lock()
		if g.leaveDone != nil {
			g.leaveEpoch = e.Epoch
			close(g.leaveDone)
			g.leaveDone = nil
		}
		g.mu.Unlock()
	case core.Suspected:
		g.suspect(e.Node, Suspected, "suspicions")
	case core.Unsuspected:
		g.suspect(e.Node, Cleared, "unsuspicions")
	case core.Failed:
		g.suspect(e.Node, Declared, "failures_declared")
	case member.Stabilized:
		if m != nil {
			m.Duration("stabilization", e.At-e.Began)
		}
	case vsync.Delivered:
		if g.deliveries != nil {
			g.deliveries.push(Delivery{Epoch: e.Epoch, Sender: e.Sender, Seq: e.Seq, Payload: e.Payload})
		}
		if m != nil {
			m.Count("multicasts_delivered", 1)
		}
	case vsync.ViewChanged:
		if m != nil && e.Previous != 0 {
			m.Duration("flush", e.Flush)
		}
	}
}

func (g *Group) suspect(id NodeID, k SuspicionKind, metric string) {
	g.mu.Lock()
	leaving := g.leavers[id]
	p := g.suspicions
	g.mu.Unlock()
	if k == Declared && leaving {
		return // the directory's own verdict about a leaver, not a failure
	}
	if p != nil {
		p.push(Suspicion{Node: id, Kind: k, At: time.Now()})
	}
	if m := g.cfg.Metrics; m != nil {
		m.Count(metric, 1)
	}
}

func (g *Group) installed(e member.ViewInstalled) {
	g.mu.Lock()
	v := View{Epoch: e.Epoch, Prev: g.view.Epoch, Members: e.Members, Joined: e.Joined, Departed: e.Departed, Root: core.None}
	if len(e.Members) > 0 {
		v.Root = e.Members[0]
	}
	for _, id := range e.Departed {
		if g.leavers[id] {
			v.Left = append(v.Left, id)
			delete(g.leavers, id)
		}
	}
	g.view = v
	p := g.views
	first := !g.firstClosed
	g.firstClosed = true
	g.mu.Unlock()
	stack.KeepTreeLinks(g.tr, e.Members, g.cfg.ID, g.cfg.Fanout)
	// The metrics first: whoever has seen the view sees them too.
	if m := g.cfg.Metrics; m != nil {
		m.Count("views_installed", 1)
		m.Count("members_joined", int64(len(e.Joined)))
		m.Count("members_departed", int64(len(e.Departed)))
		m.Count("members_left", int64(len(v.Left)))
		m.Gauge("members", float64(len(e.Members)))
		m.Gauge("epoch_counter", float64(member.EpochCounter(e.Epoch)))
	}
	if first {
		close(g.first)
	}
	if p != nil {
		p.push(v)
	}
}

// ID returns this node's id.
func (g *Group) ID() NodeID { return g.cfg.ID }

// Addr returns the address other nodes reach this one at (a seed for
// [Join]).
func (g *Group) Addr() string { return g.addr }

// View returns the view this node installed last.
func (g *Group) View() View {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.view
}

// Views returns a channel of the views this node installs, in order,
// starting with the current one; see [View.Prev]. The channel is buffered
// without bound (a slow reader delays nothing and loses nothing) and is
// closed by Close. Every call returns the same channel: read it from one
// goroutine.
func (g *Group) Views() <-chan View {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.views == nil {
		g.views = newPipe[View]()
		if g.closed {
			g.views.close()
		} else if g.view.Epoch != 0 {
			g.views.push(g.view)
		}
	}
	return g.views.out
}

// Suspicions returns a channel of what this node's failure detector says
// from the first call on (earlier suspicions are not kept), buffered without
// bound and closed by Close. Every call returns the same channel.
func (g *Group) Suspicions() <-chan Suspicion {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.suspicions == nil {
		g.suspicions = newPipe[Suspicion]()
		if g.closed {
			g.suspicions.close()
		}
	}
	return g.suspicions.out
}

// Deliveries returns the channel of multicasts delivered to this node
// (Config.Multicast; nil otherwise), from the start, buffered without
// bound and closed by Close.
func (g *Group) Deliveries() <-chan Delivery {
	if g.deliveries == nil {
		return nil
	}
	return g.deliveries.out
}

// Multicast sends payload to every member of the current view, this node
// included, with view-synchronous reliable delivery (Config.Multicast).
// It returns once the message is queued: ErrMulticastFull if MulticastWindow
// messages of this node are not yet stable and as many wait behind them,
// ErrTooLarge above MaxMessageSize. The group keeps payload: do not modify
// it afterwards.
func (g *Group) Multicast(ctx context.Context, payload []byte) error {
	if !g.cfg.Multicast {
		return ErrNoMulticast
	}
	if len(payload) > g.cfg.MaxMessageSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(payload), g.cfg.MaxMessageSize)
	}
	var err error
	doErr := g.h.Do(ctx, func(m core.Machine, _ core.Env) {
		if g.st.VSync.Stats().Queued >= 2*g.cfg.MulticastWindow {
			err = ErrMulticastFull
			return
		}
		m.Handle(vsync.Multicast{Payload: payload})
	})
	if errors.Is(doErr, host.ErrStopped) {
		return ErrClosed
	}
	if doErr != nil {
		return doErr
	}
	return err
}

// Leave leaves the group gracefully: the other members install a view
// without this node and report it in [View.Left], not as a failure. It
// returns once a member confirms that view (or at once in a group of one),
// or with ctx's error. The node stops taking part in the membership at
// once; call Close afterwards.
func (g *Group) Leave(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	alone := len(g.view.Members) <= 1
	done := g.leaveDone
	if done == nil {
		done = make(chan struct{})
		g.leaveDone = done
	}
	g.mu.Unlock()
	if err := g.h.Handle(ctx, stack.LeaveRequest{}); err != nil {
		if errors.Is(err, host.ErrStopped) {
			return ErrClosed
		}
		return err
	}
	if alone {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-g.ran:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("group: leave not confirmed: %w", ctx.Err())
	}
}

// Close stops the node: its loop, its connections and the channels of
// Views, Suspicions and Deliveries. The others see it as a failure unless
// Leave returned first. Close is idempotent.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	views, suspicions := g.views, g.suspicions
	g.mu.Unlock()
	g.stop()
	<-g.ran
	err := g.tr.Close()
	if views != nil {
		views.close()
	}
	if suspicions != nil {
		suspicions.close()
	}
	if g.deliveries != nil {
		g.deliveries.close()
	}
	return err
}

// Stats returns the node's transport and host counters.
func (g *Group) Stats() (tcp.Stats, host.Stats) { return g.tr.Stats(), g.h.Stats() }
