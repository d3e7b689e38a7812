// Package isjob runs the NAS IS benchmark over package comm: it adapts a
// communicator to the [intsort.Exchange] the distributed kernel needs
// (Allreduce of int64 sums, Alltoall of the send counts, Alltoallv of the
// keys) and runs one rank's part of it.
package isjob

import (
	"context"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/examples/npb/internal/intsort"
)

// Exchange is an intsort.Exchange over a communicator.
type Exchange struct{ C *comm.Comm }

// Rank is the communicator rank.
func (x Exchange) Rank() int { return x.C.Rank() }

// Size is the communicator size.
func (x Exchange) Size() int { return x.C.Size() }

// AllreduceSum sums buf over the ranks, in place.
func (x Exchange) AllreduceSum(ctx context.Context, buf []int64) error {
	return comm.Allreduce(ctx, x.C, buf, buf, comm.Sum[int64]())
}

// Alltoall exchanges one int64 with every rank.
func (x Exchange) Alltoall(ctx context.Context, send, recv []int64) error {
	return comm.Alltoall(ctx, x.C, send, recv)
}

// Alltoallv exchanges the key blocks.
func (x Exchange) Alltoallv(ctx context.Context, send []int32, sendCounts []int, recv []int32, recvCounts []int) error {
	return comm.Alltoallv(ctx, x.C, send, sendCounts, recv, recvCounts)
}

// Result is one rank's outcome.
type Result struct {
	Report   intsort.Report
	Reporter bool // rank 0: print the result
	Elapsed  time.Duration
}

// Run runs this rank's part of IS class c on s.World().
func Run(ctx context.Context, s *comm.Session, c intsort.Class) (Result, error) {
	begin := time.Now()
	w := s.World()
	rep, err := intsort.RunRank(ctx, Exchange{C: w}, c)
	if err != nil {
		return Result{}, err
	}
	return Result{Report: rep, Reporter: w.Rank() == 0, Elapsed: time.Since(begin)}, nil
}
