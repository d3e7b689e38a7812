package cli

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
)

func init() {
	registerBench(&benchmark{
		name:    "flood",
		summary: "a rank's ping-pong latency while 1,000 unauthenticated connections flood its listener",
		help: `The flood benchmark measures what connections without the job secret cost a
job. It starts a job of two ranks over loopback TCP (COHORT_UNIX=off, so that
the flood meets the job on the TCP listener), with the failure detector and
membership running as in any job. Rank 0 pings rank 1 with 8-byte messages
(one round trip every --interval) through quiet, control and flooded phases
in turn (--rounds of each, --duration each). In a flooded phase this process holds
--conns connections open at rank 1's listener from --sources loopback
addresses (127.0.0.10, 127.0.0.11, …; all of 127.0.0.0/8 is loopback on
Linux, elsewhere use --sources 1). Each sends a hello that claims rank 0's
node id in the job's id, then nothing (it waits for the rank's handshake
deadline) or a proof of random bytes (the rank refuses it at once), as
--payload says, and is opened again as soon as the rank closes it.

On a machine of few cores the attack costs the machine too: the flooder's
processor time and the kernel's work on its connections slow the ranks
whatever the ranks do. So a control phase (--control, on by default) runs the
same flood at a listener of this process that closes each connection at once,
which the ranks never see: the flooded phase over the control phase is what
the rank itself pays.

The report gives the round trip in each kind of phase (median, p99, max) and
their ratios; what the flooding connections met, as
this process saw them (taken into the rank's handshake: the rank wrote its
hello; shed: closed before any byte, over the transport's bound on handshakes
in progress, 512 per listener and 128 per source address); every suspicion,
failure and exclusion in the ranks' event streams (none is right: no rank
fails); the processor time of each rank and of this process in each phase.
The goal: the flooded median and p99 within 2× the quiet ones, and no live
rank suspected.

Examples:
  cohort bench flood
  cohort bench flood --conns 1000 --sources 8 --duration 10s
  cohort bench flood --payload silent --sources 1   # one source: its bound sheds`,
		run: runBenchFlood,
	})
	register(&command{
		name:     "flood-worker",
		synopsis: "--samples FILE --stop FILE [--interval D] [--limit D]",
		summary:  "one rank of the handshake flood benchmark (started by cohort bench flood)",
		help:     "Flood-worker is one rank of `cohort bench flood`, started by the benchmark through package launch. Rank 0 pings rank 1 over package comm until the stop file exists and writes its round trips to the samples file.",
		hidden:   true,
		run:      runFloodWorker,
	})
}

func runBenchFlood(ctx context.Context, c *call) error {
	f := bench.DefaultFlood()
	fs := c.newFlags()
	fs.IntVar(&f.Conns, "conns", f.Conns, "unauthenticated `connections` held open at once at rank 1")
	fs.IntVar(&f.Sources, "sources", f.Sources, "loopback source `addresses` the connections come from (127.0.0.10 on; 1 to 240)")
	fs.DurationVar(&f.Duration, "duration", f.Duration, "length of each phase, quiet and flooded")
	fs.IntVar(&f.Rounds, "rounds", f.Rounds, "how many `times` a quiet phase then a flooded one run (1 to 100); each phase's figures gather all its rounds")
	fs.BoolVar(&f.Control, "control", f.Control, "run a control phase in each round: the same flood at a listener of this process that closes each connection at once")
	fs.DurationVar(&f.Warmup, "warmup", f.Warmup, "time before the quiet phase, not measured")
	fs.DurationVar(&f.Interval, "interval", f.Interval, "time between two round trips of the ping-pong (0: back to back)")
	fs.StringVar(&f.Payload, "payload", f.Payload, "what a flooding connection sends after its hello: "+strings.Join(bench.FloodPayloads, ", ")+" (mixed: every other connection silent)")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return usagef("%v", strings.TrimPrefix(err.Error(), bench.ErrFlood.Error()+": "))
	}
	f.Progress = c.stderr
	rep, err := f.Run(ctx)
	if rep != nil {
		rep.Write(c.stdout)
	}
	return err
}

func runFloodWorker(ctx context.Context, c *call) error {
	var o bench.FloodWork
	fs := c.newFlags()
	fs.StringVar(&o.SamplesPath, "samples", "", "rank 0 writes its round trips to this `file`")
	fs.StringVar(&o.StopPath, "stop", "", "rank 0 stops once this `file` exists")
	fs.DurationVar(&o.Interval, "interval", time.Millisecond, "time between two round trips")
	fs.DurationVar(&o.Limit, "limit", time.Hour, "rank 0 stops after this long at the latest")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	if o.SamplesPath == "" || o.StopPath == "" {
		return usagef("--samples and --stop are required")
	}
	err := bench.RunFloodRank(ctx, c.stdout, o)
	if errors.Is(err, bench.ErrFlood) {
		return usagef("%v", err)
	}
	return err
}
