package isjob

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/examples/npb/internal/intsort"
)

// NPB IS class S over comm collectives (bucketed key exchange with
// Alltoall/Alltoallv) on 1, 3 and 4 ranks: all 51 checks pass.
func TestClassS(t *testing.T) {
	c, _ := intsort.ClassByName("S")
	for _, ranks := range []int{1, 3, 4} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		ss, err := comm.Local(ctx, ranks)
		if err != nil {
			t.Fatal(err)
		}
		res := make([]Result, ranks)
		errs := make([]error, ranks)
		var wg sync.WaitGroup
		for r, s := range ss {
			wg.Go(func() {
				res[r], errs[r] = Run(ctx, s, c)
				s.Finalize(context.Background())
			})
		}
		wg.Wait()
		cancel()
		for r := range res {
			if errs[r] != nil {
				t.Fatalf("%d ranks, rank %d: %v", ranks, r, errs[r])
			}
			if err := res[r].Report.Err(); err != nil {
				t.Fatalf("%d ranks, rank %d: %v", ranks, r, err)
			}
		}
		if !res[0].Reporter {
			t.Fatal("rank 0 is not the reporter")
		}
	}
}
