package stable

import (
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// Detector is one node's stability detector: a [core.Machine] that runs the
// configured protocol over the current view. Build it with [New]; see the
// package documentation for the events it takes and emits.
type Detector struct {
	cfg     Config
	err     error
	env     core.Env
	started bool

	// The view.
	epoch   uint64
	members []core.NodeID
	pos     map[core.NodeID]int
	me      int    // own position, -1 when not a member
	senders int    // vector length L
	failed  []bool // per position: reported core.Failed in this view
	nLive   int    // members not reported failed
	gen     uint64 // bumped at every install, so older timers are void

	preFailed []core.NodeID // core.Failed handled before Start
	started0  bool          // view 0 installed

	have       []uint64  // R_i: the latest Progress of this view, length L
	nextHave   *Progress // a Progress of a later epoch, kept for its install
	held       []heldMsg // messages of later epochs, replayed at install
	stable     []uint64  // S_i: the largest result emitted in this view (nil before)
	lastRound  uint64    // round of the last Stable emitted in this view
	roundStart time.Duration

	coord *coordState
	full  *fullState
	tree  *treeState
	cube  *cubeState
}

// heldMsg is a message of a later view than ours, kept until that view is
// installed.
type heldMsg struct {
	from core.NodeID
	m    core.Msg
}

// tick is the detector's timer value.
type tick struct {
	gen   uint64
	round uint64
	what  tickKind
}

type tickKind uint8

const (
	tickRound  tickKind = iota // start the next round (initiators)
	tickResend                 // §3.5 retransmission
)

// New returns a detector for the node that will run it, with the initial
// view numbered 0 made of members (in view order), so that a detector runs
// without a membership layer; later views come from [core.MembersChanged].
// New copies members. An invalid cfg or member list does not panic: the
// detector stays idle and [Detector.Err] says why (check cfg.Validate
// first).
func New(cfg Config, members []core.NodeID) *Detector {
	d := &Detector{cfg: cfg, me: -1}
	if err := cfg.Validate(); err != nil {
		d.err = err
		return d
	}
	if err := checkMembers(members); err != nil {
		d.err = err
		return d
	}
	d.members = slices.Clone(members)
	return d
}

func checkMembers(members []core.NodeID) error {
	if len(members) == 0 {
		return fmt.Errorf("%w: no members", ErrMembers)
	}
	if len(members) > topo.MaxNodes {
		return fmt.Errorf("%w: %d members", ErrMembers, len(members))
	}
	seen := make(map[core.NodeID]bool, len(members))
	for _, id := range members {
		if id == core.None {
			return fmt.Errorf("%w: member %v", ErrMembers, id)
		}
		if seen[id] {
			return fmt.Errorf("%w: %v listed twice", ErrMembers, id)
		}
		seen[id] = true
	}
	return nil
}

// Err reports why the detector is idle (an invalid Config or member list
// given to New), or nil.
func (d *Detector) Err() error { return d.err }

// Config returns the detector's configuration.
func (d *Detector) Config() Config { return d.cfg }

// Protos implements [core.ProtoOwner]: the detector receives
// [core.ProtoStable] messages.
func (d *Detector) Protos() []core.Proto { return []core.Proto{core.ProtoStable} }

// Epoch is the epoch of the view the detector runs over.
func (d *Detector) Epoch() uint64 { return d.epoch }

// Members returns the current view's members in view order (a copy).
func (d *Detector) Members() []core.NodeID { return slices.Clone(d.members) }

// Round is the number of the round this node is in (or last took part in)
// in the current view; 0 before the first round.
func (d *Detector) Round() uint64 {
	switch {
	case d.coord != nil:
		return d.coord.round
	case d.full != nil:
		return d.full.cur.round
	case d.tree != nil:
		return d.tree.round
	case d.cube != nil:
		return d.cube.round
	}
	return 0
}

// Stable returns the largest stability vector emitted in the current view
// (a copy), or nil if none was emitted yet.
func (d *Detector) Stable() []uint64 { return slices.Clone(d.stable) }

// DegreeFor is the S_Coord tree degree used for a view of n members:
// Config.Degree, or ⌈log2 n⌉ (at least 1) when it is 0.
func (c Config) DegreeFor(n int) int {
	if c.Degree > 0 {
		return c.Degree
	}
	return max(1, topo.CeilLog2(n))
}

// SendersFor is the vector length for a view of n members.
func (c Config) SendersFor(n int) int {
	if c.Senders == 0 || c.Senders > n {
		return n
	}
	return c.Senders
}

// Start implements [core.Machine]: it installs the initial view and, at the
// initiator (position 0, or every member under CubeFullDist), starts the
// first round.
func (d *Detector) Start(env core.Env) {
	if d.started || d.err != nil {
		return
	}
	d.env = env
	d.started = true
	d.install(0, d.members)
}

// Handle implements [core.Machine]: it takes [Progress],
// [core.MembersChanged] (a newer epoch, or the same epoch with another
// member list) and, with Config.ExcludeFailed, [core.Failed] (a member of
// the current view reported failed: no protocol waits for it any longer;
// see the package documentation). Other events are ignored. Handle may be called before
// Start (an experiment that sets a node's vector or its failed peers before
// the first round): a Progress of view 0 and core.Failed about members of
// view 0 are then kept for the initial view; other events are ignored.
func (d *Detector) Handle(e core.Event) {
	if !d.started {
		d.preStart(e)
		return
	}
	switch e := e.(type) {
	case Progress:
		d.progress(e)
	case core.MembersChanged:
		if e.Epoch < d.epoch || (e.Epoch == d.epoch && slices.Equal(e.Members, d.members)) {
			return
		}
		if checkMembers(e.Members) != nil {
			return // the member layer guarantees a valid list; a broken one is ignored
		}
		d.install(e.Epoch, e.Members)
	case core.Failed:
		if !d.cfg.ExcludeFailed {
			return
		}
		p, ok := d.pos[e.Node]
		if !ok || p == d.me || d.failed[p] {
			return
		}
		d.failed[p] = true
		d.nLive--
		d.onFailed(p)
	}
}

// preStart keeps what Handle receives before Start.
func (d *Detector) preStart(e core.Event) {
	if d.err != nil {
		return
	}
	switch e := e.(type) {
	case Progress:
		if e.Epoch == 0 {
			d.nextHave = &Progress{Epoch: 0, Have: slices.Clone(e.Have)}
		}
	case core.Failed:
		if d.cfg.ExcludeFailed && slices.Contains(d.members, e.Node) && !slices.Contains(d.preFailed, e.Node) {
			d.preFailed = append(d.preFailed, e.Node)
		}
	}
}

func (d *Detector) progress(e Progress) {
	switch {
	case e.Epoch == d.epoch:
		for i := range min(len(e.Have), len(d.have)) {
			d.have[i] = max(d.have[i], e.Have[i])
		}
	case e.Epoch > d.epoch:
		if d.nextHave == nil || e.Epoch >= d.nextHave.Epoch {
			d.nextHave = &Progress{Epoch: e.Epoch, Have: slices.Clone(e.Have)}
		}
	}
}

// install makes (epoch, members) the current view: the running round ends
// without a result, and the next starts over the new view.
func (d *Detector) install(epoch uint64, members []core.NodeID) {
	d.epoch = epoch
	d.members = slices.Clone(members)
	d.gen++
	n := len(members)
	d.pos = make(map[core.NodeID]int, n)
	for i, id := range members {
		d.pos[id] = i
	}
	d.me = -1
	if p, ok := d.pos[d.env.Self()]; ok {
		d.me = p
	}
	d.senders = d.cfg.SendersFor(n)
	d.failed = make([]bool, n)
	d.nLive = n
	if epoch == 0 && !d.started0 {
		d.started0 = true
		for _, id := range d.preFailed {
			if p := d.pos[id]; p != d.me && !d.failed[p] {
				d.failed[p] = true
				d.nLive--
			}
		}
		d.preFailed = nil
	}
	d.have = make([]uint64, d.senders)
	if d.nextHave != nil && d.nextHave.Epoch <= epoch {
		if d.nextHave.Epoch == epoch {
			copy(d.have, d.nextHave.Have)
		}
		d.nextHave = nil
	}
	d.stable, d.lastRound = nil, 0
	d.coord, d.full, d.tree, d.cube = nil, nil, nil, nil
	held := d.held
	d.held = nil
	if d.me < 0 {
		return // not a member: idle until a view includes us
	}
	switch d.cfg.Protocol {
	case Coord:
		d.coord = &coordState{}
	case FullDist:
		d.full = &fullState{}
	case SCoord:
		d.tree = &treeState{}
	case CubeFullDist:
		d.cube = newCubeState(n, d.me, d.senders)
	}
	if d.initiator() {
		d.startRound()
	}
	for _, h := range held {
		if e := epochOf(h.m); e == epoch {
			d.Receive(h.from, h.m)
		} else if e > epoch {
			d.held = append(d.held, h)
		}
	}
}

// initiator reports whether this node starts rounds on its own: position 0
// under Coord, FullDist and S_Coord, every member under CubeFullDist.
func (d *Detector) initiator() bool {
	return d.me == 0 || (d.me >= 0 && d.cfg.Protocol == CubeFullDist)
}

// startRound starts a round at an initiator.
func (d *Detector) startRound() {
	d.roundStart = d.env.Now()
	switch {
	case d.coord != nil:
		d.coordStart()
	case d.full != nil:
		d.fullStart()
	case d.tree != nil:
		d.treeStart()
	case d.cube != nil:
		d.cubeStep1()
	}
}

// scheduleNext arms the start of the round after the one that just ended at
// an initiator: Period after the start of the ended round, or now if that
// has passed.
func (d *Detector) scheduleNext(round uint64) {
	next := d.roundStart + d.cfg.Period
	now := d.env.Now()
	d.env.SetTimer(max(next, now)-now, tick{gen: d.gen, round: round, what: tickRound})
}

// armResend arms the §3.5 retransmission timer for round (a no-op when
// Resend is 0).
func (d *Detector) armResend(round uint64) {
	if d.cfg.Resend > 0 {
		d.env.SetTimer(d.cfg.Resend, tick{gen: d.gen, round: round, what: tickResend})
	}
}

// Fire implements [core.Machine].
func (d *Detector) Fire(t core.Timer) {
	tk, ok := t.(tick)
	if !ok || !d.started || tk.gen != d.gen || d.me < 0 {
		return
	}
	switch tk.what {
	case tickRound:
		d.nextRound(tk.round)
	case tickResend:
		d.resend(tk.round)
	}
}

func (d *Detector) nextRound(ended uint64) {
	if d.Round() != ended && d.cube == nil {
		return
	}
	if d.cube != nil {
		d.cubeTimer(ended)
		return
	}
	d.startRound()
}

func (d *Detector) resend(round uint64) {
	switch {
	case d.coord != nil:
		d.coordResend(round)
	case d.full != nil:
		d.fullResend(round)
	case d.tree != nil:
		d.treeResend(round)
	case d.cube != nil:
		d.cubeResend(round)
	}
}

func (d *Detector) onFailed(p int) {
	switch {
	case d.coord != nil:
		d.coordFailed(p)
	case d.full != nil:
		d.fullFailed(p)
	case d.tree != nil:
		d.treeFailed(p)
	case d.cube != nil:
		d.cubeFailed(p)
	}
}

// epochOf returns the view epoch a stable message belongs to.
func epochOf(m core.Msg) uint64 {
	switch m := m.(type) {
	case Start:
		return m.Epoch
	case Ack:
		return m.Epoch
	case Info:
		return m.Epoch
	case AckInfo:
		return m.Epoch
	case Row:
		return m.Epoch
	case Gossip:
		return m.Epoch
	}
	return 0
}

// maxHeld bounds the messages of later views kept for replay.
func (d *Detector) maxHeld() int { return 16 + 4*len(d.members) }

// Receive implements [core.Machine]. Messages of an older view, from
// nodes outside the view, from members reported failed, or of the wrong
// vector length are ignored; messages of a later view are kept (up to
// 16 + 4n of them) until that view is installed.
func (d *Detector) Receive(from core.NodeID, m core.Msg) {
	if !d.started {
		return
	}
	e := epochOf(m)
	if e > d.epoch {
		if len(d.held) < d.maxHeld() {
			d.held = append(d.held, heldMsg{from, m})
		}
		return
	}
	if e < d.epoch || d.me < 0 {
		return
	}
	p, ok := d.pos[from]
	if !ok || d.failed[p] {
		return
	}
	switch {
	case d.coord != nil:
		d.coordReceive(p, m)
	case d.full != nil:
		d.fullReceive(p, m)
	case d.tree != nil:
		d.treeReceive(p, m)
	case d.cube != nil:
		d.cubeReceive(p, m)
	}
}

// send sends m to the member at position p.
func (d *Detector) send(p int, m core.Msg) { d.env.Send(d.members[p], m) }

// live reports whether position p has not been reported failed.
func (d *Detector) live(p int) bool { return !d.failed[p] }

// vec returns a copy of R_i, the node's current received vector.
func (d *Detector) vec() []uint64 { return slices.Clone(d.have) }

// okVec reports whether v has the view's vector length.
func (d *Detector) okVec(v []uint64) bool { return len(v) == d.senders }

// arrayMin sets dst to the element-wise minimum of dst and v (same length).
func arrayMin(dst, v []uint64) {
	for i := range dst {
		dst[i] = min(dst[i], v[i])
	}
}

// learn records a round's result at this node: S_i becomes the
// element-wise maximum of S_i and v (so emitted vectors only grow), and
// Stable and RoundDone are emitted.
func (d *Detector) learn(round uint64, v []uint64, began time.Duration) {
	if d.stable == nil {
		d.stable = make([]uint64, d.senders)
	}
	for i := range d.stable {
		d.stable[i] = max(d.stable[i], v[i])
	}
	d.lastRound = max(d.lastRound, round)
	d.env.Emit(Stable{Epoch: d.epoch, Round: round, Vector: slices.Clone(d.stable)})
	d.env.Emit(RoundDone{Epoch: d.epoch, Round: round, Began: began, At: d.env.Now()})
}
