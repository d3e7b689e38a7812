package experiment

import (
	"context"
	"errors"
	"math"
	"testing"
)

// TestStabilityTiny runs a small stability sweep (Friedman, Manor, Guo §4)
// with one and two workers: every live node ends the round with the exact
// minimum, FullDist sends exactly n(n−1) messages, CubeFullDist's count
// follows n·log²n, failures of node 0's neighbours barely matter, and the
// outputs are identical.
func TestStabilityTiny(t *testing.T) {
	args := []string{"--sizes", "100,110,128", "--fault-sizes", "32", "--max-faults", "2", "--topologies", "1"}
	one, checks := runTiny(t, "stability", 1, args...)
	mustPass(t, checks, "every live node finished", "FullDist's messages", "CubeFullDist's messages", "up to 2 failed")
	two, _ := runTiny(t, "stability", 2, args...)
	sameFiles(t, one, two, "stability.csv", "stability-runs.csv", "report.md")
}

func TestStabilityBadOptions(t *testing.T) {
	for _, args := range [][]string{
		{"--sizes", "1"},
		{"--sizes", "ten"},
		{"--topologies", "-1"},
		{"--fault-sizes", "16", "--max-faults", "4"}, // node 0 has 4 neighbours at n = 16
		{"--recv-overhead", "-1ms"},
	} {
		spec, _ := Lookup("stability")
		e := spec.New()
		fs := flagSetFor(e)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		_, err := Execute(context.Background(), spec, e, Options{Seed: 1, Out: t.TempDir(), Workers: 1, Quick: true})
		if !errors.Is(err, ErrBadOption) {
			t.Errorf("%v: got %v, want ErrBadOption", args, err)
		}
	}
}

func TestStabilityFits(t *testing.T) {
	xs := []float64{1, 2, 3, 4}
	f := stabLinear(xs, []float64{3, 5, 7, 9})
	if math.Abs(f.a-1) > 1e-12 || math.Abs(f.b-2) > 1e-12 || math.Abs(f.r2-1) > 1e-12 {
		t.Errorf("linear fit %+v, want a=1 b=2 r2=1", f)
	}
	c, dev := stabProportional(xs, []float64{2, 4, 6, 8.8})
	if c < 2 || c > 2.2 || dev < 0.05 || dev > 0.1 {
		t.Errorf("proportional fit c=%v dev=%v", c, dev)
	}
	if got := stabEdgeProb(10); got != 0.04 {
		t.Errorf("p(10) = %v", got)
	}
	if got := stabEdgeProb(500); got != 0.02 {
		t.Errorf("p(500) = %v", got)
	}
	if got := stabEdgeProb(1900); got != 0.01 {
		t.Errorf("p(1900) = %v", got)
	}
}
