package workload

import (
	"errors"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/internal/record"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/wire"
)

// TestProbePingPong: once the first view is installed the probe pings its
// peer, one ping at a time, discards the warm-up round trips and reports
// the others' minimum, median, mean and maximum as one PingPong.
func TestProbePingPong(t *testing.T) {
	env := coretest.NewEnv(0, 1)
	p := NewProbe(1, 3, 0)
	p.Start(env)
	p.Handle(member.ViewInstalled{Epoch: 1, Members: ids(0, 1)})
	p.Handle(member.ViewInstalled{Epoch: 2, Members: ids(0, 1)}) // arms once
	if n := len(env.Pending()); n != 1 {
		t.Fatalf("%d timers pending, want 1", n)
	}
	env.AdvanceTo(probeDelay, p)
	rtts := []time.Duration{7, 2, 9} // µs, after the warm-up
	for i := range probeWarmup + len(rtts) {
		sent := env.TakeSent()
		if len(sent) != 1 || sent[0].To != 1 {
			t.Fatalf("round %d: sent %v", i, sent)
		}
		ping := sent[0].Msg.(ProbePing)
		rtt := 100 * time.Microsecond
		if i >= probeWarmup {
			rtt = rtts[i-probeWarmup] * time.Microsecond
		}
		env.T += rtt
		p.Receive(1, ProbePong{Seq: ping.Seq + 1}) // a stale or wrong pong is ignored
		p.Receive(2, ProbePong{Seq: ping.Seq})
		p.Receive(1, ProbePong(ping))
	}
	if sent := env.TakeSent(); len(sent) != 0 {
		t.Fatalf("pings after the last round trip: %v", sent)
	}
	ev := env.TakeEmitted()
	if len(ev) != 1 {
		t.Fatalf("emitted %v", ev)
	}
	want := record.PingPong{Peer: 1, Count: 3, Min: 2 * time.Microsecond, Median: 7 * time.Microsecond, Mean: 6 * time.Microsecond, Max: 9 * time.Microsecond}
	if ev[0] != want {
		t.Fatalf("got %+v, want %+v", ev[0], want)
	}
}

// TestProbeRetry: a ping whose pong does not come within probeRetry is sent
// again with a new sequence number.
func TestProbeRetry(t *testing.T) {
	env := coretest.NewEnv(0, 1)
	p := NewProbe(1, 1, 0)
	p.Start(env)
	p.Handle(member.ViewInstalled{Epoch: 1})
	env.AdvanceTo(probeDelay, p)
	first := env.TakeSent()[0].Msg.(ProbePing)
	env.Advance(probeRetry, p)
	again := env.TakeSent()
	if len(again) != 1 || again[0].Msg.(ProbePing).Seq != first.Seq+1 {
		t.Fatalf("resent %v", again)
	}
}

// TestProbeAnswersAndHints: any node answers pings; hints reach the event
// stream once per peer until the peer is heard from again or leaves the
// view.
func TestProbeAnswersAndHints(t *testing.T) {
	env := coretest.NewEnv(3, 1)
	p := NewProbe(core.None, 0, 0)
	p.Start(env)
	p.Receive(5, ProbePing{Seq: 9})
	if s := env.TakeSent(); len(s) != 1 || s[0].To != 5 || s[0].Msg != (ProbePong{Seq: 9}) {
		t.Fatalf("answer %v", s)
	}
	p.Handle(member.ViewInstalled{Epoch: 1})
	if len(env.Pending()) != 0 {
		t.Fatal("a probe without a peer set a timer")
	}
	h := core.PeerHint{Node: 5, Reason: "dial: refused"}
	p.Handle(h)
	p.Handle(h)
	p.ObserveReceive(4)
	p.Handle(h)
	if ev := env.TakeEmitted(); len(ev) != 1 || ev[0] != (record.Hint{Node: 5, Reason: "dial: refused"}) {
		t.Fatalf("emitted %v", ev)
	}
	p.ObserveReceive(5)
	p.Handle(h)
	if ev := env.TakeEmitted(); len(ev) != 1 {
		t.Fatalf("after a message from n5: emitted %v", ev)
	}
	// A view without n5 ends its episode too (a dead peer is never
	// heard from again); a view with it does not.
	p.Handle(member.ViewInstalled{Epoch: 2, Members: ids(3, 5)})
	p.Handle(h)
	if ev := env.TakeEmitted(); len(ev) != 0 {
		t.Fatalf("n5 still in the view: emitted %v", ev)
	}
	p.Handle(member.ViewInstalled{Epoch: 3, Members: ids(3)})
	p.Handle(h)
	if ev := env.TakeEmitted(); len(ev) != 1 {
		t.Fatalf("after a view without n5: emitted %v", ev)
	}
}

// TestProbeCodec: the probe kinds round-trip through a node's codec, and a
// truncated payload is an error.
func TestProbeCodec(t *testing.T) {
	c, err := stack.NewCodec(RegisterProbeCodecs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []wire.Message{ProbePing{Seq: 1 << 31}, ProbePong{Seq: 7}} {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil || got != core.Msg(m) {
			t.Fatalf("%T: got %v, %v", m, got, err)
		}
		if _, err := c.Unmarshal(m.Kind(), nil); err == nil {
			t.Fatalf("%T: empty payload decoded", m)
		}
	}
	if _, err := c.Unmarshal(KindProbePing, []byte{0xff, 0xff, 0xff, 0xff, 0x7f}); err == nil {
		t.Fatal("a sequence number above 2^32 decoded")
	}
}

// TestTreeEcho: after its ping-pong the root sends echoes down the radix
// tree of its view (n = 11, fan-out 2, so H = 4 and the view is not a full
// tree); every node forwards to exactly its children and answers its parent
// once its whole subtree has; the root counts max(count, echoMin) echoes
// after the warm-up and reports them as one TreeEchoTime.
func TestTreeEcho(t *testing.T) {
	const n, a = 11, 2
	view := member.ViewInstalled{Epoch: 1, Members: make([]core.NodeID, n)}
	for i := range view.Members {
		view.Members[i] = core.NodeID(10 + i) // ids are not positions
	}
	envs := make([]*coretest.Env, n)
	probes := make([]*probe, n)
	byID := map[core.NodeID]int{}
	for i, id := range view.Members {
		envs[i] = coretest.NewEnv(id, 1)
		peer, count := core.None, 0
		if i == 0 {
			peer, count = view.Members[1], 1
		}
		probes[i] = NewProbe(peer, count, a)
		probes[i].Start(envs[i])
		probes[i].Handle(view)
		byID[id] = i
	}
	// The root's ping-pong, then the echoes.
	envs[0].AdvanceTo(probeDelay, probes[0])
	for range probeWarmup + 1 {
		ping := envs[0].TakeSent()[0].Msg.(ProbePing)
		probes[0].Receive(view.Members[1], ProbePong(ping))
	}
	// Pump messages until quiet, checking that each echo goes to children;
	// it returns the echoes the root sent.
	pump := func() (echoes int) {
		for busy := true; busy; {
			busy = false
			for i := range n {
				for _, s := range envs[i].TakeSent() {
					busy = true
					j := byID[s.To]
					switch m := s.Msg.(type) {
					case TreeEcho:
						if p := (j - 1) / a; p != i {
							t.Fatalf("n%d (position %d) sent an echo to position %d, whose parent is %d", view.Members[i], i, j, p)
						}
						if i == 0 {
							echoes++
						}
						envs[j].T += 3 * time.Microsecond
						probes[j].Receive(view.Members[i], m)
					case TreeAck:
						if p := (i - 1) / a; p != j {
							t.Fatalf("position %d answered position %d, not its parent %d", i, j, p)
						}
						envs[0].T += time.Microsecond
						probes[j].Receive(view.Members[i], m)
					}
				}
			}
		}
		return echoes
	}
	// An echo asked for while the series runs is refused.
	probes[0].Handle(StartEcho{})
	if got := onceReports(envs[0]); len(got) != 1 || got[0].Err == "" {
		t.Fatalf("StartEcho during the series reported %+v, want one refusal", got)
	}
	echoes := pump()
	if want := (echoWarmup + echoMin) * a; echoes != want {
		t.Fatalf("the root sent %d echoes, want %d (%d echoes × %d children)", echoes, want, echoWarmup+echoMin, a)
	}
	var got []record.TreeEchoTime
	for _, e := range envs[0].TakeEmitted() {
		if e, ok := e.(record.TreeEchoTime); ok {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0].Count != echoMin || got[0].Members != n || got[0].Fanout != a || got[0].Median <= 0 {
		t.Fatalf("tree echo reports %+v, want one with %d echoes over %d members", got, echoMin, n)
	}
	for i := 1; i < n; i++ {
		if ev := envs[i].TakeEmitted(); len(ev) != 0 {
			t.Fatalf("position %d emitted %v; only the root reports", i, ev)
		}
	}

	// After the series, StartEcho runs exactly one echo, reported alone;
	// a second one asked for before it ends, and one asked of a node that
	// is not the root, are refused.
	envs[0].T = time.Second
	probes[0].Handle(StartEcho{})
	probes[0].Handle(StartEcho{})
	probes[3].Handle(StartEcho{})
	if got := onceReports(envs[3]); len(got) != 1 || got[0].Err != "not the root of its view" {
		t.Fatalf("StartEcho at a non-root reported %+v", got)
	}
	if got := onceReports(envs[0]); len(got) != 1 || got[0].Err != "an echo is under way" {
		t.Fatalf("a second StartEcho reported %+v, want a refusal", got)
	}
	if echoes := pump(); echoes != a {
		t.Fatalf("StartEcho made the root send %d echoes, want one to each of its %d children", echoes, a)
	}
	ev := envs[0].TakeEmitted()
	if len(ev) != 1 {
		t.Fatalf("after StartEcho's echo the root emitted %v, want one EchoOnce", ev)
	}
	if e, ok := ev[0].(record.EchoOnce); !ok || e.Err != "" || e.Took <= 0 || e.Members != n || e.Fanout != a {
		t.Fatalf("after StartEcho's echo the root emitted %#v", ev[0])
	}
	probes[0].Handle(StartEcho{}) // over: another may start
	if echoes := pump(); echoes != a {
		t.Fatalf("a second StartEcho made the root send %d echoes, want %d", echoes, a)
	}
}

// onceReports takes the EchoOnce events env's machine emitted.
func onceReports(env *coretest.Env) []record.EchoOnce {
	var got []record.EchoOnce
	for _, e := range env.TakeEmitted() {
		if e, ok := e.(record.EchoOnce); ok {
			got = append(got, e)
		}
	}
	return got
}

// TestProbeCodecs: the probe kinds round-trip, and a tree echo whose
// fan-out is not a power of two ≥ 2 is refused with wire.ErrInvalid.
func TestProbeCodecs(t *testing.T) {
	c := wire.NewCodec()
	if err := RegisterProbeCodecs(c); err != nil {
		t.Fatal(err)
	}
	for _, m := range []core.Msg{ProbePing{Seq: 7}, ProbePong{Seq: 1 << 31}, TreeEcho{Seq: 3, Fanout: 4}, TreeAck{Seq: 9}} {
		b, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Unmarshal(m.Kind(), b)
		if err != nil || got != m {
			t.Fatalf("%#v → %#v, %v", m, got, err)
		}
	}
	for _, a := range []uint64{0, 1, 3, 6, 1 << 17} {
		var e wire.Encoder
		e.Uvarint(1)
		e.Uvarint(a)
		if _, err := c.Unmarshal(KindTreeEcho, e.B); !errors.Is(err, wire.ErrInvalid) {
			t.Errorf("fan-out %d: err %v, want wire.ErrInvalid", a, err)
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

// TestTimedMemberHoldsRecords: the wrapped member's handling of a
// proposal is timed (At: when it began, Took: how long), and its
// record.ProcessTime is emitted only when the node installs the view,
// right before the view's events, so that recording it takes nothing
// from the stabilization.
func TestTimedMemberHoldsRecords(t *testing.T) {
	m, err := member.New(member.DefaultConfig(), ids(0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(1, 1)
	tm := TimeMember(m)
	tm.Start(env)
	env.TakeEmitted()
	env.T = 5 * time.Millisecond
	epoch := member.MakeEpoch(2, 0)
	tm.Receive(0, &member.Prepare{Cause: member.CauseFailedNode, Epoch: epoch, Ancestry: []uint64{member.MakeEpoch(1, 0)}, Failed: ids(2)})
	if ev := env.TakeEmitted(); len(ev) != 0 {
		t.Fatalf("emitted %v while the view is not installed; want nothing yet", ev)
	}
	if sent := env.TakeSent(); len(sent) != 1 || sent[0].To != 0 || sent[0].Msg.Kind() != member.KindFailureAck {
		t.Fatalf("sent %v, want the leaf's FAILURE_ACK to the root", sent)
	}
	env.T = 7 * time.Millisecond
	tm.Receive(0, &member.Commit{Epoch: epoch})
	ev := env.TakeEmitted()
	if len(ev) < 2 {
		t.Fatalf("emitted %v after the commit", ev)
	}
	pt, ok := ev[0].(record.ProcessTime)
	want := record.ProcessTime{Kind: "FAILED_NODE", Epoch: epoch, From: 0, At: 5 * time.Millisecond}
	if !ok || pt != want {
		t.Fatalf("first event after the commit %#v, want %#v", ev[0], want)
	}
	if _, ok := ev[len(ev)-1].(member.ViewInstalled); !ok {
		t.Fatalf("last event %#v, want the ViewInstalled after the held record", ev[len(ev)-1])
	}
}

// copyingEnv is an Env that copies what is sent and takes messages back,
// as a host does.
type copyingEnv struct {
	*coretest.Env
	recycled []core.Msg
}

func (e *copyingEnv) SendCopies() bool   { return true }
func (e *copyingEnv) Recycle(m core.Msg) { e.recycled = append(e.recycled, m) }

// The timed member's Env passes on what the host's offers: the member
// reuses its ACK when sends are copied and hands back what it received.
func TestTimedMemberKeepsTheHostsOffers(t *testing.T) {
	host := &copyingEnv{Env: coretest.NewEnv(0, 1)}
	env := &reportEnv{Env: host, t: &timedMember{}}
	if !core.SendCopies(env) {
		t.Error("the member's Env hides that sends are copied")
	}
	r := core.RecyclerOf(env)
	if r == nil {
		t.Fatal("the member's Env hides the host's recycler")
	}
	a := &member.Ack{}
	r.Recycle(a)
	if len(host.recycled) != 1 || host.recycled[0] != a {
		t.Errorf("recycled %v, want the ACK handed back", host.recycled)
	}
	plain := &reportEnv{Env: coretest.NewEnv(0, 1), t: &timedMember{}}
	if core.SendCopies(plain) {
		t.Error("an Env that does not copy sends says it does")
	}
	core.RecyclerOf(plain).Recycle(a) // nothing under it: a no-op
}
