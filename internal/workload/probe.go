// Package workload holds the machines a benchmark node runs beside its
// failure detector and membership service (package runner stacks them):
// the probe that measures the ping-pong latency L and the tree echo, the
// timed membership wrapper that reports O_cp ([TimeMember]), and the
// multicast layer whose load generator multicasts at a set rate over vsync,
// or over plain sends as a baseline ([NewMulticastLayer],
// [MulticastOptions]). They report through the events of package record.
package workload

import (
	"maps"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/topo"
	"github.com/cohort-mp/cohort/wire"
)

// The message kinds of the probe layer, in core.ProtoTest (reserved for
// tests and benchmarks). Append only: the numbers are on the wire.
const (
	KindProbePing = core.Kind(core.ProtoTest)<<8 | 1 // [ProbePing]
	KindProbePong = core.Kind(core.ProtoTest)<<8 | 2 // [ProbePong]
	KindTreeEcho  = core.Kind(core.ProtoTest)<<8 | 3 // [TreeEcho]
	KindTreeAck   = core.Kind(core.ProtoTest)<<8 | 4 // [TreeAck]
)

// TreeEcho travels down the radix tree of the sender's current view (fan-out
// Fanout) from the root; a node forwards it to its children and answers its
// parent with a [TreeAck] once every child has answered (a leaf answers at
// once). It is the communication pattern of a stabilization (FAILED_NODE
// down, FAILURE_ACK up) with nothing computed: the benchmark's floor.
type TreeEcho struct {
	Seq    uint32
	Fanout uint32
}

// TreeAck answers a [TreeEcho] for the sender's whole subtree.
type TreeAck struct{ Seq uint32 }

// Kind implements core.Msg.
func (TreeEcho) Kind() core.Kind { return KindTreeEcho }

// Kind implements core.Msg.
func (TreeAck) Kind() core.Kind { return KindTreeAck }

// MarshalWire implements wire.Message.
func (m TreeEcho) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(m.Seq))
	e.Uvarint(uint64(m.Fanout))
}

// MarshalWire implements wire.Message.
func (m TreeAck) MarshalWire(e *wire.Encoder) { e.Uvarint(uint64(m.Seq)) }

// ProbePing asks the receiver for a [ProbePong] with the same Seq.
type ProbePing struct{ Seq uint32 }

// ProbePong answers a [ProbePing].
type ProbePong struct{ Seq uint32 }

// Kind implements core.Msg.
func (ProbePing) Kind() core.Kind { return KindProbePing }

// Kind implements core.Msg.
func (ProbePong) Kind() core.Kind { return KindProbePong }

// MarshalWire implements wire.Message.
func (m ProbePing) MarshalWire(e *wire.Encoder) { e.Uvarint(uint64(m.Seq)) }

// MarshalWire implements wire.Message.
func (m ProbePong) MarshalWire(e *wire.Encoder) { e.Uvarint(uint64(m.Seq)) }

func decodeSeq(d *wire.Decoder) uint32 {
	u := d.Uvarint()
	if u > 1<<32-1 {
		d.Fail("probe seq", wire.ErrOverflow)
	}
	return uint32(u)
}

// RegisterProbeCodecs registers the probe layer's kinds in c.
func RegisterProbeCodecs(c *wire.Codec) error {
	if err := c.Register(KindProbePing, "workload.ProbePing", func(d *wire.Decoder) (core.Msg, error) {
		return ProbePing{Seq: decodeSeq(d)}, d.Err()
	}); err != nil {
		return err
	}
	if err := c.Register(KindProbePong, "workload.ProbePong", func(d *wire.Decoder) (core.Msg, error) {
		return ProbePong{Seq: decodeSeq(d)}, d.Err()
	}); err != nil {
		return err
	}
	if err := c.Register(KindTreeEcho, "workload.TreeEcho", func(d *wire.Decoder) (core.Msg, error) {
		m := TreeEcho{Seq: decodeSeq(d)}
		a := d.Uvarint()
		if a < 2 || a > 1<<16 || a&(a-1) != 0 {
			d.Fail("tree echo fan-out", wire.ErrInvalid)
		}
		m.Fanout = uint32(a)
		return m, d.Err()
	}); err != nil {
		return err
	}
	return c.Register(KindTreeAck, "workload.TreeAck", func(d *wire.Decoder) (core.Msg, error) {
		return TreeAck{Seq: decodeSeq(d)}, d.Err()
	})
}

// Probe timing.
const (
	probeDelay  = 100 * time.Millisecond // from the first view to the first ping
	probeRetry  = time.Second            // a ping without its pong is sent again
	probeWarmup = 20                     // round trips not counted (connection set-up, cold caches)
)

type (
	probeStart   struct{}
	probeTimeout struct{ seq uint32 }
	echoTimeout  struct{ seq uint32 }
)

// probe is the top layer of a node: it answers pings, runs the ping-pong
// that measures L when told to and then the tree echo (see [TreeEcho]) over
// the whole view, takes part in the echoes of others, and turns transport
// hints into [record.Hint] events so that they reach the event stream. It owns
// core.ProtoTest.
type probe struct {
	env   core.Env
	peer  core.NodeID // core.None: no ping-pong
	count int
	armed bool
	seq   uint32
	sent  time.Duration
	done  int // round trips completed, warm-up included
	over  bool
	rtts  []time.Duration
	timer core.TimerID
	// hinted holds the peers whose hint episode was reported.
	hinted map[core.NodeID]bool

	// The tree echo: the view it runs over, and the echo in progress.
	fanout  int
	members []core.NodeID
	me      int // this node's position in members (-1: not in it)
	echo    echoState
	echoes  []time.Duration // the root's completed echoes, warm-up excluded
	echoN   int             // echoes completed, warm-up included
	echoTm  core.TimerID
	echoEnd bool
	// once: the echo in progress is one StartEcho asked for, reported
	// alone as a record.EchoOnce.
	once bool
}

// StartEcho asks the probe of its view's root for one tree echo over that
// view, reported alone as a [record.EchoOnce] (a supervisor's "echo" line,
// [runner.Job.StartEcho]). A node that is not its view's root, or whose
// echo series or a previous StartEcho's echo is still under way, reports
// why in the record's Err instead.
type StartEcho struct{}

// echoState is one node's part in the current echo.
type echoState struct {
	seq     uint32
	parent  core.NodeID // core.None at the root
	pending int         // children that have not answered
	sent    time.Duration
}

// Tree echo timing: as many echoes as round trips of the ping-pong, at
// least echoMin, after EchoWarmup echoes that are not counted.
const (
	echoMin    = 20
	echoWarmup = EchoWarmup
)

// EchoWarmup is how many tree echoes the root runs, right after its
// [record.PingPong], before those it counts in its [record.TreeEchoTime].
const EchoWarmup = 5

func NewProbe(peer core.NodeID, count, fanout int) *probe {
	if count <= 0 {
		peer = core.None
	}
	return &probe{peer: peer, count: count, fanout: fanout, me: -1}
}

func (p *probe) Protos() []core.Proto { return []core.Proto{core.ProtoTest} }

func (p *probe) Start(env core.Env) { p.env = env }

func (p *probe) Receive(from core.NodeID, m core.Msg) {
	switch m := m.(type) {
	case ProbePing:
		p.env.Send(from, ProbePong(m))
	case TreeEcho:
		p.forwardEcho(from, m)
	case TreeAck:
		p.echoAcked(m)
	case ProbePong:
		if from != p.peer || m.Seq != p.seq || p.over {
			return
		}
		p.env.CancelTimer(p.timer)
		rtt := p.env.Now() - p.sent
		p.done++
		if p.done > probeWarmup {
			p.rtts = append(p.rtts, rtt)
		}
		if len(p.rtts) == p.count {
			p.report()
			return
		}
		p.ping()
	}
}

func (p *probe) Fire(t core.Timer) {
	switch t := t.(type) {
	case probeStart:
		p.ping()
	case probeTimeout:
		if t.seq == p.seq && !p.over {
			p.ping()
		}
	case echoTimeout:
		if t.seq == p.echo.seq && (!p.echoEnd || p.once) {
			p.startEcho() // an echo lost in a reconnection: start another
		}
	}
}

func (p *probe) Handle(e core.Event) {
	switch e := e.(type) {
	case StartEcho:
		p.startOnce()
	case member.ViewInstalled:
		p.members = e.Members
		p.me = slices.Index(e.Members, p.env.Self())
		// A peer that left the view ends its hint episode: a dead one is
		// never heard from again, and every message would look it up.
		maps.DeleteFunc(p.hinted, func(id core.NodeID, _ bool) bool { return !slices.Contains(e.Members, id) })
		if p.peer != core.None && !p.armed {
			p.armed = true
			p.env.SetTimer(probeDelay, probeStart{})
		}
	case core.PeerHint:
		// One Hint per peer and episode: a dead peer's redials would
		// otherwise flood the event stream just when the survivors are
		// busiest. A link that answers is no problem to record.
		if !e.Answering && !p.hinted[e.Node] {
			if p.hinted == nil {
				p.hinted = map[core.NodeID]bool{}
			}
			p.hinted[e.Node] = true
			p.env.Emit(record.Hint{Node: e.Node, Reason: e.Reason})
		}
	}
}

// ObserveSend implements core.TrafficObserver.
func (p *probe) ObserveSend(core.NodeID) {}

// ObserveReceive implements core.TrafficObserver: a message from a peer
// ends its hint episode.
func (p *probe) ObserveReceive(from core.NodeID) {
	if len(p.hinted) > 0 {
		delete(p.hinted, from)
	}
}

func (p *probe) ping() {
	p.seq++
	p.sent = p.env.Now()
	p.env.Send(p.peer, ProbePing{Seq: p.seq})
	p.timer = p.env.SetTimer(probeRetry, probeTimeout{seq: p.seq})
}

func (p *probe) report() {
	s := slices.Clone(p.rtts)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	n := len(s)
	p.env.Emit(record.PingPong{Peer: p.peer, Count: n, Min: s[0], Median: median(s), Mean: sum / time.Duration(n), Max: s[n-1]})
	p.over = true
	if p.fanout >= 2 {
		p.startEcho()
	}
}

// children returns the positions lo..hi-1 of self's children in the radix
// tree of fan-out a over the current view, and whether self is in it.
func (p *probe) children(a int) (lo, hi int, ok bool) {
	me := p.me
	if me < 0 {
		return 0, 0, false
	}
	t, err := topo.NewRadix(len(p.members), a)
	if err != nil {
		return 0, 0, false
	}
	lo, hi = t.Children(me)
	return lo, hi, true
}

// startEcho sends a new echo down the tree from this node (the root).
func (p *probe) startEcho() {
	p.echo = echoState{seq: p.echo.seq + 1, parent: core.None, sent: p.env.Now()}
	p.echoTm = p.env.SetTimer(probeRetry, echoTimeout{seq: p.echo.seq})
	p.sendEcho(TreeEcho{Seq: p.echo.seq, Fanout: uint32(p.fanout)})
}

// startOnce starts the echo StartEcho asks for, or reports why it cannot.
func (p *probe) startOnce() {
	var why string
	switch {
	case p.me != 0:
		why = "not the root of its view"
	case p.fanout < 2:
		why = "no tree echo without a fan-out"
	case p.once || p.peer != core.None && !p.echoEnd:
		why = "an echo is under way" // or the ping-pong and echo series, still to come
	}
	if why != "" {
		p.env.Emit(record.EchoOnce{Fanout: p.fanout, Members: len(p.members), Err: why})
		return
	}
	p.once = true
	p.startEcho()
}

// forwardEcho takes part in an echo started by another node.
func (p *probe) forwardEcho(from core.NodeID, m TreeEcho) {
	p.echo = echoState{seq: m.Seq, parent: from}
	p.sendEcho(m)
}

// sendEcho sends m to this node's children, or answers at once as a leaf.
func (p *probe) sendEcho(m TreeEcho) {
	lo, hi, ok := p.children(int(m.Fanout))
	if !ok {
		return
	}
	p.echo.pending = hi - lo
	for c := lo; c < hi; c++ {
		p.env.Send(p.members[c], m)
	}
	if p.echo.pending == 0 {
		p.echoDone()
	}
}

// echoAcked counts a child's answer.
func (p *probe) echoAcked(m TreeAck) {
	if m.Seq != p.echo.seq || p.echo.pending == 0 {
		return
	}
	p.echo.pending--
	if p.echo.pending == 0 {
		p.echoDone()
	}
}

// echoDone answers the parent, or at the root records the echo and starts
// the next one (emitting a [record.TreeEchoTime] when enough are recorded).
func (p *probe) echoDone() {
	if p.echo.parent != core.None {
		p.env.Send(p.echo.parent, TreeAck{Seq: p.echo.seq})
		return
	}
	p.env.CancelTimer(p.echoTm)
	if p.once {
		p.once = false
		p.env.Emit(record.EchoOnce{Fanout: p.fanout, Members: len(p.members), Took: p.env.Now() - p.echo.sent})
		return
	}
	p.echoN++
	if p.echoN > echoWarmup {
		p.echoes = append(p.echoes, p.env.Now()-p.echo.sent)
	}
	if len(p.echoes) < max(p.count, echoMin) {
		p.startEcho()
		return
	}
	p.echoEnd = true
	s := slices.Clone(p.echoes)
	slices.Sort(s)
	p.env.Emit(record.TreeEchoTime{Fanout: p.fanout, Members: len(p.members), Count: len(s), Min: s[0], Median: median(s), Max: s[len(s)-1]})
}

// timedMember wraps the membership machine and emits a [record.ProcessTime] for
// every proposal (the first phase's FAILED_NODE, ROOT_DEAD, …) it handles:
// the computation overhead O_cp of the benchmark. It also counts the
// failure reports it receives and emits them as [record.Reports] after each
// member.Stabilized.
type timedMember struct {
	m   *member.Member
	env core.Env
	// renv is the member's Env, here rather than boxed on its own: the
	// member's every send goes through it, and a stabilization finds it,
	// as everything else, out of the caches.
	renv    reportEnv
	reports int
	from    []core.NodeID
	// timed holds the ProcessTime records of the proposals handled since
	// the node last installed or stabilized a view: they are emitted then
	// (before the view's events), after the stabilization they time, so
	// that recording them takes nothing from it.
	timed []timedPrepare
}

// timedPrepare is a ProcessTime record held back, with its kind's name
// looked up only when it is emitted.
type timedPrepare struct {
	kind core.Kind
	pt   record.ProcessTime
}

// maxTimed bounds the ProcessTime records a node holds back: more are
// emitted at once.
const maxTimed = 64

// flushTimed emits the records held back.
func (t *timedMember) flushTimed() {
	for _, tp := range t.timed {
		tp.pt.Kind = member.KindName(tp.kind)
		t.env.Emit(tp.pt)
	}
	clear(t.timed)
	t.timed = t.timed[:0]
}

func (t *timedMember) Protos() []core.Proto { return t.m.Protos() }

func (t *timedMember) Start(env core.Env) {
	t.env = env
	t.renv = reportEnv{Env: env, t: t}
	t.m.Start(&t.renv)
}

// reportEnv is the member's Env: it follows the member's events to emit
// [record.Reports] after a Stabilized and to reset the count on a new view.
// It passes on what the Env under it offers (core.SendCopier,
// core.Recycler): hidden, the member allocated every ACK it sent and never
// handed one back, a cost the benchmark would have charged to it.
type reportEnv struct {
	core.Env
	t *timedMember
}

func (e *reportEnv) SendCopies() bool { return core.SendCopies(e.Env) }

func (e *reportEnv) Recycle(m core.Msg) { core.Recycle(e.Env, m) }

func (e *reportEnv) Emit(ev core.Event) {
	switch ev.(type) {
	case member.Stabilized, core.MembersChanged, member.ViewInstalled:
		e.t.flushTimed()
	}
	e.Env.Emit(ev)
	switch ev := ev.(type) {
	case member.Stabilized:
		e.Env.Emit(record.Reports{Epoch: ev.Epoch, Count: e.t.reports, From: e.t.from})
		e.t.reports, e.t.from = 0, nil
	case member.ViewInstalled:
		e.t.reports, e.t.from = 0, nil
	}
}

func (t *timedMember) Receive(from core.NodeID, m core.Msg) {
	if _, ok := m.(*member.Report); ok {
		t.reports++
		if !slices.Contains(t.from, from) {
			t.from = append(t.from, from)
		}
	}
	p, ok := m.(*member.Prepare)
	if !ok {
		t.m.Receive(from, m)
		return
	}
	t0 := t.env.Now()
	t.m.Receive(from, m)
	if len(t.timed) == maxTimed {
		t.flushTimed()
	}
	t.timed = append(t.timed, timedPrepare{m.Kind(), record.ProcessTime{Epoch: p.Epoch, From: from, At: t0, Took: t.env.Now() - t0}})
}

func (t *timedMember) Fire(tm core.Timer)  { t.m.Fire(tm) }
func (t *timedMember) Handle(e core.Event) { t.m.Handle(e) }

// TimeMember wraps the membership machine m so that it emits a
// [record.ProcessTime] for every failure notice it handles.
func TimeMember(m *member.Member) core.Machine { return &timedMember{m: m} }

// median returns the median of the sorted sample s, 0 if it is empty.
func median(s []time.Duration) time.Duration {
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
