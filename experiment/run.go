package experiment

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime/debug"
	"sort"
	"sync"
)

// ErrRunPanicked wraps the value of a panic inside a task, so that a bug in
// one run becomes an error naming the run and its seed instead of a crash.
var ErrRunPanicked = errors.New("experiment: run panicked")

// Task is one independent run of an experiment.
type Task[R any] struct {
	// Key names the run and must be unique within one RunAll call. The
	// run's seed is derived from the experiment's seed and Key only, so
	// the same run gives the same result in any sweep that contains it
	// (a --quick sweep shares its runs with the full one).
	Key string
	// Cost is the run's expected cost relative to the others (0 counts
	// as 1). Costlier runs are started first so that the workers finish
	// together; it never changes the results.
	Cost float64
	// Run does the work. It must be deterministic given seed, must not
	// share mutable state with other tasks, and should return early with
	// ctx.Err() when ctx is cancelled.
	Run func(ctx context.Context, seed uint64) (R, error)
}

// DeriveSeed returns the seed of the run named key in an experiment seeded
// with base: a SplitMix64 finalizer over base and the FNV-1a hash of key, so
// that nearby bases and similar keys give unrelated seeds.
func DeriveSeed(base uint64, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return splitmix(base ^ splitmix(h.Sum64()))
}

func splitmix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

type outcome[R any] struct {
	i   int
	r   R
	err error
}

// RunAll runs the tasks on s.Workers() goroutines and returns their results
// in the order of tasks (not the order they finished in). label names the
// batch on the progress bar. If a task fails, the tasks not yet started are
// skipped and the error of the failed task with the smallest index is
// returned, naming its key and seed so the run can be replayed.
func RunAll[R any](ctx context.Context, s *Session, label string, tasks []Task[R]) ([]R, error) {
	seen := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		if seen[t.Key] {
			return nil, fmt.Errorf("experiment: two tasks share the key %q (their seeds would be equal)", t.Key)
		}
		seen[t.Key] = true
		if t.Run == nil {
			return nil, fmt.Errorf("experiment: task %q has no Run function", t.Key)
		}
	}
	results := make([]R, len(tasks))
	if len(tasks) == 0 {
		return results, nil
	}

	// Start the costliest runs first (ties in task order).
	order := make([]int, len(tasks))
	for i := range order {
		order[i] = i
	}
	cost := func(i int) float64 {
		if c := tasks[i].Cost; c > 0 {
			return c
		}
		return 1
	}
	sort.SliceStable(order, func(a, b int) bool { return cost(order[a]) > cost(order[b]) })

	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	jobs := make(chan int)
	done := make(chan outcome[R])
	workers := min(s.Workers(), len(tasks))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t := tasks[i]
				seed := DeriveSeed(s.Seed(), t.Key)
				r, err := runOne(ctx, t, seed)
				if err != nil {
					err = fmt.Errorf("experiment %s: run %q (seed %d): %w", s.Name(), t.Key, seed, err)
				}
				done <- outcome[R]{i: i, r: r, err: err}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for _, i := range order {
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(done)
	}()

	bar := newProgress(s.opts.Progress, len(tasks), s.Name()+" "+label)
	errs := make([]error, len(tasks))
	failed := false
	for o := range done {
		results[o.i] = o.r
		if o.err != nil {
			errs[o.i] = o.err
			failed = true
			cancel()
		}
		bar.Add(1)
	}
	bar.Finish()
	if failed {
		// A real failure is reported before the cancellations it caused.
		for _, err := range errs {
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				return nil, err
			}
		}
	}
	if err := parent.Err(); err != nil {
		return nil, err
	}
	if failed {
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}

// runOne runs one task, turning a panic into an error.
func runOne[R any](ctx context.Context, t Task[R], seed uint64) (r R, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrRunPanicked, p, debug.Stack())
		}
	}()
	if err := ctx.Err(); err != nil {
		return r, err
	}
	return t.Run(ctx, seed)
}
