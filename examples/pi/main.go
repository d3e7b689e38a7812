// Command pi is the P2P-MPI chapter's Figure 1 program (Genaud and
// Rattanapoka, "P2P-MPI", §1, Figure 1) over package comm: rank 0
// broadcasts the number of intervals, each rank integrates 4/(1+x²) over
// its share of [0, 1] by the midpoint rule (intervals rank+1, rank+1+size,
// …), and a Reduce with Sum gathers the partial sums on rank 0, which
// prints π and the error:
//
//	cohort run -n 8 ./examples/pi
//	Pi is approximately 3.1415926535898757
//	Error is 8.33e-14
//
// -rounds repeats the integration (a Reduce per round), which makes the
// job last long enough to kill a rank in the middle:
//
//	cohort run -n 8 --kill 3@200ms ./examples/pi -- -rounds 1000000
//
// The program does not handle failures: a rank that sees one (an error
// from comm naming the failed rank) prints it and exits with status 1.
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

// pi25DT is π to 25 digits, as in Figure 1.
const pi25DT = 3.141592653589793238462643

func main() {
	intervals := flag.Int64("n", 1_000_000, "number of `intervals` (rank 0's value is broadcast)")
	rounds := flag.Int("rounds", 1, "repeat the integration this many `times`")
	flag.Parse()
	if *intervals < 1 || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "pi: -n and -rounds must be at least 1")
		os.Exit(2)
	}
	ctx := context.Background()
	s, err := comm.Init(ctx)
	if errors.Is(err, launch.ErrNotLaunched) {
		fmt.Fprintln(os.Stderr, "pi: start me with `cohort run -n N ./examples/pi`")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pi:", err)
		os.Exit(1)
	}
	w := s.World()
	pi, err := Pi(ctx, w, *intervals, *rounds)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pi: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
	if w.Rank() == 0 {
		fmt.Printf("Pi is approximately %.16f\n", pi)
		fmt.Printf("Error is %.2e\n", pi-pi25DT)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Finalize(fctx); err != nil {
		fmt.Fprintf(os.Stderr, "pi: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
}

// Pi runs Figure 1 on w: rank 0's interval count is broadcast, and the
// result (valid on rank 0 only) is the last round's sum of the ranks'
// partial integrals.
func Pi(ctx context.Context, w *comm.Comm, intervals int64, rounds int) (float64, error) {
	n := []int64{0}
	if w.Rank() == 0 {
		n[0] = intervals
	}
	if err := comm.Bcast(ctx, w, n, 0); err != nil {
		return 0, err
	}
	h := 1.0 / float64(n[0])
	mypi, pi := []float64{0}, []float64{0}
	for range rounds {
		sum := 0.0
		for i := int64(w.Rank()) + 1; i <= n[0]; i += int64(w.Size()) {
			x := h * (float64(i) - 0.5)
			sum += 4.0 / (1.0 + x*x)
		}
		mypi[0] = h * sum
		if err := comm.Reduce(ctx, w, mypi, pi, comm.Sum[float64](), 0); err != nil {
			return 0, err
		}
	}
	return pi[0], nil
}
