package bench

import (
	"math"
	"testing"
	"time"
)

func TestStudentT95(t *testing.T) {
	// Reference values of the 0.975 quantile (statistical tables).
	for _, c := range []struct {
		df   int
		want float64
	}{{1, 12.706}, {4, 2.776}, {10, 2.228}, {30, 2.042}, {31, 2.0395}, {60, 2.0003}, {120, 1.9799}} {
		if got := StudentT95(c.df); math.Abs(got-c.want) > 0.001 {
			t.Errorf("StudentT95(%d) = %.4f, want %.4f", c.df, got, c.want)
		}
	}
	if !math.IsInf(StudentT95(0), 1) {
		t.Error("StudentT95(0) is not +Inf")
	}
}

func TestEstimate95(t *testing.T) {
	ms := time.Millisecond
	e := Estimate95([]time.Duration{5 * ms, 1 * ms, 3 * ms, 2 * ms, 4 * ms})
	// mean 3 ms, s = √2.5 ms, half = t(4)·s/√5 = 2.776·1.5811/2.2361 ms.
	want := time.Duration(2.776 * math.Sqrt(2.5) / math.Sqrt(5) * float64(ms))
	if e.N != 5 || e.Mean != 3*ms || e.Median != 3*ms || e.Min != ms || e.Max != 5*ms || (e.HalfCI-want).Abs() > time.Microsecond {
		t.Fatalf("got %+v, want half-width %v", e, want)
	}
	if one := Estimate95([]time.Duration{ms}); one.HalfCI != time.Duration(math.MaxInt64) || one.Mean != ms {
		t.Fatalf("one sample: %+v", one)
	}
	if Median([]time.Duration{4, 1, 3, 2}) != 2 { // (2+3)/2 in integer nanoseconds
		t.Fatal("median of an even sample")
	}
}
