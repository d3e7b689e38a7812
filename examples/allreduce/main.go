// Command allreduce sums a vector of float64 over every rank of a job with
// comm.Allreduce, checks the result against the closed form on every rank,
// and prints the mean time of one Allreduce:
//
//	cohort run -n 4 ./examples/allreduce
//	cohort run -n 4 ./examples/allreduce -- -len 131072 -iters 50
//
// Rank r contributes x[i] = r·len + i, so element i of the sum is
// len·size·(size−1)/2 + size·i: integers, exact in float64 whatever the
// order of the additions.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/launch"
)

func main() {
	length := flag.Int("len", 1<<17, "vector `length` in float64 elements (default 1 MiB)")
	iters := flag.Int("iters", 20, "Allreduce calls to time (after one warm-up call)")
	flag.Parse()
	if *length < 1 || *iters < 1 {
		fmt.Fprintln(os.Stderr, "allreduce: -len and -iters must be at least 1")
		os.Exit(2)
	}
	ctx := context.Background()
	s, err := comm.Init(ctx)
	if errors.Is(err, launch.ErrNotLaunched) {
		fmt.Fprintln(os.Stderr, "allreduce: start me with `cohort run -n 4 ./examples/allreduce`")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		os.Exit(1)
	}
	w := s.World()
	per, err := Run(ctx, w, *length, *iters)
	if err != nil {
		fmt.Fprintf(os.Stderr, "allreduce: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
	if w.Rank() == 0 {
		fmt.Printf("Allreduce of %d float64 (%d bytes) on %d ranks: %.1f µs per call, results checked on every rank\n",
			*length, 8**length, w.Size(), float64(per.Nanoseconds())/1e3)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Finalize(fctx); err != nil {
		fmt.Fprintf(os.Stderr, "allreduce: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
}

// Run performs 1+iters Allreduce calls with Sum on w, checks every
// element of every result and returns the mean time of the timed calls.
func Run(ctx context.Context, w *comm.Comm, length, iters int) (time.Duration, error) {
	send := make([]float64, length)
	recv := make([]float64, length)
	r, p, n := float64(w.Rank()), float64(w.Size()), float64(length)
	for i := range send {
		send[i] = r*n + float64(i)
	}
	var start time.Time
	for k := range 1 + iters {
		if k == 1 {
			start = time.Now()
		}
		if err := comm.Allreduce(ctx, w, send, recv, comm.Sum[float64]()); err != nil {
			return 0, err
		}
		for i, got := range recv {
			if want := n*p*(p-1)/2 + p*float64(i); got != want {
				return 0, fmt.Errorf("allreduce: element %d is %v, want %v", i, got, want)
			}
		}
	}
	return time.Since(start) / time.Duration(iters), nil
}
