// The membership machine's state and the handlers of every role (member,
// joiner, root taking over) are in this one file, about 1,400 lines: they
// share the state the protocol's invariants are about, and split by role
// each invariant would be spread over files. The root's proposals are in
// root.go, the views in view.go.

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

// maxJoinHops bounds how often a join request is forwarded towards a root.
const maxJoinHops = 8

// maxReportTries is how many unacknowledged reports a node sends to a root
// before it takes the root for failed.
const maxReportTries = 3

// maxMergeTries is how many join requests a member that learned of a newer
// view sends before it gives up merging into it.
const maxMergeTries = 4

// maxSilentWaits is how many commit waits a node holding the proposal of a
// root outside its installed view lets pass without a word from that root
// before it counts the root as failed (softly, like a report). The detector
// watches the installed view only: without this, the crash of such a root
// (a merge after a partition, between its proposal and its commit) is never
// declared, and the proposal is held for ever.
const maxSilentWaits = 3

type timerKind uint8

const (
	tAck      timerKind = iota // waiting for the children's ACKs
	tCommit                    // waiting for the commit of an accepted proposal
	tReport                    // waiting for FAILURE_DET_ACK
	tJoin                      // waiting to be admitted
	tProbe                     // the root's probe period
	tMinority                  // a root in a minority tries again
	nTimers
)

// timer is the value a Member hands to Env.SetTimer, by pointer (see
// Member.spareTimers). A timer whose gen is not the current one of its
// kind was superseded and is ignored.
type timer struct {
	kind timerKind
	gen  uint32
}

// maxLeftProbes is how many probes (one per ProbeInterval) tell a member
// left behind by a view that skipped views that its view is over, after the
// notice sent at once (see install).
const maxLeftProbes = 5

// leftNode is a member left behind and how often it was probed since.
type leftNode struct {
	id     core.NodeID
	probes int
}

type pendingJoin struct {
	Joiner
	alive bool
	at    time.Duration
}

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
	initView *view
	initial  []core.NodeID
	contacts []core.NodeID
	alive    bool // join with NODE_ALIVE rather than NEW_NODE
	floor    uint64

	cur       *view       // installed view; nil while joining
	acc       *view       // accepted (or adopted-as-known) proposal, epoch > cur's
	accMsg    *Prepare    // the delta form of acc's Prepare (nil if acc came otherwise)
	accFull   *Prepare    // the full form, built on demand
	accParent core.NodeID // acc's sender, core.None if acc came otherwise
	// silent counts the commit waits of acc that ended without a word from
	// acc's root, when the detector does not watch that root (it is not in
	// cur): see maxSilentWaits.
	silent int
	// adopted is the uncommitted proposal of a dead root that acc is based
	// on (Prepare.Committed false): if acc is abandoned, adopted is what may
	// have committed, and becomes acc again.
	adopted   *view
	acked     ackSet // the children of this node in acc that acknowledged acc
	ackSent   bool
	ackResent int      // how many times the proposal acc went again to the silent children (see onAckTimeout)
	lastPrep  *Prepare // the last accepted Prepare, for VIEW_NEED after commit
	// ackedEpochs holds the proposals above the installed view that this
	// node acknowledged; vetoed those known never to commit: their root
	// abandoned them, or this node promised never to acknowledge them (it
	// told a node holding one that it cannot have committed). A node holds
	// one or two proposals at a time: ackedEpochs and held are short
	// slices, which every view change at every node empties and refills
	// without allocating (maps were made and dropped each time).
	ackedEpochs []uint64
	vetoed      map[uint64]bool
	held        []*view // accepted proposals above the installed view
	forwarded   uint64  // the last epoch whose commit this node forwarded

	maxCounter uint32

	failed   map[core.NodeID]bool // members declared failed (detector or reports)
	failedAt map[core.NodeID]time.Duration
	// detected is what this node's detector declares failed now, with the
	// incarnation the verdict is about (the one this node's views held).
	detected map[core.NodeID]uint64
	// reportTo is the root the last report went to, reportTries how many
	// reports it has not acknowledged.
	reportTo    core.NodeID
	reportTries int
	soft        map[core.NodeID]bool // failures known only from reports or ACK timeouts
	// failedInc holds the incarnations a failure was recorded for: a
	// re-joining process's new incarnation can fail too, and a verdict about
	// a former incarnation does not concern the new one.
	failedInc map[core.NodeID][]uint64
	// stale holds the members of a proposal that took this node back
	// (merging) that it held failed then: it does not report them, and the
	// next view it installs drops its verdicts about those it holds and
	// lists them in core.MembersChanged's Renewed, for the detector to
	// watch them afresh (staleVerdicts).
	stale []core.NodeID

	// Root state.
	driving  bool // acc is this node's own proposal, being stabilized
	restart  bool // restart the proposal with a higher epoch
	began    time.Duration
	pjoins   []pendingJoin
	minority uint64 // the epoch whose minority was announced

	// Joining and merging.
	joining     bool
	nextContact int
	mergeRoot   core.NodeID
	mergeVia    core.NodeID // a live member of the view to merge into, core.None if unknown
	mergeTries  int
	mergeEpoch  uint64

	departed []core.NodeID // most recent last
	// dropped holds the nodes this node excluded as the root of a view
	// (most recent last, at most MaxProbes): it keeps probing them after
	// another node became root, since that root may never have known them.
	dropped []core.NodeID
	// left holds the members of a former view that a view skipping views
	// dropped (see install): told again at each probe, maxLeftProbes times.
	left       []leftNode
	goneInc    map[core.NodeID]uint64 // the incarnation of nodes that left this node's views
	probeNext  int                    // rotation through the node list for probes
	lastNotice map[core.NodeID]time.Duration

	// The timers, by kind. A kind is armed (wait's armed, due, epoch)
	// apart from the Env timer that wakes it (id, at): disarming
	// leaves the Env timer pending, and arming again for a deadline no
	// earlier than the pending one's leaves that one to fire, which
	// then sets the Env timer again for what is left (see arm, Fire).
	// Every view change arms and disarms the ACK and commit waits of
	// every member, which so cost no Env call and no allocation while
	// view changes come faster than the waits (seconds): the price is
	// one wake-up that finds nothing to do, after a wait has passed.
	// A wait's state is one struct, so that arming it touches one line
	// of memory, not six.
	waits [nTimers]wait
	// spareTimers are timer values that fired, for arm to reuse: a timer
	// boxed in a core.Timer would otherwise cost an allocation per arm
	// (the probe's every ProbeInterval). The Env keeps no reference to a
	// timer it fired; a cancelled one it may keep, so only fired ones
	// come back here, and a cancelled one keeps its stale gen for good.
	spareTimers []*timer

	// atView and atPos remember this node's position in the last view
	// asked about (see at).
	atView *view
	atPos  int
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
	m.alive = opts.Recovered
	m.floor = opts.EpochFloor
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
		accParent: core.None,
		mergeRoot: core.None,
		mergeVia:  core.None,
		reportTo:  core.None,
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
	m.observe(m.floor)
	m.joining = true
	m.sendJoin()
}

// Receive implements core.Machine.
func (m *Member) Receive(from core.NodeID, msg core.Msg) {
	if m.env == nil {
		return // not started: a caller that breaks the Machine contract
	}
	if m.acc != nil && from == EpochRoot(m.acc.epoch) {
		m.silent = 0
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
		m.onNack(from, x)
	case *NeedView:
		m.onNeedView(from, x)
	case *Query:
		m.onQuery(from, x)
	case *Sync:
		m.onSync(from, x)
	case *Notice:
		m.onNotice(from, x)
	case *MinorityNotice:
		m.onMinority(from, x)
	}
}

// Handle implements core.Machine: core.Failed starts the paper's failure
// handling; core.Recovered withdraws a failure not yet acted upon and tells
// an excluded node that it is excluded. Suspicions are not acted upon.
func (m *Member) Handle(e core.Event) {
	if m.env == nil {
		return
	}
	switch x := e.(type) {
	case core.Failed:
		m.onLocalFailure(x.Node)
	case core.Recovered:
		m.onRecovered(x.Node)
	}
}

// Fire implements core.Machine.
func (m *Member) Fire(t core.Timer) {
	tp, ok := t.(*timer)
	if !ok {
		return
	}
	tm := *tp
	m.spareTimers = append(m.spareTimers, tp)
	if tm.kind >= nTimers || tm.gen != m.waits[tm.kind].gen {
		return
	}
	k := tm.kind
	w := &m.waits[k]
	w.id = 0
	if !w.armed {
		return // disarmed since the Env timer was set
	}
	if m.now() < w.due {
		m.setTimer(k, w.due) // armed again, for later
		return
	}
	w.armed = false
	epoch := w.epoch
	switch k {
	case tAck:
		m.onAckTimeout(epoch)
	case tCommit:
		if m.acc != nil && m.acc.epoch == epoch && !m.driving {
			m.suspectSilentRoot()
			if m.acc == nil || m.acc.epoch != epoch || m.driving {
				return
			}
			m.queryOutcome()
			m.arm(tCommit, m.commitWait(m.acc), epoch)
		}
	case tReport:
		m.onReportTimeout()
	case tJoin:
		if m.cur != nil && m.mergeEpoch != 0 && m.mergeTries >= maxMergeTries {
			// The view to merge into does not answer (its members may all
			// have failed since): stay in this view; a newer notice or
			// probe starts another merge.
			m.mergeRoot, m.mergeVia, m.mergeEpoch, m.mergeTries = core.None, core.None, 0, 0
			return
		}
		if m.joining || m.mergeEpoch != 0 {
			m.sendJoin()
		}
	case tProbe:
		m.probe()
		if m.cur != nil && !m.driving && m.rootOf(m.newest()) == m.self {
			m.rootStep() // anything left undone (a step cut short earlier)
		}
		m.arm(tProbe, m.cfg.ProbeInterval, 0)
	case tMinority:
		m.retryMinority()
	}
}

// arm arms timer kind k to fire after the duration, for epoch, replacing
// its previous arming.
func (m *Member) arm(k timerKind, after time.Duration, epoch uint64) {
	now := m.now()
	at := now + max(after, 0)
	w := &m.waits[k]
	w.armed, w.due, w.epoch = true, at, epoch
	if w.id != 0 && w.at <= at {
		return // the pending Env timer comes first; Fire sets it again
	}
	m.setTimerAt(k, at, now)
}

// setTimer sets the Env timer of kind k for the deadline at, in place of
// the pending one.
func (m *Member) setTimer(k timerKind, at time.Duration) { m.setTimerAt(k, at, m.now()) }

// setTimerAt is setTimer when the time is now.
func (m *Member) setTimerAt(k timerKind, at, now time.Duration) {
	w := &m.waits[k]
	if w.id != 0 {
		m.env.CancelTimer(w.id)
	}
	w.gen++
	var tp *timer
	if n := len(m.spareTimers); n > 0 {
		tp = m.spareTimers[n-1]
		m.spareTimers = m.spareTimers[:n-1]
	} else {
		tp = new(timer)
	}
	*tp = timer{kind: k, gen: w.gen}
	w.id, w.at = m.env.SetTimer(at-now, tp), at
}

// cancel disarms timer kind k. Its Env timer, if pending, stays: it
// wakes the node for nothing, or for the next arming (see arm).
func (m *Member) cancel(k timerKind) { m.waits[k].armed = false }

// wait is the state of one of a member's waits (see Member.waits).
type wait struct {
	armed bool          // the wait runs
	gen   uint32        // the generation of the Env timer set last
	due   time.Duration // when the armed wait ends
	epoch uint64        // what it is about
	id    core.TimerID  // the Env timer pending, 0: none
	at    time.Duration // when that timer fires
}

func (m *Member) send(to core.NodeID, msg core.Msg) {
	if to == m.self || to == core.None {
		return
	}
	m.env.Send(to, msg)
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
	if m.acc != nil {
		return m.acc
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

// ackWait is how long a node waits for the ACKs of its subtree in v, once.
// It waits ackWaits times before it reports a silent child (once under
// PartitionMajority; see onAckTimeout), so a node l levels above the
// leaves gives up after 3l·AckTimeout, 3·AckTimeout after its children
// gave up on theirs.
func (m *Member) ackWait(v *view) time.Duration {
	return time.Duration(max(1, v.levelsBelowAt(m.at(v)))) * m.cfg.AckTimeout
}

// at returns this node's position in v (-1 if it is not a member). It
// remembers the answer for the last view asked about: a view change asks
// it of the proposed view several times, and in a view whose members
// joined over time a position is two binary searches.
func (m *Member) at(v *view) int {
	if v == nil {
		return -1
	}
	if v != m.atView {
		p := -1
		if v.src != nil && v.src == m.atView && m.atPos >= 0 {
			// A lazy view of the last one: this node's position there,
			// shifted, without a search.
			p = v.shifted(m.atPos, m.self)
		} else {
			p = v.pos(m.self)
		}
		m.atView, m.atPos = v, p
	}
	return m.atPos
}

// ackWaits is how many ACK waits pass before a node reports a silent
// child: 3, the first and, after the proposal goes again, two more (see
// onAckTimeout); 1 under PartitionMajority.
func (m *Member) ackWaits() int {
	if m.cfg.Partition == PartitionMajority {
		return 1
	}
	return 1 + ackRetryWaits
}

// ackRetryWaits is the length of the wait after the first, in ACK waits:
// the repeated ACK of a child whose first ACK was lost leaves only when
// the repeated proposal arrives, and then crosses the child's link, which
// may be the slow one, so it comes about one wait after the first wait's
// end (a leaf whose messages take 200 ms answers at 400 ms a proposal sent
// again at 200 ms). Two waits leave it that margin.
const ackRetryWaits = 2

// ackResends is how many times the proposal goes again to a silent child
// during the retry waits: at the first wait's end and then every half
// wait. One repeat was not enough: over a link losing 5% of its messages,
// the proposal and its one repeat were both lost about once in 400 view
// changes of such a link, and the live child was reported (a group
// simulation of 128 stacks, TestSlowLossyMemberNotExcluded, seed
// 1194237355). Each repeat goes only to children still silent, which are
// in most cases crashed ones that the failure detector declares first.
const ackResends = 2 * ackRetryWaits

// commitWait is how long a node that acknowledged v waits for its commit.
func (m *Member) commitWait(v *view) time.Duration {
	return m.cfg.CommitTimeout + time.Duration(m.ackWaits()*v.tree.Height())*m.cfg.AckTimeout
}

// ---------------------------------------------------------------------------
// Installing views.

// tellLeftBehind tells the members of the view this node leaves that v
// lacks that their view is over, now and at the next probes (leaveBehind),
// unless this node's own detector declares them failed: v's root may never
// have had them in a view, and so never probes them.
func (m *Member) tellLeftBehind(departed []core.NodeID, v *view) {
	for _, id := range departed {
		if id != m.self && !v.has(id) {
			m.notice(id, true)
			if _, dead := m.detected[id]; !dead {
				m.leaveBehind(id)
			}
		}
	}
}

// install makes v the installed view and tells the other layers.
func (m *Member) install(v *view) {
	if !v.has(m.self) {
		panic(fmt.Sprintf("member: %v installing view %s that does not contain it", m.self, FormatEpoch(v.epoch)))
	}
	if m.cur != nil && v.epoch <= m.cur.epoch {
		panic(fmt.Sprintf("member: %v installing view %s after %s", m.self, FormatEpoch(v.epoch), FormatEpoch(m.cur.epoch)))
	}
	prev := m.cur
	m.cur = v
	m.observe(v.epoch)
	if m.acc != nil && !m.keeps(m.acc, v) {
		if m.driving {
			m.env.Emit(StabilizationAborted{Epoch: m.acc.epoch, At: m.now(), Reason: fmt.Sprintf("%s installed", FormatEpoch(v.epoch))})
		}
		m.dropAcc()
	}
	if m.joining {
		m.joining = false
	}
	if via := m.mergeVia; m.mergeEpoch != 0 && v.epoch > m.mergeEpoch && via != core.None && !v.has(via) {
		// A merge given up for a view of this node's own, newer than the
		// one it was merging into: the member that told of that view may
		// stay in it for good, its root gone (a restarted root joined this
		// node's side instead, and the other members, joiners of the other
		// side, are on no list of this side's probes: the oracle swarm,
		// seed 967016, paper). Tell it, now and at the next probes.
		m.notice(via, true)
		m.leaveBehind(via)
	}
	m.mergeRoot, m.mergeVia, m.mergeEpoch, m.mergeTries = core.None, core.None, 0, 0
	m.cancel(tJoin)
	m.minority = 0
	joined, departed := diff(prev, v)
	// A pending join of a node that v admits under another incarnation is
	// stale: it was queued before v's root admitted that process. Handed
	// to the root (forwardJoins), it took the admitted process out again,
	// as a member re-joining under a new incarnation (the oracle swarm,
	// seed 5342883, majority: a former root passed on a request of a
	// member's crashed former self, the root excluded the live process and
	// then counted a minority where four of seven members lived). A process
	// that is in fact newer than the admitted one is still joining and asks
	// again.
	m.pjoins = slices.DeleteFunc(m.pjoins, func(j pendingJoin) bool {
		return v.has(j.ID) && v.inc(j.ID) != j.Inc && slices.Contains(joined, j.ID)
	})
	if prev != nil && v.base() != prev.epoch && (!v.descends(prev.epoch) || !prev.has(EpochRoot(v.epoch))) {
		// This node skipped views, to a view whose root may never have had
		// the members it leaves behind in a view (so it never probes them):
		// it moved to another lineage (a merge after a partition), or v
		// descends from prev through proposals it never installed (a dead
		// root's proposal adopted by a root from outside prev). The members
		// of prev that v lacks may not know that the view they share with
		// this node is over: tell them, whether this node believes them
		// failed or not (a reporter's guess, an acknowledgement that timed
		// out, a detector's verdict about a slow node may be wrong), and
		// tell them again at the next probes, in case the notice is lost,
		// unless this node's own detector declares them failed.
		m.tellLeftBehind(departed, v)
	}
	for _, id := range departed {
		if id != m.self && !v.has(id) && EpochRoot(v.epoch) == m.self {
			m.dropped = append(slices.DeleteFunc(m.dropped, func(d core.NodeID) bool { return d == id }), id)
		}
	}
	m.dropped = slices.DeleteFunc(m.dropped, v.has)
	if over := len(m.dropped) - m.cfg.MaxProbes; over > 0 {
		m.dropped = slices.Delete(m.dropped, 0, over)
	}
	for _, id := range departed {
		if id != m.self && !v.has(id) {
			m.departed = append(m.departed, id)
			put(&m.goneInc, id, prev.inc(id))
			// The detector stops watching a node that leaves the view: its
			// verdict goes stale (it is given afresh if the node returns).
			delete(m.detected, id)
		}
	}
	// The detector watches a node that enters the view afresh (it follows
	// core.MembersChanged; a restarted process that keeps its id is listed
	// in Renewed) and declares it failed again if it still is: its
	// verdicts about the node's previous stay in (or absence from) the view
	// are void.
	if prev == nil {
		// Every member joined: visit the verdicts, not the n members
		// (unmark only clears what m.failed holds).
		for id := range m.failed {
			if id != m.self && v.has(id) {
				m.unmark(id)
			}
		}
		for id := range m.detected {
			if id != m.self && v.has(id) {
				delete(m.detected, id)
			}
		}
	} else {
		for _, id := range joined {
			if id != m.self {
				m.unmark(id)
				delete(m.detected, id)
			}
		}
	}
	// Verdicts set aside when a proposal took this node back (staleVerdicts)
	// go too: the detector watches those members afresh, as it does the
	// renewed ones.
	renew := renewed(prev, joined, m.self)
	for _, id := range m.stale {
		if v.has(id) {
			m.unmark(id)
			delete(m.detected, id)
			if !slices.Contains(renew, id) {
				renew = append(renew, id)
			}
		}
	}
	m.stale = nil
	m.departed = slices.DeleteFunc(m.departed, v.has)
	if over := len(m.departed) - m.cfg.MaxProbes; over > 0 {
		m.departed = slices.Delete(m.departed, 0, over)
	}
	m.pruneFailed()
	if m.adopted != nil && !m.keeps(m.adopted, v) {
		m.adopted = nil
	}
	m.ackedEpochs = slices.DeleteFunc(m.ackedEpochs, func(e uint64) bool { return e <= v.epoch })
	m.held = slices.DeleteFunc(m.held, func(h *view) bool { return !m.keeps(h, v) })
	for e := range m.vetoed {
		if e <= v.epoch {
			delete(m.vetoed, e)
		}
	}
	// An emptied map is dropped (put makes it again): a machine at rest
	// holds no per-proposal state (the slices keep their few words).
	if len(m.vetoed) == 0 {
		m.vetoed = nil
	}
	m.env.Emit(core.MembersChanged{Epoch: v.epoch, Members: v.list(), Renewed: renew})
	m.env.Emit(ViewInstalled{Epoch: v.epoch, Members: v.list(), Joined: joined, Departed: departed})
}

// keeps reports whether the proposal p, held when v is installed, stays
// held: it may still be a view after v for this node. It does if it is
// newer and may descend from v. It does too if it admits this node as a
// joiner: the node accepted it while merging into another lineage, and
// its own lineage's older view, whose commit was late, does not undo the
// merge (p may commit: it has this node's ACK). Any other proposal that
// is newer but descends from another view is a sibling of v's lineage,
// which never commits (it needs this node's ACK, which the node never
// gave, or gave before a proposal that superseded it, see onPrepare).
// Kept, it would serve as the base of this node's next proposal if the
// node became root, and the views installed would fork (a gossip-detector
// swarm, seed 3338917836, under PartitionMajority: n3 installed 3.n1
// while holding n2's 3.n2, adopted from a refusal, then proposed on 3.n2
// and installed a view that did not descend from 3.n1).
func (m *Member) keeps(p, v *view) bool {
	if p.epoch <= v.epoch {
		return false
	}
	return mayDescend(p.epoch, p.ancestry, v.epoch) || slices.ContainsFunc(p.joined, func(j Joiner) bool { return j.ID == m.self && j.Inc == m.inc })
}

// dropAcc forgets the accepted proposal.
func (m *Member) dropAcc() {
	m.acc, m.accMsg, m.accFull, m.accParent = nil, nil, nil, core.None
	m.acked.off()
	m.ackSent = false
	m.driving = false
	m.cancel(tAck)
	m.cancel(tCommit)
}

// restoreAdopted makes the adopted proposal the accepted one again after
// the proposal based on it was abandoned: it may have committed.
//
// More generally, when the proposal this node held is abandoned, the
// newest proposal it accepted before (from another root) that is not known
// to be dead may have committed: it becomes the accepted one again (a chain
// of adoptions can be abandoned link by link).
func (m *Member) restoreAdopted() {
	m.adopted = nil
	if m.acc != nil {
		return
	}
	var best *view
	for _, v := range m.held {
		e := v.epoch
		if m.vetoed[e] || (m.cur != nil && e <= m.cur.epoch) || EpochRoot(e) == m.self || !v.has(m.self) || v.inc(m.self) != m.inc {
			continue
		}
		if best == nil || e > best.epoch {
			best = v
		}
	}
	if best == nil {
		return
	}
	m.acc, m.accParent = best, core.None
	m.arm(tCommit, m.commitWait(best), best.epoch)
	m.pruneFailed()
}

// hold remembers an accepted proposal until a view at least as new is
// installed (see restoreAdopted).
func (m *Member) hold(v *view) {
	for i, h := range m.held {
		if h.epoch == v.epoch {
			m.held[i] = v
			return
		}
	}
	if len(m.held) < 64 {
		m.held = append(m.held, v)
	}
}

// heldView returns the held proposal numbered e, or nil.
func (m *Member) heldView(e uint64) *view {
	for _, v := range m.held {
		if v.epoch == e {
			return v
		}
	}
	return nil
}

// pruneFailed forgets failures of nodes that are in no view this node holds,
// and counts as failed the members of these views that its detector
// declares failed (a detector reports a failure once, possibly before the
// node was a member of this node's view).
func (m *Member) pruneFailed() {
	for id := range m.failed {
		if !m.cur.has(id) && !m.acc.has(id) {
			m.unmark(id)
		}
	}
	for id, inc := range m.detected {
		m.markDetected(id, inc)
	}
}

// markDetected counts id failed by its detector's verdict, given about the
// incarnation inc (the installed view's, else the held proposal's), if a
// view this node holds has it. A process that the held proposal lists under
// a newer incarnation than the installed view (it restarted and joined
// again) is counted failed in that one too: the detector watches the newer
// process now, and the former one died before it started. Counted failed
// in the installed view's incarnation only, a proposal's dead root stayed
// alive for this node, which waited for it for good (the oracle swarm,
// seeds 3743248 and 3867740; in the second the restart was too quick for
// the detector to see the former process die).
func (m *Member) markDetected(id core.NodeID, inc uint64) {
	inCur := m.cur.has(id) && m.cur.inc(id) == inc
	if inCur || (m.acc.has(id) && m.acc.inc(id) == inc) {
		m.markFailed(id, inc, false)
	}
	if inCur && m.acc.has(id) && m.acc.inc(id) != inc {
		m.markFailed(id, m.acc.inc(id), false)
	}
}

// ---------------------------------------------------------------------------
// Failure detection and reports (§3.4–3.6, Figure 3(a)).

func (m *Member) onLocalFailure(x core.NodeID) {
	if x == m.self {
		return
	}
	inc := m.acc.inc(x)
	if m.cur.has(x) {
		inc = m.cur.inc(x)
	}
	put(&m.detected, x, inc)
	if m.cur == nil || (!m.cur.has(x) && !m.acc.has(x)) {
		return
	}
	known := m.failed[x]
	m.markDetected(x, inc) // now the detector's own verdict
	if !known {
		m.reportFailures()
	}
}

func (m *Member) onRecovered(x core.NodeID) {
	delete(m.detected, x)
	if m.failed[x] {
		m.unmark(x)
		if m.cur != nil && m.rootOf(m.newest()) == m.self {
			m.rootStep()
		}
	}
	if m.cur == nil {
		return
	}
	if !m.cur.has(x) && !m.acc.has(x) {
		m.notice(x, false)
	}
}

// renewed returns the joiners of a view that prev held too, under an earlier
// incarnation: processes that restarted and joined again under their id.
// The detector watches them afresh (core.MembersChanged.Renewed): its verdict
// may be about the former incarnation, or about the new one that died again
// before this view, and install voids it either way, so without a fresh
// watch a dead member could stay in the view until the next change.
func renewed(prev *view, joined []core.NodeID, self core.NodeID) []core.NodeID {
	if prev == nil {
		return nil
	}
	var out []core.NodeID
	for _, id := range joined {
		if id != self && prev.has(id) {
			out = append(out, id)
		}
	}
	return out
}

// markFailed records that id failed; soft marks a failure this node's
// detector did not declare (a report, an ACK timeout).
func (m *Member) markFailed(id core.NodeID, inc uint64, soft bool) {
	if !m.failed[id] {
		put(&m.failed, id, true)
		put(&m.failedAt, id, m.now())
	}
	if !slices.Contains(m.failedInc[id], inc) {
		put(&m.failedInc, id, append(m.failedInc[id], inc))
	}
	if _, det := m.detected[id]; soft && !det {
		put(&m.soft, id, true)
	} else {
		delete(m.soft, id)
	}
}

// unmark forgets that id failed.
func (m *Member) unmark(id core.NodeID) {
	delete(m.failed, id)
	delete(m.failedAt, id)
	delete(m.soft, id)
	delete(m.failedInc, id)
}

// failedIn returns the members of v known to have failed, in view order.
func (m *Member) failedIn(v *view) []core.NodeID {
	var out []core.NodeID
	for id := range m.failed {
		if m.isFailed(v, id) {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b core.NodeID) int { return v.pos(a) - v.pos(b) })
	return out
}

// isFailed reports whether member id of v is known to have failed in the
// incarnation v holds.
func (m *Member) isFailed(v *view, id core.NodeID) bool {
	if !m.failed[id] || !v.has(id) {
		return false
	}
	return slices.Contains(m.failedInc[id], v.inc(id))
}

// reportFailures sends the failed members of the newest view to its root:
// NODE_FAILURE, or ROOT_FAILURE when the root is among them (Figure 3(a),
// "on failure of a node"). A root handles its own knowledge directly.
func (m *Member) reportFailures() {
	n := m.newest()
	if n == nil {
		return
	}
	list := m.failedIn(n)
	if len(list) == 0 {
		m.cancel(tReport)
		return
	}
	r := m.rootOf(n)
	if r != m.self && len(m.stale) > 0 {
		// Set aside (staleVerdicts): acted on here, not reported.
		list = slices.DeleteFunc(list, func(id core.NodeID) bool { return slices.Contains(m.stale, id) })
		if len(list) == 0 {
			m.cancel(tReport)
			return
		}
	}
	if r == m.self {
		m.cancel(tReport)
		m.rootStep()
		return
	}
	failed := make([]Joiner, len(list))
	for i, id := range list {
		failed[i] = Joiner{id, n.inc(id)}
	}
	if r != m.reportTo {
		m.reportTo, m.reportTries = r, 0
	}
	m.reportTries++
	m.send(r, &Report{Root: m.failed[n.root()], Epoch: n.epoch, Failed: failed})
	m.arm(tReport, m.cfg.ReportRetry, 0)
}

// onReportTimeout reports again. A root that acknowledged none of
// maxReportTries reports is taken for failed (the paper's timeout detection,
// §2.2: "excessive delay in response ... leads to the assumption that the
// process has failed"): this node's detector may not watch it (it may have
// entered this node's views only through a proposal).
func (m *Member) onReportTimeout() {
	if m.reportTries >= maxReportTries && m.reportTo != core.None && m.reportTo != m.self {
		inc := m.acc.inc(m.reportTo)
		if !m.acc.has(m.reportTo) {
			inc = m.cur.inc(m.reportTo)
		}
		m.markFailed(m.reportTo, inc, true)
	}
	m.reportFailures()
}

func (m *Member) onReport(from core.NodeID, r *Report) {
	if m.cur == nil {
		return
	}
	n := m.newest()
	if !n.has(from) && !m.cur.has(from) {
		if r.Epoch > m.cur.epoch && r.Epoch != n.epoch && n.descends(r.Epoch) {
			// An outsider of both views holds one of the held proposal's
			// ancestors above the installed view: a member of that
			// ancestor, which the proposal then excluded. It may have
			// installed it: ask, as from a member below. Its report is
			// still ignored. A dead root's proposal on a view installed
			// behind a partition left its next root counting majorities
			// in the view before, in a minority there, while the only
			// live node that had seen the commit was one the proposal
			// excluded (the oracle swarm, seed 3498115).
			m.send(from, &Query{Epoch: r.Epoch})
		}
		m.notice(from, false) // footnote 1: messages of excluded nodes are ignored
		return
	}
	m.observe(r.Epoch)
	m.send(from, &ReportAck{Epoch: n.epoch, Failed: r.Failed})
	if m.cur.has(from) && (r.Epoch > n.epoch || r.Epoch > m.cur.epoch && r.Epoch != n.epoch && n.descends(r.Epoch)) {
		// The reporter holds a view newer than anything this node does:
		// ask what became of it. Installed, it comes back (VIEW_SYNC) and
		// this node installs it too; under PartitionMajority a node that
		// never learned of a view its peers installed measured majorities
		// against its own, older one, and stayed in a minority for good
		// while a majority of the newer view lived (the oracle swarm,
		// seed 326194). So does one whose held proposal builds on the
		// reporter's view, which this node never saw installed: a dead
		// root's proposal on a view installed behind a partition left this
		// node counting majorities in the view before, as the root of
		// a proposal whose own members were mostly dead, while a majority
		// of the installed view lived and reported to it (seed 3061610).
		m.send(from, &Query{Epoch: r.Epoch})
	}
	grew := false
	for _, f := range r.Failed {
		if f.ID == m.self || (m.failed[f.ID] && slices.Contains(m.failedInc[f.ID], f.Inc)) {
			continue // duplicates are acknowledged and disregarded (§3.4)
		}
		if !(n.has(f.ID) && n.inc(f.ID) == f.Inc) && !(m.cur.has(f.ID) && m.cur.inc(f.ID) == f.Inc) {
			continue // not a member, or a report about a former incarnation
		}
		m.markFailed(f.ID, f.Inc, true)
		grew = true
	}
	switch {
	case m.rootOf(n) == m.self && (grew || !m.driving):
		m.rootStep()
	case m.rootOf(n) != m.self && grew:
		m.reportFailures() // not the root (any more): pass it on
	}
}

// forgetRejoined forgets the failures of nodes that a view change admits
// (again): the failure concerned their former incarnation.
//
// Only a new incarnation wipes the detector's verdict: a node re-admitted
// under the same incarnation (an excluded node merging back) is still
// failed if the detector says so now. A failure recorded earlier and not
// vouched for by the detector any more (it stopped watching the node when
// the node left the view) is forgotten: kept, it would be reported again
// each time the node is admitted, and the node excluded again, for ever.
func (m *Member) forgetRejoined(joined []Joiner) {
	for _, j := range joined {
		old, known := m.cur.inc(j.ID), m.cur.has(j.ID)
		if !known {
			old, known = m.goneInc[j.ID]
		}
		if known && old == j.Inc {
			if inc, det := m.detected[j.ID]; det && inc == j.Inc {
				continue
			}
			if !m.cur.has(j.ID) {
				m.unmark(j.ID)
			}
			continue
		}
		m.unmark(j.ID) // the detector's verdict stays, about the former incarnation
	}
}

// ---------------------------------------------------------------------------
// The first phase: Prepare down the tree, Ack up.

type relation uint8

const (
	relNone       relation = iota
	relExtends             // the proposal descends from this node's newest view
	relSupersedes          // the proposal replaces the accepted one of the same root
	relJoins               // the proposal admits this node
)

func (m *Member) listedJoiner(p *Prepare) bool {
	for _, j := range p.Joined {
		if j.ID == m.self {
			return j.Inc == m.inc
		}
	}
	return false
}

func (m *Member) onPrepare(from core.NodeID, p *Prepare) {
	m.observe(p.Epoch)
	joiner := m.listedJoiner(p)
	if joiner && p.Committed && m.cur != nil && m.mergeEpoch == 0 && p.Ancestry[0] > m.cur.epoch {
		// p's root installed a view newer than this node's that does not
		// contain it (it is listed as a joiner): its lineage is over. (An
		// adopted base, never installed, proves nothing: then the node
		// refuses, and p's root learns of this node's view.)
		m.evicted(p.Ancestry[0], EpochRoot(p.Epoch), from)
	}
	n := m.newest()
	if n != nil && p.Epoch <= n.epoch {
		if EpochRoot(p.Epoch) == EpochRoot(n.epoch) {
			// A duplicate, or a proposal its root has replaced. A parent
			// sends the proposal again when this node's ACK did not reach
			// it in time (see onAckTimeout): the ACK is repeated.
			if m.acc != nil && p.Epoch == m.acc.epoch && from == m.accParent && m.ackSent {
				m.send(m.accParent, m.ackMsg())
			}
			return
		}
		m.nack(p.Epoch, n)
		return
	}
	if p.Epoch <= m.floor {
		return
	}
	if m.vetoed[p.Epoch] {
		if n != nil {
			m.nack(p.Epoch, n)
		}
		return
	}
	// takenBack: under PartitionMajority, p lists this node as a joiner and
	// descends from its installed view (a view between excluded it).
	takenBack := joiner && m.cfg.Partition == PartitionMajority && m.cur != nil && slices.Contains(p.Ancestry, m.cur.epoch)
	rel := relNone
	switch {
	case n != nil && slices.Contains(p.Ancestry, n.epoch):
		rel = relExtends
	case m.acc != nil && supersedes(p.Epoch, p.Ancestry, m.acc.epoch):
		rel = relSupersedes
	case joiner && (m.cur == nil || m.mergeEpoch != 0):
		// Admitted: a joiner, or a member of a view that a newer one has
		// excluded (it is merging). A member content with its view refuses
		// to be taken into another lineage.
		rel = relJoins
	case takenBack && m.holdsOnlyInstalled():
		// Taken back by a proposal of its own lineage: p's ancestry holds
		// this node's installed view, and a view between (a dead root's
		// proposal that excluded it, which may have committed) is p's
		// base. The node accepts if it holds no proposal that may have
		// committed: nothing, or its own proposal on its installed view.
		// Refused, the two roots refused each other for good: p's root
		// cannot build on this node's view while it holds the excluding
		// proposal (the oracle swarm, seeds 1207433 and 1325516,
		// majority). A node holding another root's proposal, or building
		// on a dead root's, still refuses: p does not descend from it
		// (seed 23793). Under PartitionPaper the sides of a partition
		// merge instead; there, two roots that each took over a dead
		// root's proposal and listed the other side as joiners took
		// members from each other for good (seed 166388).
		rel = relJoins
	case n == nil:
		// A joiner with nothing accepted: a proposal that lists it as a
		// member with its incarnation (the dead root's proposal that
		// admitted it was adopted) admits it too (checked below).
		rel = relJoins
	}
	if (rel == relJoins || rel == relSupersedes) && m.cur != nil && m.cfg.Partition == PartitionMajority && !mayDescend(p.Epoch, p.Ancestry, m.cur.epoch) {
		// Under PartitionMajority the installed views form one history: a
		// member refuses to be taken into a lineage that cannot descend
		// from its installed view, and tells the proposer about that view,
		// which then merges into it. A merging member is offered one by a
		// minority's proposal built on a dead root's proposal that never
		// committed; any member by the replacement of a proposal it held,
		// whose root gave that proposal up and fell back to an older view
		// of its own (accepted, it took members of the installed view into
		// a lineage that abandons it: the oracle swarm, seed 279940).
		m.nack(p.Epoch, m.cur)
		return
	}
	if rel == relSupersedes && m.cfg.Partition == PartitionMajority && m.cur != nil {
		if e := m.openAcked(p); e != 0 {
			// p replaces the proposal this node holds, which says that its
			// root gave that one up, but not e, a dead root's proposal
			// beneath it that this node acknowledged: e may have committed
			// (its root may have held every ACK). Accepted, p took this
			// node, a member of both majorities, out of the members that
			// keep them apart; e's other holders, short of a majority of
			// it, refused p's root for good (the oracle swarm, seed
			// 1816437, majority). The node drops what was given up, falls
			// back to what it holds beneath, refuses p and asks e's
			// members: one that never acknowledged e frees it. (Applied to
			// every proposal, or to acknowledged proposals that the held
			// one does not build on, this broke other seeds' liveness: a
			// node that merged into another lineage had already left those
			// behind. A live root of e says itself what became of it.)
			if !m.driving { // openAcked found e beneath the proposal held
				put(&m.vetoed, m.acc.epoch, true)
				m.dropAcc()
				m.restoreAdopted()
				defer m.afterChange()
			}
			m.nack(p.Epoch, m.newest())
			m.queryAbout(m.heldView(e)) // a member that never acknowledged it frees it
			return
		}
	}
	if rel == relNone {
		if n != nil {
			m.nack(p.Epoch, n)
		}
		if takenBack && m.acc != nil && !m.driving {
			// Refused only for the proposal this node holds, another
			// root's: ask what became of it now, not at its commit
			// timeout. Its root has often given it up (it accepted p,
			// which takes it back too); then this node accepts p's next
			// proposal, where waiting let the two roots go round for
			// seconds (the oracle swarm, seed 1002924).
			m.queryOutcome()
		}
		return
	}
	v := m.viewOf(p)
	if v == nil {
		m.send(from, &NeedView{Epoch: p.Epoch})
		return
	}
	if me := m.at(v); me < 0 || v.parentAt(me) != from || v.incAt(me) != m.inc {
		// Not this node's place, or the place of a former process of its
		// id: a joiner that held a proposal admitting it accepted the next
		// one, which listed its id with the incarnation of the process
		// before the restart. Counted as that member, it made a majority
		// of an installed view that the restart had halved, and the views
		// forked (the oracle swarm, seed 29180, majority).
		return
	}
	if m.cfg.Partition == PartitionMajority && m.cur != nil && m.mergeEpoch == 0 && m.holdsOnlyInstalled() &&
		!(p.Committed && p.Ancestry[0] == m.cur.epoch) && slices.Contains(p.Ancestry, m.cur.epoch) && 2*kept(m.cur, v) <= m.cur.size() {
		// p descends from this node's installed view through proposals
		// this node never acknowledged (it holds nothing newer), and keeps
		// no majority of it: its root counted majorities against older
		// views and adopted proposals only (a chain of them is guarded by
		// its last link). The installed view's majority may have moved
		// on without this node; accepted, p forked the views (the oracle
		// swarm, seed 1741812: n4, root of the installed 5.n4 = [n4 n5 n6],
		// accepted n1's 9.n1 = [n1 n2 n3 n4], built on two uncommitted
		// proposals of 5.n4's lineage, while n5 and n6 installed 9.n5).
		// Refused, p's root learns of the view (and merges into it if the
		// view excludes it). (A proposal on this very view whose root
		// installed it needs no count: that root kept a strict majority of
		// it, rootStep.)
		m.nack(p.Epoch, m.cur)
		return
	}
	prev := m.acc
	if m.driving {
		m.abort(fmt.Sprintf("superseded by %s", FormatEpoch(p.Epoch)))
		prev = m.acc // the adopted proposal the root's own was based on
	}
	// A proposal this node held or built on that p's lineage gave up
	// never committed: its root proposed anew without it (p replaces it,
	// or p's ancestry holds a later proposal of the same root). Said to
	// whoever holds it and asks (VIEW_QUERY); else this node, which
	// acknowledged it, kept its holder waiting for good (the oracle swarm,
	// seed 239171, once a member accepted a proposal that takes it back).
	for _, h := range [...]*view{prev, m.adopted} {
		if h != nil && !slices.Contains(p.Ancestry, h.epoch) && (rel == relSupersedes && h == prev || supersedes(p.Epoch, p.Ancestry, h.epoch) && !mayDescend(p.Epoch, p.Ancestry, h.epoch)) {
			put(&m.vetoed, h.epoch, true)
		}
	}
	adopted := m.adopted
	switch {
	case rel == relExtends && !p.Committed && prev != nil && prev.epoch == p.Ancestry[0]:
		adopted = prev
	case adopted != nil && adopted.epoch == p.Ancestry[0]:
	default:
		adopted = nil
	}
	m.dropAcc()
	if joiner && m.cur != nil {
		m.staleVerdicts(v)
	}
	if rel == relExtends && p.Committed && prev != nil && prev.epoch == p.Ancestry[0] && prev.has(m.self) && (m.cur == nil || prev.epoch > m.cur.epoch) {
		// p's root installed (committed) the proposal this node accepted:
		// its commit did not reach this node; install it now.
		m.install(prev)
	}
	// Set before accept, which may start a proposal on v (this node is
	// v's next root when v's root failed: reportFailures, rootStep) and
	// adopt v for it. Set after, it undid that adoption: the root then
	// held no adopted proposal under its own, yielded to a competing
	// proposal that abandons v, which it had acknowledged, and v's other
	// holders, waiting for v's lineage to go on, refused everything else
	// for good (the oracle swarm, seed 3124975, majority).
	m.adopted = adopted
	m.accept(v, p, from)
}

// openAcked returns a proposal that the one this node holds is built on
// (above the installed view), that this node acknowledged, whose root is
// known to have failed, that p cannot descend from and that nobody gave up
// (not vetoed; no proposal this node held, nor p, replaces it), or 0.
func (m *Member) openAcked(p *Prepare) uint64 {
	if m.acc == nil {
		return 0
	}
	for _, e := range m.ackedEpochs {
		if e <= m.cur.epoch || EpochRoot(e) == m.self || m.vetoed[e] || !slices.Contains(m.acc.ancestry, e) ||
			mayDescend(p.Epoch, p.Ancestry, e) || supersedes(p.Epoch, p.Ancestry, e) {
			continue
		}
		if h := m.heldView(e); h == nil || !m.rootGone(h) {
			continue // its live root will say what became of it
		}
		if slices.ContainsFunc(m.held, func(h *view) bool { return supersedes(h.epoch, h.ancestry, e) }) {
			continue
		}
		return e
	}
	return 0
}

// holdsOnlyInstalled reports whether this node holds nothing newer than
// its installed view that may have committed: no proposal, or its own
// (driving) proposal on that view.
func (m *Member) holdsOnlyInstalled() bool { return m.acc == nil || m.driving && m.adopted == nil }

// staleVerdicts sets aside this node's failure verdicts about the members
// of v, a proposal that takes it back (it was excluded, and merges). They
// were given while it watched its own view, cut off from v's side, which,
// having excluded it, neither gossips nor beats to it any more: after a
// partition its detector may hold v's live members failed for good.
// Reported to v's root, they aborted every proposal to merge the two sides
// (a swarm over the gossip detector, and one over the heartbeat detector,
// stayed stuck so), and the root, believing its own members failed, could
// even find itself in a minority. So this node does not report them; it
// still acts on them itself (a dead root of v is one to take over from).
// The next view it installs drops them, and its detector watches those
// members afresh (Renewed), declaring again one that is dead.
func (m *Member) staleVerdicts(v *view) {
	set := func(id core.NodeID) {
		if id != m.self && v.has(id) && !slices.Contains(m.stale, id) {
			m.stale = append(m.stale, id)
		}
	}
	for id := range m.failed {
		set(id)
	}
	for id := range m.detected {
		set(id)
	}
}

// branchLeft reports whether the installed view x has left the branch of
// proposal p: x is newer than p and descends from p's base but not from
// p. Under PartitionMajority the installed views form one history, so p
// never committed (x and p would have forked at p's base), and a node
// that holds p, which may have committed as far as it knows, may drop
// it once it learns of x. Not under PartitionPaper, whose partitions
// install views side by side.
func branchLeft(x *view, p *view) bool {
	return x.epoch > p.epoch && p.base() != 0 && x.descends(p.base()) && !x.descends(p.epoch)
}

// mayDescend reports whether a view numbered epoch with the given ancestry
// may descend from the view numbered e: e is the view or one of its
// ancestors, or the ancestry is full (maxAncestry) and reaches back no
// further than after e, so that e may be an older ancestor.
func mayDescend(epoch uint64, ancestry []uint64, e uint64) bool {
	if epoch == e || slices.Contains(ancestry, e) {
		return true
	}
	return len(ancestry) == maxAncestry && ancestry[len(ancestry)-1] > e
}

// supersedes reports whether a proposal numbered epoch, with the given
// ancestry, replaces the uncommitted proposal numbered old: a later proposal
// of old's root is the proposal itself or one of its ancestors. A root
// proposes anew only after abandoning (or committing, and then old is an
// ancestor) its previous proposal, and nobody else commits it, so old never
// committed.
func supersedes(epoch uint64, ancestry []uint64, old uint64) bool {
	r := EpochRoot(old)
	if EpochRoot(epoch) == r && epoch > old {
		return true
	}
	for _, e := range ancestry {
		if EpochRoot(e) == r && e > old {
			return true
		}
	}
	return false
}

// viewOf returns the view p proposes, or nil if this node cannot compute it
// (it lacks the base) or p is inconsistent.
func (m *Member) viewOf(p *Prepare) *view {
	base := p.Ancestry[0]
	var bv *view
	switch {
	case m.cur != nil && m.cur.epoch == base:
		bv = m.cur
	case m.acc != nil && m.acc.epoch == base:
		bv = m.acc
	}
	if p.v != nil && (p.Full || bv != nil) {
		return p.v // what this node would compute, already built by the sender
	}
	if p.Full {
		v, err := newView(p.Epoch, p.Members, p.Ancestry, p.Incs, m.cfg.Fanout)
		if err != nil {
			return nil
		}
		v.delta, v.committed, v.failed, v.joined = true, p.Committed, p.Failed, p.Joined
		return v
	}
	if bv == nil {
		return nil
	}
	v, err := bv.apply(p.Epoch, p.Ancestry, p.Failed, p.Joined, m.cfg.Fanout)
	if err != nil {
		return nil
	}
	v.committed = p.Committed
	return v
}

// accept takes v (proposed by p, received from parent) as the accepted
// proposal and passes p down to this node's children.
func (m *Member) accept(v *view, p *Prepare, parent core.NodeID) {
	delta := p
	switch {
	case p.v == nil && !p.Full:
		// Decoded here: this node's own, so it carries the view down.
		p.v = v
	case p.Full || p.v != v:
		delta = &Prepare{Cause: p.Cause, Epoch: p.Epoch, Ancestry: p.Ancestry, Failed: p.Failed, Joined: p.Joined, Committed: p.Committed, v: v}
	}
	m.forgetRejoined(p.Joined)
	// Reports and ACK timeouts this node passed on concern the proposals
	// before this one; the root has them. Only the detector's own verdicts
	// stand (a lost report is found again: a dead child does not ACK).
	for id := range m.soft {
		m.unmark(id)
	}
	m.acc, m.accMsg, m.accFull, m.accParent = v, delta, nil, parent
	m.silent = 0
	m.hold(v)
	m.lastPrep = delta
	m.acked.reset(v, m.at(v))
	m.ackSent, m.ackResent = false, 0
	m.cancel(tAck)
	m.sendDown(v, delta)
	if len(m.acked.kids) == 0 {
		m.sendAck()
	} else {
		m.arm(tAck, m.ackWait(v), v.epoch)
	}
	m.arm(tCommit, m.commitWait(v), v.epoch)
	m.pruneFailed()
	if len(m.failedIn(v)) > 0 {
		m.reportFailures()
	}
}

// fullOf returns the full form of a delta Prepare.
func fullOf(p *Prepare) *Prepare {
	return &Prepare{Cause: p.Cause, Epoch: p.Epoch, Ancestry: p.Ancestry, Failed: p.Failed, Joined: p.Joined,
		Committed: p.Committed, Full: true, Members: p.v.list(), Incs: p.v.incList(), v: p.v}
}

// sendDown sends p to this node's children in v, the ones whose ACKs it
// waits for (acked, reset for v before); joiners get the full list.
func (m *Member) sendDown(v *view, p *Prepare) {
	for _, c := range m.acked.kids {
		m.send(c, m.downTo(v, p, c))
	}
}

// downTo is the form of p that child c gets: the full list for a joiner.
func (m *Member) downTo(v *view, p *Prepare, c core.NodeID) *Prepare {
	if !isJoiner(p, c) {
		return p
	}
	if m.accFull == nil || m.accFull.Epoch != p.Epoch {
		m.accFull = fullOf(p)
	}
	return m.accFull
}

func isJoiner(p *Prepare, id core.NodeID) bool {
	for _, j := range p.Joined {
		if j.ID == id {
			return true
		}
	}
	return false
}

func (m *Member) sendAck() {
	if m.ackSent || m.acc == nil {
		return
	}
	m.ackSent = true
	m.cancel(tAck)
	if len(m.ackedEpochs) < 256 && !slices.Contains(m.ackedEpochs, m.acc.epoch) {
		m.ackedEpochs = append(m.ackedEpochs, m.acc.epoch)
	}
	m.send(m.accParent, m.ackMsg())
}

// recycle hands a handled message back to the Env (see recycler).
func (m *Member) recycle(msg core.Msg) {
	if m.recycler != nil {
		m.recycler.Recycle(msg)
	}
}

// ackMsg is this node's ACK of acc: ackOut when the Env copies what is
// sent (see copies), a new message otherwise.
func (m *Member) ackMsg() *Ack {
	a := &m.ackOut
	if !m.copies {
		a = new(Ack)
	}
	*a = Ack{Cause: m.accMsg.Cause, Epoch: m.acc.epoch}
	return a
}

func (m *Member) onAck(from core.NodeID, a *Ack) {
	if m.acc == nil || a.Epoch != m.acc.epoch || !m.acked.on {
		return
	}
	i := slices.Index(m.acked.kids, from)
	if i < 0 {
		return // not a child of this node in acc
	}
	if m.acked.add(i) < len(m.acked.kids) {
		return
	}
	if m.driving {
		m.stable()
	} else {
		m.sendAck()
	}
}

// onAckTimeout reports the children that did not acknowledge as failed
// (§3.5: "the node that fails to get an acknowledgment from the dead node
// informs the root through a NODE_FAILURE"), at the end of the retry
// waits: at the first timeout, the proposal goes again to the silent
// children and the retry waits (ackRetryWaits, twice the first) start,
// during which it goes again every half wait (ackResends). Lost messages
// (the proposal, or an ACK, which a child repeats when the proposal comes
// again), or a child whose messages are slow, therefore no longer exclude
// a live child and its subtree; a crashed child is excluded two waits
// later, unless its failure detector's verdict comes first (as it usually
// does), which is handled at once.
//
// Under PartitionMajority a node reports at the first timeout, as the
// paper does: with the retry's longer waits, one swarm seed in 100,000
// (TestSwarmMajority, seed 77236) reached a state that policy does not
// leave: a member holding a newer view whose next root never learned of
// it, the older view's root blocked in a minority. That case is open.
func (m *Member) onAckTimeout(epoch uint64) {
	if m.acc == nil || m.acc.epoch != epoch || m.ackSent {
		return
	}
	if m.ackResent < ackResends && m.ackWaits() > 1 {
		m.ackResent++
		again := false
		for _, c := range m.acc.children(m.self) {
			if !m.acked.has(c) && !m.isFailed(m.acc, c) {
				m.send(c, m.downTo(m.acc, m.accMsg, c))
				again = true
			}
		}
		if again {
			m.arm(tAck, ackRetryWaits*m.ackWait(m.acc)/ackResends, epoch)
			return
		}
	}
	for _, c := range m.acc.children(m.self) {
		if !m.acked.has(c) && !m.isFailed(m.acc, c) {
			m.markFailed(c, m.acc.inc(c), true)
		}
	}
	if m.driving {
		m.rootStep()
	} else {
		m.reportFailures()
	}
}

// ackSet records which of a node's children in the proposal it holds
// acknowledged it: the children (a run of the proposal's list, or of its
// base's: see view.childrenAt) and a flag per child, in memory reused from
// one proposal to the next, where a map would be made anew. An ACK finds
// its child among a few consecutive ids, not in the whole view.
type ackSet struct {
	on    bool          // a proposal is being acknowledged
	kids  []core.NodeID // the children, in view order
	n     int           // flags set
	flags []bool
}

// reset starts the acknowledgement of v by the children of the member at
// position self of v.
func (s *ackSet) reset(v *view, self int) {
	s.on, s.kids, s.n = true, v.childrenAt(self), 0
	s.flags = slices.Grow(s.flags[:0], len(s.kids))[:len(s.kids)]
	clear(s.flags)
}

// off ends it: no ACK counts until the next reset.
func (s *ackSet) off() { s.on, s.kids = false, nil }

// add records the ACK of child i (its offset among the children) and
// returns how many children have acknowledged; a repeated ACK counts once.
func (s *ackSet) add(i int) int {
	if !s.flags[i] {
		s.flags[i] = true
		s.n++
	}
	return s.n
}

// has reports whether child c acknowledged.
func (s *ackSet) has(c core.NodeID) bool {
	i := slices.Index(s.kids, c)
	return s.on && i >= 0 && s.flags[i]
}

func (m *Member) onNeedView(from core.NodeID, q *NeedView) {
	var p *Prepare
	switch {
	case m.accMsg != nil && m.accMsg.Epoch == q.Epoch:
		p = m.accMsg
	case m.lastPrep != nil && m.lastPrep.Epoch == q.Epoch && m.cur != nil && m.cur.epoch == q.Epoch:
		// Committed: the child missed the base while the commit passed.
		// A proposal this node no longer holds and never installed was
		// given up (a root's abort): handed out, it was accepted by a
		// child its root would never commit nor abort to, which then
		// adopted it and refused the live root's proposals for good
		// (the oracle swarm, seed 1101496, majority).
		p = m.lastPrep
	default:
		return
	}
	if p.v.parent(from) != m.self {
		return
	}
	m.send(from, fullOf(p))
}

// nack refuses proposal epoch, telling its root about n.
func (m *Member) nack(epoch uint64, n *view) {
	m.send(EpochRoot(epoch), &Nack{Epoch: epoch, Pending: n == m.acc, View: n.full(), v: n})
}

// ---------------------------------------------------------------------------
// The second phase: commit.

func (m *Member) onCommit(from core.NodeID, e uint64) {
	m.observe(e)
	switch {
	case m.acc != nil && m.acc.epoch == e && !m.driving && m.acc.has(from):
		prev, adopted := m.cur, m.accMsg != nil && !m.accMsg.Committed
		m.install(m.acc)
		if adopted && prev != nil && m.cur.base() == prev.epoch {
			// The root built on this node's installed view without having
			// installed it (it adopted it as a dead root's proposal): the
			// members it dropped were never in a view of the root's, which
			// does not probe them. Under PartitionMajority one of them,
			// told only of the root's older view, stayed in this node's
			// view for good (the oracle swarm, seed 18519).
			_, departed := diff(prev, m.cur)
			m.tellLeftBehind(departed, m.cur)
		}
		m.forwardCommit()
		m.afterChange()
	case m.cur != nil && m.cur.epoch == e && m.forwarded != e:
		m.forwardCommit()
	case slices.Contains(m.ackedEpochs, e) && m.heldView(e) != nil && (m.cur == nil || e > m.cur.epoch) && m.heldView(e).has(from):
		// A proposal this node acknowledged, and has let go of since (it
		// took over as root on a stale verdict, or installed an older view
		// a member refused it with), committed: its other members hold it
		// with this node in it, so this node installs it too. Without
		// this, it stayed in the older view while the others counted it
		// in theirs, for ever.
		v := m.heldView(e)
		if !v.has(m.self) || v.inc(m.self) != m.inc {
			return
		}
		if m.driving {
			m.abort(fmt.Sprintf("%s committed", FormatEpoch(e)))
		}
		m.install(v)
		m.forwardCommit()
		m.afterChange()
	}
}

func (m *Member) forwardCommit() {
	m.forwarded = m.cur.epoch
	c := &m.commitOut
	if !m.copies {
		c = new(Commit)
	}
	c.Epoch = m.cur.epoch
	for _, ch := range m.cur.children(m.self) {
		m.send(ch, c)
	}
}

// suspectSilentRoot counts a commit wait of acc that ended without a word
// from acc's root r, when r is not in the installed view (so no detector
// watches it); after maxSilentWaits of them, r is marked failed softly, and
// the node proceeds as on a report of r's failure: the next live member of
// acc takes over as root, adopting acc (it may have committed). A root
// wrongly taken for failed answers the VIEW_QUERY sent all along; the soft
// mark is forgiven with the next proposal accepted.
func (m *Member) suspectSilentRoot() {
	r := EpochRoot(m.acc.epoch)
	if m.cur == nil || m.cur.has(r) || !m.acc.has(r) || m.isFailed(m.acc, r) {
		m.silent = 0
		return
	}
	m.silent++
	if m.silent < maxSilentWaits {
		return
	}
	m.silent = 0
	m.markFailed(r, m.acc.inc(r), true)
	m.afterChange()
}

// queryOutcome asks what became of the accepted proposal whose commit is
// overdue: its root, or, when the root is known to have failed, its other
// members, any of which can tell that it never acknowledged it (then it
// cannot have committed).
func (m *Member) queryOutcome() { m.queryAbout(m.acc) }

// queryAbout asks what became of proposal v (see queryOutcome).
func (m *Member) queryAbout(v *view) {
	q := &Query{Epoch: v.epoch}
	r := EpochRoot(v.epoch)
	m.send(r, q) // a detector may be wrong: the root's word is final
	if !m.rootGone(v) {
		return
	}
	for _, id := range v.list() {
		if !m.failed[id] && id != r {
			m.send(id, q)
		}
	}
}

// rootGone reports whether the root of proposal v is known to have failed
// in the incarnation v holds: it is marked failed, or a newer incarnation of
// it asked to join (its restarted process cannot answer for the proposal).
func (m *Member) rootGone(v *view) bool {
	r := EpochRoot(v.epoch)
	if m.failed[r] {
		return true
	}
	for _, j := range m.pjoins {
		if j.ID == r && j.Inc != v.inc(r) {
			return true
		}
	}
	return false
}

func (m *Member) onQuery(from core.NodeID, q *Query) {
	if m.cur == nil {
		// A joiner that never acknowledged q.Epoch promises it never will,
		// as a member does below, but has no view to send. A restarted
		// process admitted into a proposal whose root then died was asked
		// in vain, and under PartitionMajority the holder stayed blocked in
		// the dead root's proposal for good (the oracle swarm, seed 131142).
		// Not about a proposal of its own id: that was a former process's,
		// whose word it cannot give (and the extra answers sent seed
		// 146050 down a path that stayed stuck).
		if EpochRoot(q.Epoch) != m.self && (m.acc == nil || m.acc.epoch != q.Epoch) && !slices.Contains(m.ackedEpochs, q.Epoch) {
			put(&m.vetoed, q.Epoch, true)
			m.send(from, &Sync{Abort: q.Epoch, View: FullView{Incs: []Joiner{{m.self, m.inc}}}})
		}
		return
	}
	switch {
	case m.driving && m.acc.epoch == q.Epoch:
		// still collecting acknowledgements
	case m.cur.epoch >= q.Epoch:
		if m.cur.has(from) {
			m.send(from, &Sync{View: m.cur.full(), v: m.cur})
		} else {
			m.notice(from, false)
		}
	case EpochRoot(q.Epoch) == m.self:
		// q.Epoch was this node's proposal and was abandoned: the querier
		// must forget it, and learns this node's view, or the dead root's
		// proposal this node adopted (which may have committed).
		if a := m.adoptedBase(); a != nil {
			m.send(from, &Sync{View: a.full(), Abort: q.Epoch, Pending: true, v: a})
		} else {
			m.send(from, &Sync{View: m.cur.full(), Abort: q.Epoch, v: m.cur})
		}
	case m.vetoed[q.Epoch] || (m.acc != nil && EpochRoot(m.acc.epoch) == EpochRoot(q.Epoch) && m.acc.epoch > q.Epoch && !m.acc.descends(q.Epoch)):
		// known never to commit: vetoed, or abandoned by its root for a
		// later proposal
		m.send(from, &Sync{View: m.cur.full(), Abort: q.Epoch, v: m.cur})
	case (m.acc != nil && m.acc.epoch == q.Epoch) || slices.Contains(m.ackedEpochs, q.Epoch):
		// This node acknowledged it: it may commit. Its installed view,
		// though, may be newer than the querier's, who then installs it
		// (and, under PartitionMajority, measures majorities against it).
		if m.cur.has(from) {
			m.send(from, &Sync{View: m.cur.full(), v: m.cur})
		}
	default:
		// This node never acknowledged q.Epoch and promises it never will:
		// if it is a member of it, q.Epoch cannot commit.
		put(&m.vetoed, q.Epoch, true)
		m.send(from, &Sync{View: m.cur.full(), Abort: q.Epoch, v: m.cur})
	}
}

func (m *Member) onSync(from core.NodeID, s *Sync) {
	aborted := false
	// vouches says whether the sender's abort of v holds: it is v's root,
	// or a member (a joiner's answer names its incarnation, which must be
	// v's: its promise is about itself, not a former process of its id),
	// or, under PartitionMajority, its installed view has left v's branch
	// (branchLeft).
	viewless := s.v == nil && s.View.Epoch == 0
	vouches := func(v *view) bool {
		if viewless {
			return len(s.View.Incs) == 1 && s.View.Incs[0].ID == from && v.has(from) && v.inc(from) == s.View.Incs[0].Inc
		}
		if EpochRoot(s.Abort) == from || v.has(from) {
			return true
		}
		// Or the sender's installed view proves that v never committed.
		if s.Pending || m.cfg.Partition != PartitionMajority || s.View.Epoch <= v.epoch {
			return false
		}
		x := s.v
		if x == nil {
			x = &view{epoch: s.View.Epoch, ancestry: s.View.Ancestry}
		}
		return branchLeft(x, v)
	}
	if s.Abort != 0 && m.adopted != nil && m.adopted.epoch == s.Abort && vouches(m.adopted) {
		// The dead root's proposal this node's proposal (or accepted one)
		// is based on never committed: forget it.
		put(&m.vetoed, s.Abort, true)
		m.adopted = nil
		if m.driving && m.acc.base() == s.Abort {
			m.abort(fmt.Sprintf("its base %s never committed", FormatEpoch(s.Abort)))
		}
		aborted = true
	}
	if s.Abort != 0 && m.acc != nil && m.acc.epoch == s.Abort && !m.driving && vouches(m.acc) {
		put(&m.vetoed, s.Abort, true) // dead: tell whoever else asks
		m.dropAcc()
		m.restoreAdopted()
		aborted = true
	}
	if aborted {
		defer m.afterChange()
	}
	v := s.v
	if viewless {
		return // an abort alone, from a joiner
	}
	if v == nil {
		var err error
		if v, err = newView(s.View.Epoch, s.View.Members, s.View.Ancestry, s.View.Incs, m.cfg.Fanout); err != nil {
			return
		}
	}
	m.observe(v.epoch)
	if (m.cur != nil && v.epoch <= m.cur.epoch) || v.epoch <= m.floor {
		return
	}
	if s.Pending {
		// A proposal that may have committed: hold it (like a VIEW_NACK's)
		// if it follows what this node holds and contains it.
		known := m.cur
		if m.acc != nil {
			known = m.acc
		}
		if !m.driving && m.cur != nil && EpochRoot(v.epoch) != m.self && v.has(m.self) && v.inc(m.self) == m.inc && v.epoch > known.epoch && v.descends(known.epoch) {
			m.dropAcc()
			m.acc, m.accParent = v, core.None
			m.hold(v)
			m.arm(tCommit, m.commitWait(v), v.epoch)
			m.pruneFailed()
			if !aborted {
				m.afterChange()
			}
		}
		return
	}
	if !v.has(m.self) {
		if m.cur != nil {
			m.evicted(v.epoch, m.rootOf(v), from)
		}
		return
	}
	if v.inc(m.self) != m.inc {
		return // a view of another incarnation of this node
	}
	if m.driving {
		m.abort(fmt.Sprintf("superseded by installed view %s", FormatEpoch(v.epoch)))
	}
	m.install(v)
	m.afterChange()
}

// adoptedBase returns the dead root's proposal this node builds on (its
// driving proposal's base, or the one it holds again after an abort), or
// nil.
func (m *Member) adoptedBase() *view {
	switch {
	case m.driving && m.adopted != nil:
		return m.adopted
	case !m.driving && m.acc != nil && EpochRoot(m.acc.epoch) != m.self:
		return m.acc
	}
	return nil
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
