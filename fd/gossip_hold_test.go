package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/topo"
)

// TestGossipHeldVerdictProbesAgain: a member cut off from every other
// suspects them all at once, alone (its input gap), so its probes'
// requests are all lost and each verdict is held as long again as the
// gap. When the partition heals but the link to one suspect stays cut,
// only a helper reaches that suspect: the held verdict asks helpers
// again, and their answer refutes the suspicion before the hold runs
// out.
func TestGossipHeldVerdictProbesAgain(t *testing.T) {
	members := gfirst(4)
	g, env := startGossip(t, gossipTestConfig(topo.DoubleBinaryRoundRobin), 0, members)
	k := uint32(1)
	for ; env.Now() < 2*time.Second; k++ {
		g.Receive(1, gossipTable(t, members, 0, k, k, k))
		env.Advance(500*time.Millisecond, g)
	}
	// n0 is cut off from everyone: it suspects all three, alone.
	for g.Status(3) != StatusConsensus && env.Now() < 30*time.Second {
		env.Advance(100*time.Millisecond, g)
	}
	// The consensus pings and the first probe run out unanswered.
	for g.StallStats().Held == 0 && env.Now() < 30*time.Second {
		env.Advance(100*time.Millisecond, g)
	}
	if st := g.StallStats(); st.Held != 3 || st.Alone != 3 {
		t.Fatalf("at %v stall stats %+v, want 3 alone suspicions held", env.Now(), st)
	}
	// The partition heals; n0–n3 stays cut both ways.
	healed := env.Now() + 100*time.Millisecond
	env.AdvanceTo(healed, g)
	g.Receive(1, gossipTable(t, members, 0, k+10, k+10, k-1))
	env.TakeSent()
	var req GossipProbeReq
	for req.Seq == 0 && env.Now() < healed+2*time.Second {
		env.Advance(100*time.Millisecond, g)
		for _, s := range env.TakeSent() {
			if m, ok := s.Msg.(GossipProbeReq); ok && m.Subject == 3 && s.To == 1 {
				req = m
			}
		}
		for _, ev := range env.TakeEmitted() {
			if ev == (core.Failed{Node: 3}) {
				t.Fatalf("n3 declared failed at %v before a helper was asked again", env.Now())
			}
		}
	}
	if req.Seq == 0 {
		t.Fatalf("no probe request about n3 went to n1 in the 2 s after the heal at %v", healed)
	}
	g.Receive(1, GossipProbeAck{Seq: req.Seq, Subject: 3, Beat: k + 10, Pong: true})
	if evs := env.TakeEmitted(); len(evs) != 1 || evs[0] != (core.Unsuspected{Node: 3}) {
		t.Fatalf("n1's answer at %v emitted %v, want [Unsuspected n3]", env.Now(), evs)
	}
	env.AdvanceTo(10*time.Second, g)
	for _, ev := range env.TakeEmitted() {
		if ev == (core.Failed{Node: 3}) {
			t.Fatalf("n3 declared failed at %v after a helper reached it", env.Now())
		}
	}
}
