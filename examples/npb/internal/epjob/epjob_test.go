package epjob

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/examples/npb/internal/ep"
)

// serialS is the serial class S result, computed once.
var serialS = sync.OnceValue(func() ep.Sums {
	c, _ := ep.ClassByName("S")
	return ep.Run(c)
})

func runLocal(t *testing.T, ranks int, cfg Config) ([]Result, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ss, err := comm.Local(ctx, ranks)
	if err != nil {
		t.Fatal(err)
	}
	res := make([]Result, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r, s := range ss {
		wg.Go(func() {
			res[r], errs[r] = Run(ctx, s, cfg)
			fctx, fcancel := context.WithCancel(context.Background())
			if errs[r] == ErrCrashed {
				fcancel() // stop dead, no flush
			}
			s.Finalize(fctx)
			fcancel()
		})
	}
	wg.Wait()
	return res, errs
}

// EP class S over 3 ranks verifies and gives the very sums of the serial
// run (the table is added in batch order whatever the distribution).
func TestClassS(t *testing.T) {
	c, _ := ep.ClassByName("S")
	serial := serialS()
	res, errs := runLocal(t, 3, Config{Class: c})
	for r := range res {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if _, err := ep.Verify(c, res[r].Sums); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if res[r].Sums != serial {
			t.Fatalf("rank %d: sums %+v differ from the serial run %+v", r, res[r].Sums, serial)
		}
	}
	if !res[0].Reporter || res[1].Reporter || res[0].Rounds != 1 {
		t.Fatalf("rank 0: %+v", res[0])
	}
}

// Fault-tolerant EP: a rank dies halfway through its batches; the
// survivors recompute them and the verified sums are unchanged.
func TestRankDies(t *testing.T) {
	c, _ := ep.ClassByName("S")
	serial := serialS()
	cfg := Config{Class: c, Crash: func(world, computed int) bool { return world == 2 && computed == 30 }}
	res, errs := runLocal(t, 4, cfg)
	if errs[2] != ErrCrashed {
		t.Fatalf("rank 2 did not crash: %v", errs[2])
	}
	for _, r := range []int{0, 1, 3} {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if _, err := ep.Verify(c, res[r].Sums); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if res[r].Sums != serial {
			t.Fatalf("rank %d: sums differ from the serial run", r)
		}
		if res[r].Survivors != 3 || res[r].Recomputed != c.Batches()/4 || res[r].Rounds != 2 {
			t.Fatalf("rank %d: %d survivors, %d batches recomputed, %d rounds; want 3, %d, 2", r, res[r].Survivors, res[r].Recomputed, res[r].Rounds, c.Batches()/4)
		}
	}
}
