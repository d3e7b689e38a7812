// The membership machine of one node: its state, its constructors, and the
// entry points that hand each message, event and timer to its phase:
// install.go, report.go, prepare.go, commit.go, join.go, notice.go and
// timers.go. The root's side is in root.go, the views in view.go.

package member

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Errors of the constructors.
var (
	// ErrNoMembers: the initial member list or the contact list is empty.
	ErrNoMembers = errors.New("member: no members")
	// ErrBadMember: a list names core.None or the same node twice.
	ErrBadMember = errors.New("member: invalid member list")
)

// Member is the membership machine of one node (a core.Machine and
// core.ProtoOwner for core.ProtoMember). Build it with [New] (an initial
// member) or [NewJoiner] (a new or recovered node); it is single-threaded
// like every machine.
type Member struct {
	cfg  Config
	env  core.Env
	self core.NodeID
	inc  uint64 // 0 for initial members, random otherwise

	// recycler takes back the ACKs and commits received, once handled,
	// for the next ones to be decoded into (nil: the Env does not reuse
	// messages). copies says that the Env encodes a message as it is
	// sent (core.SendCopies): then every ACK this node sends is ackOut,
	// and every commit commitOut.
	recycler  core.Recycler
	copies    bool
	ackOut    Ack
	commitOut Commit

	// initView is the default view of an initial member's job, shared by
	// every machine of its Group; initial is its member list (nil for a
	// node built by NewJoiner).
	initView   *view
	initial    []core.NodeID
	contacts   []core.NodeID
	epochFloor uint64

	cur        *view // installed view; nil while joining
	maxCounter uint32
	refresh    bool // the root owes a new epoch (Refresh)

	// The sub-states, embedded by value: one allocation holds the machine.
	proposals     // the proposals above cur this node holds
	failures      // the failures this node knows of
	stabilization // the root's proposal in flight
	joins         // this node's join or merge, and the joins it holds for others
	outsiders     // the nodes outside this node's views that it tells so
	leaves        // this node's leave, and the members that announced theirs
	timers        // the waits, by kind

	// pos remembers this node's position in the last view asked about.
	pos selfPos
}

// New returns the machine of an initial member: the node computes the
// default view from initial alone, without messages (§3.2): the members
// sorted by id, the lowest id as root. A node started with a list that does
// not contain it joins through that list as a new node.
//
// New builds the initial view for this one machine. A process that runs
// many machines of one job (the simulator) builds them with [NewGroup] and
// [Group.New] instead, so that they share one initial view.
func New(cfg Config, initial []core.NodeID) (*Member, error) {
	g, err := NewGroup(cfg, initial)
	if err != nil {
		return nil, err
	}
	return g.New(), nil
}

// Group is the initial member list of a job, checked, sorted by id and laid
// out as the default view (§3.2, epoch 1) once. Every machine built with
// [Group.New] shares that one view (and the list it holds) instead of
// holding its own copy, so that n machines of one job in one process hold
// O(n) bytes of member lists, not O(n²). A Group is immutable after
// NewGroup and safe for concurrent use; machines built from it behave
// exactly as machines built with [New] from the same list.
type Group struct {
	cfg  Config
	init *view
}

// NewGroup checks cfg and the initial member list of a job (not empty, no
// core.None, no id twice) and builds the default view.
func NewGroup(cfg Config, initial []core.NodeID) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v, err := initialView(initial, cfg.Fanout)
	if err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, init: v}, nil
}

// Members returns the initial members sorted by id (the default view's
// order). The slice is shared: never modify it.
func (g *Group) Members() []core.NodeID { return g.init.list() }

// New returns the machine of one node of the group (see [New]): an initial
// member if the node's id, learnt at Start, is in the list; otherwise a new
// node that joins through the list.
func (g *Group) New() *Member {
	m := newMember(g.cfg)
	m.initView = g.init
	m.initial = g.init.list()
	return m
}

// JoinOptions describe how a node that is not an initial member joins.
type JoinOptions struct {
	// Contacts is the node's sequential list of nodes (§3.7): it sends its
	// request to the first, and to the next one each time JoinRetry passes
	// without being admitted. A node that receives a request and is not the
	// root forwards it to the root.
	Contacts []core.NodeID
	// Recovered marks a process that restarts after a crash and re-joins
	// under its id (NODE_ALIVE); otherwise the node is new (NEW_NODE).
	Recovered bool
	// EpochFloor is the highest epoch the node's previous incarnation saw,
	// if the host kept it (0 otherwise). The node will not install a view
	// numbered at or below it, and never proposes one: with it, epochs grow
	// at a node across restarts and a recovered root can never reuse an
	// epoch of its former self. Without it, under PartitionPaper, a
	// recovered node that becomes root of the other side of a still open
	// partition could in principle reuse such an epoch.
	EpochFloor uint64
}

// NewJoiner returns the machine of a node that joins a running group.
func NewJoiner(cfg Config, opts JoinOptions) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := sortedList(opts.Contacts); err != nil {
		return nil, err
	}
	m := newMember(cfg)
	m.contacts = slices.Clone(opts.Contacts)
	m.recovered = opts.Recovered
	m.epochFloor = opts.EpochFloor
	return m, nil
}

// sortedList checks a member or contact list (not empty, no core.None, no
// id twice) and returns a sorted copy of it. Sorting finds the duplicates
// without an n-entry map.
func sortedList(ids []core.NodeID) ([]core.NodeID, error) {
	if len(ids) == 0 {
		return nil, ErrNoMembers
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i, id := range sorted {
		if id == core.None {
			return nil, fmt.Errorf("%w: core.None listed", ErrBadMember)
		}
		if i > 0 && id == sorted[i-1] {
			return nil, fmt.Errorf("%w: %v listed twice", ErrBadMember, id)
		}
	}
	return sorted, nil
}

func newMember(cfg Config) *Member {
	// The maps are made on first write (put): most machines of a large
	// simulated job never write most of them.
	return &Member{
		cfg:       cfg,
		proposals: proposals{acceptedFrom: core.None},
		failures:  failures{reportTo: core.None},
		joins:     joins{mergeRoot: core.None, mergeVia: core.None, gaveUpRoot: core.None},
	}
}

// put sets (*mp)[k] = v, making the map first if it is nil.
func put[K comparable, V any](mp *map[K]V, k K, v V) {
	if *mp == nil {
		*mp = make(map[K]V)
	}
	(*mp)[k] = v
}

// Protos implements core.ProtoOwner.
func (m *Member) Protos() []core.Proto { return []core.Proto{core.ProtoMember} }

// View returns the installed view (the zero View while the node is joining).
func (m *Member) View() View {
	if m.cur == nil {
		return View{}
	}
	return m.cur.public()
}

// Joining reports whether the node has not installed a view yet.
func (m *Member) Joining() bool { return m.cur == nil }

// IsRoot reports whether the node believes it is the root of its newest
// view.
func (m *Member) IsRoot() bool { return m.cur != nil && m.rootOf(m.newest()) == m.self }

// Stabilizing reports whether the node is a root with a proposal in flight.
func (m *Member) Stabilizing() bool { return m.driving }

// MaxEpoch returns the highest epoch this node has seen or proposed; a host
// may keep it across restarts and pass it back as JoinOptions.EpochFloor.
func (m *Member) MaxEpoch() uint64 { return uint64(m.maxCounter)<<32 | (1<<32 - 1) }

// Incarnation returns the node's incarnation (0 for an initial member).
func (m *Member) Incarnation() uint64 { return m.inc }

// Start implements core.Machine.
func (m *Member) Start(env core.Env) {
	m.env = env
	m.self = env.Self()
	m.recycler, m.copies = core.RecyclerOf(env), core.SendCopies(env)
	if m.cfg.ProbeInterval > 0 {
		m.arm(tProbe, m.cfg.ProbeInterval, 0)
	}
	if m.initView != nil {
		if m.initView.has(m.self) {
			m.install(m.initView)
			return
		}
		m.contacts = m.initial
	}
	for m.inc == 0 {
		m.inc = env.Rand().Uint64()
	}
	m.observe(m.epochFloor)
	m.joining = true
	m.sendJoin()
}

// Receive implements core.Machine.
func (m *Member) Receive(from core.NodeID, msg core.Msg) {
	if m.env == nil || m.leaving {
		return // not started (a caller that breaks the Machine contract), or gone
	}
	if m.accepted != nil && from == EpochRoot(m.accepted.epoch) {
		m.silentWaits = 0
	}
	switch x := msg.(type) {
	case *Report:
		m.onReport(from, x)
	case *ReportAck:
		m.cancel(tReport)
		m.reportTries = 0
	case *Prepare:
		m.onPrepare(from, x)
	case *Ack:
		m.onAck(from, x)
		m.recycle(x)
	case *Commit:
		m.onCommit(from, x.Epoch)
		m.recycle(x)
	case *JoinRequest:
		m.onJoinRequest(from, x)
	case *JoinDetAck:
		if from == EpochRoot(x.Epoch) {
			m.onCommit(from, x.Epoch)
		}
	case *Nack:
		if m.accepted != nil && x.Epoch == m.accepted.epoch {
			m.acked.refuse(from)
		}
		m.onNack(from, x)
	case *NeedView:
		m.onNeedView(from, x)
	case *Query:
		m.onQuery(from, x)
	case *Sync:
		m.onSync(from, x)
	case *Notice:
		m.acked.refuse(from)
		m.onNotice(from, x)
	case *MinorityNotice:
		m.onMinority(from, x)
	case *Leave:
		m.onLeave(from, x)
	}
}

// Handle implements core.Machine: core.Failed starts the paper's failure
// handling; core.Recovered withdraws a failure not yet acted upon and tells
// an excluded node that it is excluded; [Refresh] has a root propose a new
// epoch; [LeaveRequest] makes the node leave; [NotifyExcluded] tells
// excluded nodes that they are. Suspicions are not acted
// upon; a withdrawn one (core.Unsuspected: the member proved alive) makes a
// root doubt reports of that member's failure for a while (see
// refutedLately).
func (m *Member) Handle(e core.Event) {
	if m.env == nil || m.leaving {
		return
	}
	switch x := e.(type) {
	case LeaveRequest:
		m.leave()
	case NotifyExcluded:
		for _, id := range x.Nodes {
			m.noticeFinal(id, true, x.Final)
		}
	case core.Failed:
		m.onLocalFailure(x.Node)
	case core.Recovered:
		m.alive(x.Node)
		m.onRecovered(x.Node)
	case core.Unsuspected:
		m.alive(x.Node)
	case Refresh:
		if m.cur != nil && m.rootOf(m.newest()) == m.self {
			m.refresh = true
			m.rootStep()
		}
	}
}

func (m *Member) send(to core.NodeID, msg core.Msg) {
	if to == m.self || to == core.None {
		return
	}
	m.env.Send(to, msg)
}

// recycle hands a handled message back to the Env (see recycler).
func (m *Member) recycle(msg core.Msg) {
	if m.recycler != nil {
		m.recycler.Recycle(msg)
	}
}

func (m *Member) now() time.Duration { return m.env.Now() }

func (m *Member) observe(e uint64) {
	if c := EpochCounter(e); c > m.maxCounter {
		m.maxCounter = c
	}
}

// newest is the newest view this node knows that may be or become
// installed: the accepted proposal if any, else the installed view.
func (m *Member) newest() *view {
	if m.accepted != nil {
		return m.accepted
	}
	return m.cur
}

// rootOf returns the first member of v not known to have failed: the root,
// or "the next live node in the linear list" (§3.6).
func (m *Member) rootOf(v *view) core.NodeID {
	if v == nil {
		return core.None
	}
	for p := range v.size() {
		if id := v.at(p); !m.isFailed(v, id) {
			return id
		}
	}
	return core.None
}

// ownPos returns this node's position in v (-1 if it is not a member).
func (m *Member) ownPos(v *view) int { return m.pos.in(v, m.self) }

// selfPos remembers a node's position in the last view asked about: a
// view change asks it of the proposed view several times, and in a view
// whose members joined over time a position is two binary searches.
type selfPos struct {
	view *view
	pos  int
}

// in returns the position of self in v (-1 if it is not a member).
func (s *selfPos) in(v *view, self core.NodeID) int {
	if v == nil {
		return -1
	}
	if v != s.view {
		p := -1
		if v.src != nil && v.src == s.view && s.pos >= 0 {
			// A lazy view of the last one: self's position there,
			// shifted, without a search.
			p = v.shifted(s.pos, self)
		} else {
			p = v.pos(self)
		}
		s.view, s.pos = v, p
	}
	return s.pos
}

// afterChange re-examines pending work after the views changed.
func (m *Member) afterChange() {
	if m.rootOf(m.newest()) == m.self {
		m.rootStep()
	} else {
		m.reportFailures()
		m.forwardJoins()
	}
}

// ObserveSend implements [core.TrafficObserver].
func (m *Member) ObserveSend(core.NodeID) {}

// ObserveReceive implements [core.TrafficObserver]: a message of any
// layer from a child that owes an ACK shows that it runs (see
// onAckTimeout), and one from a member whose failure this node knows only
// from a report, that the report may be wrong (see doubt).
func (m *Member) ObserveReceive(from core.NodeID) {
	if m.leaving {
		return
	}
	m.acked.hear(from)
	if m.reported[from] {
		m.doubt(from)
	}
}
