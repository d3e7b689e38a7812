// Command ep is the NAS Parallel Benchmark EP over cohort, fault-tolerant:
// ranks may die (rank 0 included) and the survivors recompute their batches;
// the sums are then bit for bit those of a run without failures.
//
//	go run ./cmd/cohort run -n 4 ./examples/npb/ep -- -class W
//	go run ./cmd/cohort run -n 4 --kill 2@300ms ./examples/npb/ep -- -class W
//
// Rank 0 of the surviving ranks prints the sums, the counts and
// VERIFICATION SUCCESSFUL only when they match the official NPB values; the
// exit status is 0 only then.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/examples/internal/appmain"
	"github.com/cohort-mp/cohort/examples/npb/internal/ep"
	"github.com/cohort-mp/cohort/examples/npb/internal/epjob"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	class := fs.String("class", "S", "problem class: S, W, A, B or C")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	var crash crashFlag
	fs.Var(&crash, "crash", "fault injection: RANK@K makes world rank RANK exit abruptly (status 3, no goodbye) after computing K batches; repeatable")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := ep.ClassByName(*class)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, s, done, err := appmain.Start("ep", *timeout, stderr)
	if err != nil {
		return 1
	}
	defer done()
	cfg := epjob.Config{Class: c}
	if len(crash) > 0 {
		cfg.Crash = func(rank, computed int) bool { return crash[rank] == computed }
	}
	res, err := epjob.Run(ctx, s, cfg)
	if errors.Is(err, epjob.ErrCrashed) {
		fmt.Fprintf(stderr, "ep: rank %d: crashing as asked by -crash\n", s.World().Rank())
		os.Exit(3) // no Finalize: the others must detect the death
	}
	if err != nil {
		fmt.Fprintf(stderr, "ep: rank %d: %v\n", s.World().Rank(), err)
		return 1
	}
	if !res.Reporter {
		return 0
	}
	v, verr := ep.Verify(c, res.Sums)
	fmt.Fprintf(stdout, " NAS Parallel Benchmarks (cohort) - EP Benchmark, class %s\n", c.Name)
	fmt.Fprintf(stdout, " Number of random numbers generated: %d\n", uint64(2)<<c.M)
	fmt.Fprintf(stdout, " Ranks: %d at start, %d at the end; %d batches of %d recomputed after failures\n",
		res.Ranks, res.Survivors, res.Recomputed, c.Batches())
	fmt.Fprintf(stdout, " Time: %.3f s   Mop/s: %.2f\n", res.Elapsed.Seconds(), float64(uint64(2)<<c.M)/res.Elapsed.Seconds()/1e6)
	fmt.Fprintf(stdout, " Gaussian pairs: %d\n Sums (NPB 3.3):     sx = %.15e  sy = %.15e\n Sums |.| (NPB 3.4): sx = %.15e  sy = %.15e\n Counts:",
		v.GC, res.Sums.SX, res.Sums.SY, res.Sums.AX, res.Sums.AY)
	for l, q := range res.Sums.Q {
		fmt.Fprintf(stdout, " %d:%d", l, q)
	}
	fmt.Fprintln(stdout)
	if verr != nil {
		fmt.Fprintf(stdout, " %v\n VERIFICATION FAILED\n", verr)
		return 1
	}
	fmt.Fprintf(stdout, " Relative errors: %.1e %.1e %.1e %.1e (tolerance %.0e)\n VERIFICATION SUCCESSFUL\n",
		v.ErrSX, v.ErrSY, v.ErrAX, v.ErrAY, ep.Epsilon)
	return 0
}

// crashFlag is the repeatable -crash RANK@K flag: rank → batches before the
// crash.
type crashFlag map[int]int

func (c *crashFlag) String() string { return fmt.Sprint(map[int]int(*c)) }

func (c *crashFlag) Set(v string) error {
	r, k, ok := strings.Cut(v, "@")
	rank, err1 := strconv.Atoi(r)
	after, err2 := strconv.Atoi(k)
	if !ok || err1 != nil || err2 != nil || rank < 0 || after < 1 {
		return fmt.Errorf("%q: want RANK@BATCHES, e.g. 2@10", v)
	}
	if *c == nil {
		*c = map[int]int{}
	}
	(*c)[rank] = after
	return nil
}
