package member

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// script drives a few Members through scripted coretest.Envs: every message
// sent goes into one FIFO queue, and the test delivers, drops, crashes and
// advances the clock explicitly, like etcd-raft's interaction tests. It
// records a trace of delivered messages ("n5->n0 NODE_FAILURE [n1]") and
// the events emitted; TestScripts replays testdata/*.txt on it and compares
// them with the exchanges the paper describes.
type script struct {
	t      *testing.T
	cfg    Config
	nodes  map[core.NodeID]*scriptNode
	ids    []core.NodeID
	queue  []scriptMsg
	trace  []string
	events []rawEvent // emitted since the last takeEvents, in order
	now    time.Duration
	group  map[core.NodeID]int // partition side; nil when none
	rules  []dropRule          // messages lost on delivery, see dropRule
}

type rawEvent struct {
	id core.NodeID
	e  core.Event
}

type scriptNode struct {
	env  *coretest.Env
	m    *Member
	down bool
}

type scriptMsg struct {
	from, to core.NodeID
	m        core.Msg
}

// newScriptCfg starts nodes n0..n(n-1) with cfg, from the initial member
// list.
func newScriptCfg(t *testing.T, cfg Config, n int) *script {
	s := &script{t: t, cfg: cfg, nodes: map[core.NodeID]*scriptNode{}}
	ids := make([]core.NodeID, n)
	for i := range ids {
		ids[i] = core.NodeID(i)
	}
	for _, id := range ids {
		m, err := New(cfg, ids)
		if err != nil {
			t.Fatal(err)
		}
		s.start(id, m)
	}
	s.takeEvents()
	return s
}

func (s *script) start(id core.NodeID, m *Member) {
	env := coretest.NewEnv(id, uint64(id)+1)
	env.T = s.now
	s.nodes[id] = &scriptNode{env: env, m: m}
	if !slices.Contains(s.ids, id) {
		s.ids = append(s.ids, id)
	}
	m.Start(env)
	s.collect(id)
}

// join starts a new (or recovered) node that joins through contacts.
func (s *script) join(id core.NodeID, recovered bool, contacts ...core.NodeID) *Member {
	m, err := NewJoiner(s.cfg, JoinOptions{Contacts: contacts, Recovered: recovered})
	if err != nil {
		s.t.Fatal(err)
	}
	s.start(id, m)
	return m
}

// collect moves what node id sent into the queue and records its events.
func (s *script) collect(id core.NodeID) {
	n := s.nodes[id]
	for _, x := range n.env.TakeSent() {
		s.queue = append(s.queue, scriptMsg{id, x.To, x.Msg})
	}
	for _, e := range n.env.TakeEmitted() {
		s.events = append(s.events, rawEvent{id, e})
	}
}

// eventFormat chooses what takeEventsAs prints beyond the membership
// events.
type eventFormat struct {
	times    bool // the Began and At instants of stabilizations
	detector bool // the MembersChanged events the failure detector gets
}

// takeEvents returns the membership events emitted since the last call,
// "n0 stable 2.n0", and forgets them.
func (s *script) takeEvents() []string { return s.takeEventsAs(eventFormat{}) }

func (s *script) takeEventsAs(f eventFormat) []string {
	var out []string
	for _, r := range s.events {
		id := r.id
		switch e := r.e.(type) {
		case ViewInstalled:
			line := fmt.Sprintf("%v installs %s %v", id, FormatEpoch(e.Epoch), e.Members)
			if len(e.Left) > 0 {
				line += fmt.Sprintf(" left %v", e.Left)
			}
			out = append(out, line)
		case Leaving:
			out = append(out, fmt.Sprintf("%v hears %v leaves", id, e.Node))
		case StabilizationStarted:
			line := fmt.Sprintf("%v starts %s %v -%v +%v", id, FormatEpoch(e.Epoch), e.Cause, e.Failed, e.Joined)
			if f.times {
				line += fmt.Sprintf(" began=%v", e.Began)
			}
			out = append(out, line)
		case Stabilized:
			line := fmt.Sprintf("%v stable %s", id, FormatEpoch(e.Epoch))
			if f.times {
				line += fmt.Sprintf(" began=%v at=%v", e.Began, e.At)
			}
			out = append(out, line)
		case StabilizationAborted:
			out = append(out, fmt.Sprintf("%v aborts %s", id, FormatEpoch(e.Epoch)))
		case Evicted:
			out = append(out, fmt.Sprintf("%v evicted by %s", id, FormatEpoch(e.Epoch)))
		case Minority:
			out = append(out, fmt.Sprintf("%v minority %s %d/%d", id, FormatEpoch(e.Epoch), e.Alive, e.Size))
		case core.PeerHint:
			out = append(out, fmt.Sprintf("%v hints %v: %s", id, e.Node, e.Reason))
		case core.MembersChanged:
			if f.detector {
				out = append(out, fmt.Sprintf("%v detector %s %v renew %v", id, FormatEpoch(e.Epoch), e.Members, e.Renewed))
			}
		}
	}
	s.events = nil
	return out
}

// fail makes node at's failure detector declare x failed.
func (s *script) fail(at core.NodeID, x core.NodeID) {
	s.nodes[at].m.Handle(core.Failed{Node: x})
	s.collect(at)
}

// leave makes node id leave the group (LeaveRequest).
func (s *script) leave(id core.NodeID) {
	s.nodes[id].m.Handle(LeaveRequest{})
	s.collect(id)
}

// hear shows node at a message of another layer from x.
func (s *script) hear(at core.NodeID, x core.NodeID) {
	n := s.nodes[at]
	n.env.T = s.now
	n.m.ObserveReceive(x)
	s.collect(at)
}

// recovered makes node at's failure detector hear from x again.
func (s *script) recovered(at core.NodeID, x core.NodeID) {
	s.nodes[at].m.Handle(core.Recovered{Node: x})
	s.collect(at)
}

// partition splits the nodes into groups that cannot talk (messages
// between groups are lost); nodes in no group form one more group.
func (s *script) partition(groups ...[]core.NodeID) {
	s.group = map[core.NodeID]int{}
	for i, g := range groups {
		for _, id := range g {
			s.group[id] = i + 1
		}
	}
}

// splitDetect makes every node of a declare every node of b failed and
// vice versa, as detectors on both sides of a partition do.
func (s *script) splitDetect(a, b []core.NodeID) {
	for _, x := range a {
		for _, y := range b {
			s.fail(x, y)
			s.fail(y, x)
		}
	}
}

// heal ends the partition.
func (s *script) heal() { s.group = nil }

// crash stops a node: it receives nothing more, and what is queued for it
// is lost.
func (s *script) crash(id core.NodeID) { s.nodes[id].down = true }

// step delivers the oldest queued message; it reports false when none is
// left.
func (s *script) step() bool {
	if len(s.queue) == 0 {
		return false
	}
	q := s.queue[0]
	s.queue = s.queue[1:]
	if s.dropped(q) {
		s.trace = append(s.trace, fmt.Sprintf("%v->%v %s (dropped)", q.from, q.to, scriptDescribe(q.m)))
		return true
	}
	n := s.nodes[q.to]
	if n == nil || n.down || (s.group != nil && s.group[q.from] != s.group[q.to]) {
		s.trace = append(s.trace, fmt.Sprintf("%v->%v %s (lost)", q.from, q.to, scriptDescribe(q.m)))
		return true
	}
	s.trace = append(s.trace, fmt.Sprintf("%v->%v %s", q.from, q.to, scriptDescribe(q.m)))
	n.env.T = s.now
	n.m.ObserveReceive(q.from) // as a core.Stack shows every layer's traffic
	n.m.Receive(q.from, q.m)
	s.collect(q.to)
	return true
}

// deliver delivers until the queue is empty.
func (s *script) deliver() {
	for i := 0; s.step(); i++ {
		if i > 100000 {
			s.t.Fatal("message storm")
		}
	}
}

// drop discards the queued messages matching f.
func (s *script) drop(f func(from, to core.NodeID, m core.Msg) bool) {
	s.queue = slices.DeleteFunc(s.queue, func(q scriptMsg) bool { return f(q.from, q.to, q.m) })
}

// advance moves every live node's clock by d, firing due timers.
func (s *script) advance(d time.Duration) {
	s.now += d
	for _, id := range s.ids {
		n := s.nodes[id]
		if n.down {
			continue
		}
		n.env.AdvanceTo(s.now, n.m)
		s.collect(id)
	}
}

// takeTrace returns the trace so far and forgets it.
func (s *script) takeTrace() []string {
	t := s.trace
	s.trace = nil
	return t
}

func ids(xs ...int) []core.NodeID {
	out := make([]core.NodeID, len(xs))
	for i, x := range xs {
		out[i] = core.NodeID(x)
	}
	return out
}

// scriptDescribe renders a message as the traces of the tests spell it.
func scriptDescribe(m core.Msg) string {
	switch x := m.(type) {
	case *Report:
		if len(x.Left) > 0 {
			return fmt.Sprintf("%s %v left %v", KindName(x.Kind()), joinerIDs(x.Failed), x.Left)
		}
		return fmt.Sprintf("%s %v", KindName(x.Kind()), joinerIDs(x.Failed))
	case *ReportAck:
		return fmt.Sprintf("FAILURE_DET_ACK %v", joinerIDs(x.Failed))
	case *Prepare:
		full := ""
		if x.Full {
			full = " full"
		}
		left := ""
		if len(x.Left) > 0 {
			left = fmt.Sprintf(" left %v", x.Left)
		}
		return fmt.Sprintf("%s %s -%v +%v%s%s", KindName(x.Kind()), FormatEpoch(x.Epoch), x.Failed, joinerIDs(x.Joined), full, left)
	case *Ack:
		return fmt.Sprintf("%s %s", KindName(x.Kind()), FormatEpoch(x.Epoch))
	case *Commit:
		return fmt.Sprintf("VIEW_COMMIT %s", FormatEpoch(x.Epoch))
	case *JoinRequest:
		return fmt.Sprintf("%s %v", KindName(x.Kind()), joinerIDs(x.Joiners))
	case *JoinDetAck:
		return fmt.Sprintf("JOIN_DET_ACK %s", FormatEpoch(x.Epoch))
	case *Nack:
		return fmt.Sprintf("VIEW_NACK %s holding %s", FormatEpoch(x.Epoch), FormatEpoch(x.View.Epoch))
	case *Notice:
		if x.Final {
			return fmt.Sprintf("EXCLUDED %s root %v final", FormatEpoch(x.Epoch), x.Root)
		}
		return fmt.Sprintf("EXCLUDED %s root %v", FormatEpoch(x.Epoch), x.Root)
	case *Sync:
		return fmt.Sprintf("VIEW_SYNC %s abort %s", FormatEpoch(x.View.Epoch), FormatEpoch(x.Abort))
	case *Query:
		return fmt.Sprintf("VIEW_QUERY %s", FormatEpoch(x.Epoch))
	case *NeedView:
		return fmt.Sprintf("VIEW_NEED %s", FormatEpoch(x.Epoch))
	case *MinorityNotice:
		return fmt.Sprintf("MINORITY %s %d/%d", FormatEpoch(x.Epoch), x.Alive, x.Size)
	case *Leave:
		return fmt.Sprintf("LEAVE %s", FormatEpoch(x.Epoch))
	}
	return KindName(m.Kind())
}

// dropRule loses the messages it matches when their turn to be delivered
// comes, as a faulty link would: from and to are core.None for any node,
// kind a kind name (FAILURE_ACK) and typ a message type (Prepare, Commit)
// or "" for any; count is how many more it loses, or 0 for every one.
type dropRule struct {
	from, to  core.NodeID
	kind, typ string
	count     int
}

func (r *dropRule) matches(q scriptMsg) bool {
	return (r.from == core.None || r.from == q.from) &&
		(r.to == core.None || r.to == q.to) &&
		(r.kind == "" || r.kind == KindName(q.m.Kind())) &&
		(r.typ == "" || r.typ == msgType(q.m))
}

// msgType is the name of m's Go type without the package: "Prepare".
func msgType(m core.Msg) string {
	t := fmt.Sprintf("%T", m)
	return t[strings.LastIndexByte(t, '.')+1:]
}

// dropped reports whether a rule loses q, and counts it against the rule.
func (s *script) dropped(q scriptMsg) bool {
	for i := range s.rules {
		r := &s.rules[i]
		if !r.matches(q) {
			continue
		}
		if r.count > 0 {
			if r.count--; r.count == 0 {
				s.rules = slices.Delete(s.rules, i, i+1)
			}
		}
		return true
	}
	return false
}

// tree describes the radix tree of the view node at installed, a line per
// member: "n1 parent n0 children [n3 n4]".
func (s *script) tree(at core.NodeID) []string {
	v := s.nodes[at].m.cur
	var out []string
	for _, id := range v.list() {
		out = append(out, fmt.Sprintf("%v parent %v children %v", id, v.parent(id), v.children(id)))
	}
	return out
}
