package fd

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/topo"
)

func gids(xs ...int) []core.NodeID {
	out := make([]core.NodeID, len(xs))
	for i, x := range xs {
		out[i] = core.NodeID(x)
	}
	return out
}

func gfirst(n int) []core.NodeID {
	out := make([]core.NodeID, n)
	for i := range out {
		out[i] = core.NodeID(i)
	}
	return out
}

// testConfig is the paper's timing (T_gossip 0.5 s) with a 0.5 s ping and
// two attempts, so that times in the tests are easy to follow.
func gossipTestConfig(s topo.Schedule) GossipConfig {
	c := DefaultGossipConfig()
	c.Schedule = s
	return c
}

func startGossip(t *testing.T, cfg GossipConfig, self core.NodeID, members []core.NodeID) (*Gossip, *coretest.Env) {
	t.Helper()
	g, err := NewGossip(cfg, members)
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(self, 1)
	g.Start(env)
	return g, env
}

// table builds a gossip message over members with the given heartbeats.
func gossipTable(t *testing.T, members []core.NodeID, beats ...uint32) *GossipMsg {
	t.Helper()
	m, err := NewGossipMsg(0, members, beats)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sentTables returns the destinations of the gossip tables in sent.
func gossipSentTables(sent []coretest.Sent) []core.NodeID {
	var to []core.NodeID
	for _, s := range sent {
		if _, ok := s.Msg.(*GossipMsg); ok {
			to = append(to, s.To)
		}
	}
	return to
}

func gossipSentPings(sent []coretest.Sent) []coretest.Sent {
	var out []coretest.Sent
	for _, s := range sent {
		if _, ok := s.Msg.(GossipPing); ok {
			out = append(out, s)
		}
	}
	return out
}

func gossipEvents[T any](evs []core.Event) []T {
	var out []T
	for _, e := range evs {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// TestGossipMergeByMaximum checks the merge rule of P2P-MPI §5.1 (Fig. 11):
// a received table is merged entry by entry, keeping the maximum heartbeat.
func TestGossipMergeByMaximum(t *testing.T) {
	members := gfirst(4)
	g, _ := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 0, members)
	g.Receive(3, gossipTable(t, members, 0, 5, 2, 0))
	g.Receive(2, gossipTable(t, members, 0, 3, 7, 1))
	for id, want := range map[core.NodeID]uint32{1: 5, 2: 7, 3: 1} {
		if got, _ := g.Heartbeat(id); got != want {
			t.Errorf("heartbeat of %v = %d, want %d (max of the received tables)", id, got, want)
		}
	}
	// Own heartbeat: one round has run, then n2's table showed n2 counting
	// 7 — more than one round ahead — so this node counts on from the
	// count n2 had a round before (the counters stay aligned, and a node
	// catching up never leads the node it caught up with).
	if got, _ := g.Heartbeat(0); got != 6 {
		t.Errorf("own heartbeat = %d, want 6", got)
	}
}

// TestGossipSendsIncrementedTable checks that each round a node increments
// its own heartbeat and sends its table (§5.1), and that the message is a
// copy that later merges do not change.
func TestGossipSendsIncrementedTable(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 1, members)
	first := env.TakeSent()
	if len(first) != 1 {
		t.Fatalf("Start sent %d messages, want 1 table", len(first))
	}
	m := first[0].Msg.(*GossipMsg)
	if !slices.Equal(m.Beats, []uint32{0, 1, 0, 0}) {
		t.Fatalf("first table = %v, want [0 1 0 0]", m.Beats)
	}
	g.Receive(2, gossipTable(t, members, 4, 0, 2, 9))
	if !slices.Equal(m.Beats, []uint32{0, 1, 0, 0}) {
		t.Fatalf("a merge changed a sent message: %v", m.Beats)
	}
	env.Advance(500*time.Millisecond, g)
	m2 := env.TakeSent()[0].Msg.(*GossipMsg)
	if !slices.Equal(m2.Beats, []uint32{4, 2, 2, 9}) {
		t.Fatalf("second table = %v, want [4 2 2 9]", m2.Beats)
	}
	if m2.WireSize() != gossipWireLen(t, m2) {
		t.Fatalf("WireSize %d, encoded %d bytes", m2.WireSize(), gossipWireLen(t, m2))
	}
}

// TestGossipTargetsFollowSchedule checks that round r sends to the target
// of Eq. 3 (RR), 4 (BRR) or 5 (DBRR) of P2P-MPI §5, round numbers wrapping
// around the cycle, with hand-computed expectations for n = 8.
func TestGossipTargetsFollowSchedule(t *testing.T) {
	for _, c := range []struct {
		s    topo.Schedule
		self int
		want []int // targets of rounds 1, 2, …
	}{
		// BRR, n=8: 0+1, 0+2, 0+4, then the cycle again.
		{topo.BinaryRoundRobin, 0, []int{1, 2, 4, 1, 2, 4, 1}},
		{topo.BinaryRoundRobin, 6, []int{7, 0, 2, 7, 0, 2}},
		// DBRR, n=8: +1 +2 +4 then -1 -2 -4.
		{topo.DoubleBinaryRoundRobin, 0, []int{1, 2, 4, 7, 6, 4, 1, 2}},
		{topo.DoubleBinaryRoundRobin, 3, []int{4, 5, 7, 2, 1, 7, 4}},
		// RR, n=8: +1 … +7.
		{topo.RoundRobin, 2, []int{3, 4, 5, 6, 7, 0, 1, 3, 4}},
	} {
		t.Run(fmt.Sprintf("%v/node%d", c.s, c.self), func(t *testing.T) {
			g, env := startGossip(t, gossipTestConfig(c.s), core.NodeID(c.self), gfirst(8))
			for range len(c.want) - 1 {
				env.Advance(500*time.Millisecond, g)
			}
			got := gossipSentTables(env.Sent)
			if !slices.Equal(got, gids(c.want...)) {
				t.Fatalf("targets = %v, want %v", got, c.want)
			}
		})
	}
}

// TestGossipBRRWorkedExample replays the example of P2P-MPI §5.1: with BRR
// over four nodes, node 2 hears from node 1 in round 1 and from node 0 in
// round 2 only.
func TestGossipBRRWorkedExample(t *testing.T) {
	members := gfirst(4)
	senders := map[int][]core.NodeID{} // round -> who sent to node 2
	for s := range 4 {
		g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), core.NodeID(s), members)
		env.Advance(500*time.Millisecond, g)
		for r, to := range gossipSentTables(env.Sent) {
			if to == 2 {
				senders[r+1] = append(senders[r+1], core.NodeID(s))
			}
		}
	}
	if !slices.Equal(senders[1], gids(1)) || !slices.Equal(senders[2], gids(0)) || len(senders) != 2 {
		t.Fatalf("node 2's sources by round = %v, want round 1: [n1], round 2: [n0]", senders)
	}
}

// TestGossipRandomTargets checks the random schedule (§5.1): never itself,
// every other node eventually, reproducibly from the seed.
func TestGossipRandomTargets(t *testing.T) {
	run := func() []core.NodeID {
		g, env := startGossip(t, gossipTestConfig(topo.Random), 3, gfirst(6))
		env.Advance(100*500*time.Millisecond, g)
		return gossipSentTables(env.Sent)
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatal("the same seed chose different random targets")
	}
	seen := map[core.NodeID]bool{}
	for _, to := range a {
		if to == 3 {
			t.Fatal("random schedule sent to itself")
		}
		seen[to] = true
	}
	if len(seen) != 5 {
		t.Fatalf("100 random rounds reached %d of 5 peers", len(seen))
	}
}

// TestGossipSuspicionPingFailed follows one silent member through the
// failure path of §5.1/§5.3: no heartbeat increase for T_cleanup →
// core.Suspected and a ping; no pong within PingAttempts·PingTimeout →
// core.Failed, once.
func TestGossipSuspicionPingFailed(t *testing.T) {
	members := gfirst(4)
	cfg := gossipTestConfig(topo.DoubleBinaryRoundRobin) // c = 3⌈log2 4⌉ = 6 rounds = 3 s
	g, env := startGossip(t, cfg, 0, members)
	if got := g.CleanupRounds(); got != 6 {
		t.Fatalf("CleanupRounds = %d, want 6", got)
	}
	// Nodes 1 and 2 keep gossiping; node 3 is silent from the start.
	for k := uint32(1); env.Now() < 3*time.Second; k++ {
		g.Receive(1, gossipTable(t, members, 0, k, k, 0))
		env.Advance(500*time.Millisecond, g)
	}
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Suspected{Node: 3}) {
		t.Fatalf("at %v emitted %v, want [Suspected n3]", env.Now(), evs)
	}
	pings := gossipSentPings(env.TakeSent())
	if len(pings) != 1 || pings[0].To != 3 || pings[0].At != 3*time.Second {
		t.Fatalf("pings = %+v, want one to n3 at 3s", pings)
	}
	if g.Status(3) != StatusConsensus {
		t.Fatalf("status = %v, want consensus", g.Status(3))
	}
	env.AdvanceTo(3500*time.Millisecond, g) // first attempt times out
	if p := gossipSentPings(env.TakeSent()); len(p) != 1 || p[0].To != 3 {
		t.Fatalf("after one timeout sent pings %+v, want a second ping to n3", p)
	}
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("emitted %v before the last attempt timed out", evs)
	}
	env.AdvanceTo(4*time.Second, g)
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Failed{Node: 3}) {
		t.Fatalf("emitted %v at 4s, want [Failed n3]", evs)
	}
	if g.Status(3) != StatusFailed {
		t.Fatalf("status = %v, want failed", g.Status(3))
	}
	// Nothing more about n3 (Failed is emitted once); n1 and n2 keep
	// gossiping.
	for k := uint32(100); env.Now() < time.Minute; k++ {
		g.Receive(2, gossipTable(t, members, 0, k, k, 0))
		env.Advance(500*time.Millisecond, g)
	}
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("emitted %v after the failure", evs)
	}
}

// TestGossipPongClearsSuspicion: a pong to the consensus ping withdraws the
// suspicion (core.Unsuspected) and gives the node a fresh T_cleanup.
func TestGossipPongClearsSuspicion(t *testing.T) {
	members := gfirst(2)
	cfg := gossipTestConfig(topo.BinaryRoundRobin) // n=2: c = 2 rounds = 1 s
	g, env := startGossip(t, cfg, 0, members)
	env.AdvanceTo(time.Second, g)
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Suspected{Node: 1}) {
		t.Fatalf("emitted %v, want [Suspected n1] at 1s", evs)
	}
	ping := gossipSentPings(env.TakeSent())[0].Msg.(GossipPing)
	g.Receive(1, GossipPong{Seq: ping.Seq + 1}) // not the outstanding ping
	g.Receive(2, GossipPong{Seq: ping.Seq})     // not from the suspect
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("a foreign pong emitted %v", evs)
	}
	env.AdvanceTo(1200*time.Millisecond, g)
	g.Receive(1, GossipPong{Seq: ping.Seq})
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Unsuspected{Node: 1}) {
		t.Fatalf("pong emitted %v, want [Unsuspected n1]", evs)
	}
	if g.Status(1) != StatusAlive {
		t.Fatalf("status = %v, want alive", g.Status(1))
	}
	// The pong arrived in round 3 (t in [1s, 1.5s)); the next suspicion is
	// at the first round more than 2 rounds later: round 6, at 2.5 s.
	env.AdvanceTo(2400*time.Millisecond, g)
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("re-suspected too early: %v at %v", evs, env.Now())
	}
	env.AdvanceTo(2500*time.Millisecond, g)
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Suspected{Node: 1}) {
		t.Fatalf("emitted %v at 2.5s, want [Suspected n1]", evs)
	}
}

// TestGossipHeartbeatClearsSuspicion: a heartbeat increase during the
// consensus phase is evidence of life too.
func TestGossipHeartbeatClearsSuspicion(t *testing.T) {
	members := gfirst(2)
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 0, members)
	env.AdvanceTo(time.Second, g)
	env.TakeEmitted()
	g.Receive(1, gossipTable(t, members, 0, 0)) // not an increase
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("a stale table emitted %v", evs)
	}
	g.Receive(1, gossipTable(t, members, 0, 1))
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Unsuspected{Node: 1}) {
		t.Fatalf("emitted %v, want [Unsuspected n1]", evs)
	}
	env.AdvanceTo(1600*time.Millisecond, g) // the cancelled ping timeout must not fire
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("emitted %v after the suspicion was cleared", evs)
	}
}

// TestGossipRecovery: after core.Failed, a genuinely newer heartbeat
// (higher than any seen before the failure, and younger than T_cleanup,
// as a restarted node's adjusted count is) produces core.Recovered; a
// stale one does not, nor does a higher one that is itself older than
// T_cleanup (a dead node's last heartbeat reaching this node late).
func TestGossipRecovery(t *testing.T) {
	members := gfirst(3)
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 0, members)
	g.Receive(1, gossipTable(t, members, 0, 7, 7))
	for env.Now() < 10*time.Second {
		env.Advance(500*time.Millisecond, g)
	}
	if f := gossipEvents[core.Failed](env.TakeEmitted()); len(f) != 2 {
		t.Fatalf("failed = %v, want n1 and n2", f)
	}
	g.Receive(2, gossipTable(t, members, 0, 7, 7))
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("a stale heartbeat emitted %v", evs)
	}
	g.Receive(2, gossipTable(t, members, 0, 8, 7))
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("a higher heartbeat older than T_cleanup emitted %v", evs)
	}
	own, _ := g.Heartbeat(0)
	g.Receive(2, gossipTable(t, members, 0, own-1, 7))
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Recovered{Node: 1}) {
		t.Fatalf("emitted %v, want [Recovered n1]", evs)
	}
	if g.Status(1) != StatusAlive || g.Status(2) != StatusFailed {
		t.Fatalf("statuses n1 %v n2 %v, want alive, failed", g.Status(1), g.Status(2))
	}
	// The recovered node is watched again: silent for T_cleanup, it is
	// suspected and, unanswered, failed again.
	env.Advance(10*time.Second, g)
	evs := env.TakeEmitted()
	if !slices.Equal(evs, []core.Event{core.Suspected{Node: 1}, core.Failed{Node: 1}}) {
		t.Fatalf("emitted %v, want [Suspected n1, Failed n1]", evs)
	}
}

// TestGossipDoubtedTarget: a round whose scheduled target is doubted
// (probing, suspected, in consensus or failed) sends the table to the
// first undoubted member after this node instead; a failed target still
// gets it as well; with every other member doubted, the scheduled target
// alone gets it. BRR at n = 4: node 0 sends to n1 in odd rounds and to n2
// in even ones.
func TestGossipDoubtedTarget(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 0, members)
	if to := gossipSentTables(env.TakeSent()); !slices.Equal(to, gids(1)) {
		t.Fatalf("round 1 sent to %v, want [n1]", to)
	}
	g.Handle(core.PeerHint{Node: 1, Reason: "connection reset"})
	g.Handle(core.PeerHint{Node: 2, Reason: "connection reset"})
	env.TakeSent()
	round := func(want []core.NodeID, st GossipStatus) {
		t.Helper()
		// n3 keeps the others' news coming; n1 and n2 stay silent.
		own, _ := g.Heartbeat(0)
		g.Receive(3, gossipTable(t, members, 0, 0, 0, own))
		env.Advance(500*time.Millisecond, g)
		if to := gossipSentTables(env.TakeSent()); !slices.Equal(to, want) {
			t.Fatalf("at %v (n1 %v) sent to %v, want %v", env.Now(), g.Status(1), to, want)
		}
		if g.Status(1) != st {
			t.Fatalf("at %v n1 is %v, want %v", env.Now(), g.Status(1), st)
		}
	}
	round(gids(3), StatusProbing) // round 2: n2 probing, replaced by n3
	// Both pings (2 × 0.5 s) unanswered: suspected at 1 s; still n3.
	for env.Now() < 1500*time.Millisecond {
		round(gids(3), StatusSuspected)
	}
	// T_cleanup (4 rounds) expires at 2 s: consensus, then failed at 3 s.
	for env.Now() < 2500*time.Millisecond {
		round(gids(3), StatusConsensus)
	}
	// Failed: n1 and n2 get their tables again, and n3 one too.
	if own, _ := g.Heartbeat(0); own%2 == 0 { // the next round is odd
		round(gids(1, 3), StatusFailed)
	} else {
		round(gids(2, 3), StatusFailed)
	}
	// n3 falls silent too: once it is failed, nobody is left undoubted and
	// the scheduled target alone gets the table.
	for k := 0; k < 20 && g.Status(3) != StatusFailed; k++ {
		env.Advance(500*time.Millisecond, g)
	}
	env.TakeSent()
	env.Advance(500*time.Millisecond, g)
	if to := gossipSentTables(env.TakeSent()); len(to) != 1 || to[0] == 3 {
		t.Fatalf("with everyone failed, sent to %v, want the scheduled n1 or n2 alone", to)
	}
}

// TestGossipMembersChanged: a view change remaps positions by id, keeps the
// heartbeats of members that stay, gives new members a grace period, drops
// the watch of a member that left, and the schedule uses the new n.
func TestGossipMembersChanged(t *testing.T) {
	old := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 2, old)
	g.Receive(0, gossipTable(t, old, 0, 5, 0, 9)) // the sender is not ahead: no adjustment
	env.AdvanceTo(2*time.Second, g)               // BRR n=4: c = 4 rounds; n0 suspected at 2 s
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Suspected{Node: 0}}) {
		t.Fatalf("emitted %v, want [Suspected n0]", evs)
	}
	g.Receive(0, gossipTable(t, old, 0, 5, 0, 10)) // n3 is alive
	// New view: n0 and n1 leave, n7 and n5 join; ids not increasing.
	view := gids(7, 3, 2, 5)
	g.Handle(core.MembersChanged{Epoch: 1, Members: view})
	if g.Epoch() != 1 || !slices.Equal(g.Members(), view) {
		t.Fatalf("view = %d %v", g.Epoch(), g.Members())
	}
	if hb, ok := g.Heartbeat(3); !ok || hb != 10 {
		t.Fatalf("heartbeat of n3 = %d,%v, want 10 carried over", hb, ok)
	}
	if _, ok := g.Heartbeat(1); ok {
		t.Fatal("n1 is still monitored after leaving the view")
	}
	if g.Status(0) != StatusUnknown || g.Status(7) != StatusAlive {
		t.Fatalf("status n0 %v n7 %v, want unknown, alive", g.Status(0), g.Status(7))
	}
	// The ping timeout of n0's dropped watch must not fail anyone.
	env.TakeSent()
	env.Advance(500*time.Millisecond, g)
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("emitted %v after the view change", evs)
	}
	// Own heartbeat is 6 now (rounds at 0, .5, …, 2.5 s): round 6 of BRR
	// over n=4 is ((6-1) mod 2)+1 = 2, offset 2: position 2+2 = 0 → n7.
	if to := gossipSentTables(env.TakeSent()); !slices.Equal(to, gids(7)) {
		t.Fatalf("sent to %v, want [n7] (BRR over the new view)", to)
	}
	// A table in the old view merges by id: n3's entry (position 3 there)
	// lands at position 1 here; n1 is ignored.
	g.Receive(1, gossipTable(t, old, 0, 6, 0, 60))
	if hb, _ := g.Heartbeat(3); hb != 60 {
		t.Fatalf("heartbeat of n3 = %d, want 60 merged by id", hb)
	}
	// New members get T_cleanup from the view change (c = 4 rounds):
	// installed during round 5, suspected in round 10 at 4.5 s.
	env.AdvanceTo(4400*time.Millisecond, g)
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("emitted %v before the new members' grace ended", evs)
	}
	env.AdvanceTo(4500*time.Millisecond, g)
	sus := gossipEvents[core.Suspected](env.TakeEmitted())
	if !slices.Equal(sus, []core.Suspected{{Node: 7}, {Node: 5}}) {
		t.Fatalf("suspected %v at 4.5s, want n7 and n5", sus)
	}
	// A stale view change is ignored.
	g.Handle(core.MembersChanged{Epoch: 0, Members: old})
	if g.Epoch() != 1 {
		t.Fatal("an older epoch was installed")
	}
}

// TestGossipPeerHint: a transport hint makes the detector ping at once; a
// pong ends the probe silently; an unanswered probe makes the node
// suspected, but the failure still waits for T_cleanup and the consensus.
func TestGossipPeerHint(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 0, members)
	env.TakeSent()
	g.Handle(core.PeerHint{Node: 1, Reason: "connection reset"})
	g.Handle(core.PeerHint{Node: 3, Reason: "connection refused"})
	g.Handle(core.PeerHint{Node: 3, Reason: "again"}) // already probing
	g.Handle(core.PeerHint{Node: 9, Reason: "not a member"})
	pings := gossipSentPings(env.TakeSent())
	if len(pings) != 2 || pings[0].To != 1 || pings[1].To != 3 {
		t.Fatalf("pings %+v, want one to n1 and one to n3", pings)
	}
	if g.Status(1) != StatusProbing {
		t.Fatalf("status n1 = %v, want probing", g.Status(1))
	}
	g.Receive(1, GossipPong{Seq: pings[0].Msg.(GossipPing).Seq})
	if g.Status(1) != StatusAlive {
		t.Fatalf("status n1 after pong = %v, want alive", g.Status(1))
	}
	// n3 answers neither attempt (2 × 0.5 s): suspected at 1 s.
	env.AdvanceTo(time.Second, g)
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Suspected{Node: 3}}) {
		t.Fatalf("emitted %v at 1s, want [Suspected n3]", evs)
	}
	if g.Status(3) != StatusSuspected {
		t.Fatalf("status n3 = %v, want suspected", g.Status(3))
	}
	// Keep n1 and n2 alive; n3 stays silent. Its T_cleanup (6 rounds)
	// expires in round 7 at 3 s: consensus pings, then Failed at 4 s, with
	// no second Suspected.
	for k := uint32(1); env.Now() < 5*time.Second; k++ {
		g.Receive(2, gossipTable(t, members, 0, k, k, 0))
		env.Advance(500*time.Millisecond, g)
	}
	evs := env.TakeEmitted()
	if !slices.Equal(evs, []core.Event{core.Failed{Node: 3}}) {
		t.Fatalf("emitted %v, want [Failed n3]", evs)
	}
}

// TestGossipAnswersPing: every ping gets a pong with its sequence number.
func TestGossipAnswersPing(t *testing.T) {
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 0, gfirst(3))
	env.TakeSent()
	g.Receive(2, GossipPing{Seq: 77})
	g.Receive(9, GossipPing{Seq: 78}) // not a member: answered anyway
	sent := env.TakeSent()
	if len(sent) != 2 || sent[0].To != 2 || sent[0].Msg != (GossipPong{Seq: 77}) || sent[1].To != 9 {
		t.Fatalf("sent %+v, want pongs 77 to n2 and 78 to n9", sent)
	}
}

// TestGossipInitialAdjustment: a node that starts late adopts the count of
// the first table it receives (the paper's "initial heartbeat adjustment",
// §5.3) so that its round number matches the others', and restarts its
// period from that arrival; nodes started together do not adjust.
func TestGossipInitialAdjustment(t *testing.T) {
	members := gfirst(8)
	cfg := gossipTestConfig(topo.DoubleBinaryRoundRobin)
	g, env := startGossip(t, cfg, 5, members)
	env.AdvanceTo(200*time.Millisecond, g)
	env.TakeSent()
	beats := make([]uint32, 8)
	for i := range beats {
		beats[i] = 99 // the sender has heard from everyone lately
	}
	beats[4], beats[5] = 100, 0
	g.Receive(4, gossipTable(t, members, beats...))
	if hb, _ := g.Heartbeat(5); hb != 100 {
		t.Fatalf("own heartbeat = %d, want 100 adopted from the sender", hb)
	}
	// The period restarts: next round at 0.7 s, not 0.5 s.
	env.AdvanceTo(600*time.Millisecond, g)
	if len(env.Sent) != 0 {
		t.Fatalf("sent %+v before the re-phased round", env.Sent)
	}
	env.AdvanceTo(700*time.Millisecond, g)
	sent := env.TakeSent()
	// Heartbeat 101 is round ((101-1) mod 6)+1 = 5 of DBRR over 8: 5-2 = 3.
	if len(sent) != 1 || sent[0].To != 3 || sent[0].Msg.(*GossipMsg).Beats[5] != 101 {
		t.Fatalf("sent %+v, want heartbeat 101 to n3", sent)
	}
	// Later tables keep the count with the others (a node that fell two
	// or more rounds behind catches up) but do not re-phase the period.
	beats[4] = 102
	g.Receive(4, gossipTable(t, members, beats...))
	if hb, _ := g.Heartbeat(5); hb != 101 {
		t.Fatalf("own heartbeat = %d after a table one round ahead, want 101", hb)
	}
	// It takes the count the sender had a round before: its own rounds
	// are not re-phased, and may come before the sender's.
	beats[4] = 500
	g.Receive(4, gossipTable(t, members, beats...))
	if hb, _ := g.Heartbeat(5); hb != 499 {
		t.Fatalf("own heartbeat = %d after a table far ahead (500), want 499", hb)
	}
	env.AdvanceTo(1100*time.Millisecond, g)
	if sent := env.TakeSent(); len(sent) != 0 {
		t.Fatalf("sent %+v before the next round at 1.2 s: the period moved", sent)
	}

	// A node started with the others (the sender one round ahead) keeps
	// its own count.
	g2, env2 := startGossip(t, cfg, 5, members)
	beats2 := make([]uint32, 8)
	beats2[4] = 2
	g2.Receive(4, gossipTable(t, members, beats2...))
	if hb, _ := g2.Heartbeat(5); hb != 1 {
		t.Fatalf("own heartbeat = %d, want 1 (no adjustment within one round)", hb)
	}
	_ = env2
}

// TestGossipRestartCountsAboveOldIncarnation: a restarted node continues
// above the heartbeat the others hold for its previous incarnation, so that
// they see it as new (core.Recovered).
func TestGossipRestartCountsAboveOldIncarnation(t *testing.T) {
	members := gfirst(3)
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 2, members)
	env.TakeSent()
	g.Receive(0, gossipTable(t, members, 41, 40, 50)) // 50: the old incarnation
	env.Advance(500*time.Millisecond, g)
	m := env.TakeSent()[0].Msg.(*GossipMsg)
	if m.Beats[2] != 51 {
		t.Fatalf("restarted node sent heartbeat %d, want 51", m.Beats[2])
	}
}

// TestGossipNotAMember: a node outside its member list answers pings but
// neither gossips nor suspects; a view that includes it starts both.
func TestGossipNotAMember(t *testing.T) {
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 9, gfirst(3))
	env.Advance(time.Minute, g)
	if len(env.Sent) != 0 || len(env.Emitted) != 0 {
		t.Fatalf("outsider sent %d messages and emitted %v", len(env.Sent), env.Emitted)
	}
	g.Handle(core.MembersChanged{Epoch: 3, Members: gids(0, 9)})
	env.Advance(500*time.Millisecond, g)
	if to := gossipSentTables(env.TakeSent()); !slices.Equal(to, gids(0)) {
		t.Fatalf("member sent to %v, want [n0]", to)
	}
}

// TestGossipAlone: a single member has nobody to gossip with or suspect.
func TestGossipAlone(t *testing.T) {
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 0, gfirst(1))
	env.Advance(time.Minute, g)
	if len(env.Sent) != 0 || len(env.Emitted) != 0 {
		t.Fatalf("alone: sent %d, emitted %v", len(env.Sent), env.Emitted)
	}
	if hb, _ := g.Heartbeat(0); hb != 121 {
		t.Fatalf("own heartbeat = %d, want 121 after a minute", hb)
	}
}

func TestNewGossipRejectsBadInput(t *testing.T) {
	if _, err := NewGossip(GossipConfig{}, gfirst(3)); !errors.Is(err, ErrGossipConfig) {
		t.Errorf("zero config: err = %v, want ErrGossipConfig", err)
	}
	if _, err := NewGossip(DefaultGossipConfig(), gids(1, 2, 1)); !errors.Is(err, ErrMembers) {
		t.Errorf("duplicate: err = %v, want ErrMembers", err)
	}
	if _, err := NewGossip(DefaultGossipConfig(), []core.NodeID{0, core.None}); !errors.Is(err, ErrMembers) {
		t.Errorf("None: err = %v, want ErrMembers", err)
	}
	if _, err := NewGossip(DefaultGossipConfig(), nil); err != nil {
		t.Errorf("empty list: %v", err)
	}
}

// TestGossipConfig checks the defaults of §5.2–5.3, the presets and
// Validate.
func TestGossipConfig(t *testing.T) {
	d := DefaultGossipConfig()
	if d.Schedule != topo.DoubleBinaryRoundRobin || d.GossipInterval != 500*time.Millisecond || d.Cleanup != 0 {
		t.Fatalf("default = %+v, want DBRR, 0.5 s, derived cleanup", d)
	}
	for name, c := range map[string]GossipConfig{"default": d, "lan": LANGossipConfig(), "wan": WANGossipConfig(), "sim": SimGossipConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s preset: %v", name, err)
		}
	}
	// T_cleanup formulas (in rounds).
	for _, c := range []struct {
		s    topo.Schedule
		n    int
		want int
	}{
		{topo.DoubleBinaryRoundRobin, 256, 24}, // 3⌈log2 256⌉ (§5.2): 12 s at 0.5 s
		{topo.DoubleBinaryRoundRobin, 100, 21},
		{topo.BinaryRoundRobin, 256, 16},
		{topo.BinaryRoundRobin, 1025, 22},
		{topo.RoundRobin, 256, 46}, // 2·23: 23·24/2 = 276 ≥ 256
		{topo.Random, 1024, 30},
		{topo.DoubleBinaryRoundRobin, 1, 0},
		{topo.BinaryRoundRobin, 2, 2},
	} {
		cfg := d
		cfg.Schedule = c.s
		if got := cfg.CleanupRounds(c.n); got != c.want {
			t.Errorf("%v n=%d: CleanupRounds = %d, want %d", c.s, c.n, got, c.want)
		}
	}
	fixed := d
	fixed.Cleanup = 1100 * time.Millisecond
	if got := fixed.CleanupRounds(4096); got != 3 {
		t.Errorf("fixed 1.1 s: CleanupRounds = %d, want ⌈1.1/0.5⌉ = 3", got)
	}
	if got := d.CleanupTime(256); got != 12*time.Second {
		t.Errorf("CleanupTime(256) = %v, want 12s", got)
	}
	if got := d.ConsensusTime(); got != time.Second {
		t.Errorf("ConsensusTime = %v, want 1s", got)
	}
	for name, mut := range map[string]func(*GossipConfig){
		"schedule":        func(c *GossipConfig) { c.Schedule = 0 },
		"interval":        func(c *GossipConfig) { c.GossipInterval = 0 },
		"negative clean":  func(c *GossipConfig) { c.Cleanup = -1 },
		"short clean":     func(c *GossipConfig) { c.Cleanup = c.GossipInterval / 2 },
		"ping timeout":    func(c *GossipConfig) { c.PingTimeout = 0 },
		"no attempts":     func(c *GossipConfig) { c.PingAttempts = 0 },
		"too many pings":  func(c *GossipConfig) { c.PingAttempts = 256 },
		"huge cleanup":    func(c *GossipConfig) { c.GossipInterval = 1; c.Cleanup = 1 << 40 },
		"negative probes": func(c *GossipConfig) { c.IndirectProbes = -1 },
		"too many probes": func(c *GossipConfig) { c.IndirectProbes = 17 },
		"probe timeout":   func(c *GossipConfig) { c.ProbeTimeout = -1 },
	} {
		c := DefaultGossipConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrGossipConfig) {
			t.Errorf("%s: Validate = %v, want ErrGossipConfig", name, err)
		}
	}
}

// TestGossipTableBytes pins the memory constant the package doc reports:
// 8 bytes and one bit per member.
func TestGossipTableBytes(t *testing.T) {
	g, err := NewGossip(DefaultGossipConfig(), gfirst(4096))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.TableBytes(), 4096*4+4096/8; got != want {
		t.Fatalf("TableBytes = %d, want %d", got, want)
	}
}

// TestGossipIgnoreHints: with IgnoreHints a transport hint starts no probe
// (no ping, the entry stays alive); the crash is still found by T_cleanup
// and the consensus.
func TestGossipIgnoreHints(t *testing.T) {
	members := gfirst(2)
	cfg := gossipTestConfig(topo.BinaryRoundRobin) // n=2: c = 2 rounds = 1 s; 2 pings of 0.5 s
	cfg.IgnoreHints = true
	g, env := startGossip(t, cfg, 0, members)
	env.TakeSent()
	g.Handle(core.PeerHint{Node: 1, Reason: "connection refused", Refused: true})
	if pings := gossipSentPings(env.TakeSent()); len(pings) != 0 {
		t.Fatalf("pings %+v after a hint, want none", pings)
	}
	if g.Status(1) != StatusAlive {
		t.Fatalf("status n1 = %v, want alive", g.Status(1))
	}
	env.AdvanceTo(time.Second, g)
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Suspected{Node: 1}}) {
		t.Fatalf("emitted %v at 1s, want [Suspected n1]", evs)
	}
	env.AdvanceTo(2*time.Second, g)
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Failed{Node: 1}}) {
		t.Fatalf("emitted %v at 2s, want [Failed n1]", evs)
	}
}

// TestGossipHintedProbeAtCleanup: a probe still running when T_cleanup
// expires turns into the consensus: Suspected at the expiry, Failed when the
// probe's last attempt times out (earlier than an unhinted failure, by at
// most T_consensus).
func TestGossipHintedProbeAtCleanup(t *testing.T) {
	members := gfirst(2)
	g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 0, members) // c = 2 rounds
	env.AdvanceTo(800*time.Millisecond, g)
	g.Handle(core.PeerHint{Node: 1, Reason: "reset"}) // probe: pings at 0.8 s and 1.3 s
	env.AdvanceTo(time.Second, g)                     // round 3: T_cleanup expires
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Suspected{Node: 1}}) {
		t.Fatalf("emitted %v at 1s, want [Suspected n1]", evs)
	}
	if g.Status(1) != StatusConsensus {
		t.Fatalf("status = %v, want consensus", g.Status(1))
	}
	env.AdvanceTo(1799*time.Millisecond, g)
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("emitted %v before the probe's last timeout", evs)
	}
	env.AdvanceTo(1800*time.Millisecond, g)
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Failed{Node: 1}}) {
		t.Fatalf("emitted %v at 1.8s, want [Failed n1]", evs)
	}
}

// TestGossipLatePongCounts: the pong of the first consensus ping that
// arrives after that ping timed out (a delay spike longer than
// PingTimeout) still proves the suspect alive: if only the pong of the
// outstanding ping counted, a suspect whose round trip exceeds
// PingTimeout would be declared failed although every pong comes back.
func TestGossipLatePongCounts(t *testing.T) {
	members := gfirst(2)
	cfg := gossipTestConfig(topo.BinaryRoundRobin) // n=2: c = 2 rounds = 1 s; 2 pings of 0.5 s
	g, env := startGossip(t, cfg, 0, members)
	env.AdvanceTo(time.Second, g)
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Suspected{Node: 1}) {
		t.Fatalf("emitted %v, want [Suspected n1] at 1s", evs)
	}
	first := gossipSentPings(env.TakeSent())[0].Msg.(GossipPing)
	env.AdvanceTo(1500*time.Millisecond, g) // the first ping times out; a second goes
	if p := gossipSentPings(env.TakeSent()); len(p) != 1 {
		t.Fatalf("sent %v after the first timeout, want a second ping", p)
	}
	env.AdvanceTo(1700*time.Millisecond, g)
	g.Receive(1, GossipPong{Seq: first.Seq}) // 700 ms round trip
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Unsuspected{Node: 1}) {
		t.Fatalf("late pong emitted %v, want [Unsuspected n1]", evs)
	}
	env.AdvanceTo(2100*time.Millisecond, g)
	if evs := env.TakeEmitted(); len(evs) != 0 {
		t.Fatalf("emitted %v after the late pong, want nothing (no failure)", evs)
	}
}

// TestGossipMembersChangedIncreasing: a view change between two lists of
// increasing ids (found by one merge) keeps the heartbeats of members that
// stay, wherever they move, and monitors those that joined.
func TestGossipMembersChangedIncreasing(t *testing.T) {
	old := gfirst(4)
	g, _ := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 2, old)
	g.Receive(0, gossipTable(t, old, 0, 5, 0, 9))
	view := gids(1, 2, 3, 6, 8)
	g.Handle(core.MembersChanged{Epoch: 1, Members: view})
	for id, want := range map[core.NodeID]uint32{1: 5, 3: 9} {
		if hb, ok := g.Heartbeat(id); !ok || hb != want {
			t.Errorf("heartbeat of %v = %d,%v, want %d carried over", id, hb, ok, want)
		}
	}
	for _, id := range []core.NodeID{6, 8} {
		if hb, ok := g.Heartbeat(id); !ok || hb != 0 || g.Status(id) != StatusAlive {
			t.Errorf("joiner %v: heartbeat %d,%v status %v, want 0 and alive", id, hb, ok, g.Status(id))
		}
	}
	if g.Status(0) != StatusUnknown {
		t.Errorf("n0 left the view but is %v", g.Status(0))
	}
}

// TestGossipStarvedSuspectClears: a suspect whose heartbeat increases is
// no longer suspected even when the new heartbeat is older than T_cleanup
// (a live node that its host starved sends heartbeats as old as the rounds
// it missed): its life does not rest on the pings alone.
func TestGossipStarvedSuspectClears(t *testing.T) {
	cfg := gossipTestConfig(topo.BinaryRoundRobin)
	cfg.PingTimeout, cfg.PingAttempts = time.Second, 2 // the pings go unanswered for 2 s
	members := gfirst(4)
	g, env := startGossip(t, cfg, 2, members)
	g.Receive(0, gossipTable(t, members, 0, 5, 0, 9))
	env.AdvanceTo(2*time.Second, g) // BRR n=4: c = 4 rounds; n0 suspected at 2 s
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Suspected{Node: 0}}) {
		t.Fatalf("emitted %v, want [Suspected n0]", evs)
	}
	env.AdvanceTo(3*time.Second, g) // own heartbeat 7
	g.Receive(1, gossipTable(t, members, 2, 7, 0, 10))
	if evs := env.TakeEmitted(); !slices.Equal(evs, []core.Event{core.Unsuspected{Node: 0}}) || g.Status(0) != StatusAlive {
		t.Fatalf("after n0's heartbeat rose to 2 (5 rounds old): emitted %v, status %v; want Unsuspected and alive", evs, g.Status(0))
	}
	env.AdvanceTo(4500*time.Millisecond, g)
	if fs := gossipEvents[core.Failed](env.TakeEmitted()); len(fs) != 0 {
		t.Fatalf("declared %v failed after the suspicion ended", fs)
	}
}

// TestGossipRenewedMember: a member declared failed whose process restarted
// and joined again under its id (core.MembersChanged.Renewed) is watched
// afresh: dead again before any table of its new incarnation arrived, it is
// suspected and declared failed again after a new T_cleanup; alive, a
// heartbeat counted since the renewal ends its grace without a suspicion.
// Without the renewal the old verdict stands and nothing more is said.
func TestGossipRenewedMember(t *testing.T) {
	members := gfirst(3)
	for _, tc := range []struct {
		name    string
		renewed []core.NodeID
		alive   bool
		want    []core.Event
	}{
		{"dead again", gids(2), false, []core.Event{core.Suspected{Node: 2}, core.Failed{Node: 2}}},
		{"alive", gids(2), true, nil},
		{"not renewed", nil, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, env := startGossip(t, gossipTestConfig(topo.BinaryRoundRobin), 0, members)
			var k uint32
			for env.Now() < 10*time.Second {
				k++
				g.Receive(1, gossipTable(t, members, 0, k, 0))
				env.Advance(500*time.Millisecond, g)
			}
			if f := gossipEvents[core.Failed](env.TakeEmitted()); !slices.Equal(f, []core.Failed{{Node: 2}}) {
				t.Fatalf("failed = %v, want n2", f)
			}
			g.Handle(core.MembersChanged{Epoch: 2, Members: members, Renewed: tc.renewed})
			if len(tc.renewed) > 0 && g.Status(2) != StatusAlive {
				t.Fatalf("renewed n2 is %v, want alive (in its grace)", g.Status(2))
			}
			for end := env.Now() + 10*time.Second; env.Now() < end; {
				k++
				b2 := uint32(0)
				if tc.alive {
					b2 = k
				}
				g.Receive(1, gossipTable(t, members, 0, k, b2))
				env.Advance(500*time.Millisecond, g)
			}
			if evs := env.TakeEmitted(); !slices.Equal(evs, tc.want) {
				t.Fatalf("after the renewal emitted %v, want %v", evs, tc.want)
			}
		})
	}
}
