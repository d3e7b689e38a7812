package cli

import (
	"context"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	register(&command{
		name:     "idle-worker",
		synopsis: "DURATION",
		summary:  "one idle rank of cohort bench overhead's idle job",
		help:     "Idle-worker is one rank of the idle job of `cohort bench overhead`, started by the benchmark through package launch: it joins the job, waits DURATION between two barriers, and leaves.",
		hidden:   true,
		run:      runIdleWorker,
	})
}

func runIdleWorker(ctx context.Context, c *call) error {
	if len(c.args) != 1 {
		return usagef("want one DURATION")
	}
	d, err := time.ParseDuration(c.args[0])
	if err != nil || d < 0 {
		return usagef("%q is not a duration", c.args[0])
	}
	return bench.RunIdleRank(ctx, d)
}
