// Command stopped is a test program of `cohort run`: a comm job whose last
// rank stops itself (SIGSTOP) once the job has started and never runs
// again on its own. The others wait until their views exclude it, then
// finalize and exit with status 0, leaving nobody to tell it that it was
// excluded. Run it with `cohort run -n N ./testdata/stopped`.
package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := comm.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stopped:", err)
		os.Exit(1)
	}
	w := s.World()
	last := w.Size() - 1
	if w.Rank() == last {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		// Run again (by a SIGCONT), it goes on as if nothing happened:
		// its own views decide what becomes of it.
		<-ctx.Done()
		os.Exit(1)
	}
	select {
	case f := <-s.Failures():
		if f.Rank != last {
			fmt.Fprintf(os.Stderr, "stopped: rank %d: rank %d failed, not the stopped rank %d\n", w.Rank(), f.Rank, last)
			os.Exit(1)
		}
	case <-ctx.Done():
		fmt.Fprintf(os.Stderr, "stopped: rank %d: rank %d was never excluded\n", w.Rank(), last)
		os.Exit(1)
	}
	if err := s.Finalize(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "stopped: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
	fmt.Printf("rank %d: rank %d excluded\n", w.Rank(), last)
}
