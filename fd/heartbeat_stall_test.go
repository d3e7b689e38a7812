package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// A peer starved for 1.2 s, 40 s after it last stalled for 700 ms (and
// was declared failed, then heard again), is not declared failed: the peers' stalls are remembered
// for minutes (peerStallHalfLife), not the few seconds of the process's
// own lateness, which had forgotten it. The same silence with no stall
// ever seen is a failure within the configured timeouts, and so is a
// peer that stays silent after the long memory.
func TestHeartbeatRemembersPeerStallsForMinutes(t *testing.T) {
	cfg := AggressiveHeartbeatConfig() // a job's timings on one machine
	cfg.Timeout = 200 * time.Millisecond
	cfg.FullMeshMax, cfg.RingNeighbors = 0, 0
	const p = core.NodeID(5)
	for _, c := range []struct {
		name       string
		stall      bool // a refuted stall of p at 1 s
		silence    time.Duration
		wantFailed bool
	}{
		{"stall remembered", true, 1200 * time.Millisecond, false},
		{"no stall seen", false, 1200 * time.Millisecond, true},
		{"crash after a stall", true, 10 * time.Second, true},
	} {
		h, env := startHB(t, cfg, 0, ids(10), 1)
		beat := func() { h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true}) }
		// beatUntil has p beat every interval until end.
		beatUntil := func(end time.Duration) {
			for env.T+cfg.Interval <= end {
				env.AdvanceTo(env.T+cfg.Interval, h)
				beat()
			}
		}
		beatUntil(time.Second)
		if c.stall {
			env.AdvanceTo(env.T+700*time.Millisecond, h)
			if got := h.State(p); got != HeartbeatFailed {
				t.Fatalf("%s: p silent 700 ms: state %v, want failed", c.name, got)
			}
			beat()
		}
		beatUntil(41 * time.Second)
		if h.State(p) != HeartbeatAlive {
			t.Fatalf("%s: p beating: state %v, want alive", c.name, h.State(p))
		}
		last := env.T
		for env.T < last+c.silence {
			env.AdvanceTo(min(env.T+time.Millisecond, last+c.silence), h)
			if h.State(p) == HeartbeatFailed {
				break
			}
		}
		if got := h.State(p) == HeartbeatFailed; got != c.wantFailed {
			t.Errorf("%s: p silent %v (stopped at %v): failed %v, want %v (remembered stall %v)",
				c.name, env.T-last, env.T, got, c.wantFailed, h.stalls.at(env.T, h.stallHalfLife()))
		}
	}
}
