package comm

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestReplicatedFinalizeAfterReplicaDeath: a replica killed while large
// messages to it are queued everywhere (process 3, replica 1 of rank 1,
// killed between two Allreduce calls of 1 MiB, at a different call in
// each of three jobs) changes nothing: every survivor ends its program and
// Finalize without error (frames left for the dead replica do not hold
// Finalize's flush).
func TestReplicatedFinalizeAfterReplicaDeath(t *testing.T) {
	const n, r, iters, victim, at = 2, 2, 12, 3, 4
	for round := range 3 {
		ss := replicatedJob(t, n, r)
		var once sync.Once
		_, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
			p := slices.IndexFunc(ss, func(s *Session) bool { return s.World() == c })
			in := make([]float64, 1<<17)
			out := make([]float64, len(in))
			for i := range iters {
				if p == victim && i == at+round {
					once.Do(ss[p].kill)
					return "", nil
				}
				if err := Allreduce(ctx, c, in, out, Sum[float64]()); err != nil {
					return "", err
				}
			}
			return "", nil
		})
		var wg sync.WaitGroup
		ferrs := make([]error, len(ss))
		for p, s := range ss {
			if p == victim {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				ferrs[p] = s.Finalize(ctx)
			}()
		}
		wg.Wait()
		for p := range ss {
			if p == victim {
				continue
			}
			if errs[p] != nil || ferrs[p] != nil {
				t.Errorf("round %d, process %d: program %v, Finalize %v", round, p, errs[p], ferrs[p])
			}
		}
	}
}
