package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/launch"
)

// The detector's own processor time, without a computation around it: a
// job of idle ranks (Init, a barrier, a wait, a barrier, Finalize) with
// the detector off and on. What the ranks spend beyond the off run is the
// detector's (and the membership's) work alone, which N-Queens' processor
// time, varying by several per cent from run to run with the stealing and
// the machine's load, cannot show at the half-per-cent level.

// RunIdleRank is one rank of the idle job (the hidden command
// `cohort idle-worker`): it joins the job, waits d between two barriers,
// and leaves.
func RunIdleRank(ctx context.Context, d time.Duration) error {
	s, err := comm.Init(ctx)
	if err != nil {
		return err
	}
	w := s.World()
	if err = comm.Barrier(ctx, w); err == nil {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		err = comm.Barrier(ctx, w)
	}
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ferr := s.Finalize(fctx); err == nil {
		err = ferr
	}
	return err
}

// idleOverhead runs the idle job of procs ranks for d with each detector,
// reps times alternated, and writes the processor time per rank-second
// and what the detectors add, as a share of one core.
func idleOverhead(ctx context.Context, w, progress io.Writer, procs []int, d time.Duration, reps int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthe detectors' own processor time: a job of idle ranks (Init, barrier, %v, barrier, Finalize), %d repetitions, configurations alternated\n", d, reps)
	fmt.Fprintf(w, "%5s  %-22s  %14s  %26s\n", "procs", "detector", "cpu per rank", "over off: share of a core")
	for _, p := range procs {
		cpu := map[string][]float64{}
		for rep := range reps {
			order := slices.Clone(overheadDetectors)
			if rep%2 == 1 {
				slices.Reverse(order)
			}
			for _, det := range order {
				job, err := launch.Start(ctx, launch.Config{N: p, Program: exe, Args: []string{"idle-worker", d.String()}, Detector: det,
					Stdout: io.Discard, Stderr: progress, Prefix: true, Timeout: d + 2*time.Minute})
				if err != nil {
					return err
				}
				exits, err := job.Wait()
				if err != nil {
					return fmt.Errorf("idle job of %d ranks, detector %s: %w", p, det, err)
				}
				var sum float64
				for _, x := range exits {
					sum += x.CPU.Seconds()
				}
				fmt.Fprintf(progress, "bench overhead: idle %d procs, %-15s rep %d: cpu %.3f s\n", p, det, rep+1, sum)
				cpu[det] = append(cpu[det], sum/float64(p))
			}
		}
		off := cpu["off"]
		fmt.Fprintf(w, "%5d  %-22s  %11.1f ms  %26s\n", p, overheadLabel("off"), 1000*medianF(off), "")
		for _, det := range overheadDetectors[1:] {
			diffs := make([]float64, reps)
			for i := range diffs {
				diffs[i] = (cpu[det][i] - off[i]) / d.Seconds() * 100
			}
			mean, half := meanCI(diffs)
			fmt.Fprintf(w, "%5d  %-22s  %11.1f ms  %+9.3f%% [%+.3f, %+.3f]\n", p, overheadLabel(det), 1000*medianF(cpu[det]), mean, mean-half, mean+half)
		}
	}
	fmt.Fprintln(w, "cpu per rank = processor time (user + system) of a rank from start to exit, median; share of a core = (on − off) ÷ the wait, per rank, mean [95% CI]")
	return nil
}
