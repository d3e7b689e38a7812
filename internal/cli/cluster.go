package cli

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/tracker"
	"github.com/cohort-mp/cohort/member"
)

func init() {
	register(&command{
		name:     "cluster",
		synopsis: "[flags]",
		summary:  "run a job of real processes on this machine, kill some, check the survivors agree",
		help: `Cluster starts n real processes of this program ('cohort node'), each with its
own port on 127.0.0.1 and a fresh random job secret in its environment; each
runs a failure detector and the membership service over authenticated TCP.
Once all of them hold the same first view, cluster kills --kill of them with
SIGKILL at random times (drawn from --seed) within --window, the root (the
first member of the current view) among them with --kill-root, and prints
each view change as the processes report it: one line per view once every
live member has installed it, with its members, who departed, how long after
the kill, and the stabilization time T_s the root measured.

It exits with status 0 only if every survivor ends in the same view and that
view holds exactly the survivors (so it excludes every killed node); after
--timeout it exits with status 1 and says who holds which view. Ctrl-C stops
the whole job. --events-dir keeps each node's event stream (n<id>.jsonl), its
logs (n<id>.log) and the orchestrator's records (job.jsonl).

Examples:
  cohort cluster -n 16 --kill 3
  cohort cluster -n 16 --kill 3 --kill-root --seed 7
  cohort cluster -n 32 --kill 4 --fanout 2 --detector heartbeat --events-dir /tmp/job`,
		run: runClusterCommand,
	})
}

// clusterConfig is what the cluster command's flags set.
type clusterConfig struct {
	n, kill   int
	killRoot  bool
	fanout    int
	detector  runner.Detector
	seed      uint64
	eventsDir string
	window    time.Duration
	timeout   time.Duration
}

// maxClusterNodes bounds -n: every node is a process with a few threads.
const maxClusterNodes = 512

func runClusterCommand(ctx context.Context, c *call) error {
	fs := c.newFlags()
	cfg := clusterConfig{detector: runner.DetectorBRR}
	fs.IntVar(&cfg.n, "n", 16, "number of `processes`")
	fs.IntVar(&cfg.kill, "kill", 3, "how many `processes` to kill with SIGKILL")
	fs.BoolVar(&cfg.killRoot, "kill-root", false, "kill the root (the first member of the current view) as one of them")
	fs.IntVar(&cfg.fanout, "fanout", runner.MemberConfig(0).Fanout, "radix tree `fan-out` a, a power of two")
	fs.TextVar(&cfg.detector, "detector", runner.DetectorBRR, "failure `detector`: brr, dbrr or heartbeat")
	fs.Uint64Var(&cfg.seed, "seed", 1, "`seed` of the kill times and victims (and of the nodes)")
	fs.StringVar(&cfg.eventsDir, "events-dir", "", "keep every node's event stream and logs in `directory`")
	fs.DurationVar(&cfg.window, "window", 2*time.Second, "the kills happen at random times within this `duration` after the first view")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "how long the survivors get to agree after the last kill")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	switch {
	case cfg.n < 2 || cfg.n > maxClusterNodes:
		return usagef("-n %d: want 2 to %d processes", cfg.n, maxClusterNodes)
	case cfg.kill < 0 || cfg.kill >= cfg.n:
		return usagef("--kill %d: want 0 to n−1 = %d (at least one process must survive)", cfg.kill, cfg.n-1)
	case cfg.killRoot && cfg.kill == 0:
		return usagef("--kill-root needs --kill ≥ 1")
	case runner.MemberConfig(cfg.fanout).Validate() != nil:
		return usagef("--fanout %d: want a power of two from 2 to 65536", cfg.fanout)
	case cfg.window < 0 || cfg.timeout <= 0:
		return usagef("--window must not be negative and --timeout must be positive")
	}
	ok, err := runCluster(ctx, cfg, c)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the survivors did not agree")
	}
	return nil
}

// runCluster runs the job; ok reports whether the survivors agreed.
func runCluster(ctx context.Context, cfg clusterConfig, c *call) (ok bool, err error) {
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(c.stdout, format+"\n", args...)
	}
	timeout, parts := runner.LocalConfig(0, cfg.detector, cfg.fanout).DetectionBound(cfg.n)
	say("starting %d processes on 127.0.0.1: fan-out %d, detector %s (declares a crash within about %v: %s)",
		cfg.n, cfg.fanout, cfg.detector, timeout, parts)
	job, err := runner.Start(ctx, runner.JobConfig{
		N: cfg.n, Fanout: cfg.fanout, Detector: cfg.detector, Seed: cfg.seed,
		EventsDir: cfg.eventsDir,
		OnLine:    func(line string) { say("%s", line) },
	})
	if err != nil {
		return false, err
	}
	defer job.Close()
	say("job %s: all %d processes hold the first view", job.ID, cfg.n)

	rng := rand.New(rand.NewPCG(cfg.seed, 0x6b696c6c))
	at := make([]time.Duration, cfg.kill)
	for i := range at {
		if cfg.window > 0 {
			at[i] = time.Duration(rng.Int64N(int64(cfg.window)))
		}
	}
	slices.Sort(at)
	rootKill := -1
	if cfg.killRoot {
		rootKill = rng.IntN(cfg.kill)
	}
	t0 := time.Now()
	var killed []core.NodeID
	for i, d := range at {
		if err := sleepUntil(ctx, t0.Add(d)); err != nil {
			return false, err
		}
		victim := chooseVictim(job, rng, i == rootKill)
		if victim == core.None {
			return false, fmt.Errorf("no process left to kill")
		}
		if err := job.Kill(victim); err != nil {
			return false, err
		}
		killed = append(killed, victim)
	}

	wctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	view, err := job.WaitAgreed(wctx, nil)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	job.Inspect(func(t *tracker.Tracker) {
		for _, l := range t.Flush() {
			say("%s", l)
		}
	})
	if err != nil {
		say("✘ no agreement %v after the last kill: %v", cfg.timeout, err)
		return false, nil
	}
	survivors := cfg.n - len(killed)
	say("✔ all %d survivors hold epoch %s with members [%s]; it excludes every killed process [%s]",
		survivors, member.FormatEpoch(view.Epoch), tracker.FormatIDs(view.Members), tracker.FormatIDs(killed))
	return true, nil
}

// chooseVictim picks the next process to kill: the root of the newest view
// (its first live member) if root, else a random live process other than
// that root.
func chooseVictim(job *runner.Job, rng *rand.Rand, root bool) core.NodeID {
	victim := core.None
	job.Inspect(func(t *tracker.Tracker) {
		var newest member.ViewInstalled
		var live []core.NodeID
		for _, n := range t.Nodes() {
			if n.Live() {
				live = append(live, n.ID)
				if n.View.Epoch > newest.Epoch {
					newest = n.View
				}
			}
		}
		cur := core.None
		for _, id := range newest.Members {
			if slices.Contains(live, id) {
				cur = id
				break
			}
		}
		if root {
			victim = cur
			return
		}
		others := slices.DeleteFunc(live, func(id core.NodeID) bool { return id == cur })
		if len(others) > 0 {
			victim = others[rng.IntN(len(others))]
		}
	})
	return victim
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
