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
// although the survivors keep sending to it. Before the fix, traffic that
// started before a node's first heartbeat suppressed the heartbeat that
// announces the interval, its monitors never learned to wait for it, and
// no survivor ever declared it failed.
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

// The same case, scripted: a monitor link busy from the start still gets
// the heartbeat that announces the interval, and a peer whose only sign of
// life is our own sending to it is suspected T_interval + T_timeout after
// the last message it sent us.
func TestHeartbeatSendIsNoSignOfLife(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	h, env := startHB(t, cfg, 0, ids(3), 1)
	// Both peers are monitors (k = 2, n = 3); the application sends to
	// both every 25 ms from the start.
	step := 25 * time.Millisecond
	for at := time.Duration(0); at < cfg.Interval; at += step {
		env.AdvanceTo(at, h)
		h.ObserveSend(1)
		h.ObserveSend(2)
	}
	env.AdvanceTo(cfg.Interval, h)
	b := beats(env.TakeSent())
	for _, p := range []core.NodeID{1, 2} {
		if len(b[p]) != 1 || b[p][0].Next != cfg.Interval {
			t.Fatalf("heartbeats to busy monitor %v in the first interval: %v, want one announcing %v", p, b[p], cfg.Interval)
		}
	}
	// Peer 1 announces its interval once, then is silent while we keep
	// sending to it.
	last := env.T
	h.ObserveReceive(1)
	h.Receive(1, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	var suspectedAt, failedAt []time.Duration
	for at := last + cfg.Interval + cfg.Timeout + monitorBroken(cfg) + step; env.T < at; {
		env.Advance(time.Millisecond, h)
		for _, e := range env.TakeEmitted() {
			switch e := e.(type) {
			case core.Suspected:
				if e.Node == 1 {
					suspectedAt = append(suspectedAt, env.T)
				}
			case core.Failed:
				if e.Node == 1 {
					failedAt = append(failedAt, env.T)
				}
			}
		}
		h.ObserveSend(1)
		h.ObserveSend(2)
	}
	if want := last + cfg.Interval + cfg.Timeout; len(suspectedAt) != 1 || suspectedAt[0] != want {
		t.Errorf("peer silent since %v while we sent to it every millisecond: suspected at %v, want once at %v", last, suspectedAt, want)
	}
	if want := last + cfg.Interval + cfg.Timeout + monitorBroken(cfg); len(failedAt) != 1 || failedAt[0] != want {
		t.Errorf("peer silent since %v while we sent to it every millisecond: failed at %v, want once at %v", last, failedAt, want)
	}
}

// Local health (health.go): a process whose loop stalled finds its timers
// late; it does not suspect a peer whose messages wait behind those
// timers, raises its score, and waits (1 + score)·T_timeout after it
// caught up before it suspects a peer that really went silent; the score
// decays once its timers are on time again.
func TestHeartbeatLateTimersDoNotAccuse(t *testing.T) {
	cfg := AggressiveHeartbeatConfig() // T_interval = T_timeout = 100 ms
	cfg.FullMeshMax = 0
	cfg.RingNeighbors = 0
	h, env := startHB(t, cfg, 0, ids(10), 1)
	const p, q = core.NodeID(5), core.NodeID(6)
	env.AdvanceTo(time.Second, h)
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	h.Receive(q, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	env.TakeEmitted()
	// The loop stalls for 1 s: every deadline passes unseen. When it
	// wakes, the timers fire first (late), then p's queued message is read.
	env.T = 2 * time.Second
	env.AdvanceTo(env.T, h)
	h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) != 0 {
		t.Fatalf("suspected %v right after a stall of 1 s, want nobody", s)
	}
	hs := h.Health()
	if hs.Late == 0 || hs.Score != 1 || hs.MaxLate < 900*time.Millisecond {
		t.Fatalf("health %+v after a stall of 1 s, want lateness seen, score 1", hs)
	}
	// q really is silent: it is suspected T_interval + 2·T_timeout after
	// the stall, not at once.
	woke := env.T
	want := woke + cfg.Interval + 2*cfg.Timeout
	for env.T < want+50*time.Millisecond {
		env.Advance(10*time.Millisecond, h)
		h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
		if s := eventsOf[core.Suspected](env.TakeEmitted()); len(s) > 0 {
			if len(s) != 1 || s[0].Node != q || env.T < want || env.T > want+10*time.Millisecond {
				t.Fatalf("suspected %v at %v after waking at %v; want %v alone, at %v", s, env.T, woke, q, want)
			}
			break
		}
	}
	if h.State(q) != HeartbeatSuspected {
		t.Fatalf("silent %v not suspected by %v", q, env.T)
	}
	// On time again: the score decays by one per T_interval.
	for range 10 {
		env.Advance(cfg.Interval, h)
		h.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	}
	if hs := h.Health(); hs.Score != 0 || hs.MaxScore != 1 {
		t.Errorf("health %+v after 1 s on time, want score back to 0 (max 1)", hs)
	}
	// With LocalHealthMax = 0 the same stall makes it suspect q and p at
	// once (the papers' fixed timeouts).
	cfg.LocalHealthMax = 0
	h0, env0 := startHB(t, cfg, 0, ids(10), 1)
	env0.AdvanceTo(time.Second, h0)
	h0.Receive(p, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	h0.Receive(q, HeartbeatMsg{Next: cfg.Interval, Monitor: true})
	env0.TakeEmitted()
	env0.T = 2 * time.Second
	env0.AdvanceTo(env0.T, h0)
	if s := eventsOf[core.Suspected](env0.TakeEmitted()); len(s) != 2 {
		t.Errorf("fixed timeouts: suspected %v right after the stall, want both peers", s)
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
// again and again. Before, every re-check was itself late and postponed
// the accusation forever: a killed node was never suspected over TCP.
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
