package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/workload"
	"github.com/cohort-mp/cohort/stable"
)

func init() {
	registerBench(&benchmark{
		name:    "multicast",
		summary: "view-synchronous reliable multicast: throughput, latency and stability-driven buffers",
		help: `Bench runs a benchmark on real processes ('cohort node') over TCP on
127.0.0.1. The multicast benchmark:

It starts -n processes, each running the failure detector, the membership
service, a stability detector (package stable, --protocol) and the
view-synchronous reliable multicast (package vsync) under a load generator
that multicasts --rate messages of --size bytes per second. Every process
delivers every message; a message is freed once the stability detector
reports that every member holds it, and a sender stops while --window of
its own messages are unstable.

Baseline: first (unless --baseline 0) a separate job of the same size and
load runs for --baseline with plain sends instead (each message sent once
to every other member and delivered on arrival: no order, no
retransmission, no stability detection, no buffer, no flush), on the same
transport and host loop. Its row, "raw", is the floor the multicast is
compared with.

After --warmup, the steady phase runs for --duration with every process
alive. Then --kill processes (random, never the membership root) get
SIGKILL; the "kill" phase runs for --after from the kill and includes the
detection, the membership view change and the flush, in which the
survivors agree on what the dead delivered before they move on.

For each phase the table gives the multicasts per second of the whole
group, the messages (and payload MB) each process delivered per second,
the delivery latency of other processes' messages (send time stamp in the
payload → delivery, median and 99th percentile within 10%), the peak
number of messages and bytes a process held (exact, since it started),
the mean held at each report, and the retransmissions. The kill phase adds
the time until every survivor's application had the new view, the longest
flush, and whether every survivor delivered the same messages in the old
view (count and digest of each view's deliveries, compared across
survivors; the benchmark fails otherwise).

Examples:
  cohort bench multicast -n 16 --duration 60s --kill 1
  cohort bench multicast -n 8 --rate 500 --size 1024 --duration 20s --kill 0`,
		run: runBenchMulticast,
	})
}

func runBenchMulticast(ctx context.Context, c *call) error {
	fs := c.newFlags()
	o := workload.DefaultMulticastOptions()
	cfg := bench.MulticastBenchConfig{Detector: runner.DetectorBRR}
	fs.IntVar(&cfg.N, "n", 16, "number of `processes`")
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "length of the steady phase")
	fs.DurationVar(&cfg.Warmup, "warmup", 3*time.Second, "time before the steady phase is measured")
	fs.IntVar(&cfg.Kill, "kill", 1, "processes to kill after the steady phase (0: none)")
	fs.DurationVar(&cfg.Baseline, "baseline", 10*time.Second, "length of the baseline run with plain sends (0: none)")
	fs.DurationVar(&cfg.After, "after", 0, "length of the kill phase, from the kill (default: --duration, at least 5s)")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "multicasts per second of each process")
	fs.IntVar(&o.Size, "size", o.Size, "payload `bytes` of a message (at least 16)")
	fs.IntVar(&o.Window, "window", o.Window, "flow-control window: unstable own `messages` a process may have")
	fs.DurationVar(&o.Period, "period", o.Period, "stability round period and resend interval")
	fs.TextVar(&o.Protocol, "protocol", stable.CubeFullDist, "stability `protocol`: coord, fulldist, scoord or cubefulldist")
	fs.IntVar(&cfg.Fanout, "fanout", 4, "membership radix tree fan-out")
	fs.TextVar(&cfg.Detector, "detector", runner.DetectorBRR, "failure `detector`: brr, dbrr or heartbeat")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "`seed` of the victims and of the nodes")
	fs.StringVar(&cfg.EventsDir, "events-dir", "", "keep every node's event stream and log in this `directory`")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	cfg.Options = o
	switch {
	case cfg.N < 2 || cfg.N > maxClusterNodes:
		return usagef("-n %d: want 2 to %d processes", cfg.N, maxClusterNodes)
	case cfg.Kill < 0 || cfg.Kill > cfg.N-2:
		return usagef("--kill %d: want 0 to %d (n-2)", cfg.Kill, cfg.N-2)
	case cfg.Duration <= 0:
		return usagef("--duration must be positive")
	case cfg.Baseline < 0:
		return usagef("--baseline must not be negative")
	case runner.MemberConfig(cfg.Fanout).Validate() != nil:
		return usagef("--fanout %d: want a power of two", cfg.Fanout)
	}
	if err := o.Validate(); err != nil {
		return usagef("%v", err)
	}
	cfg.Log = c.stderr
	start := time.Now()
	phases, err := bench.RunMulticastBench(ctx, cfg)
	bench.WriteMulticastTable(c.stdout, cfg, phases)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "(%.0f s; cohort bench multicast -n %d --duration %v --kill %d --baseline %v --rate %g --size %d --window %d --period %v --protocol %v --seed %d)\n",
		time.Since(start).Seconds(), cfg.N, cfg.Duration, cfg.Kill, cfg.Baseline, o.Rate, o.Size, o.Window, o.Period, o.Protocol, cfg.Seed)
	return nil
}
