package fd

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
	"github.com/cohort-mp/cohort/topo"
)

// silentSuspect runs a detector of 4 members as node 0 in which node 3 is
// silent from the start (nodes 1 and 2 gossip) up to its suspicion at 3 s
// (DBRR, c = 6 rounds), and returns the probe requests sent then and their
// destinations.
func silentSuspect(t *testing.T, cfg GossipConfig) (*Gossip, *coretest.Env, []GossipProbeReq, []core.NodeID) {
	t.Helper()
	members := gfirst(4)
	g, env := startGossip(t, cfg, 0, members)
	for k := uint32(1); env.Now() < 3*time.Second; k++ {
		g.Receive(1, gossipTable(t, members, 0, k, k, 0))
		env.Advance(500*time.Millisecond, g)
	}
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Suspected{Node: 3}) {
		t.Fatalf("at %v emitted %v, want [Suspected n3]", env.Now(), evs)
	}
	var reqs []GossipProbeReq
	var to []core.NodeID
	for _, s := range env.TakeSent() {
		if m, ok := s.Msg.(GossipProbeReq); ok {
			reqs = append(reqs, m)
			to = append(to, s.To)
		}
	}
	slices.Sort(to)
	return g, env, reqs, to
}

// TestGossipIndirectProbeRefutes: the consensus phase asks the other
// members to ping the suspect; an answer from one of them (the suspect's
// link to this node is down, both ways or one way: our pings or its pongs
// are lost) ends the suspicion as a pong would, and the suspect is
// reported unreachable, not failed.
func TestGossipIndirectProbeRefutes(t *testing.T) {
	g, env, reqs, to := silentSuspect(t, gossipTestConfig(topo.DoubleBinaryRoundRobin))
	// n3 itself is asked too: its answer goes round a cut from it.
	if !slices.Equal(to, gids(1, 2, 3)) || reqs[0].Subject != 3 || reqs[0] != reqs[1] || reqs[1] != reqs[2] {
		t.Fatalf("probe requests %v to %v, want one about n3 to each of n1, n2, n3", reqs, to)
	}
	env.AdvanceTo(3700*time.Millisecond, g)
	g.Receive(2, GossipProbeAck{Seq: reqs[0].Seq + 1, Subject: 3}) // not our request
	g.Receive(2, GossipProbeAck{Seq: reqs[0].Seq, Subject: 1})     // not our suspect
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("a foreign answer emitted %v", evs)
	}
	g.Receive(2, GossipProbeAck{Seq: reqs[0].Seq, Subject: 3, Beat: 5})
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Unsuspected{Node: 3}) {
		t.Fatalf("the helper's answer emitted %v, want [Unsuspected n3]", evs)
	}
	if g.Status(3) != StatusAlive || !slices.Equal(g.Unreachable(), gids(3)) {
		t.Fatalf("status %v, unreachable %v; want alive, [n3]", g.Status(3), g.Unreachable())
	}
	if st := g.ProbeStats(); st.Requests != 3 || st.IndirectAlive != 1 {
		t.Fatalf("stats %+v, want 3 requests, 1 indirect alive", st)
	}
	env.AdvanceTo(5*time.Second, g)
	for _, ev := range env.TakeEmitted() {
		if ev == (core.Failed{Node: 3}) {
			t.Fatalf("n3 declared failed at %v after a helper reached it", env.Now())
		}
	}
	// A message from n3 itself: reachable again.
	g.Receive(3, GossipPong{Seq: 999})
	if u := g.Unreachable(); len(u) != 0 {
		t.Fatalf("unreachable %v after a message from n3", u)
	}
}

// TestGossipIndirectProbeUnanswered: no helper reaches the suspect (a
// crash, or every link to it cut): the failure is declared when both the
// pings and the probe have had their time, T_verdict after the suspicion —
// T_consensus with the default ProbeTimeout, so the detection bound of
// the paper's detector holds unchanged; a longer ProbeTimeout postpones it.
func TestGossipIndirectProbeUnanswered(t *testing.T) {
	for _, c := range []struct {
		probe, want time.Duration
	}{{0, 4 * time.Second}, {1500 * time.Millisecond, 4500 * time.Millisecond}, {300 * time.Millisecond, 4 * time.Second}} {
		cfg := gossipTestConfig(topo.DoubleBinaryRoundRobin)
		cfg.ProbeTimeout = c.probe
		g, env, _, _ := silentSuspect(t, cfg)
		if got := 3*time.Second + cfg.VerdictTime(); got != c.want {
			t.Fatalf("probe %v: VerdictTime gives %v, want %v", c.probe, got, c.want)
		}
		env.AdvanceTo(c.want-time.Nanosecond, g)
		if evs := env.TakeEmitted(); len(evs) != 0 {
			t.Fatalf("probe %v: emitted %v before %v", c.probe, evs, c.want)
		}
		env.AdvanceTo(c.want, g)
		if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Failed{Node: 3}) {
			t.Fatalf("probe %v: emitted %v at %v, want [Failed n3]", c.probe, evs, c.want)
		}
	}
}

// TestGossipIndirectProbeOff: IndirectProbes = 0 is the paper's detector:
// no request, the verdict at T_consensus.
func TestGossipIndirectProbeOff(t *testing.T) {
	cfg := gossipTestConfig(topo.DoubleBinaryRoundRobin)
	cfg.IndirectProbes = 0
	cfg.ProbeTimeout = 5 * time.Second // ignored
	g, env, reqs, _ := silentSuspect(t, cfg)
	if len(reqs) != 0 {
		t.Fatalf("sent probe requests %v with IndirectProbes = 0", reqs)
	}
	env.AdvanceTo(4*time.Second, g)
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Failed{Node: 3}) {
		t.Fatalf("emitted %v at 4s, want [Failed n3]", evs)
	}
}

// TestGossipHelperAnswers: the helper's side. A request makes it answer
// at once with the suspect's heartbeat it holds (news that may have come
// by a path the requester's tables miss), tell the suspect who suspects
// it and ping it; the suspect's pong to that ping is answered to the
// requester, once; a pong after the probe's time is not; a request about
// the helper itself is answered at once.
func TestGossipHelperAnswers(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 1, members)
	g.Receive(2, gossipTable(t, members, 0, 0, 0, 7))
	env.TakeSent()
	g.Receive(0, GossipProbeReq{Seq: 40, Subject: 3})
	sent := env.TakeSent()
	if len(sent) != 3 || sent[0].To != 3 || sent[0].Msg != (GossipProbeReq{Seq: 40, Subject: 3, Origin: 0, OriginSeq: 40}) ||
		sent[1].To != 0 || sent[1].Msg != (GossipProbeAck{Seq: 40, Subject: 3, Beat: 7}) || sent[2].To != 3 {
		t.Fatalf("helper sent %v, want the request on to n3 for n0, probe-ack{40 n3 beat 7} to n0 and a ping to n3", sent)
	}
	ping := sent[2].Msg.(GossipPing)
	g.Receive(3, GossipPong{Seq: ping.Seq})
	g.Receive(3, GossipPong{Seq: ping.Seq}) // a duplicate
	sent = env.TakeSent()
	if len(sent) != 1 || sent[0].To != 0 || sent[0].Msg != (GossipProbeAck{Seq: 40, Subject: 3, Beat: 7, Pong: true}) {
		t.Fatalf("helper sent %v, want one probe-ack{40 n3 beat 7 pong} to n0", sent)
	}
	g.Receive(0, GossipProbeReq{Seq: 41, Subject: 3})
	sent = env.TakeSent()
	ping = sent[len(sent)-1].Msg.(GossipPing)
	env.Advance(2*time.Second, g) // past ProbeTimeout (T_consensus = 1 s)
	env.TakeSent()
	g.Receive(3, GossipPong{Seq: ping.Seq})
	for _, s := range env.TakeSent() {
		if _, ok := s.Msg.(GossipProbeAck); ok {
			t.Fatalf("answered a probe after its time: %v", s)
		}
	}
	g.Receive(0, GossipProbeReq{Seq: 42, Subject: 1})
	if sent := env.TakeSent(); len(sent) != 1 || sent[0].Msg.(GossipProbeAck).Seq != 42 || sent[0].To != 0 {
		t.Fatalf("a request about the helper itself: sent %v, want its answer", sent)
	}
	if st := g.ProbeStats(); st.Helped != 2 || st.AcksSent != 4 {
		t.Fatalf("stats %+v, want 2 helped, 4 answers", st)
	}
}

// TestGossipIndirectProbeTableAnswer: a helper's answer without a pong
// refutes only with a heartbeat newer than the one the suspicion began
// with, and young (at most half T_cleanup old): after a crash, others
// may hold the dead node's last heartbeat a few rounds fresher.
func TestGossipIndirectProbeTableAnswer(t *testing.T) {
	g, env, reqs, _ := silentSuspect(t, gossipTestConfig(topo.DoubleBinaryRoundRobin))
	seq := reqs[0].Seq
	for _, old := range []uint32{0, 2} { // the suspected heartbeat; one 4 rounds old (c = 6)
		g.Receive(1, GossipProbeAck{Seq: seq, Subject: 3, Beat: old})
		if evs := env.TakeEmitted(); len(evs) != 0 {
			t.Fatalf("an answer with heartbeat %d emitted %v", old, evs)
		}
	}
	g.Receive(1, GossipProbeAck{Seq: seq, Subject: 3, Beat: 5})
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Unsuspected{Node: 3}) {
		t.Fatalf("a young heartbeat emitted %v, want [Unsuspected n3]", evs)
	}
	if b, _ := g.Heartbeat(3); b != 5 {
		t.Fatalf("heartbeat of n3 = %d, want the helper's 5 merged", b)
	}
}

// TestGossipHelperPassesOn: a request with Hops left is passed on to
// helpers of the helper's own (not the requester, not the suspect), and
// their answer is relayed back: a suspect two hops away from the
// requester, through members it cannot reach, is found alive.
func TestGossipHelperPassesOn(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 1, members)
	env.TakeSent()
	g.Receive(0, GossipProbeReq{Seq: 40, Subject: 3, Hops: 1})
	var sub GossipProbeReq
	var subTo []core.NodeID
	for _, s := range env.TakeSent() {
		if m, ok := s.Msg.(GossipProbeReq); ok && s.To != 3 {
			sub = m
			subTo = append(subTo, s.To)
		}
	}
	if !slices.Equal(subTo, gids(2)) || sub.Subject != 3 || sub.Hops != 0 || sub.Seq == 40 || sub.Origin != 0 || sub.OriginSeq != 40 {
		t.Fatalf("passed on %v to %v, want one request about n3 for n0's 40 with no hops left to n2", sub, subTo)
	}
	g.Receive(2, GossipProbeAck{Seq: sub.Seq, Subject: 3, Beat: 9, Pong: true})
	sent := env.TakeSent()
	if len(sent) != 1 || sent[0].To != 0 || sent[0].Msg != (GossipProbeAck{Seq: 40, Subject: 3, Beat: 9, Pong: true}) {
		t.Fatalf("relayed %v, want probe-ack{40 n3 beat 9 pong} to n0", sent)
	}
	g.Receive(2, GossipProbeAck{Seq: sub.Seq, Subject: 3, Beat: 9, Pong: true})
	if sent := env.TakeSent(); len(sent) != 0 {
		t.Fatalf("relayed a second answer: %v", sent)
	}
}

// TestGossipSuspectAnswersAround: a suspect asked about itself answers the
// requester directly and through members it heard from lately
// (GossipProbeRelay), which pass the answer on: the requester's link from
// it may be the one that is down.
func TestGossipSuspectAnswersAround(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 3, members)
	g.Receive(2, gossipTable(t, members, 0, 0, 1, 0))
	env.TakeSent()
	g.Receive(0, GossipProbeReq{Seq: 40, Subject: 3, Hops: 1})
	sent := env.TakeSent()
	if len(sent) != 2 || sent[0].To != 0 || !sent[0].Msg.(GossipProbeAck).Pong || sent[1].To != 2 || sent[1].Msg.(GossipProbeRelay).To != 0 {
		t.Fatalf("suspect sent %v, want its answer to n0 and a relay of it through n2", sent)
	}
	// The relay's side.
	h, henv := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 2, members)
	henv.TakeSent()
	h.Receive(3, GossipProbeRelay{To: 0, Seq: 40, Beat: 9})
	if sent := henv.TakeSent(); len(sent) != 1 || sent[0].To != 0 || sent[0].Msg != (GossipProbeAck{Seq: 40, Subject: 3, Beat: 9, Pong: true}) {
		t.Fatalf("relay sent %v, want probe-ack{40 n3 beat 9 pong} to n0", sent)
	}
}

// A storm of indirect probes: 16 members under BRR with cohort's timings
// on one machine, 15 of them stalling 20–800 ms about every 300 ms for
// 4 s, so that suspects stay silent past their probes while helpers
// stall too. A member then passes a request on once per hop count it is
// reached with, not once per suspect, so the requests exceed the O(k·n)
// of an answered probe; they stay within 20 pass-ons of 5k requests to
// n members per suspicion (1,500 to 4,400 per suspicion on these seeds,
// where sending the shared pass-on's earlier requesters a request they
// pass on again made 4,500 to 15,500), and end with the stalls:
// 2·ProbeTimeout after the last stall no member is helping anyone.
func TestGossipSimProbeStorm(t *testing.T) {
	const n = 16
	cfg := gossipLocalConfig()
	m := loadModel{loaded: n - 1, every: 300 * time.Millisecond, minPause: 20 * time.Millisecond, maxPause: 800 * time.Millisecond, until: 4 * time.Second}
	for _, seed := range simtest.Seeds(t, 2) {
		w := gossipLoadWorld(t, seed, n, cfg, 0)
		plan := m.plan(w)
		if err := plan.Apply(w, nil); err != nil {
			t.Fatal(err)
		}
		var quiet time.Duration // the end of the last stall
		for _, f := range plan {
			if p, ok := f.(sim.Pause); ok {
				quiet = max(quiet, p.At+p.For)
			}
		}
		suspicions := 0
		w.OnEmit(func(_ time.Duration, _ core.NodeID, e core.Event) {
			if _, ok := e.(core.Suspected); ok {
				suspicions++
			}
		})
		w.RunUntil(quiet + 2*cfg.probeTimeout())
		var requests uint64
		helping := 0
		for i := range n {
			g := w.Node(core.NodeID(i)).(*Gossip)
			requests += g.ProbeStats().Requests
			helping += len(slices.DeleteFunc(slices.Clone(g.helps), func(h gossipHelp) bool { return h.until < w.Now() }))
		}
		budget := uint64(suspicions) * 20 * 5 * uint64(cfg.IndirectProbes) * n
		t.Logf("seed %d: %d suspicions, %d probe requests (budget %d), %d helps running %v after the last stall", seed, suspicions, requests, budget, helping, 2*cfg.probeTimeout())
		if requests > budget || helping != 0 {
			t.Errorf("seed %d: %d probe requests for %d suspicions (want at most %d), %d helps still running after the stalls; want none", seed, requests, suspicions, budget, helping)
		}
	}
}
