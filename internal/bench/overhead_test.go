package bench

import (
	"math"
	"testing"
)

// TestMeanCI: the ratio's 95% confidence interval of bench overhead
// (Phoenix §6.1, Table 2 compares means) uses Student's t: for 1, 2, 3 the
// mean is 2, the standard deviation 1 and t(2 df) = 4.303.
func TestMeanCI(t *testing.T) {
	mean, half := meanCI([]float64{1, 2, 3})
	if mean != 2 || math.Abs(half-4.303/math.Sqrt(3)) > 1e-9 {
		t.Fatalf("meanCI = %v ± %v, want 2 ± %v", mean, half, 4.303/math.Sqrt(3))
	}
	if _, half := meanCI([]float64{1.01, 1.01, 1.01, 1.01}); half != 0 {
		t.Fatalf("equal ratios: half-width %v, want 0", half)
	}
}

// TestNQueensTime: only an exact count gives a time.
func TestNQueensTime(t *testing.T) {
	m := nqueensTime.FindStringSubmatch("[0] nqueens n=14 mode=steal ranks=8: 365596 solutions in 0.138s (known 365596): CORRECT\n")
	if m == nil || m[1] != "0.138" {
		t.Fatalf("match %q", m)
	}
	if nqueensTime.MatchString("nqueens n=14 mode=steal ranks=8: 365595 solutions in 0.138s (known 365596): WRONG") {
		t.Fatal("a wrong count matched")
	}
}
