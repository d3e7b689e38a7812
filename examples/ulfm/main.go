// Command ulfm shows cohort's failure semantics (after ULFM, the MPI
// fault-tolerance extension) on real processes: every rank runs one kind of
// operation over the world communicator in a loop — an all-pairs
// point-to-point exchange, a Bcast from rank 0, or an Allreduce — until a
// rank is killed. Every survivor's call then returns an error naming the
// dead rank; none hangs. The survivors agree that the step failed, revoke the
// communicator, shrink it to the survivors, agree again, and check that an
// Allreduce on the new communicator gives the right sum.
//
//	cohort run -n 5 --kill 3@1s ./examples/ulfm -- -op allreduce
//
// Each survivor prints one "failed" line naming the ranks its error named
// and one "recovered" line; it exits 0 only if the recovery checked out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/examples/internal/appmain"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ulfm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	op := fs.String("op", "allreduce", "operation to loop on: p2p (all pairs), bcast or allreduce")
	wait := fs.Duration("wait", 60*time.Second, "give up if no failure happens within this time")
	pace := fs.Duration("pace", time.Millisecond, "pause between two iterations (an unpaced Bcast root runs ahead of its receivers: sends are eager, and the backlog delays the failure detector's traffic on the same connections)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	step, ok := ops[*op]
	if !ok {
		fmt.Fprintf(stderr, "ulfm: unknown -op %q (want p2p, bcast or allreduce)\n", *op)
		return 2
	}
	ctx, s, done, err := appmain.Start("ulfm", *wait+30*time.Second, stderr)
	if err != nil {
		return 1
	}
	defer done()
	w := s.World()
	me := w.Rank()

	// Loop until the operation fails.
	deadline := time.Now().Add(*wait)
	var opErr error
	for i := 0; opErr == nil; i++ {
		if time.Now().After(deadline) {
			fmt.Fprintf(stderr, "ulfm: rank %d: no failure within %v\n", me, *wait)
			return 1
		}
		opErr = step(ctx, w, i)
		time.Sleep(*pace)
	}
	var pf *comm.ProcFailedError
	switch {
	case errors.As(opErr, &pf):
		fmt.Fprintf(stdout, "rank %d: %s failed naming ranks %v\n", me, *op, pf.Ranks)
	case errors.Is(opErr, comm.ErrRevoked):
		fmt.Fprintf(stdout, "rank %d: %s failed: communicator revoked by a peer\n", me, *op)
	default:
		fmt.Fprintf(stderr, "ulfm: rank %d: %s: unexpected error %v\n", me, *op, opErr)
		return 1
	}

	// Repair. First agree, on the broken communicator, that the step
	// failed (Agree tolerates the failed rank): once it returns, every
	// survivor has left its operation, so the revocation cannot overtake
	// anyone's own report of the failure. Then revoke (no operation on the
	// old communicator can succeed any more), shrink to the survivors,
	// agree again and compute on the new communicator.
	if ok, err := w.Agree(ctx, 0); err != nil || ok != 0 {
		fmt.Fprintf(stderr, "ulfm: rank %d: Agree on the broken communicator = %d, %v (want 0)\n", me, ok, err)
		return 1
	}
	w.Revoke()
	nw, err := w.Shrink(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "ulfm: rank %d: Shrink: %v\n", me, err)
		return 1
	}
	flag, err := nw.Agree(ctx, 1)
	if err != nil || flag != 1 {
		fmt.Fprintf(stderr, "ulfm: rank %d: Agree = %d, %v (want 1)\n", me, flag, err)
		return 1
	}
	n := nw.Size()
	send, recv := []int64{int64(nw.Rank() + 1)}, []int64{0}
	if err := comm.Allreduce(ctx, nw, send, recv, comm.Sum[int64]()); err != nil {
		fmt.Fprintf(stderr, "ulfm: rank %d: Allreduce on the survivors: %v\n", me, err)
		return 1
	}
	want := int64(n * (n + 1) / 2)
	if recv[0] != want {
		fmt.Fprintf(stderr, "ulfm: rank %d: Allreduce on %d survivors = %d, want %d\n", me, n, recv[0], want)
		return 1
	}
	failed := w.Failed()
	slices.Sort(failed)
	fmt.Fprintf(stdout, "rank %d: recovered: rank %d of %d survivors, failed %v, agree %d, allreduce %d OK\n", me, nw.Rank(), n, failed, flag, recv[0])
	return 0
}

// ops are the operations the ranks loop on; i numbers the iteration.
var ops = map[string]func(ctx context.Context, c *comm.Comm, i int) error{
	// p2p: every rank sends to and receives from every other rank.
	"p2p": func(ctx context.Context, c *comm.Comm, i int) error {
		var reqs []*comm.Request
		in := make([][]int64, c.Size())
		for r := range c.Size() {
			if r == c.Rank() {
				continue
			}
			in[r] = make([]int64, 1)
			reqs = append(reqs, comm.Irecv(c, in[r], r, i%1000), comm.Isend(c, []int64{int64(i)}, r, i%1000))
		}
		if err := comm.WaitAll(ctx, reqs...); err != nil {
			return err
		}
		for r, v := range in {
			if v != nil && v[0] != int64(i) {
				return fmt.Errorf("iteration %d: got %d from rank %d", i, v[0], r)
			}
		}
		return nil
	},
	"bcast": func(ctx context.Context, c *comm.Comm, i int) error {
		buf := []int64{0}
		if c.Rank() == 0 {
			buf[0] = int64(i)
		}
		if err := comm.Bcast(ctx, c, buf, 0); err != nil {
			return err
		}
		if buf[0] != int64(i) {
			return fmt.Errorf("iteration %d: Bcast gave %d", i, buf[0])
		}
		return nil
	},
	"allreduce": func(ctx context.Context, c *comm.Comm, i int) error {
		recv := []int64{0}
		if err := comm.Allreduce(ctx, c, []int64{1}, recv, comm.Sum[int64]()); err != nil {
			return err
		}
		if recv[0] != int64(c.Size()) {
			return fmt.Errorf("iteration %d: Allreduce gave %d", i, recv[0])
		}
		return nil
	},
}
