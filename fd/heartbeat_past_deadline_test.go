package fd

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
)

// A timer armed for a deadline that had already passed when it was set
// fires at once, on time: its deadline says nothing of this process's
// loop. Measured from the deadline, it read as the loop running that
// late, raised the local health score, restarted the judgement clock and
// held the accusation it made (recheck) as long again; any rule that
// re-armed a past deadline could then postpone a verdict for ever.
func TestHeartbeatTimerForPastDeadlineIsOnTime(t *testing.T) {
	cfg := clusterHeartbeatConfig()
	h, env := startHB(t, cfg, 0, ids(3), 1)
	for range 2 * cfg.SettleIntervals {
		env.Advance(cfg.Interval, h)
		for _, p := range []core.NodeID{1, 2} {
			h.Receive(p, HeartbeatMsg{Next: cfg.Interval})
		}
	}
	r := h.find(1)
	if r == nil || r.state != HeartbeatAlive || r.expect == 0 {
		t.Fatalf("n1 not watched: %+v", r)
	}
	before := h.Health()
	// n1's deadline moved back, well past, while its timer was armed for
	// a later one (as a deadline does when the score decays).
	now := env.Now()
	r.lastRecv = now - 10*(r.expect+cfg.Timeout)
	due, ok := h.recvDue(r)
	if !ok || now-due <= cfg.lateTolerance() {
		t.Fatalf("n1's deadline %v (ok %v) not past by more than %v at %v", due, ok, cfg.lateTolerance(), now)
	}
	h.schedule(r)
	env.Advance(0, h)
	if got := h.Health(); got.Late != before.Late || got.Score != before.Score {
		t.Errorf("a timer set at %v for %v counted as late: Late %d → %d, Score %d → %d; want unchanged", now, due, before.Late, got.Late, before.Score, got.Score)
	}
	if r.hold > now || r.state != HeartbeatSuspected {
		t.Errorf("n1 silent past its deadline: state %v (hold %v) at %v; want suspected at once, not held", r.state, r.hold, now)
	}
}
