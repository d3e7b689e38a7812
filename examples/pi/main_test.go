package main

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// TestPi runs Figure 1 of the P2P-MPI chapter (§1) in one process over
// comm.Local, for sizes that divide the intervals and sizes that do not:
// rank 0 gets π to 1e-10.
func TestPi(t *testing.T) {
	for _, n := range []int{1, 3, 8} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ss, err := comm.Local(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		results := make([]float64, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r, s := range ss {
			wg.Go(func() { results[r], errs[r] = Pi(ctx, s.World(), 1_000_000, 2) })
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("n=%d rank %d: %v", n, r, err)
			}
		}
		if d := math.Abs(results[0] - pi25DT); d > 1e-10 {
			t.Fatalf("n=%d: π ≈ %.16f, off by %.3g", n, results[0], d)
		}
		for _, s := range ss {
			s.Finalize(ctx)
		}
		cancel()
	}
}
