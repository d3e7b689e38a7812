package core_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// layer is a recording machine that owns one protocol.
type layer struct {
	name    string
	proto   core.Proto
	env     core.Env
	log     *[]string
	onEvent func(env core.Env, e core.Event)
	sent    []core.NodeID
	recv    []core.NodeID
}

type msg struct{ k core.Kind }

func (m msg) Kind() core.Kind { return m.k }

func (l *layer) Protos() []core.Proto { return []core.Proto{l.proto} }
func (l *layer) Start(env core.Env) {
	l.env = env
	*l.log = append(*l.log, l.name+".start")
	env.SetTimer(time.Second, l.name+"-timer")
}
func (l *layer) Receive(from core.NodeID, m core.Msg) {
	*l.log = append(*l.log, fmt.Sprintf("%s.recv(%v,%v)", l.name, from, m.Kind()))
	l.env.Emit(l.name + "-got")
}
func (l *layer) Fire(t core.Timer) { *l.log = append(*l.log, fmt.Sprintf("%s.fire(%v)", l.name, t)) }
func (l *layer) Handle(e core.Event) {
	*l.log = append(*l.log, fmt.Sprintf("%s.handle(%v)", l.name, e))
	if l.onEvent != nil {
		l.onEvent(l.env, e)
	}
}

// observer additionally sees all traffic.
type observer struct{ layer }

func (o *observer) ObserveSend(to core.NodeID)      { o.sent = append(o.sent, to) }
func (o *observer) ObserveReceive(from core.NodeID) { o.recv = append(o.recv, from) }

func TestStackRoutesMessagesTimersAndEvents(t *testing.T) {
	var log []string
	low := &observer{layer{name: "fd", proto: core.ProtoFD, log: &log}}
	high := &layer{name: "member", proto: core.ProtoMember, log: &log}
	// member reacts to fd's event by emitting its own and sending.
	high.onEvent = func(env core.Env, e core.Event) {
		if e == "fd-got" {
			env.Emit("member-reacted")
			env.Send(9, msg{core.MakeKind(core.ProtoMember, 1)})
		}
	}
	s := core.NewStack(low, high)
	env := coretest.NewEnv(1, 1)
	s.Start(env)
	s.Receive(5, msg{core.MakeKind(core.ProtoFD, 3)})
	s.Receive(6, msg{core.MakeKind(core.ProtoApp, 1)}) // nobody owns app
	env.Advance(2*time.Second, s)

	want := []string{
		"fd.start", "member.start",
		"fd.recv(n5,fd/3)", "member.handle(fd-got)", "fd.handle(member-reacted)",
		"fd.fire(fd-timer)", "member.fire(member-timer)",
	}
	if !slices.Equal(log, want) {
		t.Fatalf("log:\n got %q\nwant %q", log, want)
	}
	if fmt.Sprint(env.Emitted) != "[fd-got member-reacted]" {
		t.Fatalf("events reaching the host: %v", env.Emitted)
	}
	if s.Unrouted != 1 {
		t.Fatalf("unrouted = %d, want 1", s.Unrouted)
	}
	// The observer saw the member layer's send and both receives.
	if fmt.Sprint(low.sent) != "[n9]" || fmt.Sprint(low.recv) != "[n5 n6]" {
		t.Fatalf("observer saw sends %v receives %v", low.sent, low.recv)
	}
}

func TestStackOutsideEventReachesEveryLayer(t *testing.T) {
	var log []string
	s := core.NewStack(&layer{name: "a", proto: 1, log: &log}, &layer{name: "b", proto: 2, log: &log})
	env := coretest.NewEnv(0, 1)
	s.Start(env)
	log = nil
	s.Handle(core.PeerHint{Node: 3})
	if len(log) != 2 || len(env.Emitted) != 0 {
		t.Fatalf("log %q, emitted %v", log, env.Emitted)
	}
}

func TestStackRejectsDuplicateProtocol(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("two layers claiming one protocol did not panic")
		}
	}()
	var log []string
	core.NewStack(&layer{name: "a", proto: 1, log: &log}, &layer{name: "b", proto: 1, log: &log})
}

func TestKindAndNodeID(t *testing.T) {
	k := core.MakeKind(core.ProtoMember, 7)
	if k.Proto() != core.ProtoMember || k.String() != "member/7" {
		t.Fatalf("kind %v proto %v", k, k.Proto())
	}
	if core.None.String() != "none" || core.NodeID(3).String() != "n3" {
		t.Fatal("NodeID strings")
	}
	if core.MsgSize(msg{}) != core.DefaultMsgSize {
		t.Fatal("default size")
	}
}
