package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
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
	"github.com/cohort-mp/cohort/wire"
)

// Group is this node's membership in a group. Its methods are safe for
// concurrent use.
type Group struct {
	cfg   Config
	name  string
	id    NodeID
	tr    *tcp.Transport
	h     *host.Host
	st    *stack.Stack
	codec *wire.Codec
	log   *slog.Logger
	addr  string
	boot  *boot
	stop  context.CancelFunc
	ran   chan struct{} // closed when the host's loop has returned
	first chan struct{} // closed at the first view delivered

	mu          sync.Mutex
	view        View                         // the last view delivered
	installed   member.ViewInstalled         // the last view installed
	published   map[uint64][]stack.MetaEntry // metadata of epochs not yet installed here
	closed      bool
	left        map[NodeID]bool // leavers of the views installed since the last delivered
	views       *queue[View]
	viewsCh     <-chan View
	suspicions  *queue[Suspicion]
	suspectCh   <-chan Suspicion
	deliveries  *queue[Delivery]
	deliverCh   <-chan Delivery
	delegate    *queue[any]
	delegateRan chan struct{}
	metaSeen    chan struct{} // closed and renewed at every view delivered
	leaveDone   chan struct{}
	runErr      error
	firstClosed bool
	counts      counts
}

// New starts this node and makes it a member of a group: it listens,
// asks each of Config.Seeds whether it belongs to a group, and joins that
// group, or, if none does, the node of lowest id among those it reached
// forms one and the others join it. So every node calls New, with the same
// Seeds or with any list that reaches the group, whatever the order in
// which they start; nodes started together with each other as seeds form
// one group. A node with no seeds, or that reaches none, forms a group of
// its own. A node not admitted after a while (the node it waited for
// crashed before forming) probes its seeds again. The rule and why it
// forms one group are in boot.go.
//
// New returns once the node has installed its first view, or with ctx's
// error (and nothing left running); with an error wrapping ErrDuplicate
// when another node runs under its name, ErrSecret or ErrCluster when
// every seed reached refused it for that reason.
func New(ctx context.Context, cfg Config) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, fmt.Errorf("%w: Name is empty and the host name is unknown (%v)", ErrConfig, err)
		}
		name = h
		if len(name) > MaxNameLen {
			name = name[:MaxNameLen]
		}
	}
	g, err := listen(cfg, name)
	if err != nil {
		return nil, err
	}
	for {
		contacts, book, err := g.decide(ctx)
		if err != nil {
			g.tr.Close()
			return nil, err
		}
		opts := stack.Options{Directory: &stack.Directory{Addr: g.addr, Book: book, Name: name,
			Meta: cfg.Meta, MetaVersion: uint64(time.Now().UnixNano())}}
		members := []NodeID{g.id}
		var giveUp <-chan time.Time
		if contacts != nil {
			opts.Join, opts.Contacts, members = true, contacts, nil
			giveUp = time.After(time.Duration(2*(len(contacts)+1)) * cfg.JoinRetry)
		}
		st, err := stack.New(cfg.stackConfig(g.id), members, opts)
		if err != nil {
			g.tr.Close()
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if err := g.run(st); err != nil {
			return nil, err
		}
	wait:
		select {
		case <-g.first:
			g.startDelegate()
			return g, nil
		case <-g.ran:
			g.Close(context.Background())
			return nil, fmt.Errorf("group: the node stopped before it was admitted: %v", g.runErr)
		case <-ctx.Done():
			g.Close(context.Background())
			return nil, fmt.Errorf("group: not admitted through %v: %w", contacts, ctx.Err())
		case <-giveUp:
			if !g.reboot() {
				giveUp = nil // admitted: its view's metadata is on its way
				goto wait
			}
			g.log.Info("group: not admitted; probing the seeds again", "contacts", contacts)
		}
	}
}

// reboot stops a joiner that no contact admitted (the node it waited for
// to form a group may have crashed first) and makes it undecided again,
// to probe its seeds anew. It reports false, doing nothing, if the node
// has installed a view meanwhile.
func (g *Group) reboot() bool {
	g.mu.Lock()
	installed := g.installed.Epoch != 0
	g.mu.Unlock()
	if installed {
		return false
	}
	g.stop()
	<-g.ran
	g.tr.SetHandler(g.bootHandler())
	g.boot.mu.Lock()
	g.boot.state = stack.StateUndecided
	clear(g.boot.known)
	g.boot.mu.Unlock()
	g.ran = make(chan struct{})
	return true
}

// listen validates cfg, listens, and answers probes until the loop runs.
func listen(cfg Config, name string) (*Group, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	id := idOf(name)
	tcfg := tcp.DefaultConfig()
	tcfg.Node = id
	tcfg.ListenAddr = cfg.BindAddr
	tcfg.JobID = cfg.Cluster
	tcfg.Secret = cfg.Secret
	tcfg.TLS = cfg.TLS
	tcfg.QueueUnknown = true
	tcfg.IdleTimeout = cfg.IdleTimeout // 0: the transport's default
	tcfg.Logger = logger
	codec, err := stack.NewCodec()
	if err != nil {
		return nil, err
	}
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
	limit := cfg.EventBuffer
	if limit == 0 {
		limit = 1024
	}
	g := &Group{cfg: cfg, name: name, id: id, tr: tr, codec: codec, log: logger.With("node", name), addr: addr,
		boot: newBoot(), ran: make(chan struct{}), first: make(chan struct{}), left: map[NodeID]bool{},
		published: map[uint64][]stack.MetaEntry{}, metaSeen: make(chan struct{})}
	g.cfg.EventBuffer = limit
	if cfg.Multicast {
		g.deliveries = newQueue(limit, func(Delivery) bool { return false }, func(Delivery) {})
	}
	if cfg.Delegate != nil {
		g.delegate = newQueue(limit, func(e any) bool { _, d := e.(Delivery); return !d }, g.countDrop)
	}
	tr.SetHandler(g.bootHandler())
	return g, nil
}

// run starts the host's loop over st.
func (g *Group) run(st *stack.Stack) error {
	var tr transport.Transport = g.tr
	if g.cfg.WrapTransport != nil {
		if tr = g.cfg.WrapTransport(g.tr); tr == nil {
			g.tr.Close()
			return fmt.Errorf("%w: WrapTransport returned nil", ErrConfig)
		}
	}
	h, err := host.New(st.Machine, host.Config{
		Transport: tr,
		Codec:     g.codec,
		Seed:      g.cfg.RandomSeed,
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
		g.installedView(e)
	case stack.MetaPublished:
		g.mu.Lock()
		if e.Epoch >= g.installed.Epoch {
			g.published[e.Epoch] = e.Entries
		}
		g.mu.Unlock()
		g.deliverView()
	case stack.AddrLearned:
		g.tr.SetPeer(e.Node, e.Addr)
	case stack.AddrForgotten:
		g.tr.RemovePeer(e.Node)
	case stack.LeaveDone:
		g.mu.Lock()
		if g.leaveDone != nil {
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
		d := Delivery{Epoch: e.Epoch, Sender: e.Sender, Seq: e.Seq, Payload: e.Payload}
		if g.deliveries != nil {
			g.deliveries.push(d)
		}
		if g.delegate != nil {
			g.delegate.push(d)
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
	q := g.suspicions
	g.mu.Unlock()
	s := Suspicion{Node: id, Kind: k, At: time.Now()}
	if q != nil {
		q.push(s)
	}
	if g.delegate != nil {
		g.delegate.push(s)
	}
	if m := g.cfg.Metrics; m != nil {
		m.Count(metric, 1)
	}
}

func (g *Group) installedView(e member.ViewInstalled) {
	g.mu.Lock()
	g.installed = e
	// A view installed but never delivered here (its metadata came after
	// a newer view) still says who of its departed left; a later one that
	// admits the id again makes that news stale.
	for _, id := range e.Joined {
		delete(g.left, id)
	}
	for _, id := range e.Left {
		g.left[id] = true
	}
	for ep := range g.published {
		if ep < e.Epoch {
			delete(g.published, ep) // never delivered here: a newer view was installed first
		}
	}
	g.counts.installed++
	g.mu.Unlock()
	stack.KeepTreeLinks(g.tr, e.Members, g.id, g.cfg.stackConfig(g.id).MemberConfig().Fanout)
	if m := g.cfg.Metrics; m != nil {
		m.Count("views_installed", 1)
		m.Gauge("members", float64(len(e.Members)))
		m.Gauge("epoch_counter", float64(member.EpochCounter(e.Epoch)))
	}
	g.deliverView()
}

// deliverView delivers the installed view once its metadata is published.
func (g *Group) deliverView() {
	g.mu.Lock()
	e := g.installed
	entries, ok := g.published[e.Epoch]
	if !ok || e.Epoch == 0 || e.Epoch <= g.view.Epoch {
		g.mu.Unlock()
		return
	}
	delete(g.published, e.Epoch)
	prev := g.view
	v := View{Epoch: e.Epoch, Prev: prev.Epoch, Members: make([]Member, len(entries))}
	for i, x := range entries {
		v.Members[i] = Member{ID: x.ID, Name: x.Name, Addr: x.Addr, Meta: x.Meta}
	}
	for _, x := range v.Members {
		if !prev.Has(x.ID) || slices.Contains(e.Joined, x.ID) && prev.Epoch != 0 {
			v.Joined = append(v.Joined, x)
		}
	}
	for _, x := range prev.Members {
		if !v.Has(x.ID) || slices.Contains(e.Joined, x.ID) {
			v.Departed = append(v.Departed, x)
			if g.left[x.ID] {
				v.Left = append(v.Left, x)
			}
		}
	}
	clear(g.left)
	g.view = v
	g.counts.delivered++
	q := g.views
	first := !g.firstClosed
	g.firstClosed = true
	close(g.metaSeen)
	g.metaSeen = make(chan struct{})
	g.mu.Unlock()
	if m := g.cfg.Metrics; m != nil {
		m.Count("views_delivered", 1)
		m.Count("members_joined", int64(len(v.Joined)))
		m.Count("members_departed", int64(len(v.Departed)))
		m.Count("members_left", int64(len(v.Left)))
	}
	if first {
		close(g.first)
	}
	if q != nil {
		q.push(v)
	}
	if g.delegate != nil {
		g.delegate.push(v)
	}
}

// countDrop counts an event a full queue dropped.
func (g *Group) countDrop(e any) {
	switch e.(type) {
	case View:
		g.counts.viewsDropped.Add(1)
	case Suspicion:
		g.counts.suspicionsDropped.Add(1)
	}
}

// startDelegate starts the Delegate's goroutine, once the node is a
// member (the events queued until then wait for it).
func (g *Group) startDelegate() {
	if g.delegate != nil {
		g.delegateRan = make(chan struct{})
		go g.runDelegate()
	}
}

func (g *Group) runDelegate() {
	defer close(g.delegateRan)
	d := g.cfg.Delegate
	for {
		e, ok := g.delegate.pop()
		if !ok {
			return
		}
		switch e := e.(type) {
		case View:
			d.NotifyView(e)
		case Suspicion:
			d.NotifySuspicion(e)
		case Delivery:
			d.NotifyDelivery(e)
		}
	}
}

// ID returns this node's id (derived from its name).
func (g *Group) ID() NodeID { return g.id }

// Name returns this node's name.
func (g *Group) Name() string { return g.name }

// Addr returns the address other nodes reach this one at (a seed for
// others).
func (g *Group) Addr() string { return g.addr }

// View returns the view this node delivered last.
func (g *Group) View() View {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.view
}

// Views returns a channel of the views this node delivers, in order,
// starting with the current one; see [View.Prev] and, for a slow reader,
// [Delegate]. It is closed by Close. Every call returns the same channel:
// read it from one goroutine.
func (g *Group) Views() <-chan View {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.views == nil {
		g.views = newQueue(g.cfg.EventBuffer, func(View) bool { return true }, func(View) { g.counts.viewsDropped.Add(1) })
		if g.closed {
			g.views.close()
		} else if g.view.Epoch != 0 {
			g.views.push(g.view)
		}
		g.viewsCh = toChan(g.views)
	}
	return g.viewsCh
}

// Suspicions returns a channel of what this node's failure detector says
// from the first call on (earlier suspicions are not kept), closed by
// Close; a full queue drops the oldest (see [Delegate]). Every call returns
// the same channel.
func (g *Group) Suspicions() <-chan Suspicion {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.suspicions == nil {
		g.suspicions = newQueue(g.cfg.EventBuffer, func(Suspicion) bool { return true }, func(Suspicion) { g.counts.suspicionsDropped.Add(1) })
		g.suspectCh = toChan(g.suspicions)
		if g.closed {
			g.suspicions.close()
		}
	}
	return g.suspectCh
}

// Deliveries returns the channel of multicasts delivered to this node
// (Config.Multicast; nil otherwise), from the start, closed by Close. Read
// it: a full queue of deliveries stalls the node (see [Delegate]).
func (g *Group) Deliveries() <-chan Delivery {
	if g.deliveries == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deliverCh == nil {
		g.deliverCh = toChan(g.deliveries)
	}
	return g.deliverCh
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

// SetMeta changes this node's metadata (at most MaxMetaSize bytes). The
// change takes a view change: SetMeta returns once this node has
// delivered a view showing it, or with ctx's error (the change then still
// shows in a later view). Every member sees the metadata of a given epoch
// alike; a member reading this node's metadata in the view it holds may
// read the former value until it delivers that view.
func (g *Group) SetMeta(ctx context.Context, meta []byte) error {
	if len(meta) > MaxMetaSize {
		return fmt.Errorf("%w: metadata of %d bytes, limit %d", ErrTooLarge, len(meta), MaxMetaSize)
	}
	meta = slices.Clone(meta)
	if err := g.h.Handle(ctx, stack.SetMeta{Meta: meta}); err != nil {
		if errors.Is(err, host.ErrStopped) {
			return ErrClosed
		}
		return err
	}
	for {
		g.mu.Lock()
		own, _ := g.view.Member(g.id)
		seen := g.metaSeen
		g.mu.Unlock()
		if string(own.Meta) == string(meta) {
			return nil
		}
		select {
		case <-seen:
		case <-g.ran:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("group: metadata not yet published: %w", ctx.Err())
		}
	}
}

// Leave leaves the group gracefully: the other members deliver a view
// without this node and report it in [View.Left], not as a failure, every
// one of them alike (the view change that excludes the node says that it
// left). It returns once a member confirms that it installed a view
// without this node (or at once in a group of one), or with ctx's error.
// The node stops taking part in the membership and its detector stops at
// once; call Close afterwards. A node that crashes, or is cut off from
// every member, before any of them heard its leave is excluded as failed,
// at every member alike, and nobody confirms: Leave then returns with
// ctx's error.
func (g *Group) Leave(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	alone := len(g.installed.Members) <= 1
	done := g.leaveDone
	if done == nil {
		done = make(chan struct{})
		g.leaveDone = done
	}
	g.mu.Unlock()
	if err := g.h.Handle(ctx, member.LeaveRequest{}); err != nil {
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

// Close stops the node: its loop, its connections, the channels of Views,
// Suspicions and Deliveries and the Delegate's goroutine, waiting for
// them until ctx is done (a Delegate method that does not return holds
// Close until then). The others see it as a failure unless Leave returned
// first. Close is idempotent.
func (g *Group) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	views, suspicions := g.views, g.suspicions
	g.mu.Unlock()
	// Queues first: a loop waiting for a reader's room returns.
	for _, q := range []interface{ close() }{views, suspicions, g.deliveries, g.delegate} {
		if q != nil && !isNilQueue(q) {
			q.close()
		}
	}
	if g.stop != nil {
		g.stop()
		select {
		case <-g.ran:
		case <-ctx.Done():
			return fmt.Errorf("group: close: %w", ctx.Err())
		}
	}
	err := g.tr.Close()
	if g.delegateRan != nil {
		select {
		case <-g.delegateRan:
		case <-ctx.Done():
			return fmt.Errorf("group: close: the delegate has not returned: %w", ctx.Err())
		}
	}
	return err
}

// isNilQueue reports whether q holds a nil *queue (an interface holding a
// typed nil is not nil).
func isNilQueue(q interface{ close() }) bool {
	switch q := q.(type) {
	case *queue[View]:
		return q == nil
	case *queue[Suspicion]:
		return q == nil
	case *queue[Delivery]:
		return q == nil
	case *queue[any]:
		return q == nil
	}
	return false
}
