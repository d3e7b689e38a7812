package experiment

import (
	"math"
	"slices"
)

// Summary describes a sample of measurements.
type Summary struct {
	N                   int
	Mean, Std, Min, Max float64
	P50, P90, P99       float64
}

// Summarize returns the summary of xs (which it does not modify). The
// quantiles interpolate linearly between order statistics. An empty sample
// gives a zero Summary with NaN statistics.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		nan := math.NaN()
		return Summary{Mean: nan, Std: nan, Min: nan, Max: nan, P50: nan, P90: nan, P99: nan}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	mean := sum / float64(len(s))
	var ss float64
	for _, x := range s {
		ss += (x - mean) * (x - mean)
	}
	std := 0.0
	if len(s) > 1 {
		std = math.Sqrt(ss / float64(len(s)-1))
	}
	return Summary{
		N: len(s), Mean: mean, Std: std, Min: s[0], Max: s[len(s)-1],
		P50: quantileSorted(s, 0.5), P90: quantileSorted(s, 0.9), P99: quantileSorted(s, 0.99),
	}
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of xs, interpolating
// linearly between order statistics; NaN for an empty sample.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantileSorted(s, q)
}

func quantileSorted(s []float64, q float64) float64 {
	q = math.Max(0, math.Min(1, q))
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// Z95 is the standard normal quantile for a two-sided 95% interval.
const Z95 = 1.959963984540054

// Wilson returns the Wilson score interval for a binomial proportion with
// k successes in n trials at normal quantile z (use [Z95]). It stays inside
// [0, 1] and is informative when k is 0 or n. n = 0 gives [0, 1].
func Wilson(k, n int64, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	nf := float64(n)
	p := float64(k) / nf
	z2 := z * z
	den := 1 + z2/nf
	center := (p + z2/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	lo, hi = math.Max(0, center-half), math.Min(1, center+half)
	if k == 0 {
		lo = 0
	}
	if k == n {
		hi = 1
	}
	return lo, hi
}

// RuleOfThree is the approximate 95% upper bound 3/n on a probability of
// which n independent trials showed no occurrence.
func RuleOfThree(n int64) float64 {
	if n <= 0 {
		return 1
	}
	return math.Min(1, 3/float64(n))
}
