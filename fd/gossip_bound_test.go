package fd

import (
	"errors"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

// TestPropagationRoundsWorkedExample: BRR over four nodes (the example of
// P2P-MPI §5.1). If node 0 sends its last heartbeat in round 1 (to node 1),
// node 1 forwards it to node 3 in round 2, and node 2 gets it from node 1
// in round 1 of the next cycle: 3 rounds. Starting in round 2 is the
// mirror case. With a live source the paper's T_cleanup^min is 2 rounds;
// the dead source costs one more.
func TestPropagationRoundsWorkedExample(t *testing.T) {
	for _, c := range []struct {
		s    topo.Schedule
		n    int
		want int
	}{
		{topo.BinaryRoundRobin, 4, 3},
		{topo.BinaryRoundRobin, 2, 1},
		{topo.DoubleBinaryRoundRobin, 2, 1},
		{topo.RoundRobin, 2, 1},
		{topo.RoundRobin, 3, 3}, // 0→1 (r1), 1→0 dead (r2), 1→2 (r1 again)
		{topo.BinaryRoundRobin, 8, 4},
		{topo.DoubleBinaryRoundRobin, 8, 4},
	} {
		got, err := PropagationRounds(c.s, c.n)
		if err != nil || got != c.want {
			t.Errorf("PropagationRounds(%v, %d) = %d, %v; want %d", c.s, c.n, got, err, c.want)
		}
	}
	for _, c := range []struct {
		s topo.Schedule
		n int
	}{{topo.Random, 8}, {topo.BinaryRoundRobin, 1}, {0, 8}} {
		if _, err := PropagationRounds(c.s, c.n); !errors.Is(err, ErrNoBound) {
			t.Errorf("PropagationRounds(%v, %d): err = %v, want ErrNoBound", c.s, c.n, err)
		}
	}
}

// TestDefaultCleanupExceedsPropagation checks the no-false-suspicion
// condition of the package documentation for the default T_cleanup: c ≥ P+1
// rounds, so that in a stable view with synchronous rounds a live node's
// newest heartbeat always reaches everyone before its entry expires. It also
// pins P ≤ ⌈log2 n⌉+2 for BRR and DBRR (a property the doc states).
func TestDefaultCleanupExceedsPropagation(t *testing.T) {
	sizes := []int{}
	for n := 2; n <= 300; n++ {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, 511, 512, 513, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096)
	if testing.Short() || gossipRace {
		sizes = sizes[:130]
	}
	cfg := DefaultGossipConfig()
	for _, s := range []topo.Schedule{topo.BinaryRoundRobin, topo.DoubleBinaryRoundRobin, topo.RoundRobin} {
		cfg.Schedule = s
		for _, n := range sizes {
			if s == topo.RoundRobin && n > 200 {
				break // O(n²) per size
			}
			p, err := PropagationRounds(s, n)
			if err != nil {
				t.Fatalf("%v n=%d: %v", s, n, err)
			}
			if c := cfg.CleanupRounds(n); c < p+1 {
				t.Errorf("%v n=%d: default cleanup %d rounds < P+1 = %d: false suspicions possible", s, n, c, p+1)
			}
			if l := topo.CeilLog2(n); s != topo.RoundRobin && p > l+2 {
				t.Errorf("%v n=%d: P = %d > ⌈log2 n⌉+2 = %d", s, n, p, l+2)
			}
		}
	}
}

func TestDetectionBound(t *testing.T) {
	cfg := DefaultGossipConfig() // DBRR, 0.5 s, 2 × 0.5 s pings
	// n = 256: c = 24 rounds, P = 9 (⌈log2 256⌉+1), T_consensus = 1 s.
	p, _ := PropagationRounds(cfg.Schedule, 256)
	if p != 9 {
		t.Fatalf("P(dbrr, 256) = %d, want 9", p)
	}
	lo, hi, err := DetectionBound(cfg, 256, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// lo = c·T − L − Φ + T_cons, hi = (c+1)·T + Φ + T_cons, Φ = T − L.
	wantLo := 24*500*time.Millisecond - 10*time.Millisecond - 490*time.Millisecond + time.Second
	wantHi := 25*500*time.Millisecond + 490*time.Millisecond + time.Second
	if lo != wantLo || hi != wantHi {
		t.Fatalf("DetectionBound = [%v, %v], want [%v, %v]", lo, hi, wantLo, wantHi)
	}
	_, hi0, err := DetectionBoundSpread(cfg, 256, 10*time.Millisecond, 0)
	if err != nil || hi0 != 25*500*time.Millisecond+time.Second {
		t.Fatalf("DetectionBoundSpread(Φ=0) hi = %v, %v; want 13.5s", hi0, err)
	}
	for name, f := range map[string]func() error{
		"random": func() error {
			c := cfg
			c.Schedule = topo.Random
			_, _, err := DetectionBound(c, 256, 0)
			return err
		},
		"latency ≥ T_gossip": func() error { _, _, err := DetectionBound(cfg, 256, cfg.GossipInterval); return err },
		"spread too large": func() error {
			_, _, err := DetectionBoundSpread(cfg, 256, 100*time.Millisecond, 400*time.Millisecond)
			return err
		},
		"one node": func() error { _, _, err := DetectionBound(cfg, 1, 0); return err },
		"T_cleanup shorter than propagation": func() error {
			c := cfg
			c.Cleanup = 2 * cfg.GossipInterval // 2 rounds < P = 9
			_, _, err := DetectionBound(c, 256, 0)
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrNoBound) {
			t.Errorf("%s: err = %v, want ErrNoBound", name, err)
		}
	}
	if _, _, err := DetectionBound(GossipConfig{}, 8, 0); !errors.Is(err, ErrGossipConfig) {
		t.Errorf("invalid config: err = %v, want ErrGossipConfig", err)
	}
}

// LoadedDetectionBound against the formula worked by hand: BRR at n = 128
// with cohort's timings on one machine (T = 100 ms, pings of 250 ms, two
// attempts, H = 3): c = 14, T_consensus = 500 ms, StallCap = 4·(1.4 s +
// 0.5 s) = 7.6 s.
func TestLoadedDetectionBound(t *testing.T) {
	cfg := LANGossipConfig()
	cfg.Schedule = topo.BinaryRoundRobin
	cfg.PingTimeout = 250 * time.Millisecond
	const n, l = 128, 2 * time.Millisecond
	if got := cfg.StallCap(n); got != 7600*time.Millisecond {
		t.Fatalf("StallCap = %v, want 7.6s", got)
	}
	_, plain, err := DetectionBound(cfg, n, l)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	for _, c := range []struct {
		stall time.Duration
		alone bool
		want  time.Duration
	}{
		// (4·14 + 0 + 1)·100 ms + 98 ms + 4·500 ms
		{0, false, 5700*ms + 98*ms + 2000*ms},
		// s = ⌈2·250/100⌉ = 5: (56+5+1)·100 ms + 98 ms + 2 s + 500 ms
		{250 * ms, false, 6200*ms + 98*ms + 2000*ms + 500*ms},
		// s = ⌈2·130/100⌉ = 3
		{130 * ms, false, 6000*ms + 98*ms + 2000*ms + 260*ms},
		// alone: two more (56+5+1)·100 ms
		{250 * ms, true, 3*6200*ms + 98*ms + 2000*ms + 500*ms},
		// capped at 7.6 s: s = 152
		{time.Hour, false, (56+152+1)*100*ms + 98*ms + 2000*ms + 15200*ms},
	} {
		got, err := LoadedDetectionBound(cfg, n, l, c.stall, c.alone)
		if err != nil || got != c.want {
			t.Errorf("LoadedDetectionBound(stall %v, alone %v) = %v, %v; want %v", c.stall, c.alone, got, err, c.want)
		}
	}
	off := cfg
	off.LocalHealthMax = 0
	if got, err := LoadedDetectionBound(off, n, l, time.Second, true); err != nil || got != plain {
		t.Errorf("H = 0: LoadedDetectionBound = %v, %v; want DetectionBound's %v", got, err, plain)
	}
	if got := off.StallCap(n); got != 0 {
		t.Errorf("H = 0: StallCap = %v, want 0", got)
	}
	if _, err := LoadedDetectionBound(cfg, 1, l, 0, false); !errors.Is(err, ErrNoBound) {
		t.Errorf("one node: err = %v, want ErrNoBound", err)
	}
}
