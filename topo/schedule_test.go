package topo

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

var deterministic = []Schedule{RoundRobin, BinaryRoundRobin, DoubleBinaryRoundRobin}

func TestScheduleNames(t *testing.T) {
	for _, s := range Schedules {
		got, err := ParseSchedule(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSchedule(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
		text, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Schedule
		if err := back.UnmarshalText(text); err != nil || back != s {
			t.Errorf("UnmarshalText(%q) = %v, %v", text, back, err)
		}
	}
	want := map[Schedule]string{Random: "random", RoundRobin: "rr", BinaryRoundRobin: "brr", DoubleBinaryRoundRobin: "dbrr"}
	for s, name := range want {
		if s.String() != name {
			t.Errorf("%d.String() = %q, want %q", uint8(s), s.String(), name)
		}
	}
	for _, bad := range []string{"", "RR", "round-robin", "dbrr ", "bbr"} {
		if _, err := ParseSchedule(bad); !errors.Is(err, ErrSchedule) {
			t.Errorf("ParseSchedule(%q): err = %v, want ErrSchedule", bad, err)
		}
	}
	var zero Schedule
	if zero.Valid() || zero.String() != "schedule(0)" || Schedule(9).Valid() {
		t.Errorf("invalid schedules validate: %v %v", zero, Schedule(9))
	}
	if _, err := zero.MarshalText(); !errors.Is(err, ErrSchedule) {
		t.Errorf("MarshalText of the zero schedule: err = %v", err)
	}
	if _, err := zero.Target(0, 1, 4); !errors.Is(err, ErrSchedule) {
		t.Errorf("Target of the zero schedule: err = %v", err)
	}
}

// TestScheduleTargetsPaper checks the targets against the equations of
// P2P-MPI §5.1 (Eq. 3, 4) and §5.2 (Eq. 5) and the worked example of §5.1:
// "in a four nodes system, node 2 gets incoming messages from node 1 (in the
// 1st round) and from node 0 (2nd round) only".
func TestScheduleTargetsPaper(t *testing.T) {
	cases := []struct {
		s          Schedule
		src, r, n  int
		want       int
		wantSource int // the node that sends to src in round r
	}{
		{RoundRobin, 0, 1, 5, 1, 4},
		{RoundRobin, 3, 4, 5, 2, 4},
		{RoundRobin, 4, 2, 5, 1, 2},
		{BinaryRoundRobin, 2, 1, 4, 3, 1}, // §5.1 example: node 2 hears from 1 in round 1
		{BinaryRoundRobin, 2, 2, 4, 0, 0}, // … and from 0 in round 2
		{BinaryRoundRobin, 5, 3, 6, 3, 1}, // 5+4 mod 6
		{BinaryRoundRobin, 0, 10, 1000, 512, 488},
		{DoubleBinaryRoundRobin, 0, 1, 8, 1, 7},
		{DoubleBinaryRoundRobin, 0, 3, 8, 4, 4},
		{DoubleBinaryRoundRobin, 0, 4, 8, 7, 1}, // r = ⌈log2 8⌉+1: s - 2^0
		{DoubleBinaryRoundRobin, 1, 6, 8, 5, 5}, // s - 2^2
		{DoubleBinaryRoundRobin, 2, 6, 6, 4, 0}, // n = 6: ⌈log2 6⌉ = 3, r = 6: s - 2^2 mod 6
		{RoundRobin, 0, 1, 2, 1, 1},             // n = 2: the other node, always
		{BinaryRoundRobin, 1, 1, 2, 0, 0},
		{DoubleBinaryRoundRobin, 1, 2, 2, 0, 0},
	}
	for _, c := range cases {
		got, err := c.s.Target(c.src, c.r, c.n)
		if err != nil || got != c.want {
			t.Errorf("%v.Target(%d, %d, %d) = %d, %v; want %d", c.s, c.src, c.r, c.n, got, err, c.want)
		}
		src, err := c.s.Sources(c.src, c.r, c.n)
		if err != nil || src != c.wantSource {
			t.Errorf("%v.Sources(%d, %d, %d) = %d, %v; want %d", c.s, c.src, c.r, c.n, src, err, c.wantSource)
		}
	}
	// §5.1: in a four-node BRR system node 2 has exactly two sources, 1 and 0.
	var sources []int
	for r := 1; r <= BinaryRoundRobin.CycleLength(4); r++ {
		s, err := BinaryRoundRobin.Sources(2, r, 4)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, s)
	}
	if !equalInts(sources, []int{1, 0}) {
		t.Errorf("BRR n=4: sources of node 2 = %v, want [1 0]", sources)
	}
}

func TestScheduleCycleLength(t *testing.T) {
	cases := []struct {
		n                     int
		random, rr, brr, dbrr int
	}{
		{-1, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {1, 0, 0, 0, 0},
		{2, 1, 1, 1, 2}, {3, 1, 2, 2, 4}, {4, 1, 3, 2, 4}, {5, 1, 4, 3, 6},
		{8, 1, 7, 3, 6}, {9, 1, 8, 4, 8}, {256, 1, 255, 8, 16}, {257, 1, 256, 9, 18},
	}
	for _, c := range cases {
		want := map[Schedule]int{Random: c.random, RoundRobin: c.rr, BinaryRoundRobin: c.brr, DoubleBinaryRoundRobin: c.dbrr}
		for s, w := range want {
			if got := s.CycleLength(c.n); got != w {
				t.Errorf("%v.CycleLength(%d) = %d, want %d", s, c.n, got, w)
			}
		}
	}
	// Round wraps the step counter like the paper's circular counter.
	for step, want := range []int{1, 2, 3, 1, 2, 3, 1} {
		if got := BinaryRoundRobin.Round(step, 8); got != want {
			t.Errorf("Round(%d, 8) = %d, want %d", step, got, want)
		}
	}
	if BinaryRoundRobin.Round(5, 1) != 0 || BinaryRoundRobin.Round(-1, 8) != 0 {
		t.Errorf("Round without a cycle is not 0")
	}
}

func TestScheduleBadInput(t *testing.T) {
	for _, s := range deterministic {
		for _, c := range []struct {
			v, r, n int
			want    error
		}{
			{0, 1, 0, ErrSize}, {0, 1, -3, ErrSize}, {0, 1, MaxNodes + 1, ErrSize},
			{-1, 1, 4, ErrIndex}, {4, 1, 4, ErrIndex},
			{0, 1, 1, ErrNoPeer}, {0, 0, 1, ErrNoPeer},
			{0, 0, 4, ErrRound}, {0, s.CycleLength(4) + 1, 4, ErrRound}, {0, -1, 4, ErrRound},
		} {
			if _, err := s.Target(c.v, c.r, c.n); !errors.Is(err, c.want) {
				t.Errorf("%v.Target(%d, %d, %d): err = %v, want %v", s, c.v, c.r, c.n, err, c.want)
			}
			if _, err := s.Sources(c.v, c.r, c.n); !errors.Is(err, c.want) {
				t.Errorf("%v.Sources(%d, %d, %d): err = %v, want %v", s, c.v, c.r, c.n, err, c.want)
			}
		}
	}
	if _, err := Random.Target(0, 1, 4); !errors.Is(err, ErrRandomSchedule) {
		t.Errorf("Random.Target: err = %v", err)
	}
	if _, err := Random.Sources(0, 1, 4); !errors.Is(err, ErrRandomSchedule) {
		t.Errorf("Random.Sources: err = %v", err)
	}
	if _, err := Random.TargetRand(nil, 0, 1, 4); !errors.Is(err, ErrRandomSchedule) {
		t.Errorf("Random.TargetRand(nil): err = %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if _, err := Random.TargetRand(rng, 0, 1, 1); !errors.Is(err, ErrNoPeer) {
		t.Errorf("Random.TargetRand n=1: err = %v", err)
	}
	if _, err := Random.TargetRand(rng, 5, 1, 5); !errors.Is(err, ErrIndex) {
		t.Errorf("Random.TargetRand src=n: err = %v", err)
	}
	if _, err := Random.MinCleanupRounds(8); !errors.Is(err, ErrRandomSchedule) {
		t.Errorf("Random.MinCleanupRounds: err = %v", err)
	}
	if _, err := RoundRobin.MinCleanupRounds(0); !errors.Is(err, ErrSize) {
		t.Errorf("MinCleanupRounds(0): err = %v", err)
	}
}

// TestSchedulePermutations checks, for every n up to 1024 and every round
// (RR: every round up to n = 256, then the first two, middle and last),
// that a deterministic schedule is a permutation without fixed points (each
// node sends one message and receives one, never to itself), that Sources
// inverts Target, and that the schedule is circulant (the offset d-s depends
// only on r and n), which the dissemination test below relies on.
func TestSchedulePermutations(t *testing.T) {
	seen := make([]int, 1024)
	for _, s := range deterministic {
		for n := 2; n <= 1024; n++ {
			rounds := make([]int, 0, 32)
			for r := 1; r <= s.CycleLength(n); r++ {
				if s != RoundRobin || n <= 256 || r <= 2 || r == n/2 || r == n-1 {
					rounds = append(rounds, r)
				}
			}
			for _, r := range rounds {
				d0, err := s.Target(0, r, n)
				if err != nil {
					t.Fatal(err)
				}
				for src := 0; src < n; src++ {
					d, err := s.Target(src, r, n)
					if err != nil {
						t.Fatalf("%v.Target(%d, %d, %d): %v", s, src, r, n, err)
					}
					if d == src || d != (src+d0)%n {
						t.Fatalf("%v n=%d r=%d: Target(%d) = %d (Target(0) = %d)", s, n, r, src, d, d0)
					}
					if back, err := s.Sources(d, r, n); err != nil || back != src {
						t.Fatalf("%v n=%d r=%d: Sources(%d) = %d, %v; want %d", s, n, r, d, back, err, src)
					}
					if mark := n<<16 | r; seen[d] == mark {
						t.Fatalf("%v n=%d r=%d: node %d receives twice", s, n, r, d)
					} else {
						seen[d] = mark
					}
				}
			}
		}
	}
}

// disseminationRounds simulates how one heartbeat spreads (P2P-MPI §5.1: a
// module merges the tables it receives, so whatever a node knows reaches its
// target in the next round). The heartbeat starts at node 0 at the
// beginning of round start; the function returns the number of rounds until
// every node knows it, giving up after limit rounds (and returning limit+1).
// It relies on the schedule being circulant (checked above): a round moves
// the informed set by the offset Target(0, r, n).
func disseminationRounds(t *testing.T, s Schedule, n, start, limit int, informed, tmp bitset) int {
	t.Helper()
	informed.clear()
	informed.set(0)
	cycle := s.CycleLength(n)
	r := start
	for rounds := 1; rounds <= limit; rounds++ {
		off, err := s.Target(0, r, n)
		if err != nil {
			t.Fatalf("%v.Target(0, %d, %d): %v", s, r, n, err)
		}
		rotate(tmp, informed, off, n)
		informed.or(tmp)
		if informed.count() == n {
			return rounds
		}
		if r++; r > cycle {
			r = 1
		}
	}
	return limit + 1
}

// TestScheduleCleanupBound checks the paper's dissemination claims for every
// n from 1 to 4096 (P2P-MPI §5.1–5.2): with BRR and with DBRR, a heartbeat
// that starts at any round of the cycle reaches every node within
// MinCleanupRounds(n) rounds; for BRR that bound is also necessary (after
// ⌈log2 n⌉-1 rounds at most 2^(⌈log2 n⌉-1) < n nodes can know). With RR the
// paper's argument starts at round 1 ("one other node in the first round,
// then two … in the second"), after which 1+r(r+1)/2 nodes know; the test
// checks that exact count and the bound ⌈(√(1+8n)-1)/2⌉, which is at least
// it. RR started later in the cycle can take longer than that bound (about
// 1.4 times as long, see TestScheduleRoundRobinAnyStart).
func TestScheduleCleanupBound(t *testing.T) {
	informed, tmp := newBitset(4096), newBitset(4096)
	samples := []int{1, 2, 3}
	for n := 1; n <= 4096; n++ {
		words := (n + 63) / 64
		inf, tm := informed[:words], tmp[:words]
		for _, s := range deterministic {
			bound, err := s.MinCleanupRounds(n)
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				if bound != 0 || s.CycleLength(1) != 0 {
					t.Fatalf("%v n=1: bound %d, cycle %d; want 0, 0", s, bound, s.CycleLength(1))
				}
				continue
			}
			if n > 1024 { // circulance for large n, on a few sources (all sources up to 1024 above)
				samples = append(samples[:3], n/3, n/2, n-1)
				rounds := s.CycleLength(n)
				if s == RoundRobin {
					rounds = bound // the simulation below uses rounds 1..bound only
				}
				for r := 1; r <= rounds; r++ {
					d0, _ := s.Target(0, r, n)
					for _, src := range samples {
						if d, err := s.Target(src, r, n); err != nil || d != (src+d0)%n {
							t.Fatalf("%v n=%d r=%d: Target(%d) = %d, %v; not circulant", s, n, r, src, d, err)
						}
					}
				}
			}
			starts := s.CycleLength(n)
			if s == RoundRobin {
				starts = 1
			}
			for start := 1; start <= starts; start++ {
				got := disseminationRounds(t, s, n, start, bound, inf, tm)
				if got > bound {
					t.Fatalf("%v n=%d: a heartbeat starting at round %d is not everywhere after %d rounds (MinCleanupRounds)", s, n, start, bound)
				}
				switch s {
				case BinaryRoundRobin:
					if got != bound {
						t.Fatalf("BRR n=%d start %d: everyone informed after %d < ⌈log2 n⌉ = %d rounds", n, start, got, bound)
					}
				case RoundRobin:
					if want := triangularRoot(n - 1); got != want {
						t.Fatalf("RR n=%d: informed after %d rounds, want the least r with 1+r(r+1)/2 ≥ n = %d", n, got, want)
					}
				}
			}
		}
	}
}

// TestScheduleRoundRobinAnyStart measures RR when the heartbeat starts later
// in the cycle. The paper's bound does not hold there, but one cycle (n-1
// rounds) always suffices: it uses every offset 1..n-1 once. The worst ratio
// to the bound is logged.
func TestScheduleRoundRobinAnyStart(t *testing.T) {
	informed, tmp := newBitset(256), newBitset(256)
	worstRatio, worstN, exceeded := 0.0, 0, 0
	for n := 2; n <= 256; n++ {
		words := (n + 63) / 64
		bound, _ := RoundRobin.MinCleanupRounds(n)
		worst := 0
		for start := 1; start <= n-1; start++ {
			got := disseminationRounds(t, RoundRobin, n, start, n-1, informed[:words], tmp[:words])
			if got > n-1 {
				t.Fatalf("RR n=%d start %d: not everyone informed within one cycle", n, start)
			}
			worst = max(worst, got)
		}
		if worst > bound {
			exceeded++
		}
		if r := float64(worst) / float64(bound); r > worstRatio {
			worstRatio, worstN = r, n
		}
	}
	t.Logf("RR, any start, n ≤ 256: bound exceeded for %d values of n; worst ratio %.2f at n=%d", exceeded, worstRatio, worstN)
}

// TestScheduleRandom checks Random.TargetRand: never the sender, every other
// node reachable with roughly equal frequency, reproducible from the seed.
func TestScheduleRandom(t *testing.T) {
	seed := uint64(20060611)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	const n, draws = 10, 90000
	counts := make([]int, n)
	for i := 0; i < draws; i++ {
		src := i % n
		d, err := Random.TargetRand(rng, src, 7, n)
		if err != nil {
			t.Fatal(err)
		}
		if d == src || d < 0 || d >= n {
			t.Fatalf("seed %d: TargetRand(src=%d) = %d", seed, src, d)
		}
		counts[d]++
	}
	// Each node is the target of 1/9 of the draws of the 9 other senders:
	// draws/n in expectation. Chi-square with 9 degrees of freedom; 27.9 is
	// the 0.999 quantile.
	exp := float64(draws) / n
	chi := 0.0
	for _, c := range counts {
		chi += (float64(c) - exp) * (float64(c) - exp) / exp
	}
	if chi > 27.9 {
		t.Errorf("seed %d: chi-square %.1f > 27.9, counts %v", seed, chi, counts)
	}
	// n = 2: the only choice.
	for i := 0; i < 10; i++ {
		if d, err := Random.TargetRand(rng, 1, 1, 2); err != nil || d != 0 {
			t.Fatalf("n=2: TargetRand = %d, %v", d, err)
		}
	}
	// Same seed, same draws.
	a, b := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 100; i++ {
		x, _ := Random.TargetRand(a, 3, 1, 50)
		y, _ := Random.TargetRand(b, 3, 1, 50)
		if x != y {
			t.Fatalf("seed %d: draw %d differs: %d vs %d", seed, i, x, y)
		}
	}
	// Deterministic schedules ignore the rng (nil allowed).
	if d, err := BinaryRoundRobin.TargetRand(nil, 2, 2, 4); err != nil || d != 0 {
		t.Errorf("BRR.TargetRand(nil) = %d, %v", d, err)
	}
}

// TestMinCleanupRounds checks the closed forms of P2P-MPI §5.1–5.2 on exact
// small cases and the integer RR formula against the floating-point
// ⌈(√(1+8n)-1)/2⌉ for every n up to 10^6 (where float64 square roots of the
// integers involved are exact enough to be a reference).
func TestMinCleanupRounds(t *testing.T) {
	cases := []struct{ n, rr, brr, dbrr int }{
		{1, 0, 0, 0}, {2, 2, 1, 2}, {3, 2, 2, 4}, {4, 3, 2, 4}, {5, 3, 3, 6}, {6, 3, 3, 6},
		{7, 4, 3, 6}, {10, 4, 4, 8}, {11, 5, 4, 8}, {16, 6, 4, 8}, {17, 6, 5, 10},
		{1024, 45, 10, 20}, {1025, 45, 11, 22}, {1035, 45, 11, 22}, {1036, 46, 11, 22},
	}
	for _, c := range cases {
		for s, want := range map[Schedule]int{RoundRobin: c.rr, BinaryRoundRobin: c.brr, DoubleBinaryRoundRobin: c.dbrr} {
			if got, err := s.MinCleanupRounds(c.n); err != nil || got != want {
				t.Errorf("%v.MinCleanupRounds(%d) = %d, %v; want %d", s, c.n, got, err, want)
			}
		}
	}
	for n := 2; n <= 1_000_000; n++ {
		want := int(math.Ceil((math.Sqrt(1+8*float64(n)) - 1) / 2))
		if got := triangularRoot(n); got != want {
			t.Fatalf("RR n=%d: %d, float reference %d", n, got, want)
		}
	}
	// Near the top of the range, and on and around exact triangular numbers,
	// check the defining inequality directly.
	for _, k := range []int{1, 2, 3, 1000, 65535, 65536} {
		tk := k * (k + 1) / 2
		for _, n := range []int{tk - 1, tk, tk + 1} {
			r := triangularRoot(n)
			if r*(r+1)/2 < n || (r > 0 && (r-1)*r/2 >= n) {
				t.Errorf("triangularRoot(%d) = %d is not the least r with r(r+1)/2 ≥ n", n, r)
			}
		}
	}
	for n := MaxNodes - 5; n <= MaxNodes; n++ {
		r, err := RoundRobin.MinCleanupRounds(n)
		r64, n64 := int64(r), int64(n) // r(r+1) passes 2^31 here
		if err != nil || r64*(r64+1)/2 < n64 || (r64-1)*r64/2 >= n64 {
			t.Errorf("RR.MinCleanupRounds(%d) = %d, %v", n, r, err)
		}
	}
}
