package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
	"github.com/cohort-mp/cohort/internal/runner"
)

func init() {
	registerBench(&benchmark{
		name:    "membership",
		summary: "stabilization time T_s of the radix-tree membership (Varma et al.) beside its model",
		help: `Bench runs a benchmark on real processes ('cohort node') over TCP on
127.0.0.1 (or, with --in-process, on hosts inside one process). The
membership benchmark:

For every job size n and fan-out a it starts n processes, measures the
point-to-point latency L by a ping-pong between the root and its first child,
then kills one random non-root process with SIGKILL --samples times (a fresh
process joins after each kill, so every failure happens among n processes).
Each time it reads the stabilization time T_s of the membership paper (the
root receiving the failure report → the root holding every FAILURE_ACK, on
the root's own monotonic clock) and O_cp (the median time a node spends on
the FAILED_NODE message), and the time from the kill until every survivor
installed the new view. The table gives the mean with a 95% confidence
interval (Student t) beside the paper's base model
T_s = 2·L·(H−1) + O_cp·H.

Baseline: the root times tree echoes, a message down the radix tree of the
view and every answer back up (the stabilization's messages along the same
tree, with nothing computed), in the same job, two ways:
  echo once    before each failure, after the same idle wait (--gap,
               default 20 ms) as the failure, one echo alone ("echo" on
               the root's standard input): the floor of T_s in the state a
               failure finds the machine in, with threads asleep and
               caches cold. The goal compares T_s to it.
  echo series  before the first kill, echoes back to back after the
               ping-pong: each finds the loops, threads and caches the
               previous one left busy, a floor no single event after
               idleness reaches; shown for comparison.
T_s/echo is the protocol's cost above the floor. The goal line checks
T_s < 1 ms and T_s ≤ 1.3× the echo once at the largest n.

--report says who reports each failure to the root:
  one  (the default) the paper's experiment, which isolates the protocol:
       its T_s is the stabilization after ONE detector reports the failure.
       The nodes' detectors keep their periodic traffic but postpone every
       verdict by an hour and do not probe a peer whose connection drops
       (so the victim's neighbours do not redial it); once the killed
       process is reaped, the orchestrator tells the victim's parent in
       the radix tree (a "fail <id>" line on its standard input) to
       declare the victim failed.
  all  the detectors decide: every survivor declares the crash within a
       few milliseconds and reports it to the root, so all n processes
       compete for the cores during the stabilization.
The table's header names the mode, and its last column counts the distinct
nodes whose reports reached the root per failure.

--in-process runs the n nodes of each point as n hosts inside the benchmark's
own process instead of n processes: each has its own event loop goroutine
and the stack, codecs and seed 'cohort node' would have, and --transport
says what they talk over:
  mem  (the default) an endpoint each of one in-memory hub (package
       transport/mem): a message is handed from the sender's loop to the
       receiver's, with no system call and no goroutine in between. This
       measures the protocol itself.
  tcp  its own TCP transport listening on 127.0.0.1 (the same
       authenticated TCP through the kernel's loopback, over Unix sockets
       as between the processes of a host). This measures the protocol and
       the kernel's socket path without the kernel waking n processes one
       after another, which sets the floor (the echo column) of the process
       mode on a machine with fewer cores than nodes.
The echo baseline runs over the same transport in the same job. A kill
stops the node's loop and closes its transport without a word (over TCP
its peers see the connections drop, as after a SIGKILL); "fail <id>"
becomes a verdict handed to the parent's loop. In-process runs also give
the processor time per node of a stabilization (from the kill to the
root's Stabilized, the whole process's, per member of the new view) and
of the echoes. The header says which mode and transport ran and with what
GOMAXPROCS.

--cpuprofile FILE (with --in-process only) writes a CPU profile of the
whole run to FILE, for 'go tool pprof': every node's loop, transport and
protocol runs in this process, so the profile shows where the
stabilizations' processor time goes. It covers the start of the hosts,
the ping-pong, the tree echo, every kill and stabilization and every
re-admission; more --samples weigh the stabilizations more. The garbage
collector is off during an in-process run (the n nodes share one heap: a
collection would land in stabilizations, and one forced before each kill
made every idle loop grow its stack again during the stabilization); a
full cycle is forced before a kill only once the heap passes 1 GiB.
Before the first job the heap is grown by 256 MiB, touched and collected,
so that the run's allocations reuse pages the process already has, as a
node's own process, whose collector recycles its heap, does.

Examples:
  cohort bench membership
  cohort bench membership -n 8,16,32,64 --fanout 2,4 --samples 5
  cohort bench membership -n 64 --fanout 4 --detector heartbeat --report all
  cohort bench membership -n 8,16,32,64 --fanout 2,4 --samples 5 --in-process
  cohort bench membership -n 64 --fanout 4 --samples 50 --in-process --cpuprofile ts.prof`,
		run: runBenchMembership,
	})
}

func runBenchMembership(ctx context.Context, c *call) (err error) {
	fs := c.newFlags()
	cfg := bench.BenchConfig{Sizes: []int{8, 16, 32, 64}, Fanouts: []int{2, 4}, Detector: runner.DetectorBRR, Report: bench.ReportOne}
	fs.Var((*intList)(&cfg.Sizes), "n", "comma-separated job `sizes`")
	fs.Var((*intList)(&cfg.Fanouts), "fanout", "comma-separated radix tree `fan-outs` (powers of two)")
	fs.IntVar(&cfg.Samples, "samples", 5, "failures measured per point")
	fs.TextVar(&cfg.Detector, "detector", runner.DetectorBRR, "failure `detector`: brr, dbrr or heartbeat")
	fs.TextVar(&cfg.Report, "report", bench.ReportOne, "who reports a failure: one (the victim's parent, told by the orchestrator; detectors quiet) or all (every survivor's detector)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "`seed` of the victims and of the nodes")
	fs.IntVar(&cfg.PingCount, "ping-count", 200, "round `trips` of the ping-pong that measures L")
	fs.StringVar(&cfg.EventsDir, "events-dir", "", "keep every node's event stream and log in this `directory` (one subdirectory per point)")
	fs.DurationVar(&cfg.SampleTimeout, "timeout", 30*time.Second, "how long one failure may take to be handled")
	fs.DurationVar(&cfg.Gap, "gap", bench.DefaultGap, "idle `wait` before each failure, and before the tree echo measured alone ahead of it")
	fs.BoolVar(&cfg.InProcess, "in-process", false, "run the n nodes as hosts (one loop goroutine each) inside this process instead of n processes")
	fs.StringVar(&cfg.Transport, "transport", runner.TransportMem, "with --in-process, what the hosts talk over: `mem` (one in-memory hub) or tcp (TCP on 127.0.0.1)")
	cpuProfile := fs.String("cpuprofile", "", "with --in-process, write a CPU profile of the whole run to this `file` (go tool pprof)")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	if *cpuProfile != "" && !cfg.InProcess {
		return usagef("--cpuprofile needs --in-process (the nodes run in other processes otherwise)")
	}
	if cfg.Transport != runner.TransportMem && cfg.Transport != runner.TransportTCP {
		return usagef("--transport %q: want mem or tcp", cfg.Transport)
	}
	transportSet := false
	fs.Visit(func(f *flag.Flag) { transportSet = transportSet || f.Name == "transport" })
	if transportSet && !cfg.InProcess {
		return usagef("--transport needs --in-process (processes talk over TCP)")
	}
	for _, n := range cfg.Sizes {
		if n < 3 || n > maxClusterNodes {
			return usagef("-n %d: want 3 to %d processes", n, maxClusterNodes)
		}
	}
	for _, a := range cfg.Fanouts {
		if runner.MemberConfig(a).Validate() != nil {
			return usagef("--fanout %d: want a power of two from 2 to 65536", a)
		}
	}
	switch {
	case cfg.Samples < 2:
		return usagef("--samples %d: want at least 2 (for a confidence interval)", cfg.Samples)
	case cfg.PingCount < 1:
		return usagef("--ping-count %d: want at least 1", cfg.PingCount)
	case cfg.SampleTimeout <= 0:
		return usagef("--timeout must be positive")
	case cfg.Gap <= 0 || cfg.Gap > time.Minute:
		return usagef("--gap %v: want a positive wait of at most a minute", cfg.Gap)
	}
	cfg.Progress = c.stderr
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer func() {
			if perr := stop(); perr != nil && err == nil {
				err = perr
			}
		}()
	}
	start := time.Now()
	points, err := bench.RunBench(ctx, cfg)
	bench.WriteBenchTable(c.stdout, cfg, points)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "(%d points in %.0f s; cohort bench membership %s)\n", len(points), time.Since(start).Seconds(), benchArgs(cfg))
	return nil
}

// benchArgs renders the flags that reproduce a run.
func benchArgs(cfg bench.BenchConfig) string {
	args := fmt.Sprintf("-n %s --fanout %s --samples %d --detector %s --seed %d --report %s --gap %v",
		(*intList)(&cfg.Sizes), (*intList)(&cfg.Fanouts), cfg.Samples, cfg.Detector, cfg.Seed, cfg.Report, cfg.Gap)
	if cfg.InProcess {
		args += " --in-process --transport " + cfg.Transport
	}
	return args
}

// startCPUProfile starts writing this process's CPU profile to the file
// path (created or truncated); stop ends the profile and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	stopProfile, err := bench.StartCPUProfile(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		if err := stopProfile(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}
