package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/cohort-mp/cohort/experiment/swarm"
)

// swarmCommand is `cohort sim swarm`, reached through `cohort sim` (sim.go
// hands it the arguments after "swarm").
var swarmCommand = &command{
	name:     "sim swarm",
	synopsis: "--protocol " + swarm.Names() + " [--faults partial] [--seeds N] [--from SEED] [--workers W]",
	summary:  "run a protocol's randomized simulation swarm over many seeds",
	helpFunc: func() string {
		var b strings.Builder
		b.WriteString(`Swarm runs a protocol's randomized simulation swarm — faults drawn from each
seed (crashes, recoveries, joins, partitions, cut links, loss, delay spikes),
safety checked on every event, then a liveness phase after everything heals —
on seeds --from, --from+1, …, in parallel, one simulated world per seed. It
prints every failing or stuck seed with the command that replays it, then a
summary. The exit status is 1 if any seed failed or got stuck.

Protocols:
`)
		for _, p := range swarm.Protocols() {
			fmt.Fprintf(&b, "  %-7s %s\n", p.Name, p.Summary)
		}
		fmt.Fprintf(&b, `
Faults:
  --faults partial (member only): %s; no member may be declared failed
  while a path of uncut links still connects it to the one that declared it.
`, swarm.PartialSummary())
		b.WriteString(`
Examples:
  cohort sim swarm --protocol member --seeds 10000
  cohort sim swarm --protocol member --faults partial --seeds 100000
  cohort sim swarm --protocol vsync --seeds 1000 --workers 2 --from 5000
  cohort sim swarm --protocol member --seeds 1 --from 3040358880`)
		return b.String()
	},
}

func runSwarm(ctx context.Context, c *call) error {
	sub := &call{cmd: swarmCommand, stdout: c.stdout, stderr: c.stderr}
	fs := sub.newFlags()
	protocol := fs.String("protocol", "", "the swarm to run: "+swarm.Names())
	seeds := fs.Int("seeds", 1000, "how many seeds")
	from := fs.Uint64("from", 1, "the first seed")
	workers := fs.Int("workers", 0, "seeds run at once (default: GOMAXPROCS)")
	faults := fs.String("faults", "", "the fault set: nothing for the protocol's own, or partial (member only: partial partitions and one-way cuts, over the real detectors)")
	timeout := fs.Duration("seed-timeout", 2*time.Minute, "wall-clock time a seed should take at most; one over it is marked slow and waited for up to five times as long before it is reported stuck")
	if err := sub.parse(fs, c.args[1:], 0); err != nil {
		return err
	}
	if *protocol == "" {
		return usagef("missing --protocol (%s)", swarm.Names())
	}
	if _, ok := swarm.Lookup(*protocol); !ok {
		return usagef("unknown protocol %q (want %s)", *protocol, swarm.Names())
	}
	if *faults != "" && (*faults != swarm.FaultsPartial || *protocol != "member") {
		return usagef("--faults %q: want partial, with --protocol member", *faults)
	}
	bar := newSwarmProgress(c.stderr, *seeds, *protocol)
	opts := swarm.Options{Protocol: *protocol, Faults: *faults, Seeds: *seeds, From: *from, Workers: *workers, SeedTimeout: *timeout,
		OnResult: func(r swarm.Result) {
			if r.Outcome != swarm.Passed {
				bar.clear()
				writeSwarmFailure(c.stdout, r)
			}
			bar.add()
		}}
	sum, err := swarm.Run(ctx, opts)
	bar.finish()
	if errors.Is(err, swarm.ErrOption) {
		return &usageError{msg: err.Error()}
	}
	writeSwarmSummary(c.stdout, sum, *from, *seeds)
	if err != nil {
		return err
	}
	if !sum.OK() {
		return fmt.Errorf("%d of %d seeds failed, %d stuck", sum.Failed, sum.Seeds, sum.Stuck)
	}
	return nil
}

func writeSwarmFailure(w io.Writer, r swarm.Result) {
	msg := r.Err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	fmt.Fprintf(w, "seed %d %s (%s): %s\n  replay: %s\n", r.Seed, r.Outcome, r.Variant, msg, r.Replay)
}

func writeSwarmSummary(w io.Writer, s swarm.Summary, from uint64, requested int) {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Seeds) / s.Elapsed.Seconds()
	}
	done := ""
	if s.Seeds < requested {
		done = fmt.Sprintf(" (interrupted: %d of the %d seeds finished)", s.Seeds, requested)
	}
	fmt.Fprintf(w, "swarm %s: seeds %d–%d%s: %d seeds, %d passed, %d failed, %d stuck",
		s.Protocol, from, from+uint64(requested)-1, done, s.Seeds, s.Passed, s.Failed, s.Stuck)
	if s.Minority > 0 {
		fmt.Fprintf(w, " (%d runs rightly blocked in a minority)", s.Minority)
	}
	fmt.Fprintf(w, "; %.1f s, %.1f seeds/s\n", s.Elapsed.Seconds(), rate)
	if len(s.Slow) > 0 {
		fmt.Fprintf(w, "slow seeds (over --seed-timeout of wall-clock time, then finished; replay one alone to time it): %v\n", s.Slow)
	}
}

// swarmProgress is a progress bar on a terminal, and a line every 5 % of
// the seeds otherwise (a log file gets a readable trail, not a bar).
type swarmProgress struct {
	bar   *progressbar.ProgressBar
	w     io.Writer
	total int
	done  int
	start time.Time
}

func newSwarmProgress(w io.Writer, total int, label string) *swarmProgress {
	p := &swarmProgress{w: w, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok && f != nil && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(f),
			progressbar.OptionSetDescription("swarm "+label),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("seeds"),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetRenderBlankState(true),
		)
	}
	return p
}

func (p *swarmProgress) add() {
	p.done++
	if p.bar != nil {
		_ = p.bar.Add(1)
		return
	}
	step := max(1, p.total/20)
	if p.done%step == 0 || p.done == p.total {
		el := time.Since(p.start).Seconds()
		fmt.Fprintf(p.w, "swarm: %d/%d seeds (%.0f s, %.0f seeds/s)\n", p.done, p.total, el, float64(p.done)/max(el, 1e-9))
	}
}

// clear erases the bar before a failure is printed.
func (p *swarmProgress) clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

func (p *swarmProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
