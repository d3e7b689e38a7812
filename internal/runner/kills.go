package runner

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/tracker"
	"github.com/cohort-mp/cohort/member"
)

// KillConfig describes the scenario of `cohort cluster`: a job of N
// processes; once all hold the first view, Kill of them killed with SIGKILL
// at random times within Window (the root among them if KillRoot); then
// the survivors get Timeout to agree.
type KillConfig struct {
	N, Kill   int
	KillRoot  bool
	Fanout    int
	Detector  Detector
	Seed      uint64 // of the kill times and victims, and of the nodes
	EventsDir string // keep the event streams and logs here ("": a temporary directory)
	Window    time.Duration
	Timeout   time.Duration
}

// RunKills runs the scenario and writes what happens to w, a line per view
// change; ok reports whether every survivor ended in the same view holding
// exactly the survivors.
func RunKills(ctx context.Context, cfg KillConfig, w io.Writer) (ok bool, err error) {
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(w, format+"\n", args...)
	}
	timeout, parts := LocalConfig(0, cfg.Detector, cfg.Fanout).DetectionBound(cfg.N)
	say("starting %d processes on 127.0.0.1: fan-out %d, detector %s (declares a crash within about %v: %s)",
		cfg.N, cfg.Fanout, cfg.Detector, timeout, parts)
	job, err := Start(ctx, JobConfig{
		N: cfg.N, Fanout: cfg.Fanout, Detector: cfg.Detector, Seed: cfg.Seed,
		EventsDir: cfg.EventsDir,
		OnLine:    func(line string) { say("%s", line) },
	})
	if err != nil {
		return false, err
	}
	defer job.Close()
	say("job %s: all %d processes hold the first view", job.ID, cfg.N)

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6b696c6c))
	at := make([]time.Duration, cfg.Kill)
	for i := range at {
		if cfg.Window > 0 {
			at[i] = time.Duration(rng.Int64N(int64(cfg.Window)))
		}
	}
	slices.Sort(at)
	rootKill := -1
	if cfg.KillRoot {
		rootKill = rng.IntN(cfg.Kill)
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

	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
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
		say("✘ no agreement %v after the last kill: %v", cfg.Timeout, err)
		return false, nil
	}
	survivors := cfg.N - len(killed)
	say("✔ all %d survivors hold epoch %s with members [%s]; it excludes every killed process [%s]",
		survivors, member.FormatEpoch(view.Epoch), tracker.FormatIDs(view.Members), tracker.FormatIDs(killed))
	return true, nil
}

// chooseVictim picks the next process to kill: the root of the newest view
// (its first live member) if root, else a random live process other than
// that root.
func chooseVictim(job *Job, rng *rand.Rand, root bool) core.NodeID {
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
