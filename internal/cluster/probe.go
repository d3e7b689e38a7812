package cluster

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/wire"
)

// The message kinds of the probe layer, in core.ProtoTest (reserved for
// tests and benchmarks). Append only: the numbers are on the wire.
const (
	KindProbePing = core.Kind(core.ProtoTest)<<8 | 1 // [ProbePing]
	KindProbePong = core.Kind(core.ProtoTest)<<8 | 2 // [ProbePong]
)

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
	if err := c.Register(KindProbePing, "cluster.ProbePing", func(d *wire.Decoder) (core.Msg, error) {
		return ProbePing{Seq: decodeSeq(d)}, d.Err()
	}); err != nil {
		return err
	}
	return c.Register(KindProbePong, "cluster.ProbePong", func(d *wire.Decoder) (core.Msg, error) {
		return ProbePong{Seq: decodeSeq(d)}, d.Err()
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
)

// probe is the top layer of a node: it answers pings, runs the ping-pong
// that measures L when told to, and turns transport hints into [Hint]
// events so that they reach the event stream. It owns core.ProtoTest.
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
}

func newProbe(peer core.NodeID, count int) *probe {
	if count <= 0 {
		peer = core.None
	}
	return &probe{peer: peer, count: count}
}

func (p *probe) Protos() []core.Proto { return []core.Proto{core.ProtoTest} }

func (p *probe) Start(env core.Env) { p.env = env }

func (p *probe) Receive(from core.NodeID, m core.Msg) {
	switch m := m.(type) {
	case ProbePing:
		p.env.Send(from, ProbePong(m))
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
	}
}

func (p *probe) Handle(e core.Event) {
	switch e := e.(type) {
	case member.ViewInstalled:
		if p.peer != core.None && !p.armed {
			p.armed = true
			p.env.SetTimer(probeDelay, probeStart{})
		}
	case core.PeerHint:
		// One Hint per peer and episode: a dead peer's redials would
		// otherwise flood the event stream just when the survivors are
		// busiest.
		if !p.hinted[e.Node] {
			if p.hinted == nil {
				p.hinted = map[core.NodeID]bool{}
			}
			p.hinted[e.Node] = true
			p.env.Emit(Hint(e))
		}
	}
}

// ObserveSend implements core.TrafficObserver.
func (p *probe) ObserveSend(core.NodeID) {}

// ObserveReceive implements core.TrafficObserver: a message from a peer
// ends its hint episode.
func (p *probe) ObserveReceive(from core.NodeID) { delete(p.hinted, from) }

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
	p.env.Emit(PingPong{Peer: p.peer, Count: n, Min: s[0], Median: median(s), Mean: sum / time.Duration(n), Max: s[n-1]})
	p.over = true
}

// timedMember wraps the membership machine and emits a [ProcessTime] for
// every proposal (the first phase's FAILED_NODE, ROOT_DEAD, …) it handles:
// the computation overhead O_cp of the benchmark. It also counts the
// failure reports it receives and emits them as [Reports] after each
// member.Stabilized.
type timedMember struct {
	m       *member.Member
	env     core.Env
	reports int
	from    []core.NodeID
}

func (t *timedMember) Protos() []core.Proto { return t.m.Protos() }

func (t *timedMember) Start(env core.Env) {
	t.env = env
	t.m.Start(reportEnv{Env: env, t: t})
}

// reportEnv is the member's Env: it follows the member's events to emit
// [Reports] after a Stabilized and to reset the count on a new view.
type reportEnv struct {
	core.Env
	t *timedMember
}

func (e reportEnv) Emit(ev core.Event) {
	e.Env.Emit(ev)
	switch ev := ev.(type) {
	case member.Stabilized:
		e.Env.Emit(Reports{Epoch: ev.Epoch, Count: e.t.reports, From: e.t.from})
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
	t.env.Emit(ProcessTime{Kind: member.KindName(m.Kind()), Epoch: p.Epoch, From: from, Took: t.env.Now() - t0})
}

func (t *timedMember) Fire(tm core.Timer)  { t.m.Fire(tm) }
func (t *timedMember) Handle(e core.Event) { t.m.Handle(e) }
