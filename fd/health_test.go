package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// A loaded host's timers run late by less than the tolerance long before
// one runs a whole tolerance late: such lateness raises no score and
// restarts no judgement, but the margin remembers it, and forgets it
// slowly (a 64th and a 64th of the tolerance per period on time), so that
// a group on time is back to no margin within a few seconds.
func TestHealthRemembersLatenessWithinTolerance(t *testing.T) {
	const tolerance, period = 100 * time.Millisecond, 100 * time.Millisecond
	l := newHealth(3, tolerance, period)
	l.fired(time.Second, time.Second+60*time.Millisecond)
	if l.score != 0 || l.since != -1 || l.stats.Late != 0 {
		t.Fatalf("lateness within the tolerance: score %d, judgement clock %v, Late %d; want 0, -1, 0", l.score, l.since, l.stats.Late)
	}
	// The first period's decay comes with it: 60 ms less a 64th of 60 ms
	// and of the tolerance, 57.5 ms, doubled.
	if got, want := l.margin(), 115*time.Millisecond; got != want {
		t.Fatalf("margin after a timer 60 ms late = %v, want %v", got, want)
	}
	// Ten periods on time: about 57.5 ms·(63/64)^10 less ten 64ths of
	// the tolerance, about 35 ms, where an eighth per period left none.
	at := time.Second + 60*time.Millisecond
	for range 10 {
		at += period
		l.fired(at, at)
	}
	if got := l.lateness; got < 30*time.Millisecond || got > 45*time.Millisecond {
		t.Fatalf("lateness after ten periods on time = %v, want about 36 ms", got)
	}
	for range 100 {
		at += period
		l.fired(at, at)
	}
	if l.lateness != 0 {
		t.Fatalf("lateness after 110 periods on time = %v, want 0", l.lateness)
	}
}

// A suspicion refuted after T_interval or more teaches the suspect's
// whole silence, the T_interval + T_timeout before the suspicion
// included; one refuted sooner (a lost heartbeat, a refutation that
// crossed the notice) its own length; a process declared failed and
// heard from again teaches the same as a refutation.
func TestHeartbeatRefutationTeachesSilence(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.FullMeshMax, cfg.RingNeighbors = 0, 0
	for _, c := range []struct {
		name  string
		after time.Duration // from the notice to the refutation
		fail  bool          // the suspect is declared failed first
		want  time.Duration
	}{
		{"quick", cfg.Interval / 2, false, cfg.Interval / 2},
		{"long", 3 * cfg.Interval / 2, false, 3*cfg.Interval/2 + cfg.Interval + cfg.Timeout},
		{"false verdict", 0, true, 0},
	} {
		h, env := startHB(t, cfg, 0, ids(10), 1)
		const accuser, suspect = core.NodeID(7), core.NodeID(5)
		env.AdvanceTo(time.Second, h)
		h.Receive(accuser, HeartbeatNotice{Subject: suspect})
		if got := h.State(suspect); got != HeartbeatSuspected {
			t.Fatalf("%s: state %v after the notice, want suspected", c.name, got)
		}
		after := c.after
		if c.fail {
			for h.State(suspect) != HeartbeatFailed && env.T < 10*time.Second {
				env.AdvanceTo(env.T+time.Millisecond, h)
			}
			after = env.T - time.Second
			c.want = min(after+cfg.Interval+cfg.Timeout, h.stallCap())
		} else {
			env.AdvanceTo(time.Second+after, h)
		}
		h.Receive(suspect, HeartbeatNotice{Subject: suspect, Inc: 1, Alive: true})
		if got := h.State(suspect); got != HeartbeatAlive {
			t.Fatalf("%s: state %v after the refutation, want alive", c.name, got)
		}
		if got := h.Health().Lateness; got != c.want {
			t.Errorf("%s: refuted %v after the notice: remembered stall %v, want %v", c.name, after, got, c.want)
		}
	}
}
