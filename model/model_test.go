package model

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

const µs = time.Microsecond

// TestMinCleanup checks T_cleanup^min of P2P-MPI §5.1–5.2 on hand-computed
// cases: RR ⌈(√(1+8n)-1)/2⌉, BRR ⌈log2 n⌉, DBRR 2⌈log2 n⌉ rounds of
// T_gossip. T_gossip = 0.5 s is the value of the Grid'5000 experiment (§5.3).
func TestMinCleanup(t *testing.T) {
	half := 500 * time.Millisecond
	cases := []struct {
		s    topo.Schedule
		n    int
		want time.Duration
	}{
		{topo.RoundRobin, 10, 4 * half},   // 4·5/2 = 10 ≥ 10
		{topo.RoundRobin, 11, 5 * half},   // 4·5/2 = 10 < 11
		{topo.RoundRobin, 256, 23 * half}, // 22·23/2 = 253 < 256 ≤ 276
		{topo.BinaryRoundRobin, 256, 8 * half},
		{topo.BinaryRoundRobin, 257, 9 * half},
		{topo.BinaryRoundRobin, 2, half},
		{topo.DoubleBinaryRoundRobin, 256, 16 * half},
		{topo.DoubleBinaryRoundRobin, 100, 14 * half},
		{topo.BinaryRoundRobin, 1, 0},
	}
	for _, c := range cases {
		got, err := MinCleanup(c.s, c.n, half)
		if err != nil || got != c.want {
			t.Errorf("MinCleanup(%v, %d) = %v, %v; want %v", c.s, c.n, got, err, c.want)
		}
	}
	if _, err := MinCleanup(topo.Random, 8, half); !errors.Is(err, topo.ErrRandomSchedule) {
		t.Errorf("MinCleanup(random): err = %v", err)
	}
	if _, err := MinCleanup(topo.BinaryRoundRobin, 0, half); !errors.Is(err, topo.ErrSize) {
		t.Errorf("MinCleanup(n=0): err = %v", err)
	}
	if _, err := MinCleanup(topo.BinaryRoundRobin, 8, 0); !errors.Is(err, ErrParam) {
		t.Errorf("MinCleanup(T_gossip=0): err = %v", err)
	}
	if _, err := MinCleanup(topo.BinaryRoundRobin, 8, math.MaxInt64/2); !errors.Is(err, ErrOverflow) {
		t.Errorf("MinCleanup(huge T_gossip): err = %v", err)
	}
}

// TestDefaultCleanup checks the T_cleanup that P2P-MPI configures (§5.2):
// 3⌈log2 n⌉·T_gossip for DBRR as stated, and 2⌈log2 n⌉·T_gossip for BRR (our
// reading of "the same assumptions as for BRR": one BRR cycle of margin).
func TestDefaultCleanup(t *testing.T) {
	half := 500 * time.Millisecond
	cases := []struct {
		s    topo.Schedule
		n    int
		want time.Duration
	}{
		{topo.DoubleBinaryRoundRobin, 256, 24 * half}, // 3·8 rounds = 12 s
		{topo.DoubleBinaryRoundRobin, 100, 21 * half}, // 3·7
		{topo.DoubleBinaryRoundRobin, 2, 3 * half},
		{topo.BinaryRoundRobin, 256, 16 * half},
		{topo.BinaryRoundRobin, 5, 6 * half},
		{topo.BinaryRoundRobin, 1, 0},
	}
	for _, c := range cases {
		got, err := DefaultCleanup(c.s, c.n, half)
		if err != nil || got != c.want {
			t.Errorf("DefaultCleanup(%v, %d) = %v, %v; want %v", c.s, c.n, got, err, c.want)
		}
	}
	// Over every n up to 4096 the default is at least the minimum, and DBRR's
	// is exactly 3⌈log2 n⌉ rounds.
	for n := 1; n <= 4096; n++ {
		l := topo.CeilLog2(n)
		for _, s := range []topo.Schedule{topo.BinaryRoundRobin, topo.DoubleBinaryRoundRobin} {
			def, err1 := DefaultCleanupRounds(s, n)
			minR, err2 := MinCleanupRounds(s, n)
			if err1 != nil || err2 != nil || def < minR {
				t.Fatalf("%v n=%d: default %d, min %d (%v, %v)", s, n, def, minR, err1, err2)
			}
		}
		if def, _ := DefaultCleanupRounds(topo.DoubleBinaryRoundRobin, n); def != 3*l {
			t.Fatalf("DBRR n=%d: default %d rounds, want 3⌈log2 n⌉ = %d", n, def, 3*l)
		}
	}
	for _, s := range []topo.Schedule{topo.RoundRobin, topo.Random} {
		if _, err := DefaultCleanup(s, 8, half); !errors.Is(err, ErrNoDefault) {
			t.Errorf("DefaultCleanup(%v): err = %v", s, err)
		}
	}
	if _, err := DefaultCleanup(topo.Schedule(0), 8, half); !errors.Is(err, ErrParam) {
		t.Errorf("DefaultCleanup(invalid): err = %v", err)
	}
}

// TestWeibullFailure checks Eq. 1 of P2P-MPI §4.5 on the setting of Figure 12
// (δ = 1, λ = 10⁻³ s⁻¹, t = 100 s: λt = 0.1) and other hand-computed values.
func TestWeibullFailure(t *testing.T) {
	cases := []struct {
		rate, shape float64
		t           time.Duration
		want        float64
	}{
		{1e-3, 1, 100 * time.Second, 1 - math.Exp(-0.1)}, // 0.09516258…
		{1e-3, 1, 0, 0},
		{1, 1, time.Second, 1 - 1/math.E},
		{1e-2, 0.5, 100 * time.Second, 1 - 1/math.E}, // (0.01·100)^0.5 = 1
		{1e-2, 2, 200 * time.Second, 1 - math.Exp(-4)},
		{0.25, 0.5, 4 * time.Second, 1 - 1/math.E},
		{1e-9, 1, time.Second, 1e-9 - 5e-19}, // expm1 keeps the digits
	}
	for _, c := range cases {
		got, err := WeibullFailure(c.rate, c.shape, c.t)
		if err != nil || !approx(got, c.want) {
			t.Errorf("WeibullFailure(%v, %v, %v) = %v, %v; want %v", c.rate, c.shape, c.t, got, err, c.want)
		}
	}
	if got, _ := WeibullFailure(1e-3, 1, 100*time.Second); math.Abs(got-0.0951625819640404) > 1e-15 {
		t.Errorf("Figure 12 setting: f = %.16f, want 0.0951625819640404", got)
	}
	for _, bad := range []struct {
		rate, shape float64
		t           time.Duration
	}{{0, 1, time.Second}, {-1, 1, time.Second}, {1, 0, time.Second}, {1, 1, -time.Second}, {math.NaN(), 1, 1}, {1, math.Inf(1), 1}, {math.Inf(1), 1, 1}} {
		if _, err := WeibullFailure(bad.rate, bad.shape, bad.t); !errors.Is(err, ErrParam) {
			t.Errorf("WeibullFailure(%v, %v, %v): err = %v", bad.rate, bad.shape, bad.t, err)
		}
	}
}

// TestAppFailure checks Eq. 2 of P2P-MPI §4.5: P_app(p, r) = 1-(1-f^r)^p.
func TestAppFailure(t *testing.T) {
	cases := []struct {
		p, r int
		f    float64
		want float64
	}{
		{1, 1, 0.3, 0.3},
		{2, 1, 0.5, 0.75}, // 1 - 0.5²
		{10, 1, 0.1, 1 - math.Pow(0.9, 10)},
		{3, 2, 0.5, 1 - 0.421875}, // 1 - 0.75³
		{10, 3, 0.1, 1 - math.Pow(0.999, 10)},
		{5, 1, 0, 0},
		{5, 3, 1, 1},
		{1_000_000, 4, 1e-6, 1e-18}, // tiny: log1p/expm1 keep it, 1-(1-x)^p would give 0
	}
	for _, c := range cases {
		got, err := AppFailure(c.p, c.r, c.f)
		if err != nil || !approx(got, c.want) {
			t.Errorf("AppFailure(%d, %d, %v) = %v, %v; want %v", c.p, c.r, c.f, got, err, c.want)
		}
	}
	if got, _ := AppFailure(1_000_000, 4, 1e-6); math.Abs(got-1e-18)/1e-18 > 1e-9 {
		t.Errorf("tiny probability lost: %v", got)
	}
	// Replication lowers the crash probability at fixed f (§4.5).
	prev := 1.0
	for r := 1; r <= 8; r++ {
		got, _ := AppFailureWeibull(10, r, 1e-3, 1, 100*time.Second)
		if got >= prev {
			t.Errorf("r=%d: P_app %v not below r-1's %v", r, got, prev)
		}
		prev = got
	}
	for _, bad := range []struct {
		p, r int
		f    float64
	}{{0, 1, 0.1}, {1, 0, 0.1}, {1, 1, -0.1}, {1, 1, 1.1}, {1, 1, math.NaN()}} {
		if _, err := AppFailure(bad.p, bad.r, bad.f); !errors.Is(err, ErrParam) {
			t.Errorf("AppFailure(%d, %d, %v): err = %v", bad.p, bad.r, bad.f, err)
		}
	}
	if _, err := AppFailureWeibull(10, 2, -1, 1, time.Second); !errors.Is(err, ErrParam) {
		t.Errorf("AppFailureWeibull(bad λ): err = %v", err)
	}
}

// TestStabilizationBase checks Eq. 1–2 of the membership paper (§4) with its
// own parameters: BlueGene/L L = 4.6 µs, O_cp = 2 µs (§7.1); TCP L = 118 µs,
// O_cp = 2 µs (§7.2). Hand computation: n = 1024, a = 2 gives H = 11,
// O_cm = 2·4.6·10 = 92 µs, T_s = 92 + 2·11 = 114 µs.
func TestStabilizationBase(t *testing.T) {
	bgl, tcp, ocp := 4600*time.Nanosecond, 118*µs, 2*µs
	cases := []struct {
		l       time.Duration
		n, a    int
		h       int
		ocm, ts time.Duration
	}{
		{bgl, 1024, 2, 11, 92 * µs, 114 * µs},
		{bgl, 1024, 4, 6, 46 * µs, 58 * µs},   // 1+4+…+256 = 341 < 1024 ≤ 1365
		{bgl, 1, 2, 1, 0, 2 * µs},             // lone root
		{tcp, 47, 2, 6, 1180 * µs, 1192 * µs}, // the 47 XTORC nodes
		{tcp, 5, 4, 2, 236 * µs, 240 * µs},    // §7.2: H grows above 5 …
		{tcp, 6, 4, 3, 472 * µs, 478 * µs},
		{tcp, 21, 4, 3, 472 * µs, 478 * µs}, // … and above 21 nodes
		{tcp, 22, 4, 4, 708 * µs, 716 * µs},
	}
	for _, c := range cases {
		h, err := TreeHeight(c.n, c.a)
		if err != nil || h != c.h {
			t.Errorf("TreeHeight(%d, %d) = %d, %v; want %d", c.n, c.a, h, err, c.h)
			continue
		}
		if ocm, err := CommOverhead(c.l, h); err != nil || ocm != c.ocm {
			t.Errorf("CommOverhead(%v, %d) = %v, %v; want %v", c.l, h, ocm, err, c.ocm)
		}
		if ts, err := StabilizationTimeN(c.l, ocp, c.n, c.a); err != nil || ts != c.ts {
			t.Errorf("StabilizationTimeN(%v, %v, %d, %d) = %v, %v; want %v", c.l, ocp, c.n, c.a, ts, err, c.ts)
		}
	}
	for _, bad := range []func() error{
		func() error { _, err := CommOverhead(-1, 3); return err },
		func() error { _, err := CommOverhead(µs, 0); return err },
		func() error { _, err := StabilizationTime(µs, -1, 3); return err },
		func() error { _, err := StabilizationTimeN(µs, µs, 0, 2); return err },
		func() error { _, err := StabilizationTimeN(µs, µs, 10, 3); return err },
	} {
		if err := bad(); !errors.Is(err, ErrParam) {
			t.Errorf("bad parameters: err = %v, want ErrParam", err)
		}
	}
	if _, err := StabilizationTime(math.MaxInt64/4, µs, 10); !errors.Is(err, ErrOverflow) {
		t.Errorf("overflow: err = %v", err)
	}
}

// TestStabilizationDistance checks the BlueGene/L distance model of §7.1:
// with one hop per level it equals the base model (Eq. 1–2), and a level
// whose farthest parent–child pair is k hops apart costs k·L each way.
func TestStabilizationDistance(t *testing.T) {
	l, ocp := 4600*time.Nanosecond, 2*µs
	for n := 1; n <= 300; n++ {
		for _, a := range []int{2, 4} {
			tree, _ := topo.NewRadix(n, a)
			hops := LevelMaxHops(tree, func(p, c int) int { return 1 })
			if len(hops) != tree.Height()-1 {
				t.Fatalf("n=%d a=%d: %d levels of links, want H-1 = %d", n, a, len(hops), tree.Height()-1)
			}
			base, _ := StabilizationTime(l, ocp, tree.Height())
			dist, err := DistanceStabilizationTime(l, ocp, hops)
			if err != nil || dist != base {
				t.Fatalf("n=%d a=%d: one hop per level gives %v, %v; base model %v", n, a, dist, err, base)
			}
		}
	}
	// Hand example: 7 nodes, a = 2 (H = 3); ranks laid on a line, hop count
	// = |parent - child|. Level 0 links 0–1, 0–2: max 2; level 1 links 1–3,
	// 1–4, 2–5, 2–6: max 4. O_cm = 2·4.6·(2+4) = 55.2 µs, T_s = 55.2 + 3·2.
	tree, _ := topo.NewRadix(7, 2)
	hops := LevelMaxHops(tree, func(p, c int) int { return c - p })
	if len(hops) != 2 || hops[0] != 2 || hops[1] != 4 {
		t.Fatalf("LevelMaxHops = %v, want [2 4]", hops)
	}
	if ocm, err := DistanceCommOverhead(l, hops); err != nil || ocm != 55200*time.Nanosecond {
		t.Errorf("DistanceCommOverhead = %v, %v; want 55.2µs", ocm, err)
	}
	if ts, err := DistanceStabilizationTime(l, ocp, hops); err != nil || ts != 61200*time.Nanosecond {
		t.Errorf("DistanceStabilizationTime = %v, %v; want 61.2µs", ts, err)
	}
	if ts, err := DistanceStabilizationTime(l, ocp, nil); err != nil || ts != ocp {
		t.Errorf("lone root: %v, %v; want O_cp", ts, err)
	}
	if got := LevelMaxHops(topo.Radix{}, nil); len(got) != 0 {
		t.Errorf("empty tree: %v", got)
	}
	if _, err := DistanceCommOverhead(l, []int{1, -1}); !errors.Is(err, ErrParam) {
		t.Errorf("negative hops: err = %v", err)
	}
	if _, err := DistanceStabilizationTime(l, -1, []int{1}); !errors.Is(err, ErrParam) {
		t.Errorf("negative O_cp: err = %v", err)
	}
}

// TestStabilizationContention checks the contention model of §7.2: Eq. 2
// with L replaced by the contention latency for the run's node count.
func TestStabilizationContention(t *testing.T) {
	// A Figure 7-shaped curve: flat at 118 µs up to 12 nodes, then +10 µs
	// per node (the slope is illustrative; the paper gives it only as a
	// plot).
	curve := func(nodes int) time.Duration { return 118*µs + 10*µs*time.Duration(max(0, nodes-12)) }
	cases := []struct {
		n, a int
		want time.Duration
	}{
		{12, 2, 2*118*µs*3 + 2*µs*4}, // H = 4, below the knee: the base model
		{15, 2, 2*148*µs*3 + 2*µs*4}, // L_c(15) = 148 µs
		{47, 2, 2*468*µs*5 + 2*µs*6}, // L_c(47) = 468 µs, H = 6
		{47, 4, 2*468*µs*3 + 2*µs*4}, // H = 4
	}
	for _, c := range cases {
		got, err := ContentionStabilizationTime(curve, 2*µs, c.n, c.a)
		if err != nil || got != c.want {
			t.Errorf("ContentionStabilizationTime(n=%d, a=%d) = %v, %v; want %v", c.n, c.a, got, err, c.want)
		}
	}
	if _, err := ContentionStabilizationTime(nil, µs, 8, 2); !errors.Is(err, ErrParam) {
		t.Errorf("nil curve: err = %v", err)
	}
	if _, err := ContentionStabilizationTime(func(int) time.Duration { return -1 }, µs, 8, 2); !errors.Is(err, ErrParam) {
		t.Errorf("negative latency: err = %v", err)
	}
}

// approx reports whether got is within a relative 1e-12 of want (exact for 0).
func approx(got, want float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(got-want) <= 1e-12*math.Abs(want)
}
