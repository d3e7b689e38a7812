package comm

import (
	"context"
	"fmt"

	"github.com/cohort-mp/cohort/comm/internal/coll"
)

// Collectives. Every rank of a communicator calls the same collectives in
// the same order with consistent arguments (the same root and operator,
// counts that agree); their messages travel in the communicator's private
// collective context, so they never match point-to-point traffic. Each is a
// size-aware algorithm (binomial trees for short messages; van de Geijn's
// broadcast, Rabenseifner's reduce and allreduce, rings and pairwise
// exchanges for long ones; a dissemination barrier), correct for every size
// and root: the algorithms, their thresholds and their costs are documented
// in package comm/internal/coll.
//
// Failures: once a member of the communicator is known failed (or the
// communicator is revoked), every rank still waiting inside a collective
// returns an error — a [*ProcFailedError] naming the failed ranks, or
// [ErrRevoked] — wrapped with the collective and the step; no collective
// hangs. A rank that had finished its part before the failure returns nil,
// so ranks may disagree about a collective's outcome: use [Comm.Agree] when
// they must not. When every rank of the communicator runs on one host,
// Allreduce, Bcast and Barrier go through memory the ranks share rather than
// messages (coll_shm.go), and across hosts Allreduce goes through each
// host's (coll_hier.go), with the same failures, and one more: a rank
// whose ctx ends in the middle of one leaves the others of its host
// without its part, and they fail with [ErrAbandoned] naming it. Bad
// arguments are errors wrapping [ErrCount], [ErrRoot] or
// [ErrOp] (or [ErrBadArg] for a nil communicator), never panics.

// Op is a reduction operator over T: [Sum], [Prod], [Min], [Max], [BAnd],
// [BOr], [BXor] or one made with [NewOp]. Reductions combine the ranks'
// contributions in rank order (x₀ ⊕ x₁ ⊕ … ⊕ xₙ₋₁).
type Op[T Elem] = coll.Op[T]

// Integer is the set of integer element types (the bitwise operators).
type Integer = coll.Integer

// Errors of the collectives (see also the package's errors).
var (
	// ErrCount: a buffer length or count vector that does not fit the
	// collective, or a peer that sent a different amount than this rank's
	// arguments imply.
	ErrCount = coll.ErrCount
	// ErrRoot: a root outside [0, Size).
	ErrRoot = coll.ErrRoot
	// ErrOp: the zero Op.
	ErrOp = coll.ErrOp
)

// Sum is element-wise addition (wrapping for integers).
func Sum[T Elem]() Op[T] { return coll.Sum[T]() }

// Prod is element-wise multiplication (wrapping for integers).
func Prod[T Elem]() Op[T] { return coll.Prod[T]() }

// Min is the element-wise minimum.
func Min[T Elem]() Op[T] { return coll.Min[T]() }

// Max is the element-wise maximum.
func Max[T Elem]() Op[T] { return coll.Max[T]() }

// BAnd is the element-wise bitwise AND.
func BAnd[T Integer]() Op[T] { return coll.BAnd[T]() }

// BOr is the element-wise bitwise OR.
func BOr[T Integer]() Op[T] { return coll.BOr[T]() }

// BXor is the element-wise bitwise exclusive OR.
func BXor[T Integer]() Op[T] { return coll.BXor[T]() }

// NewOp returns a user-defined operator. fn(inout, in) must set inout[i] =
// inout[i] ⊕ in[i] for every i, inout being the lower ranks' partial result
// (the left operand); ⊕ must be associative and act on each element on its
// own (vectors are split at any element). fn must not modify in, which may
// be the caller's send buffer or another rank's input, nor keep either
// slice. With commutative false the collectives combine only in rank order.
func NewOp[T Elem](name string, fn func(inout, in []T), commutative bool) Op[T] {
	return coll.NewOp(name, fn, commutative)
}

func collOf(c *Comm, name string) (coll.Transport, error) {
	if c == nil || c.st == nil {
		return nil, fmt.Errorf("%w: %s on a nil communicator", ErrBadArg, name)
	}
	return c.collTransport(), nil
}

// Bcast copies root's buf into buf on every rank (every rank passes a buf of
// the same length).
func Bcast[T Elem](ctx context.Context, c *Comm, buf []T, root int) error {
	t, err := collOf(c, "bcast")
	if err != nil {
		return err
	}
	if ok, err := bcastShared(ctx, c, buf, root); ok {
		return err
	}
	return coll.Bcast(ctx, t, buf, root)
}

// Reduce combines every rank's send with op, in rank order, into recv on
// root (len(recv) = len(send) there; other ranks may pass nil). send is
// never modified.
func Reduce[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op[T], root int) error {
	t, err := collOf(c, "reduce")
	if err != nil {
		return err
	}
	return coll.Reduce(ctx, t, send, recv, op, root)
}

// Allreduce is Reduce with the result in every rank's recv (len(recv) =
// len(send)); send and recv may be the same slice.
func Allreduce[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op[T]) error {
	t, err := collOf(c, "allreduce")
	if err != nil {
		return err
	}
	if ok, err := allreduceShared(ctx, c, send, recv, op); ok {
		return err
	}
	return coll.Allreduce(ctx, t, send, recv, op)
}

// Gather concatenates every rank's send (all of one length k), in rank order,
// into recv on root (Size·k elements; other ranks may pass nil).
func Gather[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) error {
	t, err := collOf(c, "gather")
	if err != nil {
		return err
	}
	return coll.Gather(ctx, t, send, recv, root)
}

// Gatherv gathers counts[i] elements from rank i (len(send) = counts[Rank])
// into recv on root, packed in rank order (len(recv) = sum of counts). counts
// is read on root only.
func Gatherv[T Elem](ctx context.Context, c *Comm, send, recv []T, counts []int, root int) error {
	t, err := collOf(c, "gatherv")
	if err != nil {
		return err
	}
	return coll.Gatherv(ctx, t, send, recv, counts, root)
}

// Scatter sends block i of root's send (Size blocks of len(recv) elements)
// to rank i's recv. send is read on root only.
func Scatter[T Elem](ctx context.Context, c *Comm, send, recv []T, root int) error {
	t, err := collOf(c, "scatter")
	if err != nil {
		return err
	}
	return coll.Scatter(ctx, t, send, recv, root)
}

// Scatterv sends counts[i] elements of root's send (packed in rank order,
// len(send) = sum of counts) to rank i's recv (len(recv) = counts[i]). send
// and counts are read on root only.
func Scatterv[T Elem](ctx context.Context, c *Comm, send []T, counts []int, recv []T, root int) error {
	t, err := collOf(c, "scatterv")
	if err != nil {
		return err
	}
	return coll.Scatterv(ctx, t, send, counts, recv, root)
}

// Allgather concatenates every rank's send (all of one length), in rank
// order, into every rank's recv (len(recv) = Size·len(send)).
func Allgather[T Elem](ctx context.Context, c *Comm, send, recv []T) error {
	t, err := collOf(c, "allgather")
	if err != nil {
		return err
	}
	return coll.Allgather(ctx, t, send, recv)
}

// Allgatherv is Allgather with counts[i] elements from rank i (len(send) =
// counts[Rank], len(recv) = sum of counts); every rank passes the same
// counts.
func Allgatherv[T Elem](ctx context.Context, c *Comm, send, recv []T, counts []int) error {
	t, err := collOf(c, "allgatherv")
	if err != nil {
		return err
	}
	return coll.Allgatherv(ctx, t, send, recv, counts)
}

// Alltoall sends block j of every rank i's send to block i of rank j's recv
// (send and recv have Size·k elements, for one k).
func Alltoall[T Elem](ctx context.Context, c *Comm, send, recv []T) error {
	t, err := collOf(c, "alltoall")
	if err != nil {
		return err
	}
	return coll.Alltoall(ctx, t, send, recv)
}

// Alltoallv is Alltoall with per-pair lengths: sendCounts[j] elements to rank
// j (packed in rank order in send), recvCounts[i] from rank i (packed in
// recv); recvCounts[i] must equal rank i's sendCounts[Rank].
func Alltoallv[T Elem](ctx context.Context, c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	t, err := collOf(c, "alltoallv")
	if err != nil {
		return err
	}
	return coll.Alltoallv(ctx, t, send, sendCounts, recv, recvCounts)
}

// ReduceScatter reduces every rank's send (len = sum of counts) with op, in
// rank order, and leaves block i of the result (counts[i] elements, packed
// in rank order) in rank i's recv. Every rank passes the same counts.
func ReduceScatter[T Elem](ctx context.Context, c *Comm, send, recv []T, counts []int, op Op[T]) error {
	t, err := collOf(c, "reducescatter")
	if err != nil {
		return err
	}
	return coll.ReduceScatter(ctx, t, send, recv, counts, op)
}

// ReduceScatterBlock is ReduceScatter with every block len(recv) elements
// long (len(send) = Size·len(recv)).
func ReduceScatterBlock[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op[T]) error {
	t, err := collOf(c, "reducescatterblock")
	if err != nil {
		return err
	}
	return coll.ReduceScatterBlock(ctx, t, send, recv, op)
}

// Barrier returns once every rank of c has called it.
func Barrier(ctx context.Context, c *Comm) error {
	t, err := collOf(c, "barrier")
	if err != nil {
		return err
	}
	if ok, err := barrierShared(ctx, c); ok {
		return err
	}
	return coll.Barrier(ctx, t)
}

// Scan leaves the inclusive prefix reduction send₀ ⊕ … ⊕ sendᵢ in rank i's
// recv (len(recv) = len(send)).
func Scan[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op[T]) error {
	t, err := collOf(c, "scan")
	if err != nil {
		return err
	}
	return coll.Scan(ctx, t, send, recv, op)
}

// Exscan leaves the exclusive prefix reduction send₀ ⊕ … ⊕ sendᵢ₋₁ in rank
// i's recv; rank 0's recv is left unchanged.
func Exscan[T Elem](ctx context.Context, c *Comm, send, recv []T, op Op[T]) error {
	t, err := collOf(c, "exscan")
	if err != nil {
		return err
	}
	return coll.Exscan(ctx, t, send, recv, op)
}
