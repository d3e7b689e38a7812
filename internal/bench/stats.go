package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// t975 holds the 0.975 quantiles of Student's t distribution for 1 to 30
// degrees of freedom (two-sided 95% intervals).
var t975 = [...]float64{
	12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
}

// StudentT95 returns the 0.975 quantile of Student's t distribution with
// df degrees of freedom: the factor of a two-sided 95% confidence interval
// of a mean from df+1 samples. Beyond 30 degrees of freedom it uses the
// first two Cornish–Fisher corrections to the normal quantile (error
// below 0.0005). df < 1 gives +Inf.
func StudentT95(df int) float64 {
	switch {
	case df < 1:
		return math.Inf(1)
	case df <= len(t975):
		return t975[df-1]
	}
	const z = 1.959963984540054
	v := float64(df)
	z3, z5 := z*z*z, z*z*z*z*z
	return z + (z3+z)/(4*v) + (5*z5+16*z3+3*z)/(96*v*v)
}

// Estimate is the mean of a sample of durations with the half-width of its
// two-sided 95% confidence interval (Student t with N−1 degrees of
// freedom; +Inf for a single sample).
type Estimate struct {
	N        int
	Mean     time.Duration
	HalfCI   time.Duration
	Min, Max time.Duration
	Median   time.Duration
}

// Estimate95 summarizes xs (not modified); an empty sample gives the zero
// Estimate.
func Estimate95(xs []time.Duration) Estimate {
	n := len(xs)
	if n == 0 {
		return Estimate{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += float64(x)
	}
	mean := sum / float64(n)
	e := Estimate{N: n, Mean: time.Duration(math.Round(mean)), Min: s[0], Max: s[n-1], Median: median(s)}
	if n < 2 {
		e.HalfCI = time.Duration(math.MaxInt64)
		return e
	}
	var ss float64
	for _, x := range s {
		ss += (float64(x) - mean) * (float64(x) - mean)
	}
	sd := math.Sqrt(ss / float64(n-1))
	e.HalfCI = time.Duration(math.Round(StudentT95(n-1) * sd / math.Sqrt(float64(n))))
	return e
}

// median returns the median of a sorted sample (the mean of the middle
// two for an even count), 0 for an empty one.
func median[T time.Duration | float64](s []T) T {
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Median returns the median of xs (not modified), 0 for an empty sample.
func Median(xs []time.Duration) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return median(s)
}

// ms renders d in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	m := float64(d) / float64(time.Millisecond)
	switch {
	case m < 10:
		return fmt.Sprintf("%.2f ms", m)
	case m < 1000:
		return fmt.Sprintf("%.0f ms", m)
	}
	return fmt.Sprintf("%.2f s", m/1000)
}
