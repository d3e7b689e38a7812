package bench

import (
	"math"
	"testing"
)

// TestSignTestRank checks the ranks of the sign test's interval for the
// median against the binomial tables (two-sided, at most 5%).
func TestSignTestRank(t *testing.T) {
	for _, c := range []struct{ n, k int }{{5, 0}, {6, 1}, {8, 1}, {9, 2}, {10, 2}, {11, 2}, {12, 3}, {17, 5}, {20, 6}, {30, 10}, {40, 14}} {
		if got := signTestRank(c.n); got != c.k {
			t.Errorf("signTestRank(%d) = %d, want %d", c.n, got, c.k)
		}
	}
}

func TestMedianCI95(t *testing.T) {
	xs := []float64{9, 1, 8, 2, 7, 3, 6, 4, 5, 100} // n = 10: ranks 2 and 9
	med, lo, hi := MedianCI95(xs)
	if med != 5.5 || lo != 2 || hi != 9 {
		t.Fatalf("got %v [%v, %v], want 5.5 [2, 9]", med, lo, hi)
	}
	if xs[0] != 9 {
		t.Fatal("the sample was modified")
	}
	if _, lo, hi := MedianCI95([]float64{1, 2, 3}); !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
		t.Fatalf("three samples: [%v, %v], want unbounded", lo, hi)
	}
	if m, _, _ := MedianCI95(nil); !math.IsNaN(m) {
		t.Fatal("empty sample: not NaN")
	}
	for _, c := range []struct {
		lo, hi float64
		want   Verdict
	}{{1.1, 1.4, Met}, {1.1, 1.5, Met}, {1.2, 1.6, Undecided}, {1.51, 2, NotMet}, {math.Inf(-1), math.Inf(1), Undecided}} {
		if got := verdictOf(c.lo, c.hi, 1.5); got != c.want {
			t.Errorf("verdictOf(%v, %v, 1.5) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

// TestGoalVerdict builds a result of 10 paired repetitions whose ratios
// over the floor are known, and checks each goal's verdict and the size
// that decides it.
func TestGoalVerdict(t *testing.T) {
	// ratios[size] are the 10 repetitions' ratios at that size; the sign
	// test's interval of 10 is the 2nd to the 9th of them, sorted.
	build := func(ratios map[int][]float64) *ReplicationResult {
		res := &ReplicationResult{Cfg: ReplicationConfig{MaxReplicas: 2, Reps: 10}, Sizes: []int{0, 8, 64, 1 << 20},
			Lat: make([][]map[int]float64, 2), Floor: make([][]map[int]float64, 2)}
		for rep := range 10 {
			lat, floor := map[int]float64{}, map[int]float64{}
			for _, size := range res.Sizes {
				floor[size], lat[size] = 10, 10 // a size not given: ratio 1
				if rs, ok := ratios[size]; ok {
					lat[size] = 10 * rs[rep]
				}
			}
			res.Lat[1] = append(res.Lat[1], lat)
			res.Floor[1] = append(res.Floor[1], floor)
		}
		return res
	}
	flat := func(x float64) []float64 { return []float64{x, x, x, x, x, x, x, x, x, x} }
	spread := []float64{1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9} // [1.1, 1.8]
	for _, c := range []struct {
		name   string
		ratios map[int][]float64
		want   Verdict
		at     int
	}{
		// 0 B and 1 MiB lie outside the goals' sizes: they never decide.
		{"met", map[int][]float64{0: flat(9), 8: flat(1.2), 64: flat(1.4), 1 << 20: flat(9)}, Met, 64},
		{"one size above", map[int][]float64{8: flat(1.2), 64: flat(1.6)}, NotMet, 64},
		{"one size across", map[int][]float64{8: spread, 64: flat(1.3)}, Undecided, 8},
		{"across, then above", map[int][]float64{8: spread, 64: flat(1.6)}, NotMet, 64},
	} {
		res := build(c.ratios)
		if v, at := res.GoalVerdict(2, 1.5); v != c.want || at != c.at {
			t.Errorf("%s: got %v at %d B, want %v at %d B", c.name, v, at, c.want, c.at)
		}
	}
	if med, lo, hi := build(map[int][]float64{8: spread}).OverFloor(2, 8); math.Abs(med-1.45) > 1e-9 || math.Abs(lo-1.1) > 1e-9 || math.Abs(hi-1.8) > 1e-9 {
		t.Errorf("OverFloor: got %v [%v, %v], want 1.45 [1.1, 1.8]", med, lo, hi)
	}
}
