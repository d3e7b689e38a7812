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
// records a trace of delivered messages ("n5->n0 NODE_FAILURE [n1]") that
// tests compare with the exact exchange the paper describes.
type script struct {
	t      *testing.T
	cfg    Config
	nodes  map[core.NodeID]*scriptNode
	ids    []core.NodeID
	queue  []scriptMsg
	trace  []string
	events []string // emitted member events, "n0 Stabilized 2.n0"
	now    time.Duration
	group  map[core.NodeID]int // partition side; nil when none
	raw    []rawEvent          // every event emitted, in order
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

func newScript(t *testing.T, fanout int, n int) *script {
	cfg := DefaultConfig()
	cfg.Fanout = fanout
	cfg.ProbeInterval = 0
	return newScriptCfg(t, cfg, n)
}

// newScriptCfg is newScript with a configuration of the test's choice.
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
		s.raw = append(s.raw, rawEvent{id, e})
		switch e := e.(type) {
		case ViewInstalled:
			s.events = append(s.events, fmt.Sprintf("%v installs %s %v", id, FormatEpoch(e.Epoch), e.Members))
		case StabilizationStarted:
			s.events = append(s.events, fmt.Sprintf("%v starts %s %v -%v +%v", id, FormatEpoch(e.Epoch), e.Cause, e.Failed, e.Joined))
		case Stabilized:
			s.events = append(s.events, fmt.Sprintf("%v stable %s", id, FormatEpoch(e.Epoch)))
		case StabilizationAborted:
			s.events = append(s.events, fmt.Sprintf("%v aborts %s", id, FormatEpoch(e.Epoch)))
		case Evicted:
			s.events = append(s.events, fmt.Sprintf("%v evicted by %s", id, FormatEpoch(e.Epoch)))
		case Minority:
			s.events = append(s.events, fmt.Sprintf("%v minority %s %d/%d", id, FormatEpoch(e.Epoch), e.Alive, e.Size))
		}
	}
}

// fail makes node at's failure detector declare x failed.
func (s *script) fail(at core.NodeID, x core.NodeID) {
	s.nodes[at].m.Handle(core.Failed{Node: x})
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
	n := s.nodes[q.to]
	if n == nil || n.down || (s.group != nil && s.group[q.from] != s.group[q.to]) {
		s.trace = append(s.trace, fmt.Sprintf("%v->%v %s (lost)", q.from, q.to, scriptDescribe(q.m)))
		return true
	}
	s.trace = append(s.trace, fmt.Sprintf("%v->%v %s", q.from, q.to, scriptDescribe(q.m)))
	n.env.T = s.now
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

func (s *script) takeEvents() []string {
	e := s.events
	s.events = nil
	return e
}

// expectTrace compares the delivered messages with want, line by line.
func (s *script) expectTrace(want ...string) {
	s.t.Helper()
	got := s.takeTrace()
	if !slices.Equal(got, want) {
		s.t.Fatalf("messages:\ngot:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func (s *script) expectEvents(want ...string) {
	s.t.Helper()
	got := s.takeEvents()
	if !slices.Equal(got, want) {
		s.t.Fatalf("events:\ngot:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// expectView checks that every live node listed has installed epoch with
// members.
func (s *script) expectView(epoch string, members []core.NodeID, at ...core.NodeID) {
	s.t.Helper()
	for _, id := range at {
		v := s.nodes[id].m.View()
		if FormatEpoch(v.Epoch) != epoch || !slices.Equal(v.Members, members) {
			s.t.Fatalf("%v holds %s %v, want %s %v", id, FormatEpoch(v.Epoch), v.Members, epoch, members)
		}
	}
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
		return fmt.Sprintf("%s %v", KindName(x.Kind()), joinerIDs(x.Failed))
	case *ReportAck:
		return fmt.Sprintf("FAILURE_DET_ACK %v", joinerIDs(x.Failed))
	case *Prepare:
		full := ""
		if x.Full {
			full = " full"
		}
		return fmt.Sprintf("%s %s -%v +%v%s", KindName(x.Kind()), FormatEpoch(x.Epoch), x.Failed, joinerIDs(x.Joined), full)
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
		return fmt.Sprintf("EXCLUDED %s root %v", FormatEpoch(x.Epoch), x.Root)
	case *Sync:
		return fmt.Sprintf("VIEW_SYNC %s abort %s", FormatEpoch(x.View.Epoch), FormatEpoch(x.Abort))
	case *Query:
		return fmt.Sprintf("VIEW_QUERY %s", FormatEpoch(x.Epoch))
	case *NeedView:
		return fmt.Sprintf("VIEW_NEED %s", FormatEpoch(x.Epoch))
	case *MinorityNotice:
		return fmt.Sprintf("MINORITY %s %d/%d", FormatEpoch(x.Epoch), x.Alive, x.Size)
	}
	return KindName(m.Kind())
}
