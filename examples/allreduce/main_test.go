package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// TestAllreduce checks the example's sums on in-process jobs of several
// sizes, powers of two and not, short and long vectors.
func TestAllreduce(t *testing.T) {
	for _, n := range []int{1, 3, 4, 7} {
		for _, length := range []int{1, 1000, 1 << 16} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			ss, err := comm.Local(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r, s := range ss {
				wg.Go(func() { _, errs[r] = Run(ctx, s.World(), length, 2) })
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("n=%d len=%d rank %d: %v", n, length, r, err)
				}
			}
			for _, s := range ss {
				s.Finalize(ctx)
			}
			cancel()
		}
	}
}
