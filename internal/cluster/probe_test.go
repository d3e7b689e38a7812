package cluster

import (
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
	p := newProbe(1, 3)
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
	want := PingPong{Peer: 1, Count: 3, Min: 2 * time.Microsecond, Median: 7 * time.Microsecond, Mean: 6 * time.Microsecond, Max: 9 * time.Microsecond}
	if ev[0] != want {
		t.Fatalf("got %+v, want %+v", ev[0], want)
	}
}

// TestProbeRetry: a ping whose pong does not come within probeRetry is sent
// again with a new sequence number.
func TestProbeRetry(t *testing.T) {
	env := coretest.NewEnv(0, 1)
	p := newProbe(1, 1)
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
// stream once per peer until the peer is heard from again.
func TestProbeAnswersAndHints(t *testing.T) {
	env := coretest.NewEnv(3, 1)
	p := newProbe(core.None, 0)
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
	if ev := env.TakeEmitted(); len(ev) != 1 || ev[0] != (Hint{Node: 5, Reason: "dial: refused"}) {
		t.Fatalf("emitted %v", ev)
	}
	p.ObserveReceive(5)
	p.Handle(h)
	if ev := env.TakeEmitted(); len(ev) != 1 {
		t.Fatalf("after a message from n5: emitted %v", ev)
	}
}

// TestProbeCodec: the probe kinds round-trip through a node's codec, and a
// truncated payload is an error.
func TestProbeCodec(t *testing.T) {
	c, err := NewCodec()
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
