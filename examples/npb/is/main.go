// Command is is the NAS Parallel Benchmark IS (integer sort) over cohort:
// the keys are generated in blocks, exchanged by bucket with Alltoall(v) and
// ranked ten times; rank 0 prints VERIFICATION SUCCESSFUL only when the 50
// partial checks and the full check pass, and the exit status is 0 only then.
//
//	go run ./cmd/cohort run -n 4 ./examples/npb/is -- -class W
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cohort-mp/cohort/examples/internal/appmain"
	"github.com/cohort-mp/cohort/examples/npb/internal/intsort"
	"github.com/cohort-mp/cohort/examples/npb/internal/isjob"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("is", flag.ContinueOnError)
	fs.SetOutput(stderr)
	class := fs.String("class", "S", "problem class: S, W, A or B")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c, err := intsort.ClassByName(*class)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, s, done, err := appmain.Start("is", *timeout, stderr)
	if err != nil {
		return 1
	}
	defer done()
	res, err := isjob.Run(ctx, s, c)
	if err != nil {
		fmt.Fprintf(stderr, "is: rank %d: %v\n", s.World().Rank(), err)
		return 1
	}
	if !res.Reporter {
		if res.Report.Err() != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, " NAS Parallel Benchmarks (cohort) - IS Benchmark, class %s\n", c.Name)
	fmt.Fprintf(stdout, " Size: %d keys in [0, %d)   Iterations: %d   Ranks: %d\n", c.NumKeys(), c.MaxKey(), intsort.Iterations, s.World().Size())
	fmt.Fprintf(stdout, " Time: %.3f s   Mop/s: %.2f\n", res.Elapsed.Seconds(), float64(c.NumKeys())*intsort.Iterations/res.Elapsed.Seconds()/1e6)
	fmt.Fprintf(stdout, " Checks passed: %d of %d\n", res.Report.Passed, intsort.Passes)
	if err := res.Report.Err(); err != nil {
		fmt.Fprintf(stdout, " %v\n VERIFICATION FAILED\n", err)
		return 1
	}
	fmt.Fprintln(stdout, " VERIFICATION SUCCESSFUL")
	return 0
}
