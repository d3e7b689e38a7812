package membertest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/wire"
)

// oracle is a deterministic failure detector for tests: the harness, which
// knows from the simulator who crashed and who is cut off, tells it what to
// declare (oracleCmd) and it emits core.Failed / core.Recovered, once per
// change, like a real detector.
type oracle struct {
	env      core.Env
	declared map[core.NodeID]bool
	members  map[core.NodeID]bool
}

type oracleCmd struct {
	node   core.NodeID
	failed bool
}

func newOracle() *oracle { return &oracle{declared: map[core.NodeID]bool{}} }

func (o *oracle) Start(env core.Env)            { o.env = env }
func (o *oracle) Receive(core.NodeID, core.Msg) {}
func (o *oracle) Fire(core.Timer)               {}
func (o *oracle) Handle(e core.Event) {
	if mc, ok := e.(core.MembersChanged); ok {
		// Like a real detector, start watching a node that (re-)enters the
		// view afresh: a verdict about it is given again if it still holds.
		next := map[core.NodeID]bool{}
		for _, id := range mc.Members {
			next[id] = true
			if !o.members[id] {
				delete(o.declared, id)
			}
		}
		for _, id := range mc.Renewed {
			delete(o.declared, id) // a new incarnation of the same id
		}
		o.members = next
		return
	}
	c, ok := e.(oracleCmd)
	if !ok || o.env == nil || c.failed == o.declared[c.node] {
		return
	}
	if c.failed {
		o.declared[c.node] = true
		o.env.Emit(core.Failed{Node: c.node})
	} else {
		delete(o.declared, c.node)
		o.env.Emit(core.Recovered{Node: c.node})
	}
}

// wireTrip wraps a Member so that every message it receives is encoded and
// decoded first: the path a real host takes, without the in-memory shortcuts.
// A message that does not survive the trip is a bug: it panics, and the
// swarm reports the panic with its seed.
type wireTrip struct {
	*member.Member
	codec *wire.Codec
}

func (w *wireTrip) Receive(from core.NodeID, m core.Msg) {
	b, err := w.codec.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("membertest: marshal %T: %v", m, err))
	}
	d, err := w.codec.Unmarshal(m.Kind(), b)
	if err != nil {
		panic(fmt.Sprintf("membertest: unmarshal %v: %v", member.KindName(m.Kind()), err))
	}
	w.Member.Receive(from, d)
}

// outage is a window during which a and b cannot talk (a cut), or a
// partition.
type outage struct {
	from, until time.Duration // until 0: until the heal
	groups      [][]core.NodeID
	a, b        core.NodeID // a cut when groups is nil
}

// Harness runs membership machines in a simulated world (each node a
// core.Stack of a failure detector and a member.Member) and checks the
// safety properties on every event (it is a sim.Checker, added to its
// world): self inclusion, agreement (one member set per epoch), epochs that
// only grow at each node across restarts, and no message delivered twice or
// without a send. The default detector is an oracle that declares, after
// Delay, exactly the nodes that crashed or are cut off.
type Harness struct {
	W        *sim.World
	Cfg      member.Config
	Delay    time.Duration // oracle detection delay
	WireTrip bool          // every message received is encoded and decoded first
	Quiet    bool          // no event log (benchmarks)
	// Trace, if set, receives every event log line as it happens (and the
	// deliveries).
	Trace func(line string)
	// Detector builds the failure detector of a node (its stack's layer
	// 0) from the node's initial member list (nil for a joiner); nil means
	// the oracle.
	Detector func(initial []core.NodeID) core.Machine

	All      []core.NodeID                 // every node id ever added (initial and joiners)
	Started  map[core.NodeID]time.Duration // when each node (re)started
	Installs int                           // views installed, over all nodes
	Lefts    int                           // leavers reported in installed views, over all nodes

	codec    *wire.Codec
	outages  []outage
	healAt   time.Duration // HealAll time (0: none)
	oracleAt map[time.Duration]bool

	// checker state
	views    map[uint64][]core.NodeID // agreement: one member set per epoch
	ancestry map[uint64][]uint64      // the ancestry of each installed view
	incs     map[uint64]*member.ViewState
	// departs holds, per epoch, each node some install of it reported
	// departed, and whether as a leaver: every node that reports the same
	// departure from the same view says the same (leave agreement).
	departs map[uint64]map[core.NodeID]bool
	// leavers are the nodes that announced a leave (Leave).
	leavers  map[core.NodeID]bool
	last     map[core.NodeID]uint64 // monotonic epochs per node (across restarts)
	inflight map[[2]core.NodeID][]core.Msg
	log      []string // recent events, printed on failure
}

// NewHarness returns a harness over a new world with the given seed and
// network.
func NewHarness(seed uint64, net sim.Network, cfg member.Config, delay time.Duration) *Harness {
	return NewHarnessSim(sim.Config{Seed: seed, Network: net}, cfg, delay)
}

// NewHarnessSim returns a harness over a new world built from scfg.
func NewHarnessSim(scfg sim.Config, cfg member.Config, delay time.Duration) *Harness {
	h := &Harness{
		Cfg: cfg, Delay: delay,
		W:        sim.New(scfg),
		Started:  map[core.NodeID]time.Duration{},
		views:    map[uint64][]core.NodeID{},
		ancestry: map[uint64][]uint64{},
		incs:     map[uint64]*member.ViewState{},
		departs:  map[uint64]map[core.NodeID]bool{},
		leavers:  map[core.NodeID]bool{},
		last:     map[core.NodeID]uint64{},
		inflight: map[[2]core.NodeID][]core.Msg{},
	}
	h.codec = wire.NewCodec()
	if err := member.RegisterCodecs(h.codec); err != nil {
		panic(fmt.Sprintf("membertest: %v", err))
	}
	h.W.OnSend(func(_ time.Duration, from, to core.NodeID, m core.Msg) {
		k := [2]core.NodeID{from, to}
		h.inflight[k] = append(h.inflight[k], m)
	})
	h.W.AddChecker(h)
	return h
}

func (h *Harness) stack(m *member.Member) core.Machine {
	var layer core.Machine = m
	if h.WireTrip {
		layer = &wireTrip{Member: m, codec: h.codec}
	}
	var det core.Machine = newOracle()
	if h.Detector != nil {
		det = h.Detector(m.Inspect().Initial)
	}
	return core.NewStack(det, layer)
}

// Member returns the membership machine of node id.
func (h *Harness) Member(id core.NodeID) *member.Member {
	switch l := h.W.Node(id).(*core.Stack).Layer(1).(type) {
	case *member.Member:
		return l
	case *wireTrip:
		return l.Member
	}
	panic("membertest: no member layer")
}

func (h *Harness) oracleOf(id core.NodeID) *oracle {
	o, _ := h.W.Node(id).(*core.Stack).Layer(0).(*oracle)
	return o
}

// AddInitial adds n initial members, numbered from the number of nodes
// added so far.
func (h *Harness) AddInitial(n int) []core.NodeID {
	ids := make([]core.NodeID, n)
	for i := range ids {
		ids[i] = core.NodeID(len(h.All) + i)
	}
	for _, id := range ids {
		m, err := member.New(h.Cfg, ids)
		if err != nil {
			panic(fmt.Sprintf("membertest: %v", err))
		}
		if got := h.W.Add(h.stack(m)); got != id {
			panic(fmt.Sprintf("membertest: added %v, want %v", got, id))
		}
		h.All = append(h.All, id)
		h.Started[id] = 0
	}
	return ids
}

// AddJoiner adds a new node that starts at at and joins through contacts.
func (h *Harness) AddJoiner(at time.Duration, contacts []core.NodeID) core.NodeID {
	m, err := member.NewJoiner(h.Cfg, member.JoinOptions{Contacts: contacts})
	if err != nil {
		panic(fmt.Sprintf("membertest: %v", err))
	}
	id := h.W.AddAt(at, h.stack(m))
	h.All = append(h.All, id)
	h.W.At(at, func() {
		h.Started[id] = at
		h.logf("start %v as a new node", id)
		h.oracleSoon()
	})
	return id
}

// Restart is the factory of recovered nodes: a fresh machine that re-joins
// under its id (NODE_ALIVE), with the epoch floor its former self reached
// (the host's stable storage).
func (h *Harness) Restart(id core.NodeID) core.Machine {
	floor := h.Member(id).MaxEpoch()
	m, err := member.NewJoiner(h.Cfg, member.JoinOptions{Contacts: h.All, Recovered: true, EpochFloor: floor})
	if err != nil {
		panic(fmt.Sprintf("membertest: %v", err))
	}
	return h.stack(m)
}

// connected reports whether a and b can talk now (mirror of the plan).
func (h *Harness) connected(a, b core.NodeID) bool {
	now := h.W.Now()
	for _, o := range h.outages {
		if now < o.from || (o.until != 0 && now >= o.until) || (h.healAt != 0 && now >= h.healAt && o.from < h.healAt) {
			continue
		}
		if o.groups == nil {
			if (o.a == a && o.b == b) || (o.a == b && o.b == a) {
				return false
			}
			continue
		}
		if side(o.groups, a) != side(o.groups, b) {
			return false
		}
	}
	return true
}

func side(groups [][]core.NodeID, x core.NodeID) int {
	for i, g := range groups {
		if slices.Contains(g, x) {
			return i + 1
		}
	}
	return 0
}

// oracleSoon schedules the oracle detectors to look at the world after the
// detection delay.
func (h *Harness) oracleSoon() {
	at := h.W.Now() + h.Delay
	if h.Detector != nil || h.oracleAt[at] {
		return // one look per instant is enough
	}
	if h.oracleAt == nil {
		h.oracleAt = map[time.Duration]bool{}
	}
	h.oracleAt[at] = true
	h.W.At(at, func() {
		delete(h.oracleAt, at)
		h.oracleNow()
	})
}

// oracleNow makes every live node's detector agree with the world.
func (h *Harness) oracleNow() {
	for _, a := range h.All {
		if !h.IsUp(a) {
			continue
		}
		o := h.oracleOf(a)
		if o == nil {
			return // a real detector
		}
		for _, x := range h.All {
			if x == a {
				continue
			}
			_, up := h.Started[x]
			want := up && (!h.W.Alive(x) || !h.connected(a, x))
			if want != o.declared[x] {
				h.W.Node(a).Handle(oracleCmd{node: x, failed: want})
			}
		}
	}
}

// IsUp reports whether node id has started and is alive.
func (h *Harness) IsUp(id core.NodeID) bool {
	_, ok := h.Started[id]
	return ok && h.W.Alive(id)
}

func (h *Harness) logf(format string, args ...any) {
	if h.Quiet {
		return
	}
	line := fmt.Sprintf("%v: ", h.W.Now()) + fmt.Sprintf(format, args...)
	if h.Trace != nil {
		h.Trace(line)
	}
	h.log = append(h.log, line)
	if len(h.log) > 4000 {
		h.log = h.log[len(h.log)-3000:]
	}
}

// Name implements sim.Checker.
func (h *Harness) Name() string { return "membership" }

// Check implements sim.Checker: self inclusion, agreement (one member set
// per epoch), epochs that only grow at each node (across restarts), and no
// message delivered twice or without a send.
func (h *Harness) Check(w *sim.World, o sim.Obs) error {
	switch o.Kind {
	case sim.ObsCrash:
		h.logf("crash %v", o.Node)
		h.oracleSoon()
	case sim.ObsRecover:
		h.logf("recover %v", o.Node)
		h.Started[o.Node] = o.At
		h.oracleSoon()
	case sim.ObsDeliver:
		k := [2]core.NodeID{o.From, o.Node}
		q := h.inflight[k]
		i := slices.IndexFunc(q, func(m core.Msg) bool { return m == o.Msg })
		if i < 0 {
			return sim.Violatef(o.Node, "no duplication: %v from %v delivered but not in flight", member.KindName(o.Msg.Kind()), o.From)
		}
		h.inflight[k] = q[i+1:]
		if h.Trace != nil {
			h.logf("%v -> %v %s", o.From, o.Node, describe(o.Msg))
		}
	case sim.ObsEmit:
		return h.checkEvent(o)
	}
	return nil
}

func (h *Harness) checkEvent(o sim.Obs) error {
	switch e := o.Event.(type) {
	case member.ViewInstalled:
		h.Installs++
		h.logf("%v installs %s %v (+%v -%v)", o.Node, member.FormatEpoch(e.Epoch), e.Members, e.Joined, e.Departed)
		if !slices.Contains(e.Members, o.Node) {
			return sim.Violatef(o.Node, "self inclusion: installed %s %v without itself", member.FormatEpoch(e.Epoch), e.Members)
		}
		if prev, ok := h.views[e.Epoch]; ok && !slices.Equal(prev, e.Members) {
			return sim.Violatef(o.Node, "agreement: epoch %s installed as %v and as %v", member.FormatEpoch(e.Epoch), prev, e.Members)
		}
		h.views[e.Epoch] = e.Members
		if err := h.checkLeft(o.Node, e); err != nil {
			return err
		}
		if cur := h.Member(o.Node).Inspect().Installed; cur != nil && cur.Epoch == e.Epoch {
			h.ancestry[e.Epoch] = cur.Ancestry
			h.incs[e.Epoch] = cur
		}
		if prev, ok := h.last[o.Node]; ok && e.Epoch <= prev {
			return sim.Violatef(o.Node, "monotonic epochs: installed %s after %s", member.FormatEpoch(e.Epoch), member.FormatEpoch(prev))
		}
		h.last[o.Node] = e.Epoch
	case core.MembersChanged:
		h.oracleSoon()
		if !slices.Contains(e.Members, o.Node) {
			return sim.Violatef(o.Node, "self inclusion: MembersChanged %s without itself", member.FormatEpoch(e.Epoch))
		}
	case member.Stabilized:
		h.logf("%v stabilized %s in %v", o.Node, member.FormatEpoch(e.Epoch), e.At-e.Began)
	case member.StabilizationStarted:
		h.logf("%v proposes %s %v -%v +%v", o.Node, member.FormatEpoch(e.Epoch), e.Cause, e.Failed, e.Joined)
	case member.StabilizationAborted:
		h.logf("%v aborts %s: %s", o.Node, member.FormatEpoch(e.Epoch), e.Reason)
	case member.Evicted:
		h.logf("%v evicted by %s", o.Node, member.FormatEpoch(e.Epoch))
	case member.Minority:
		h.logf("%v minority in %s: %d/%d", o.Node, member.FormatEpoch(e.Epoch), e.Alive, e.Size)
	case core.Failed:
		h.logf("%v detects %v failed", o.Node, e.Node)
	case core.Recovered:
		h.logf("%v detects %v recovered", o.Node, e.Node)
	}
	return nil
}

// checkLeft checks a view's leavers: only nodes that announced a leave are
// reported as leavers, and every node that reports a departure from the
// same view reports it alike, as a leave or not.
func (h *Harness) checkLeft(at core.NodeID, e member.ViewInstalled) error {
	h.Lefts += len(e.Left)
	for _, x := range e.Left {
		if !h.leavers[x] {
			return sim.Violatef(at, "no invented leave: %s reports %v left, which never announced it", member.FormatEpoch(e.Epoch), x)
		}
	}
	if len(e.Departed) == 0 {
		return nil
	}
	d := h.departs[e.Epoch]
	if d == nil {
		d = map[core.NodeID]bool{}
		h.departs[e.Epoch] = d
	}
	for _, x := range e.Departed {
		left := slices.Contains(e.Left, x)
		if prev, ok := d[x]; ok && prev != left {
			return sim.Violatef(at, "leave agreement: %s reports %v departed as a leaver here (%v), not elsewhere", member.FormatEpoch(e.Epoch), x, left)
		}
		d[x] = left
	}
	return nil
}

// Leave makes node id announce that it leaves (member.LeaveRequest), if
// announce is set; the node is then crashed after stopAfter, as a process
// that finished ends (its announcement may still be in flight).
func (h *Harness) Leave(id core.NodeID, stopAfter time.Duration, announce bool) {
	if !h.IsUp(id) {
		return
	}
	if announce {
		h.logf("fault: %v leaves", id)
		h.leavers[id] = true
		h.W.Node(id).Handle(member.LeaveRequest{})
	}
	h.W.At(h.W.Now()+stopAfter, func() {
		if h.W.Alive(id) {
			h.W.Crash(id)
		}
	})
}

// Converged checks liveness: every live node has installed the same view,
// whose members are exactly the live nodes (less the joiners nobody can
// admit). It returns a description of the first difference, or "".
func (h *Harness) Converged() string {
	var live []core.NodeID
	for _, id := range h.All {
		if h.IsUp(id) && !h.lost(id) {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		return ""
	}
	ref := h.Member(live[0]).View()
	want := slices.Clone(live)
	slices.Sort(want)
	got := slices.Clone(ref.Members)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Sprintf("%v holds %s %v, live nodes are %v", live[0], member.FormatEpoch(ref.Epoch), ref.Members, live)
	}
	for _, id := range live[1:] {
		v := h.Member(id).View()
		if v.Epoch != ref.Epoch {
			return fmt.Sprintf("%v holds %s %v, %v holds %s %v", id, member.FormatEpoch(v.Epoch), v.Members, live[0], member.FormatEpoch(ref.Epoch), ref.Members)
		}
	}
	return ""
}

// lost reports whether id is a joiner none of whose contacts is a live
// member: nobody can admit it (the paper's joiner knows only its list).
func (h *Harness) lost(id core.NodeID) bool {
	m := h.Member(id)
	if !m.Joining() {
		return false
	}
	for _, c := range m.Inspect().Contacts {
		if h.IsUp(c) && !h.Member(c).Joining() {
			return false
		}
	}
	return true
}

// Dump describes every node's state and the recent events, for failure
// reports.
func (h *Harness) Dump() string {
	var b strings.Builder
	for _, id := range h.All {
		if !h.IsUp(id) {
			fmt.Fprintf(&b, "  %v: down\n", id)
			continue
		}
		m := h.Member(id)
		in := m.Inspect()
		v := m.View()
		pending := "-"
		if in.Pending != nil {
			pending = member.FormatEpoch(in.Pending.Epoch)
		}
		fmt.Fprintf(&b, "  %v: view %s %v pending %s root=%v driving=%v joining=%v failed=%v pendingJoins=%d merge=%v\n",
			id, member.FormatEpoch(v.Epoch), v.Members, pending, m.IsRoot(), in.Driving, in.Joining, m.FailedMembers(), in.PendingJoins, in.MergeRoot)
	}
	b.WriteString("  recent events:\n")
	for _, l := range h.log[max(0, len(h.log)-80):] {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// describe renders a message compactly for traces.
func describe(m core.Msg) string {
	switch x := m.(type) {
	case *member.Report:
		return fmt.Sprintf("%s(%v) e=%s", member.KindName(x.Kind()), x.Failed, member.FormatEpoch(x.Epoch))
	case *member.ReportAck:
		return fmt.Sprintf("FAILURE_DET_ACK(%v)", x.Failed)
	case *member.Prepare:
		full := ""
		if x.Full {
			full = " full"
		}
		return fmt.Sprintf("%s %s base %s -%v +%v%s", member.KindName(x.Kind()), member.FormatEpoch(x.Epoch), member.FormatEpoch(x.Ancestry[0]), x.Failed, x.Joined, full)
	case *member.Ack:
		return fmt.Sprintf("%s %s", member.KindName(x.Kind()), member.FormatEpoch(x.Epoch))
	case *member.Commit:
		return fmt.Sprintf("VIEW_COMMIT %s", member.FormatEpoch(x.Epoch))
	case *member.JoinRequest:
		return fmt.Sprintf("%s from %v %v hops %d", member.KindName(x.Kind()), x.From, x.Joiners, x.Hops)
	case *member.JoinDetAck:
		return fmt.Sprintf("JOIN_DET_ACK %s", member.FormatEpoch(x.Epoch))
	case *member.Nack:
		return fmt.Sprintf("VIEW_NACK %s holding %s pending=%v", member.FormatEpoch(x.Epoch), member.FormatEpoch(x.View.Epoch), x.Pending)
	case *member.Notice:
		if x.Final {
			return fmt.Sprintf("EXCLUDED %s root %v final", member.FormatEpoch(x.Epoch), x.Root)
		}
		return fmt.Sprintf("EXCLUDED %s root %v", member.FormatEpoch(x.Epoch), x.Root)
	case *member.Sync:
		pending := ""
		if x.Pending {
			pending = " pending"
		}
		return fmt.Sprintf("VIEW_SYNC %s abort %s%s", member.FormatEpoch(x.View.Epoch), member.FormatEpoch(x.Abort), pending)
	case *member.Query:
		return fmt.Sprintf("VIEW_QUERY %s", member.FormatEpoch(x.Epoch))
	}
	return member.KindName(m.Kind())
}
