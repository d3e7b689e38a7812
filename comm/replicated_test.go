package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// replicatedJob starts n logical ranks × r replicas in this process over
// TCP, as Init does in n·r processes with COHORT_REPLICAS=r; ss[p] is
// process p (replica p/n of rank p mod n).
func replicatedJob(t *testing.T, n, r int) []*Session {
	t.Helper()
	return tcpJob(t, n*r, func(b *launch.Bootstrap) { b.Replicas = r })
}

// replicatedRun runs f at every process, each with its own deadline, and
// returns each process's error and result.
func replicatedRun(ss []*Session, f func(ctx context.Context, c *Comm) (string, error)) ([]string, []error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outs, errs := make([]string, len(ss)), make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = f(ctx, s.World())
		}()
	}
	wg.Wait()
	return outs, errs
}

// ringAndAllreduce is a deterministic program: iters rounds of a ring
// exchange (send to the right, receive from the left) and an Allreduce of
// the values received; it returns a digest of what it computed. kill, if
// not nil, is called at each round (to crash processes mid-run).
func ringAndAllreduce(iters int, kill func(round int)) func(ctx context.Context, c *Comm) (string, error) {
	return func(ctx context.Context, c *Comm) (string, error) {
		me, n := c.Rank(), c.Size()
		var acc int64
		for i := range iters {
			if kill != nil {
				kill(i)
			}
			right, left := (me+1)%n, (me+n-1)%n
			in := []int64{0}
			req := Irecv(c, in, left, i)
			if err := Send(ctx, c, []int64{int64(me*1000 + i)}, right, i); err != nil {
				return "", err
			}
			if _, err := req.Wait(ctx); err != nil {
				return "", err
			}
			if in[0] != int64(left*1000+i) {
				return "", fmt.Errorf("round %d: got %d from rank %d", i, in[0], left)
			}
			sum := []int64{0}
			if err := Allreduce(ctx, c, in, sum, Sum[int64]()); err != nil {
				return "", err
			}
			acc += sum[0]
		}
		return fmt.Sprintf("rank %d of %d: %d", me, n, acc), nil
	}
}

// Each of 3 ranks runs as 2 replicas: the program sees 3 ranks, every
// replica computes the same result, and killing one replica of each rank
// mid-run (the master of rank 0, a non-master of ranks 1 and 2) changes
// nothing and surfaces no error.
func TestReplicatedReplicaDeathsInvisible(t *testing.T) {
	const n, r, iters = 3, 2, 40
	ss := replicatedJob(t, n, r)
	want := func(rank int) string {
		var acc int64
		for i := range iters {
			for k := range n {
				acc += int64(k*1000 + i)
			}
		}
		return fmt.Sprintf("rank %d of %d: %d", rank, n, acc)
	}
	victims := map[int]int{0: 10, 4: 20, 5: 30} // process → round: rank 0's master (replica 0), replica 1 of ranks 1 and 2
	var once sync.Map
	outs, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		p := slices.IndexFunc(ss, func(s *Session) bool { return s.World() == c })
		kill := func(round int) {
			if at, ok := victims[p]; ok && round == at {
				if _, done := once.LoadOrStore(p, true); !done {
					ss[p].kill()
				}
			}
		}
		return ringAndAllreduce(iters, kill)(ctx, c)
	})
	for p := range ss {
		if _, dead := victims[p]; dead {
			continue
		}
		if errs[p] != nil {
			t.Errorf("process %d (rank %d): %v", p, p%n, errs[p])
		} else if outs[p] != want(p%n) {
			t.Errorf("process %d: %q, want %q", p, outs[p], want(p%n))
		}
	}
}

// When every replica of a rank dies, the others get the ordinary ULFM
// error naming that logical rank.
func TestReplicatedRankFailure(t *testing.T) {
	const n, r = 3, 2
	ss := replicatedJob(t, n, r)
	const victim = 2
	_, errs := replicatedRun(ss, func(ctx context.Context, c *Comm) (string, error) {
		p := slices.IndexFunc(ss, func(s *Session) bool { return s.World() == c })
		if p%n == victim {
			ss[p].kill()
			return "", nil
		}
		for i := 0; ; i++ {
			if err := allPairsStep(ctx, c, i); err != nil {
				return "", err
			}
		}
	})
	for p, err := range errs {
		if p%n == victim {
			continue
		}
		var pf *ProcFailedError
		if !errors.As(err, &pf) || !slices.Equal(pf.Ranks, []int{victim}) {
			t.Errorf("process %d: %v, want a failure naming rank %d", p, err, victim)
		}
	}
}

// allPairsStep: every rank sends to and receives from every other rank
// (so every live rank meets a failed one).
func allPairsStep(ctx context.Context, c *Comm, i int) error {
	var reqs []*Request
	for r := range c.Size() {
		if r != c.Rank() {
			reqs = append(reqs, Irecv(c, make([]int64, 1), r, i), Isend(c, []int64{int64(i)}, r, i))
		}
	}
	return WaitAll(ctx, reqs...)
}

// A wildcard receive on a replicated rank is refused (its replicas could
// match different messages), with an error that says so.
func TestReplicatedWildcardRefused(t *testing.T) {
	ss := replicatedJob(t, 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := ss[0].World().Recv(ctx, make([]byte, 1), AnySource, 0)
	if !errors.Is(err, ErrReplicatedWildcard) {
		t.Fatalf("AnySource receive: %v", err)
	}
	if _, _, err := ss[0].World().Iprobe(AnySource, AnyTag); !errors.Is(err, ErrReplicatedWildcard) {
		t.Fatalf("AnySource probe: %v", err)
	}
}
