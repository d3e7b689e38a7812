// Command resumed is a test program of `cohort run`: like stopped, its
// last rank stops itself (SIGSTOP) once the job has started, and the
// others wait until their views exclude it and finalize. They then exit
// with status 3, so that the launcher does not count their reports and
// leaves the stopped rank alone, as no launcher stops it under SLURM. The
// test runs it again (SIGCONT) once they have ended. Run again, it goes on
// as a program that carries on without failed ranks does: once every
// other rank has failed it prints "rank N: alone" and exits with status 0,
// unless it learns first that it was excluded: it then prints the error
// and exits with status 1. Every rank writes its process id to
// $RESUMED_DIR/pid.RANK as it starts.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := comm.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "resumed:", err)
		os.Exit(1)
	}
	w := s.World()
	last := w.Size() - 1
	pid := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(filepath.Join(os.Getenv("RESUMED_DIR"), "pid."+strconv.Itoa(w.Rank())), []byte(pid), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "resumed:", err)
		os.Exit(1)
	}
	// The stopped rank has talked with every other first, as a rank
	// stopped in the middle of a computation has.
	if w.Rank() == last {
		for r := range last {
			if _, err := w.Recv(ctx, nil, r, 1); err != nil {
				fmt.Fprintf(os.Stderr, "resumed: rank %d: %v\n", w.Rank(), err)
				os.Exit(1)
			}
		}
	} else if err := w.Send(ctx, nil, last, 1); err != nil {
		fmt.Fprintf(os.Stderr, "resumed: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
	if w.Rank() == last {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		for {
			// Nobody sends: the receive fails when a rank fails (until
			// acknowledged) or when the session ends.
			_, err := w.Recv(ctx, nil, comm.AnySource, 0)
			if errors.Is(err, comm.ErrEvicted) || ctx.Err() != nil {
				fmt.Fprintf(os.Stderr, "resumed: rank %d: %v\n", w.Rank(), err)
				os.Exit(1)
			}
			w.AckFailed()
			if len(w.Failed()) == w.Size()-1 {
				fmt.Printf("rank %d: alone\n", w.Rank())
				os.Exit(0)
			}
		}
	}
	select {
	case f := <-s.Failures():
		if f.Rank != last {
			fmt.Fprintf(os.Stderr, "resumed: rank %d: rank %d failed, not the stopped rank %d\n", w.Rank(), f.Rank, last)
			os.Exit(1)
		}
	case <-ctx.Done():
		fmt.Fprintf(os.Stderr, "resumed: rank %d: rank %d was never excluded\n", w.Rank(), last)
		os.Exit(1)
	}
	if err := s.Finalize(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "resumed: rank %d: %v\n", w.Rank(), err)
		os.Exit(1)
	}
	fmt.Printf("rank %d: rank %d excluded\n", w.Rank(), last)
	os.Exit(3)
}
