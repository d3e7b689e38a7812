package experiment

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/cohort-mp/cohort/topo"
)

// testSeed returns the seed of a randomized test: COHORT_SEED when set, a
// fixed default otherwise. The test prints it so a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(20240601)
	if v := os.Getenv("COHORT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("COHORT_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d (replay with COHORT_SEED=%d)", seed, seed)
	return seed
}

// TestGossipGraphShape checks the cycle graphs against P2P-MPI §5.1–5.2:
// BRR sends to s+2^(r-1) (⌈log2 n⌉ out-edges), DBRR adds the reverse
// direction, making the graph symmetric.
func TestGossipGraphShape(t *testing.T) {
	g, err := newGossipGraph(topo.BinaryRoundRobin, 4)
	if err != nil {
		t.Fatal(err)
	}
	// The paper's example: in a four-node system node 2 gets messages
	// from node 1 and node 0 only.
	if got := g.in[2]; len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("BRR n=4: sources of node 2 = %v, want [0 1]", got)
	}
	if g.symmetric {
		t.Error("BRR n=4 reported symmetric")
	}
	for _, n := range []int{4, 8, 64, 128, 1024} {
		b, _ := newGossipGraph(topo.BinaryRoundRobin, n)
		d, _ := newGossipGraph(topo.DoubleBinaryRoundRobin, n)
		k := topo.CeilLog2(n)
		if len(b.offsets) != k || len(b.out[0]) != k {
			t.Errorf("BRR n=%d: %d offsets, %d out-edges, want %d", n, len(b.offsets), len(b.out[0]), k)
		}
		if !d.symmetric || d.offsets == nil {
			t.Errorf("DBRR n=%d: symmetric=%v offsets=%v", n, d.symmetric, d.offsets)
		}
	}
	if _, err := newGossipGraph(topo.Random, 8); err == nil {
		t.Error("random schedule accepted")
	}
	if _, err := newGossipGraph(topo.BinaryRoundRobin, 1); err == nil {
		t.Error("n=1 accepted")
	}
}

// naiveVerdict decides a failure pattern the slow way: adjacency from
// topo's Target, breadth-first search on bools.
func naiveVerdict(t *testing.T, s topo.Schedule, n int, live []bool) verdict {
	t.Helper()
	out := make([][]int, n)
	for src := range n {
		for r := 1; r <= s.CycleLength(n); r++ {
			d, err := s.Target(src, r, n)
			if err != nil {
				t.Fatal(err)
			}
			out[src] = append(out[src], d)
		}
	}
	return referenceVerdict(out, live)
}

// TestJudgeMatchesNaiveReference compares the bitset verdicts (rotations
// and the adjacency-list fallback) with the naive reference on random
// failure patterns, for n on and off the fast path.
func TestJudgeMatchesNaiveReference(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, s := range []topo.Schedule{topo.RoundRobin, topo.BinaryRoundRobin, topo.DoubleBinaryRoundRobin} {
		for _, n := range []int{2, 3, 4, 5, 12, 64, 100, 128, 192} {
			g, err := newGossipGraph(s, n)
			if err != nil {
				t.Fatal(err)
			}
			lists := *g
			lists.offsets = nil
			sc, scl := g.newScratch(), lists.newScratch()
			counts := [2]int{}
			for trial := range 200 {
				// Failure rates from rare to most nodes, so that
				// both verdicts occur.
				p := []float64{0.05, 0.2, 0.5, 0.8}[trial%4]
				live := make([]bool, n)
				clear(sc.live)
				for v := range n {
					live[v] = rng.Float64() >= p
					if live[v] {
						sc.live[v/64] |= 1 << uint(v%64)
					}
				}
				copy(scl.live, sc.live)
				want := naiveVerdict(t, s, n, live)
				if got := g.judge(sc); got != want {
					t.Fatalf("%v n=%d trial %d: judge = %+v, reference %+v (live %v)", s, n, trial, got, want, live)
				}
				if got := lists.judge(scl); got != want {
					t.Fatalf("%v n=%d trial %d: list judge = %+v, reference %+v", s, n, trial, got, want)
				}
				if want.disconnected {
					counts[1]++
				} else {
					counts[0]++
				}
			}
			mustFail := s == topo.BinaryRoundRobin && n >= 4 || s == topo.DoubleBinaryRoundRobin && n >= 12
			if mustFail && (counts[0] == 0 || counts[1] == 0) {
				t.Errorf("%v n=%d: verdicts %v: the test did not exercise both outcomes", s, n, counts)
			}
		}
	}
}

// TestBernoulliMask checks the bit-sliced Bernoulli sampler's rate.
func TestBernoulliMask(t *testing.T) {
	seed := testSeed(t)
	src := &wyrand{s: seed}
	for _, p := range []float64{0, 0.0951625819640404, 0.5, 0.9, 1} {
		m := newBernoulliMask(p)
		if math.Abs(m.prob()-p) > 3e-8 {
			t.Errorf("p=%v: drawn probability %v", p, m.prob())
		}
		const words = 20000
		ones := 0
		for range words {
			ones += popcount(m.word(src))
		}
		got := float64(ones) / (64 * words)
		sd := math.Sqrt(p*(1-p)/(64*words)) + 1e-12
		if math.Abs(got-p) > 5*sd {
			t.Errorf("p=%v: frequency %v (%.1f sd off)", p, got, math.Abs(got-p)/sd)
		}
	}
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// BenchmarkRelTrials measures the trial loop of fd-reliability: draw a
// failure pattern and judge it under BRR, DBRR or both.
func BenchmarkRelTrials(b *testing.B) {
	mask := newBernoulliMask(0.0951625819640404)
	for _, n := range []int{64, 1024} {
		brr, _ := newGossipGraph(topo.BinaryRoundRobin, n)
		dbrr, _ := newGossipGraph(topo.DoubleBinaryRoundRobin, n)
		for _, c := range []struct {
			name   string
			active [2]bool
		}{{"brr", [2]bool{true, false}}, {"dbrr", [2]bool{false, true}}, {"both", [2]bool{true, true}}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, c.name), func(b *testing.B) {
				for b.Loop() {
					relTrials(context.Background(), [2]*gossipGraph{brr, dbrr}, c.active, mask, 1, 1000)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/trial")
			})
		}
	}
}
