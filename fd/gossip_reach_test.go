package fd

import (
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// TestGossipSuspectAnswersOrigin: a suspect that a helper tells of a
// suspicion some hops back (Origin) answers the suspecting member itself,
// directly and through members it heard from lately, not the helper: the
// way back through the helpers may be cut one way while the link from the
// suspect to the suspecting member is not.
func TestGossipSuspectAnswersOrigin(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 3, members)
	g.Receive(1, gossipTable(t, members, 0, 0, 1, 0))
	env.TakeSent()
	g.Receive(2, GossipProbeReq{Seq: 5, Subject: 3, Origin: 0, OriginSeq: 40})
	sent := env.TakeSent()
	if len(sent) < 2 || sent[0].To != 0 || sent[0].Msg != (GossipProbeAck{Seq: 40, Subject: 3, Beat: sent[0].Msg.(GossipProbeAck).Beat, Pong: true}) {
		t.Fatalf("suspect sent %v, want its answer to n0's request 40 first", sent)
	}
	for _, s := range sent[1:] {
		if r, ok := s.Msg.(GossipProbeRelay); !ok || r.To != 0 || r.Seq != 40 || s.To == 0 {
			t.Fatalf("suspect sent %v, want only relays of its answer to n0 after it", sent)
		}
	}
	// Other helpers tell of the same request: it is answered once.
	g.Receive(1, GossipProbeReq{Seq: 9, Subject: 3, Origin: 0, OriginSeq: 40})
	if sent := env.TakeSent(); len(sent) != 0 {
		t.Fatalf("answered n0's request 40 again: %v", sent)
	}
}

// TestGossipHelperSecondWave: a helper whose pass-on got no answer half
// way through asks more members (the first were drawn while many doubted
// each other), with the same request, so that their answers reach every
// requester that shares it; an answered pass-on asks nobody more.
func TestGossipHelperSecondWave(t *testing.T) {
	members := gfirst(10)
	cfg := gossipTestConfig(topo.DoubleBinaryRoundRobin)
	for _, answered := range []bool{false, true} {
		g, env := startGossip(t, cfg, 1, members)
		env.TakeSent()
		g.Receive(0, GossipProbeReq{Seq: 40, Subject: 9, Hops: 3})
		var first []core.NodeID
		var sub uint32
		for _, s := range env.TakeSent() {
			if m, ok := s.Msg.(GossipProbeReq); ok && s.To != 9 {
				first, sub = append(first, s.To), m.Seq
			}
		}
		if len(first) != cfg.IndirectProbes {
			t.Fatalf("first pass-on to %v, want %d helpers", first, cfg.IndirectProbes)
		}
		if answered {
			g.Receive(first[0], GossipProbeAck{Seq: sub, Subject: 9, Pong: true})
		}
		env.Advance(cfg.probeTimeout()/2, g)
		var second []core.NodeID
		for _, s := range env.TakeSent() {
			if m, ok := s.Msg.(GossipProbeReq); ok && m.Seq == sub {
				second = append(second, s.To)
			}
		}
		slices.Sort(second)
		want := []core.NodeID{}
		if !answered {
			for _, id := range members {
				if id != 0 && id != 1 && id != 9 && !slices.Contains(first, id) {
					want = append(want, id)
				}
			}
		}
		if !slices.Equal(second, want) && !(len(second) == 0 && len(want) == 0) {
			t.Errorf("answered %v: second wave to %v, want %v", answered, second, want)
		}
	}
}

// TestGossipSharedPassOnAsksRequesters: a pass-on shared by a second
// requester is sent to the first requester as well (it was left out, as
// the one to go round, but may reach the suspect for the second), once.
func TestGossipSharedPassOnAsksRequesters(t *testing.T) {
	members := gfirst(6)
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 1, members)
	env.TakeSent()
	g.Receive(0, GossipProbeReq{Seq: 40, Subject: 5, Hops: 2})
	var sub uint32
	for _, s := range env.TakeSent() {
		if m, ok := s.Msg.(GossipProbeReq); ok && s.To != 5 {
			sub = m.Seq
			if s.To == 0 {
				t.Fatalf("passed on to the requester: %v", s)
			}
		}
	}
	for range 2 {
		g.Receive(2, GossipProbeReq{Seq: 41, Subject: 5, Hops: 2})
	}
	var toFirst int
	for _, s := range env.TakeSent() {
		if m, ok := s.Msg.(GossipProbeReq); ok && s.To == 0 {
			if m.Seq != sub || m.Subject != 5 {
				t.Fatalf("sent n0 %v, want the shared request %d", m, sub)
			}
			toFirst++
		}
	}
	if toFirst != 1 {
		t.Fatalf("sent the shared request to n0 %d times, want once", toFirst)
	}
}

// TestGossipHelperTellsOwnNews: a helper that suspects the subject itself
// and then learns it alive (its own probe answered) answers the requests
// it is helping with: its requesters need not reach whoever answered it.
func TestGossipHelperTellsOwnNews(t *testing.T) {
	g, env, reqs, _ := silentSuspect(t, gossipTestConfig(topo.DoubleBinaryRoundRobin))
	g.Receive(2, GossipProbeReq{Seq: 50, Subject: 3})
	env.TakeSent()
	g.Receive(1, GossipProbeAck{Seq: reqs[0].Seq, Subject: 3, Beat: 5, Pong: true})
	var got []GossipProbeAck
	for _, s := range env.TakeSent() {
		if m, ok := s.Msg.(GossipProbeAck); ok && s.To == 2 {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Seq != 50 || got[0].Subject != 3 || !got[0].Pong {
		t.Fatalf("answered n2 with %v, want one probe-ack{50 n3 pong}", got)
	}
}

// TestGossipProbeAsksJoinedMembers: a suspicion whose probe runs when the
// view changes asks the members new to the view too, and its verdict
// waits a fresh ProbeTimeout for their answer.
func TestGossipProbeAsksJoinedMembers(t *testing.T) {
	cfg := gossipTestConfig(topo.DoubleBinaryRoundRobin)
	g, env, _, _ := silentSuspect(t, cfg)
	env.Advance(cfg.probeTimeout()/2, g)
	env.TakeSent()
	g.Handle(core.MembersChanged{Epoch: 1, Members: gfirst(5)})
	var to []core.NodeID
	for _, s := range env.TakeSent() {
		if m, ok := s.Msg.(GossipProbeReq); ok && m.Subject == 3 {
			to = append(to, s.To)
		}
	}
	if !slices.Equal(to, gids(4)) {
		t.Fatalf("asked %v about n3 on the view change, want the new member n4", to)
	}
	env.Advance(cfg.probeTimeout()*3/4, g)
	for _, ev := range env.TakeEmitted() {
		if ev == (core.Failed{Node: 3}) {
			t.Fatalf("declared n3 failed before the new helper's time was up")
		}
	}
	env.Advance(cfg.probeTimeout(), g)
	if evs := env.TakeEmitted(); !slices.Contains(evs, core.Event(core.Failed{Node: 3})) {
		t.Fatalf("emitted %v, want n3 failed once the new helper's time is up", evs)
	}
}
