package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
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
	bound := cfg.Interval + cfg.Timeout + cfg.Broken + 2*hbMaxLatency
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
	for at := last + cfg.Interval + cfg.Timeout + cfg.Broken + step; env.T < at; {
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
	if want := last + cfg.Interval + cfg.Timeout + cfg.Broken; len(failedAt) != 1 || failedAt[0] != want {
		t.Errorf("peer silent since %v while we sent to it every millisecond: failed at %v, want once at %v", last, failedAt, want)
	}
}
