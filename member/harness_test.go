package member

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
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
type wireTrip struct {
	*Member
	codec *wire.Codec
	t     testing.TB
}

func (w *wireTrip) Receive(from core.NodeID, m core.Msg) {
	b, err := w.codec.Marshal(m)
	if err != nil {
		w.t.Errorf("marshal %T: %v", m, err)
		return
	}
	d, err := w.codec.Unmarshal(m.Kind(), b)
	if err != nil {
		w.t.Errorf("unmarshal %v: %v", KindName(m.Kind()), err)
		return
	}
	w.Member.Receive(from, d)
}

// link is a window during which a and b cannot talk (a cut), or a partition.
type outage struct {
	from, until time.Duration // until 0: until the heal
	groups      [][]core.NodeID
	a, b        core.NodeID // a cut when groups is nil
}

// harness runs membership machines in a simulated world with the oracle
// detector, and checks the safety properties on every event.
type harness struct {
	t        testing.TB
	w        *sim.World
	cfg      Config
	delay    time.Duration // oracle detection delay
	wireTrip bool
	codec    *wire.Codec
	all      []core.NodeID // every node id ever added (initial and joiners)
	started  map[core.NodeID]time.Duration
	outages  []outage
	healAt   time.Duration // HealAll time (0: none)
	oracleAt map[time.Duration]bool
	quiet    bool // no event log (benchmarks)
	// detector builds the failure detector of a node (its stack's layer 0);
	// nil means the oracle.
	detector func(initial []core.NodeID) core.Machine

	// checker state
	views    map[uint64][]core.NodeID // agreement: one member set per epoch
	ancestry map[uint64][]uint64      // the ancestry of each installed view
	incs     map[uint64]map[core.NodeID]uint64
	last     map[core.NodeID]uint64 // monotonic epochs per node (across restarts)
	inflight map[[2]core.NodeID][]core.Msg
	log      []string // recent events, printed on failure
	installs int
	trace    bool
}

func newHarness(t testing.TB, seed uint64, net sim.Network, cfg Config, delay time.Duration) *harness {
	return newHarnessSim(t, sim.Config{Seed: seed, Network: net}, cfg, delay)
}

func newHarnessSim(t testing.TB, scfg sim.Config, cfg Config, delay time.Duration) *harness {
	h := &harness{
		t: t, cfg: cfg, delay: delay,
		w:        sim.New(scfg),
		started:  map[core.NodeID]time.Duration{},
		views:    map[uint64][]core.NodeID{},
		ancestry: map[uint64][]uint64{},
		incs:     map[uint64]map[core.NodeID]uint64{},
		last:     map[core.NodeID]uint64{},
		inflight: map[[2]core.NodeID][]core.Msg{},
	}
	h.codec = wire.NewCodec()
	if err := RegisterCodecs(h.codec); err != nil {
		t.Fatal(err)
	}
	h.w.OnSend(func(_ time.Duration, from, to core.NodeID, m core.Msg) {
		k := [2]core.NodeID{from, to}
		h.inflight[k] = append(h.inflight[k], m)
	})
	h.w.AddChecker(h)
	return h
}

func (h *harness) stack(m *Member) core.Machine {
	var layer core.Machine = m
	if h.wireTrip {
		layer = &wireTrip{Member: m, codec: h.codec, t: h.t}
	}
	var det core.Machine = newOracle()
	if h.detector != nil {
		det = h.detector(m.initial)
	}
	return core.NewStack(det, layer)
}

// member returns the membership machine of node id.
func (h *harness) member(id core.NodeID) *Member {
	switch l := h.w.Node(id).(*core.Stack).Layer(1).(type) {
	case *Member:
		return l
	case *wireTrip:
		return l.Member
	}
	panic("no member layer")
}

func (h *harness) oracleOf(id core.NodeID) *oracle {
	o, _ := h.w.Node(id).(*core.Stack).Layer(0).(*oracle)
	return o
}

// addInitial adds n initial members 0..n-1.
func (h *harness) addInitial(n int) []core.NodeID {
	ids := make([]core.NodeID, n)
	for i := range ids {
		ids[i] = core.NodeID(len(h.all) + i)
	}
	for _, id := range ids {
		m, err := New(h.cfg, ids)
		if err != nil {
			h.t.Fatal(err)
		}
		if got := h.w.Add(h.stack(m)); got != id {
			h.t.Fatalf("added %v, want %v", got, id)
		}
		h.all = append(h.all, id)
		h.started[id] = 0
	}
	return ids
}

// addJoiner adds a new node that starts at at and joins through contacts.
func (h *harness) addJoiner(at time.Duration, contacts []core.NodeID) core.NodeID {
	m, err := NewJoiner(h.cfg, JoinOptions{Contacts: contacts})
	if err != nil {
		h.t.Fatal(err)
	}
	id := h.w.AddAt(at, h.stack(m))
	h.all = append(h.all, id)
	h.w.At(at, func() {
		h.started[id] = at
		h.logf("start %v as a new node", id)
		h.oracleSoon()
	})
	return id
}

// restart is the factory of recovered nodes: a fresh machine that re-joins
// under its id (NODE_ALIVE), with the epoch floor its former self reached
// (the host's stable storage).
func (h *harness) restart(id core.NodeID) core.Machine {
	floor := h.member(id).MaxEpoch()
	m, err := NewJoiner(h.cfg, JoinOptions{Contacts: h.all, Recovered: true, EpochFloor: floor})
	if err != nil {
		h.t.Fatal(err)
	}
	return h.stack(m)
}

// connected reports whether a and b can talk now (mirror of the plan).
func (h *harness) connected(a, b core.NodeID) bool {
	now := h.w.Now()
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
func (h *harness) oracleSoon() {
	at := h.w.Now() + h.delay
	if h.detector != nil || h.oracleAt[at] {
		return // one look per instant is enough
	}
	if h.oracleAt == nil {
		h.oracleAt = map[time.Duration]bool{}
	}
	h.oracleAt[at] = true
	h.w.At(at, func() {
		delete(h.oracleAt, at)
		h.oracleNow()
	})
}

// oracleNow makes every live node's detector agree with the world.
func (h *harness) oracleNow() {
	for _, a := range h.all {
		if !h.isUp(a) {
			continue
		}
		o := h.oracleOf(a)
		if o == nil {
			return // a real detector
		}
		for _, x := range h.all {
			if x == a {
				continue
			}
			_, up := h.started[x]
			want := up && (!h.w.Alive(x) || !h.connected(a, x))
			if want != o.declared[x] {
				h.w.Node(a).Handle(oracleCmd{node: x, failed: want})
			}
		}
	}
}

func (h *harness) isUp(id core.NodeID) bool {
	_, ok := h.started[id]
	return ok && h.w.Alive(id)
}

func (h *harness) logf(format string, args ...any) {
	if h.quiet {
		return
	}
	line := fmt.Sprintf("%v: ", h.w.Now()) + fmt.Sprintf(format, args...)
	if h.trace {
		h.t.Log(line)
	}
	h.log = append(h.log, line)
	if len(h.log) > 4000 {
		h.log = h.log[len(h.log)-3000:]
	}
}

// Name implements sim.Checker.
func (h *harness) Name() string { return "membership" }

// Check implements sim.Checker: self inclusion, agreement (one member set
// per epoch), epochs that only grow at each node (across restarts), and no
// message delivered twice or without a send.
func (h *harness) Check(w *sim.World, o sim.Obs) error {
	switch o.Kind {
	case sim.ObsCrash:
		h.logf("crash %v", o.Node)
		h.oracleSoon()
	case sim.ObsRecover:
		h.logf("recover %v", o.Node)
		h.started[o.Node] = o.At
		h.oracleSoon()
	case sim.ObsDeliver:
		k := [2]core.NodeID{o.From, o.Node}
		q := h.inflight[k]
		i := slices.IndexFunc(q, func(m core.Msg) bool { return m == o.Msg })
		if i < 0 {
			return sim.Violatef(o.Node, "no duplication: %v from %v delivered but not in flight", KindName(o.Msg.Kind()), o.From)
		}
		h.inflight[k] = q[i+1:]
		if h.trace {
			h.logf("%v -> %v %s", o.From, o.Node, describe(o.Msg))
		}
	case sim.ObsEmit:
		switch e := o.Event.(type) {
		case ViewInstalled:
			h.installs++
			h.logf("%v installs %s %v (+%v -%v)", o.Node, FormatEpoch(e.Epoch), e.Members, e.Joined, e.Departed)
			if !slices.Contains(e.Members, o.Node) {
				return sim.Violatef(o.Node, "self inclusion: installed %s %v without itself", FormatEpoch(e.Epoch), e.Members)
			}
			if prev, ok := h.views[e.Epoch]; ok && !slices.Equal(prev, e.Members) {
				return sim.Violatef(o.Node, "agreement: epoch %s installed as %v and as %v", FormatEpoch(e.Epoch), prev, e.Members)
			}
			h.views[e.Epoch] = e.Members
			if cur := h.member(o.Node).cur; cur != nil && cur.epoch == e.Epoch {
				h.ancestry[e.Epoch] = cur.ancestry
				h.incs[e.Epoch] = cur.incs
			}
			if prev, ok := h.last[o.Node]; ok && e.Epoch <= prev {
				return sim.Violatef(o.Node, "monotonic epochs: installed %s after %s", FormatEpoch(e.Epoch), FormatEpoch(prev))
			}
			h.last[o.Node] = e.Epoch
		case core.MembersChanged:
			h.oracleSoon()
			if !slices.Contains(e.Members, o.Node) {
				return sim.Violatef(o.Node, "self inclusion: MembersChanged %s without itself", FormatEpoch(e.Epoch))
			}
		case Stabilized:
			h.logf("%v stabilized %s in %v", o.Node, FormatEpoch(e.Epoch), e.At-e.Began)
		case StabilizationStarted:
			h.logf("%v proposes %s %v -%v +%v", o.Node, FormatEpoch(e.Epoch), e.Cause, e.Failed, e.Joined)
		case StabilizationAborted:
			h.logf("%v aborts %s: %s", o.Node, FormatEpoch(e.Epoch), e.Reason)
		case Evicted:
			h.logf("%v evicted by %s", o.Node, FormatEpoch(e.Epoch))
		case Minority:
			h.logf("%v minority in %s: %d/%d", o.Node, FormatEpoch(e.Epoch), e.Alive, e.Size)
		case core.Failed:
			h.logf("%v detects %v failed", o.Node, e.Node)
		case core.Recovered:
			h.logf("%v detects %v recovered", o.Node, e.Node)
		}
	}
	return nil
}

// converged checks liveness: every live node has installed the same view,
// whose members are exactly the live nodes. It returns a description of the
// first difference, or "".
func (h *harness) converged() string {
	var live []core.NodeID
	for _, id := range h.all {
		if h.isUp(id) && !h.lost(id) {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		return ""
	}
	ref := h.member(live[0]).View()
	want := slices.Clone(live)
	slices.Sort(want)
	got := slices.Clone(ref.Members)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Sprintf("%v holds %s %v, live nodes are %v", live[0], FormatEpoch(ref.Epoch), ref.Members, live)
	}
	for _, id := range live[1:] {
		v := h.member(id).View()
		if v.Epoch != ref.Epoch {
			return fmt.Sprintf("%v holds %s %v, %v holds %s %v", id, FormatEpoch(v.Epoch), v.Members, live[0], FormatEpoch(ref.Epoch), ref.Members)
		}
	}
	return ""
}

// lost reports whether id is a joiner none of whose contacts is a live
// member: nobody can admit it (the paper's joiner knows only its list).
func (h *harness) lost(id core.NodeID) bool {
	m := h.member(id)
	if !m.Joining() {
		return false
	}
	for _, c := range m.contacts {
		if h.isUp(c) && !h.member(c).Joining() {
			return false
		}
	}
	return true
}

func (h *harness) dump() string {
	var b strings.Builder
	for _, id := range h.all {
		if !h.isUp(id) {
			fmt.Fprintf(&b, "  %v: down\n", id)
			continue
		}
		m := h.member(id)
		v := m.View()
		acc := "-"
		if m.acc != nil {
			acc = FormatEpoch(m.acc.epoch)
		}
		fmt.Fprintf(&b, "  %v: view %s %v acc %s root=%v driving=%v joining=%v failed=%v pjoins=%d merge=%v\n",
			id, FormatEpoch(v.Epoch), v.Members, acc, m.IsRoot(), m.driving, m.joining, sortedKeys(m.failed), len(m.pjoins), m.mergeRoot)
	}
	b.WriteString("  recent events:\n")
	for _, l := range h.log[max(0, len(h.log)-80):] {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

func sortedKeys(m map[core.NodeID]bool) []core.NodeID {
	var ks []core.NodeID
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// describe renders a message compactly for traces.
func describe(m core.Msg) string {
	switch x := m.(type) {
	case *Report:
		return fmt.Sprintf("%s(%v) e=%s", KindName(x.Kind()), x.Failed, FormatEpoch(x.Epoch))
	case *ReportAck:
		return fmt.Sprintf("FAILURE_DET_ACK(%v)", x.Failed)
	case *Prepare:
		full := ""
		if x.Full {
			full = " full"
		}
		return fmt.Sprintf("%s %s base %s -%v +%v%s", KindName(x.Kind()), FormatEpoch(x.Epoch), FormatEpoch(x.Ancestry[0]), x.Failed, x.Joined, full)
	case *Ack:
		return fmt.Sprintf("%s %s", KindName(x.Kind()), FormatEpoch(x.Epoch))
	case *Commit:
		return fmt.Sprintf("VIEW_COMMIT %s", FormatEpoch(x.Epoch))
	case *JoinRequest:
		return fmt.Sprintf("%s from %v %v hops %d", KindName(x.Kind()), x.From, x.Joiners, x.Hops)
	case *JoinDetAck:
		return fmt.Sprintf("JOIN_DET_ACK %s", FormatEpoch(x.Epoch))
	case *Nack:
		return fmt.Sprintf("VIEW_NACK %s holding %s pending=%v", FormatEpoch(x.Epoch), FormatEpoch(x.View.Epoch), x.Pending)
	case *Notice:
		return fmt.Sprintf("EXCLUDED %s root %v", FormatEpoch(x.Epoch), x.Root)
	case *Sync:
		return fmt.Sprintf("VIEW_SYNC %s abort %s", FormatEpoch(x.View.Epoch), FormatEpoch(x.Abort))
	}
	return KindName(m.Kind())
}
