package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// Only what is received from a peer is a sign of its life. Here every node
// has a layer that talks to every other node every 25 ms from the start,
// so that application traffic stands in for every heartbeat: a node that
// crashes must still be suspected by its monitors and declared failed by
// every survivor within T_interval + T_timeout + T_broken (+ latency),
// although the survivors keep sending to it: traffic that starts before a
// node's first heartbeat must not suppress the heartbeat that announces
// the interval, or its monitors never learn to wait for it and no
// survivor declares it failed.
func TestHeartbeatSimTrafficToCrashed(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	const n = 3
	bound := cfg.Interval + cfg.Timeout + monitorBroken(cfg) + 2*hbMaxLatency
	for _, seed := range simtest.Seeds(t, 8) {
		w := hbWorld(t, seed, n, cfg, func(core.NodeID) []core.Machine {
			return []core.Machine{&appChatter{n: n, period: 25 * time.Millisecond, until: time.Hour}}
		})
		ev := recordHB(w)
		const victim = core.NodeID(1)
		crash := time.Second + time.Duration(w.Rand().Int64N(int64(time.Second)))
		w.CrashAt(crash, victim)
		w.RunUntil(crash + 4*time.Second)
		for i := range n {
			y := core.NodeID(i)
			if y == victim {
				continue
			}
			f := ev.failed[[2]core.NodeID{y, victim}]
			if len(f) != 1 || f[0] > crash+bound {
				t.Errorf("seed %d: %v crashed at %v while %v kept sending to it every 25 ms; %v declared it failed at %v, want once by %v",
					seed, victim, crash, y, y, f, crash+bound)
			}
		}
		for k, s := range ev.suspected {
			if k[1] != victim {
				t.Errorf("seed %d: %v suspected live %v at %v", seed, k[0], k[1], s)
			}
		}
	}
}

// A peer whose gaps exceed the interval it announced gets a longer
// timeout: twice its largest recent excess, capped at
// (1 + LocalHealthMax)·T_timeout.
func TestHeartbeatAdaptiveTimeout(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.FullMeshMax = 0
	cfg.RingNeighbors = 0
	h, env := startHB(t, cfg, 0, ids(10), 1)
	const p = core.NodeID(5)
	beat := func() { h.ObserveReceive(p); h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true}) }
	env.AdvanceTo(time.Second, h)
	beat()
	// One gap of 180 ms (excess 80 ms over the 100 ms announced): the
	// timeout becomes 160 ms.
	env.AdvanceTo(env.T+180*time.Millisecond, h)
	beat()
	last := env.T
	if got := h.find(p).slack; got != 80*time.Millisecond {
		t.Fatalf("slack %v, want 80ms", got)
	}
	env.AdvanceTo(last+cfg.Interval+160*time.Millisecond-time.Millisecond, h)
	if h.State(p) != HeartbeatAlive {
		t.Fatalf("suspected at %v, before T_interval + 2·80 ms", env.T)
	}
	env.AdvanceTo(last+cfg.Interval+160*time.Millisecond, h)
	if h.State(p) != HeartbeatSuspected {
		t.Fatalf("not suspected at T_interval + 2·80 ms")
	}
	if h.Health().Adaptions != 1 {
		t.Errorf("adaptions %d, want 1", h.Health().Adaptions)
	}
	// A huge gap is capped: (1+3)·T_timeout.
	h2, env2 := startHB(t, cfg, 0, ids(10), 1)
	env2.AdvanceTo(time.Second, h2)
	h2.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	h2.find(p).slack = 10 * time.Second
	if got := h2.timeout(h2.find(p)); got != 4*cfg.Timeout {
		t.Errorf("timeout %v with a slack of 10 s, want the cap 4·T_timeout = %v", got, 4*cfg.Timeout)
	}
}

// advanceLate moves env to until firing every timer a little late (by up
// to step), as a real host does, never exactly on time.
func advanceLate(env *coretest.Env, m core.Machine, until, step time.Duration) {
	for {
		next := time.Duration(-1)
		for _, p := range env.Pending() {
			if next < 0 || p.When < next {
				next = p.When
			}
		}
		if next < 0 || next+step > until {
			break
		}
		env.T = max(env.T, next+step)
		env.AdvanceTo(env.T, m)
	}
	env.AdvanceTo(until, m)
}

// Timers that always fire a little late (a real host) still let the
// detector accuse: the re-check of a late deadline is made once, not
// again and again: each re-check would itself be late and postpone the
// accusation forever, and a killed node would never be suspected over
// TCP.
func TestHeartbeatSlightlyLateTimersStillAccuse(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.FullMeshMax, cfg.RingNeighbors = 0, 0
	h, env := startHB(t, cfg, 0, ids(10), 1)
	const p = core.NodeID(5)
	advanceLate(env, h, time.Second, 50*time.Microsecond)
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	last := env.T
	advanceLate(env, h, last+time.Second, 50*time.Microsecond)
	if got := h.State(p); got != HeartbeatFailed {
		t.Fatalf("peer silent since %v: state %v at %v, want failed", last, got, env.T)
	}
	if hs := h.Health(); hs.Late != 0 || hs.Score != 0 {
		t.Errorf("health %+v with timers 50 µs late, want no lateness noticed (tolerance %v)", hs, cfg.Timeout/2)
	}
}
