package fd

import (
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// TestHeartbeatPassedOnAnswerEndsHeardSuspicion: a member that only heard
// of a suspicion, and helped the accuser by passing its request on, ends
// its own suspicion when a helper of its own answers: the suspect's
// refutation may never come this way (it follows the way back to the
// accuser), and without this the member declared the suspect failed
// after its T_broken although a member it reaches had just reached the
// suspect. Nothing answers for a crashed suspect, whose heard suspicion
// still ends in a verdict.
func TestHeartbeatPassedOnAnswerEndsHeardSuspicion(t *testing.T) {
	cfg := bigCfg()
	cfg.IndirectProbes = 3
	for _, answered := range []bool{true, false} {
		h, env := startHB(t, cfg, 0, ids(8), 1)
		h.Receive(5, HeartbeatNotice{Subject: 3})
		h.Receive(5, HeartbeatProbeReq{Subject: 3, Hops: 1})
		if evs := env.TakeEmitted(); !slices.Contains(evs, core.Event(core.Suspected{Node: 3})) {
			t.Fatalf("emitted %v on the notice, want n3 suspected", evs)
		}
		env.Advance(cfg.probeTimeout()/4+1, h)
		var helper core.NodeID = core.None
		for _, s := range env.TakeSent() {
			if m, ok := s.Msg.(HeartbeatProbeReq); ok && m.Subject == 3 && s.To != 5 {
				helper = s.To
			}
		}
		if helper == core.None {
			t.Fatal("the request was not passed on")
		}
		if answered {
			h.Receive(helper, HeartbeatProbeAck{Subject: 3})
			evs := env.TakeEmitted()
			if !slices.Contains(evs, core.Event(core.Unsuspected{Node: 3})) {
				t.Fatalf("emitted %v on the passed-on answer, want n3 unsuspected", evs)
			}
			if acks := sentOf[HeartbeatProbeAck](env.TakeSent()); len(acks) != 1 || acks[0].To != 5 {
				t.Fatalf("sent acks %v, want the answer relayed to n5", acks)
			}
		}
		env.Advance(cfg.Broken*(1+3)+cfg.probeTimeout(), h)
		failed := slices.Contains(env.TakeEmitted(), core.Event(core.Failed{Node: 3}))
		if failed == answered {
			t.Errorf("answered %v: declared n3 failed = %v", answered, failed)
		}
	}
}
