package experiment

import (
	"context"
	"fmt"
)

// runSamples runs samples independent runs of every point of a sweep with
// RunAll and returns, for each point in order, its results in sample order.
// The run of sample i of point p is named key(p) + "/crash=i" (the name
// fixes its seed, see Task.Key) and costs cost(p) (see Task.Cost).
func runSamples[P, R any](ctx context.Context, s *Session, label string, points []P, samples int,
	key func(p P) string, cost func(p P) float64, run func(ctx context.Context, seed uint64, p P) (R, error)) ([][]R, error) {
	tasks := make([]Task[R], 0, len(points)*samples)
	for _, p := range points {
		prefix, c := key(p), cost(p)
		for i := range samples {
			tasks = append(tasks, Task[R]{
				Key:  fmt.Sprintf("%s/crash=%d", prefix, i),
				Cost: c,
				Run: func(ctx context.Context, seed uint64) (R, error) {
					return run(ctx, seed, p)
				},
			})
		}
	}
	res, err := RunAll(ctx, s, label, tasks)
	if err != nil {
		return nil, err
	}
	out := make([][]R, len(points))
	for i := range points {
		out[i] = res[i*samples : (i+1)*samples : (i+1)*samples]
	}
	return out, nil
}
