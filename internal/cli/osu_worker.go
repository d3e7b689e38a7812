package cli

import (
	"context"
	"slices"
	"strconv"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	register(&command{
		name:     "osu-worker",
		synopsis: "latency|bw|allreduce ours|ours-unix|ours-tcp|ours-mac|ours-tls|tcp LOOP SKIP LOOP_LARGE SKIP_LARGE WINDOW SIZE...",
		summary:  "one rank of an OSU-style benchmark (started by cohort bench)",
		help:     "Osu-worker is one rank of `cohort bench p2p|bw|allreduce`, started by the benchmark through package launch. It runs the OSU loops over package comm (ours; ours-unix when COHORT_SHM=off; ours-tcp when COHORT_UNIX=off; ours-mac when COHORT_INTEGRITY=on as well; ours-tls when the job is encrypted) or raw TCP sockets (tcp) and rank 0 prints one \"size figure\" line per size.",
		hidden:   true,
		run:      runOSUWorker,
	})
}

func runOSUWorker(ctx context.Context, c *call) error {
	if len(c.args) < 8 {
		return usagef("want latency|bw|allreduce ours|ours-unix|ours-tcp|ours-mac|ours-tls|tcp LOOP SKIP LOOP_LARGE SKIP_LARGE WINDOW SIZE...")
	}
	o := &bench.OSUWork{Mode: c.args[0], Impl: c.args[1]}
	var nums []int
	for _, a := range c.args[2:] {
		v, err := strconv.Atoi(a)
		if err != nil || v < 0 {
			return usagef("%q is not a count", a)
		}
		nums = append(nums, v)
	}
	o.Loop, o.Skip, o.LoopL, o.SkipL, o.Window, o.Sizes = nums[0], nums[1], nums[2], nums[3], nums[4], nums[5:]
	if o.Mode != "latency" && o.Mode != "bw" && o.Mode != "allreduce" {
		return usagef("unknown mode %q", o.Mode)
	}
	if !slices.Contains([]string{"ours", "ours-unix", "ours-tcp", "ours-mac", "ours-tls", "tcp", "shm"}, o.Impl) {
		return usagef("unknown implementation %q", o.Impl)
	}
	return bench.RunOSURank(ctx, c.stdout, o)
}
