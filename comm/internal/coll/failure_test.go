package coll

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/comm/internal/coll/colltest"
)

// failCase is one collective under failure injection. mustFail says which
// ranks cannot complete without the failed rank f's contribution, when f
// crashes before sending anything: their call has to return an error.
type failCase struct {
	name     string
	run      func(ctx context.Context, ep Transport, n, root int) error
	mustFail func(p, root, f, r int) bool
}

func everyone(p, root, f, r int) bool    { return true }
func rootOnly(p, root, f, r int) bool    { return r == root }
func allIfRoot(p, root, f, r int) bool   { return f == root }
func aboveFailed(p, root, f, r int) bool { return r > f }

func failCases() []failCase {
	sum := Sum[float64]()
	cat := matMul2x2()
	return []failCase{
		{"barrier", func(ctx context.Context, ep Transport, n, root int) error {
			return Barrier(ctx, ep)
		}, everyone},
		{"bcast-binomial", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "bcast")
			return c.done(bcastBytes(c, make([]byte, n), root, bcastBinomial))
		}, allIfRoot},
		{"bcast-scatter-ring", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "bcast")
			return c.done(bcastBytes(c, make([]byte, n), root, bcastScatterRing))
		}, allIfRoot},
		{"reduce-binomial", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "reduce")
			return c.done(reduce(c, make([]int64, n), make([]int64, n), cat, root, reduceBinomial))
		}, rootOnly},
		{"reduce-rabenseifner", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "reduce")
			return c.done(reduce(c, make([]float64, n), make([]float64, n), sum, root, reduceRabenseifner))
		}, rootOnly},
		{"allreduce-doubling", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "allreduce")
			return c.done(allreduce(c, make([]float64, n), nil, sum, allreduceDoubling))
		}, everyone},
		{"allreduce-rabenseifner", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "allreduce")
			return c.done(allreduce(c, make([]float64, n), nil, sum, allreduceRabenseifner))
		}, everyone},
		{"allreduce-flat", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "allreduce")
			return c.done(allreduce(c, make([]float64, n), nil, sum, allreduceFlat))
		}, everyone},
		{"allreduce-ring", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "allreduce")
			return c.done(allreduce(c, make([]float64, n), nil, sum, allreduceRing))
		}, everyone},
		{"gather", func(ctx context.Context, ep Transport, n, root int) error {
			return Gather(ctx, ep, make([]float64, n), make([]float64, n*ep.Size()), root)
		}, rootOnly},
		{"gatherv", func(ctx context.Context, ep Transport, n, root int) error {
			counts := make([]int, ep.Size())
			for i := range counts {
				counts[i] = n
			}
			return Gatherv(ctx, ep, make([]float64, n), make([]float64, n*ep.Size()), counts, root)
		}, rootOnly},
		{"scatter", func(ctx context.Context, ep Transport, n, root int) error {
			return Scatter(ctx, ep, make([]float64, n*ep.Size()), make([]float64, n), root)
		}, allIfRoot},
		{"scatterv", func(ctx context.Context, ep Transport, n, root int) error {
			counts := make([]int, ep.Size())
			for i := range counts {
				counts[i] = n
			}
			return Scatterv(ctx, ep, make([]float64, n*ep.Size()), counts, make([]float64, n), root)
		}, allIfRoot},
		{"allgather-doubling-or-bruck", func(ctx context.Context, ep Transport, n, root int) error {
			return Allgather(ctx, ep, make([]float64, n), make([]float64, n*ep.Size()))
		}, everyone},
		{"allgatherv-ring", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "allgatherv")
			displs := make([]int, ep.Size()+1)
			for i := range displs {
				displs[i] = i * n
			}
			return c.done(allgatherBytes(c, make([]byte, n*ep.Size()), displs, allgatherRing))
		}, everyone},
		{"alltoall", func(ctx context.Context, ep Transport, n, root int) error {
			return Alltoall(ctx, ep, make([]float64, n*ep.Size()), make([]float64, n*ep.Size()))
		}, everyone},
		{"alltoall-bruck", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "alltoall")
			return c.done(alltoallBytes(c, make([]byte, n*ep.Size()), make([]byte, n*ep.Size()), n, alltoallBruck))
		}, everyone},
		{"reducescatter-pairwise", func(ctx context.Context, ep Transport, n, root int) error {
			c := begin(ctx, ep, "reducescatter")
			displs := make([]int, ep.Size()+1)
			for i := range displs {
				displs[i] = i * n
			}
			return c.done(reduceScatter(c, make([]float64, n*ep.Size()), make([]float64, n), displs, sum, reduceScatterPairwise))
		}, everyone},
		{"reducescatterblock", func(ctx context.Context, ep Transport, n, root int) error {
			return ReduceScatterBlock(ctx, ep, make([]int64, n*ep.Size()), make([]int64, n), cat)
		}, everyone},
		{"scan", func(ctx context.Context, ep Transport, n, root int) error {
			return Scan(ctx, ep, make([]int64, n), make([]int64, n), cat)
		}, aboveFailed},
		{"exscan", func(ctx context.Context, ep Transport, n, root int) error {
			return Exscan(ctx, ep, make([]float64, n), make([]float64, n), sum)
		}, aboveFailed},
	}
}

// TestFailureNeverHangs crashes one rank's Transport at a random point of a
// collective (its k-th Send or Recv; k = 0 in half of the runs, before it
// contributed anything) and checks the ULFM-style contract of the package
// doc: the crashed rank's call returns its Transport error; every other
// rank's call returns either nil (it completed before the failure) or an
// error that wraps the Transport's failure report naming the crashed rank;
// every rank that needed the crashed rank's contribution returns an error;
// and no call hangs (the safety net fails the test if one does). Trials
// alternate the transports: eager with receives in place, rendezvous sends,
// and the plain Send/Recv fallbacks.
func TestFailureNeverHangs(t *testing.T) {
	rng := newRNG(t)
	for _, fc := range failCases() {
		for trial := 0; trial < 12; trial++ {
			p := 2 + rng.IntN(32)
			f, root := rng.IntN(p), rng.IntN(p)
			k := int64(0)
			if trial%2 == 1 {
				k = rng.Int64N(2 * int64(log2Ceil(p)+2))
			}
			n := rng.IntN(3) * (1 + rng.IntN(300))
			what := fmt.Sprintf("%s p=%d n=%d root=%d: rank %d crashes at call %d", fc.name, p, n, root, f, k)
			ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
			newNet := colltest.New
			if trial%3 == 2 {
				newNet = colltest.NewSync
			}
			net, err := newNet(p)
			if err != nil {
				t.Fatal(err)
			}
			net.FailAt(f, k)
			errs := net.Run(func(ep *colltest.Endpoint) error {
				if trial%4 == 3 { // fallback paths: no EagerSender, no RecvIntoer
					return fc.run(ctx, plain{ep}, n, root)
				}
				return fc.run(ctx, ep, n, root)
			})
			cancel()
			for r, err := range errs {
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s: rank %d hung until the safety net: %v", what, r, err)
				}
			}
			if net.Err() == nil { // f finished before its k-th call
				for r, err := range errs {
					if err != nil {
						t.Fatalf("%s: no failure happened, yet rank %d: %v", what, r, err)
					}
				}
				continue
			}
			if !errors.Is(errs[f], colltest.ErrCrashed) {
				t.Fatalf("%s: crashed rank returned %v, want ErrCrashed", what, errs[f])
			}
			for r, err := range errs {
				if r == f {
					continue
				}
				var pf *colltest.PeerFailedError
				switch {
				case err == nil && k == 0 && fc.mustFail(p, root, f, r):
					t.Fatalf("%s: rank %d returned nil without rank %d's contribution", what, r, f)
				case err != nil && (!errors.As(err, &pf) || pf.Rank != f):
					t.Fatalf("%s: rank %d returned %v, want an error wrapping PeerFailedError{%d}", what, r, err, f)
				}
			}
		}
	}
}

// TestBadInput: arguments that cannot work are errors wrapping the package's
// sentinels, returned on every rank without a hang or a panic.
func TestBadInput(t *testing.T) {
	const p = 4
	sum := Sum[int32]()
	var zero Op[int32]
	cases := []struct {
		name string
		want error
		run  func(ctx context.Context, ep Transport) error
	}{
		{"bcast root = size", ErrRoot, func(ctx context.Context, ep Transport) error {
			return Bcast(ctx, ep, make([]int32, 3), p)
		}},
		{"reduce root < 0", ErrRoot, func(ctx context.Context, ep Transport) error {
			return Reduce(ctx, ep, make([]int32, 3), make([]int32, 3), sum, -1)
		}},
		{"gather root = size", ErrRoot, func(ctx context.Context, ep Transport) error {
			return Gather(ctx, ep, make([]int32, 3), make([]int32, 12), p)
		}},
		{"allreduce short recv", ErrCount, func(ctx context.Context, ep Transport) error {
			return Allreduce(ctx, ep, make([]int32, 3), make([]int32, 2), sum)
		}},
		{"allreduce zero op", ErrOp, func(ctx context.Context, ep Transport) error {
			return Allreduce(ctx, ep, make([]int32, 3), make([]int32, 3), zero)
		}},
		{"allgather recv not size × send", ErrCount, func(ctx context.Context, ep Transport) error {
			return Allgather(ctx, ep, make([]int32, 3), make([]int32, 11))
		}},
		{"allgatherv counts too short", ErrCount, func(ctx context.Context, ep Transport) error {
			return Allgatherv(ctx, ep, make([]int32, 1), make([]int32, 3), []int{1, 1, 1})
		}},
		{"allgatherv negative count", ErrCount, func(ctx context.Context, ep Transport) error {
			return Allgatherv(ctx, ep, make([]int32, 1), make([]int32, 1), []int{1, 1, 1, -2})
		}},
		{"alltoall not a multiple of size", ErrCount, func(ctx context.Context, ep Transport) error {
			return Alltoall(ctx, ep, make([]int32, 6), make([]int32, 6))
		}},
		{"alltoallv counts do not add up", ErrCount, func(ctx context.Context, ep Transport) error {
			return Alltoallv(ctx, ep, make([]int32, 5), []int{1, 1, 1, 1}, make([]int32, 4), []int{1, 1, 1, 1})
		}},
		{"reducescatter counts do not add up", ErrCount, func(ctx context.Context, ep Transport) error {
			return ReduceScatter(ctx, ep, make([]int32, 7), make([]int32, 2), []int{2, 2, 2, 2}, sum)
		}},
		{"reducescatterblock send not size × recv", ErrCount, func(ctx context.Context, ep Transport) error {
			return ReduceScatterBlock(ctx, ep, make([]int32, 7), make([]int32, 2), sum)
		}},
		{"scan short recv", ErrCount, func(ctx context.Context, ep Transport) error {
			return Scan(ctx, ep, make([]int32, 2), make([]int32, 1), sum)
		}},
	}
	for _, tc := range cases {
		errs := run(t, p, tc.name, tc.run)
		for r, err := range errs {
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: rank %d: err = %v, want %v", tc.name, r, err, tc.want)
			}
		}
	}
	// Root-only checks: root reports the error but still takes part, so the
	// others finish (with an error when what they got does not fit).
	rootCases := []struct {
		name      string
		othersErr bool
		run       func(ctx context.Context, ep Transport) error
	}{
		{"gather short recv on root", false, func(ctx context.Context, ep Transport) error {
			return Gather(ctx, ep, make([]int32, 2), make([]int32, 7), 1)
		}},
		{"gatherv counts do not add up on root", false, func(ctx context.Context, ep Transport) error {
			return Gatherv(ctx, ep, make([]int32, 1), make([]int32, 4), []int{1, 1, 1, 2}, 0)
		}},
		{"scatter long send on root", false, func(ctx context.Context, ep Transport) error {
			return Scatter(ctx, ep, make([]int32, 9), make([]int32, 2), 3)
		}},
		{"scatterv bad counts on root", true, func(ctx context.Context, ep Transport) error {
			return Scatterv(ctx, ep, make([]int32, 4), []int{1, 1, -1, 3}, make([]int32, 1), 0)
		}},
		{"reduce short recv on root", false, func(ctx context.Context, ep Transport) error {
			return Reduce(ctx, ep, make([]int32, 3000), make([]int32, 2), sum, 2)
		}},
	}
	for _, tc := range rootCases {
		errs := run(t, p, tc.name, tc.run)
		for r, err := range errs {
			counted := errors.Is(err, ErrCount)
			if !counted && (err != nil || tc.othersErr) {
				t.Errorf("%s: rank %d: err = %v", tc.name, r, err)
			}
		}
		n := 0
		for _, err := range errs {
			if err != nil {
				n++
			}
		}
		if n == 0 {
			t.Errorf("%s: no rank reported ErrCount", tc.name)
		}
	}
}

// TestPeerDisagrees: when ranks disagree on a length, the rank that notices
// returns ErrCount naming the peer, and the collective still completes
// everywhere (no hang, no panic).
func TestPeerDisagrees(t *testing.T) {
	for _, p := range []int{2, 5, 8} {
		errs := run(t, p, "bcast", func(ctx context.Context, ep Transport) error {
			n := 10
			if ep.Rank() == p-1 {
				n = 7 // a leaf of every binomial tree rooted at 0
			}
			return Bcast(ctx, ep, make([]float64, n), 0)
		})
		for r, err := range errs {
			if r == p-1 && !errors.Is(err, ErrCount) {
				t.Errorf("p=%d: rank %d (short buffer): err = %v, want ErrCount", p, r, err)
			}
			if r != p-1 && err != nil {
				t.Errorf("p=%d: rank %d: %v", p, r, err)
			}
		}
		errs = run(t, p, "allgather", func(ctx context.Context, ep Transport) error {
			n := 3
			if ep.Rank() == 0 {
				n = 4
			}
			return Allgather(ctx, ep, make([]int32, n), make([]int32, n*p))
		})
		// Rank 0 notices (its peers' blocks are shorter than its own);
		// ranks that receive its block directly notice too, those that get
		// it relayed (trimmed) may not. Nobody hangs.
		if !errors.Is(errs[0], ErrCount) {
			t.Errorf("p=%d allgather: rank 0: err = %v, want ErrCount", p, errs[0])
		}
		for r, err := range errs {
			if err != nil && !errors.Is(err, ErrCount) {
				t.Errorf("p=%d allgather: rank %d: err = %v, want nil or ErrCount", p, r, err)
			}
		}
	}
}
