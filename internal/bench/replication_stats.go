package bench

import (
	"math"
	"slices"
)

// MedianCI95 returns the median of xs (not modified) and a distribution-free
// confidence interval of at least 95% for it: the order statistics
// x(k) and x(n+1−k) of the sorted sample, with k the largest rank such
// that a Binomial(n, ½) count falls below k or above n − k with
// probability at most 5% (the sign test's interval). It assumes only that
// the samples are independent and drawn alike, which paired ratios from
// interleaved runs on a shared machine come closer to than a normal
// distribution does: one slow run moves a mean by any amount but a median
// by one rank. Below six samples no such interval exists and lo, hi are
// −Inf, +Inf; an empty sample gives NaN throughout.
func MedianCI95(xs []float64) (med, lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med = median(s)
	k := signTestRank(n)
	if k < 1 {
		return med, math.Inf(-1), math.Inf(1)
	}
	return med, s[k-1], s[n-k]
}

// signTestRank is the largest k ≥ 1 with 2·P(Binomial(n, ½) ≤ k−1) ≤
// 0.05, or 0 when even k = 1 is too wide a bet (n < 6).
func signTestRank(n int) int {
	// P(X ≤ j) summed term by term: C(n, j)/2ⁿ in logarithms, which
	// stay finite for any n a benchmark runs.
	k, cum := 0, 0.0
	for j := 0; j < n; j++ {
		lg := lgammaOf(n+1) - lgammaOf(j+1) - lgammaOf(n-j+1) - float64(n)*math.Ln2
		cum += math.Exp(lg)
		if 2*cum > 0.05 {
			break
		}
		k = j + 1
	}
	return k
}

func lgammaOf(x int) float64 {
	v, _ := math.Lgamma(float64(x))
	return v
}

// Verdict is the outcome of a goal "ratio ≤ Max" from an interval.
type Verdict int

// The verdicts, from the interval [lo, hi] of a ratio.
const (
	Undecided Verdict = iota // the interval holds the goal's bound
	Met                      // hi ≤ the bound
	NotMet                   // lo > the bound
)

func (v Verdict) String() string {
	switch v {
	case Met:
		return "met"
	case NotMet:
		return "NOT met"
	}
	return "undecided"
}

// verdictOf judges "ratio ≤ bound" from the ratio's interval.
func verdictOf(lo, hi, bound float64) Verdict {
	switch {
	case hi <= bound:
		return Met
	case lo > bound:
		return NotMet
	}
	return Undecided
}
