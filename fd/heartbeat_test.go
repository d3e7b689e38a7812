package fd

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// Tests of the heartbeat detector (Phoenix §4) that sweep seeds or tables,
// and helpers for the other Go tests; its scenarios are the scripts of
// testdata/heartbeat (heartbeat_script_test.go).

func ids(n int) []core.NodeID {
	out := make([]core.NodeID, n)
	for i := range out {
		out[i] = core.NodeID(i)
	}
	return out
}

// startHB starts a detector as node self of members on a fresh Env.
func startHB(t *testing.T, cfg HeartbeatConfig, self core.NodeID, members []core.NodeID, seed uint64) (*HeartbeatDetector, *coretest.Env) {
	t.Helper()
	h, err := NewHeartbeat(cfg, members)
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(self, seed)
	h.Start(env)
	return h, env
}

// beats returns the heartbeats among sent, by destination.
func beats(sent []coretest.Sent) map[core.NodeID][]HeartbeatMsg {
	out := map[core.NodeID][]HeartbeatMsg{}
	for _, s := range sent {
		if m, ok := s.Msg.(HeartbeatMsg); ok {
			out[s.To] = append(out[s.To], m)
		}
	}
	return out
}

func sentOf[M core.Msg](sent []coretest.Sent) []coretest.Sent {
	var out []coretest.Sent
	for _, s := range sent {
		if _, ok := s.Msg.(M); ok {
			out = append(out, s)
		}
	}
	return out
}

// bigCfg is the default without full mesh, so that only monitors, ring
// neighbours and talkers are connections.
func bigCfg() HeartbeatConfig {
	c := DefaultHeartbeatConfig()
	c.FullMeshMax = 0
	return c
}

// §4.2.1: each process sends heartbeats to k distinct monitors chosen at
// random, every T_interval, each announcing the interval.
func TestHeartbeatKDistinctMonitors(t *testing.T) {
	cfg := bigCfg()
	cfg.Monitors = 3
	cfg.RingNeighbors = 0
	chosen := map[core.NodeID]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		h, env := startHB(t, cfg, 5, ids(20), seed)
		ms := h.Monitors()
		if len(ms) != 3 {
			t.Fatalf("seed %d: %d monitors, want 3", seed, len(ms))
		}
		sorted := slices.Clone(ms)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != 3 || slices.Contains(ms, 5) {
			t.Fatalf("seed %d: monitors %v not 3 distinct peers", seed, ms)
		}
		for _, m := range ms {
			chosen[m]++
		}
		// Over 10 intervals each monitor gets a heartbeat at least every
		// interval, the first within one, and nobody else gets any; one
		// of them may get one more, sent early to fall due with another
		// monitor's (beatAlong).
		env.AdvanceTo(10*cfg.Interval-1, h)
		sent := env.TakeSent()
		b := beats(sent)
		if len(b) != 3 {
			t.Fatalf("seed %d: heartbeats to %d peers, want the 3 monitors %v", seed, len(b), ms)
		}
		at := map[core.NodeID][]time.Duration{}
		for _, s := range sentOf[HeartbeatMsg](sent) {
			at[s.To] = append(at[s.To], s.At)
		}
		for _, m := range ms {
			if n := len(b[m]); n < 10 || n > 11 {
				t.Errorf("seed %d: monitor %v got %d heartbeats in 10 intervals, want 10 (11 with one sent early)", seed, m, n)
			}
			for _, hb := range b[m] {
				if hb != (HeartbeatMsg{Next: cfg.Interval, Monitor: true}) {
					t.Errorf("seed %d: heartbeat %v, want next %v monitor true", seed, hb, cfg.Interval)
				}
			}
			prev := time.Duration(0)
			for _, a := range at[m] {
				if a-prev > cfg.Interval {
					t.Errorf("seed %d: heartbeats to %v at %v: a gap over %v", seed, m, at[m], cfg.Interval)
					break
				}
				prev = a
			}
		}
		// Then exactly one per interval, to all three at the same times:
		// the process wakes once per interval for them.
		env.AdvanceTo(20*cfg.Interval-1, h)
		at = map[core.NodeID][]time.Duration{}
		for _, s := range sentOf[HeartbeatMsg](env.TakeSent()) {
			at[s.To] = append(at[s.To], s.At)
		}
		for _, m := range ms {
			if len(at[m]) != 10 || !slices.Equal(at[m], at[ms[0]]) {
				t.Errorf("seed %d: heartbeats at %v to %v and at %v to %v: want 10 each, together", seed, at[m], m, at[ms[0]], ms[0])
			}
			for i := 1; i < len(at[m]); i++ {
				if at[m][i]-at[m][i-1] != cfg.Interval {
					t.Errorf("seed %d: heartbeats to %v at %v: want every %v", seed, m, at[m], cfg.Interval)
					break
				}
			}
		}
	}
	// Random choice: every one of the 19 peers is chosen by some seed.
	if len(chosen) != 19 {
		t.Errorf("over 200 seeds only %d of 19 peers were ever chosen: %v", len(chosen), chosen)
	}
}

func TestHeartbeatConfigValidate(t *testing.T) {
	for _, c := range []HeartbeatConfig{DefaultHeartbeatConfig(), LANHeartbeatConfig(), WANHeartbeatConfig(), SimHeartbeatConfig(), AggressiveHeartbeatConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("preset %+v: %v", c, err)
		}
	}
	d := DefaultHeartbeatConfig()
	if d.Monitors != 2 || d.Interval != 5*time.Second || d.Timeout != 5*time.Second || d.Insurance != 200*time.Second || d.Broken != 5*time.Second {
		t.Errorf("default %+v is not the paper's Table 1", d)
	}
	if a := AggressiveHeartbeatConfig(); a.Interval != 100*time.Millisecond {
		t.Errorf("aggressive interval %v, want 100ms", a.Interval)
	}
	for name, mut := range map[string]func(*HeartbeatConfig){
		"Monitors":                func(c *HeartbeatConfig) { c.Monitors = 0 },
		"Interval":                func(c *HeartbeatConfig) { c.Interval = -1 },
		"Timeout":                 func(c *HeartbeatConfig) { c.Timeout = 0 },
		"Insurance":               func(c *HeartbeatConfig) { c.Insurance = c.Interval - 1 },
		"Broken":                  func(c *HeartbeatConfig) { c.Broken = -1 },
		"FullMeshMax":             func(c *HeartbeatConfig) { c.FullMeshMax = -1 },
		"RingNeighbors":           func(c *HeartbeatConfig) { c.RingNeighbors = -1 },
		"NoticeFanout":            func(c *HeartbeatConfig) { c.NoticeFanout = 33 },
		"IndirectProbes negative": func(c *HeartbeatConfig) { c.IndirectProbes = -1 },
		"IndirectProbes 17":       func(c *HeartbeatConfig) { c.IndirectProbes = 17 },
		"ProbeTimeout":            func(c *HeartbeatConfig) { c.ProbeTimeout = -time.Millisecond },
		"SettleIntervals":         func(c *HeartbeatConfig) { c.SettleIntervals = -1 },
	} {
		c := DefaultHeartbeatConfig()
		mut(&c)
		err := c.Validate()
		if !errors.Is(err, ErrHeartbeatConfig) {
			t.Errorf("%s: Validate = %v, want ErrHeartbeatConfig", name, err)
		}
		if _, err := NewHeartbeat(c, nil); !errors.Is(err, ErrHeartbeatConfig) {
			t.Errorf("%s: NewHeartbeat accepted an invalid config", name)
		}
	}
}

// monitorBroken is how long a monitor's own suspicion of a peer on a
// clean link lasts before it declares the peer failed, when the peer
// announced cfg.Interval and its jitter is below an eighth of it: T_broken
// and a quarter interval (brokenDue).
func monitorBroken(cfg HeartbeatConfig) time.Duration { return cfg.Broken + cfg.Interval/4 }
