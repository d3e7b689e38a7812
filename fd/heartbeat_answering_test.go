package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// A 2-rank job on an overloaded host: the kernel leaves rank 0 unscheduled
// while rank 1's monitor runs on time. While rank 1's transport finds the
// link to rank 0 answering (core.PeerHint with Answering, every 100 ms as
// the TCP transport looks), a starved rank 0 is not declared failed and
// refutes when it runs again; with no such hint the same silence is a
// failure, as it was before the hints; a rank that stays silent with its
// link answering (a stopped process) is declared at the stated limit,
// min((1 + H)·T_broken + 2·stallCap, T_broken + answeringStallMax) after
// the suspicion, with a job's timings and with the LAN preset's, whose
// settling limit alone would be 20 s; and a suspicion from a refused
// connection is not held.
func TestHeartbeatAnsweringLinkHoldsVerdict(t *testing.T) {
	t.Run("job", func(t *testing.T) { checkAnsweringHold(t, AggressiveHeartbeatConfig(), true) })
	t.Run("lan", func(t *testing.T) { checkAnsweringHold(t, LANHeartbeatConfig(), false) })
}

// checkAnsweringHold runs TestHeartbeatAnsweringLinkHoldsVerdict's cases
// with cfg; starved: also the 1.2 s stalls, which only a job's timings
// would declare without the hold.
func checkAnsweringHold(t *testing.T, cfg HeartbeatConfig, starved bool) {
	const p, self = core.NodeID(0), core.NodeID(1)
	limit := min(cfg.Broken*time.Duration(1+cfg.LocalHealthMax)+2*(cfg.Timeout+cfg.Broken)*time.Duration(1+cfg.LocalHealthMax),
		cfg.Broken+answeringStallMax)
	const hintEvery = 100 * time.Millisecond
	type outcome struct {
		failed                bool
		suspectedAt, failedAt time.Duration
	}
	// run has p beat every interval for 2 s (past the settling), then stay
	// silent for silence (refused: its host refuses a connection at once),
	// the transport hinting that its link answers every hintEvery if hints.
	run := func(silence time.Duration, hints, refused bool) outcome {
		h, env := startHB(t, cfg, self, ids(2), 1)
		beat := func() { h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true}) }
		for env.T+cfg.Interval <= 3*cfg.Interval+2*time.Second {
			env.AdvanceTo(env.T+cfg.Interval, h)
			beat()
		}
		if h.State(p) != HeartbeatAlive {
			t.Fatalf("p beating: state %v, want alive", h.State(p))
		}
		last := env.T
		if refused {
			h.Handle(core.PeerHint{Node: p, Reason: "connection refused", Refused: true})
		}
		var o outcome
		for env.T < last+silence {
			env.AdvanceTo(env.T+time.Millisecond, h)
			if hints && (env.T-last)%hintEvery == 0 {
				h.Handle(core.PeerHint{Node: p, Reason: "link answers", Answering: true})
			}
			for _, ev := range env.TakeEmitted() {
				switch ev.(type) {
				case core.Suspected:
					o.suspectedAt = env.T
				case core.Failed:
					o.failed, o.failedAt = true, env.T
				}
			}
			if o.failed {
				return o
			}
		}
		beat()
		if got := h.State(p); got != HeartbeatAlive {
			t.Errorf("p heard again after %v: state %v, want alive", silence, got)
		}
		return o
	}

	if starved {
		if o := run(1200*time.Millisecond, true, false); o.failed {
			t.Errorf("starved 1.2 s, link answering: declared failed %v after its suspicion, want no verdict", o.failedAt-o.suspectedAt)
		}
		if o := run(1200*time.Millisecond, false, false); !o.failed {
			t.Errorf("starved 1.2 s, no hint: not declared failed, want a failure within the configured timeouts")
		}
	}
	o := run(time.Hour, true, false)
	switch {
	case !o.failed:
		t.Errorf("stopped, link answering: never declared failed, want a failure within %v of its suspicion", limit)
	case o.failedAt-o.suspectedAt > limit:
		t.Errorf("stopped, link answering: declared %v after its suspicion, want at most %v", o.failedAt-o.suspectedAt, limit)
	case o.failedAt-o.suspectedAt < limit-cfg.Interval:
		t.Errorf("stopped, link answering: declared %v after its suspicion, want the hold to reach about %v", o.failedAt-o.suspectedAt, limit)
	}
	with, without := run(time.Hour, true, true), run(time.Hour, false, true)
	if !with.failed || !without.failed || with.failedAt != without.failedAt {
		t.Errorf("refused connection: declared at %v with answering hints, %v without (failed %v, %v); want the same time",
			with.failedAt, without.failedAt, with.failed, without.failed)
	}
}
