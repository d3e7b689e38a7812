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
