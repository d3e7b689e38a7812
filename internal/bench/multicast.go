package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/workload"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/vsync"
)

// MulticastBenchConfig configures [RunMulticastBench].
type MulticastBenchConfig struct {
	// N is the number of processes (≥ 2).
	N int
	// Options is every node's multicast workload.
	Options workload.MulticastOptions
	// Warmup runs before the steady phase is measured (default 3 s).
	Warmup time.Duration
	// Duration is the steady phase, measured with every node alive.
	Duration time.Duration
	// Kill processes are killed (SIGKILL) after the steady phase, chosen
	// at random among the non-root nodes from Seed; the "kill" phase then
	// runs for After (default: Duration, at least 5 s) and includes the
	// view change.
	Kill  int
	After time.Duration
	// Fanout and Detector of the membership layer (as JobConfig).
	Fanout   int
	Detector runner.Detector
	Seed     uint64
	// EventsDir keeps the nodes' event streams and logs (see JobConfig).
	EventsDir string
	// Timeout bounds the view change after the kill (default 30 s).
	Timeout time.Duration
	// Baseline > 0 first runs a separate job of the same size and load
	// with Options.Raw (plain sends: no order, no stability, no buffers)
	// and measures its steady phase for Baseline: the "raw" phase.
	Baseline time.Duration
	// Log, if not nil, receives progress lines.
	Log io.Writer
}

// MulticastPhase is what one phase of the benchmark measured over the
// nodes that lived through it. Rates come from the nodes' own reports
// (counter differences over the reports' time stamps).
type MulticastPhase struct {
	Name     string
	Nodes    int
	Duration time.Duration // covered by the reports used
	// SentRate is the group's multicasts per second; DeliveredRate the
	// mean, over nodes, of the messages each delivered per second (own
	// included), and DeliveredMBps the same in payload megabytes.
	SentRate      float64
	DeliveredRate float64
	DeliveredMBps float64
	// Latency of other nodes' messages (send → delivery), over all nodes.
	Samples       uint64
	P50, P99, Max time.Duration
	// PeakBuffered and PeakBytes are the largest, over nodes, of the
	// buffered messages and payload bytes: the exact maximum since the
	// node started (vsync.Stats), read at the end of the phase.
	PeakBuffered, PeakBytes int
	// MeanBuffered is the mean over nodes and reports of the messages
	// buffered when the report was taken.
	MeanBuffered float64
	Resent       uint64
	Throttled    uint64
	// For the kill phase: the killed nodes; Flush the longest flush
	// (membership view → vsync.ViewChanged) among the survivors; ViewChange
	// the time from the kill until the last survivor announced the new
	// view; Agreed whether every survivor moving between the same views
	// delivered the same messages (count and digest) in the old one.
	Killed     []core.NodeID
	Flush      time.Duration
	ViewChange time.Duration
	Agreed     bool
	Moves      int // view changes compared
}

// ErrMulticastDisagree is returned when survivors moving between the
// same views delivered different messages in the old one.
var ErrMulticastDisagree = errors.New("bench: survivors delivered different messages in a view")

// ReportOf decodes a record's [record.MulticastReport], if it is one.
func ReportOf(r record.Record) (record.MulticastReport, bool) {
	var m record.MulticastReport
	if r.Type != "record.MulticastReport" {
		return m, false
	}
	raw, ok := r.Event.(json.RawMessage)
	if !ok || json.Unmarshal(raw, &m) != nil {
		return m, false
	}
	return m, true
}

// ViewChangedOf decodes a record's vsync.ViewChanged, if it is one.
func ViewChangedOf(r record.Record) (vsync.ViewChanged, bool) {
	var v vsync.ViewChanged
	if r.Type != "vsync.ViewChanged" {
		return v, false
	}
	raw, ok := r.Event.(json.RawMessage)
	if !ok || json.Unmarshal(raw, &v) != nil {
		return v, false
	}
	return v, true
}

// CheckSameDelivery compares the vsync.ViewChanged records of a job: for
// every pair (previous view, next view), every node that moved between
// them must report the same count and digest. It returns the number of
// (pair, node) moves compared and an error wrapping
// [ErrMulticastDisagree] naming the first difference.
func CheckSameDelivery(records []record.Record) (int, error) {
	type move struct{ from, to uint64 }
	type seen struct {
		node          core.NodeID
		count, digest uint64
	}
	first := map[move]seen{}
	n := 0
	for _, r := range records {
		v, ok := ViewChangedOf(r)
		if !ok || v.Previous == 0 {
			continue
		}
		k := move{v.Previous, v.Epoch}
		n++
		if s, ok := first[k]; !ok {
			first[k] = seen{r.Node, v.Count, v.Digest}
		} else if s.count != v.Count || s.digest != v.Digest {
			return n, fmt.Errorf("%w: moving %d→%d, %v delivered %d messages (digest %x), %v delivered %d (digest %x)",
				ErrMulticastDisagree, v.Previous, v.Epoch, s.node, s.count, s.digest, r.Node, v.Count, v.Digest)
		}
	}
	return n, nil
}

// RunMulticastBench starts cfg.N nodes with the multicast workload,
// measures a steady phase and, if cfg.Kill > 0, a phase in which that many
// nodes are killed.
func RunMulticastBench(ctx context.Context, cfg MulticastBenchConfig) ([]MulticastPhase, error) {
	if cfg.N < 2 || cfg.Kill < 0 || cfg.Kill >= cfg.N-1 {
		return nil, fmt.Errorf("%w: %d nodes, %d to kill", runner.ErrJob, cfg.N, cfg.Kill)
	}
	if err := cfg.Options.Validate(); err != nil {
		return nil, err
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = 3 * time.Second
	}
	if cfg.After == 0 {
		cfg.After = max(cfg.Duration, 5*time.Second)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	all := make([]core.NodeID, cfg.N)
	for i := range all {
		all[i] = core.NodeID(i)
	}
	var phases []MulticastPhase
	if cfg.Baseline > 0 {
		raw := cfg.Options
		raw.Raw = true
		job, err := startMulticastJob(ctx, cfg, raw)
		if err != nil {
			return nil, err
		}
		logf("baseline job (plain sends): warming up for %v, then %v", cfg.Warmup, cfg.Baseline)
		p, err := steadyPhase(ctx, job, "raw", all, cfg.Warmup, cfg.Baseline)
		job.Close()
		if err != nil {
			return nil, err
		}
		phases = append(phases, p)
	}
	job, err := startMulticastJob(ctx, cfg, cfg.Options)
	if err != nil {
		return phases, err
	}
	defer job.Close()
	logf("%d nodes up; warming up for %v (%v), then the steady phase: %v", cfg.N, cfg.Warmup, cfg.Options, cfg.Duration)
	steady, err := steadyPhase(ctx, job, "steady", all, cfg.Warmup, cfg.Duration)
	if err != nil {
		return phases, err
	}
	phases = append(phases, steady)
	if cfg.Kill == 0 {
		return phases, nil
	}

	r := rand.New(rand.NewPCG(cfg.Seed, 0x6b696c6c))
	cands := all[1:]
	r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	victims := slices.Clone(cands[:cfg.Kill])
	slices.Sort(victims)
	outside := map[core.NodeID]bool{}
	var survivors []core.NodeID
	for _, id := range all {
		if !slices.Contains(victims, id) {
			survivors = append(survivors, id)
		}
	}
	for _, v := range victims {
		outside[v] = true
	}
	killAt := time.Now()
	for _, v := range victims {
		if err := job.Kill(v); err != nil {
			return phases, err
		}
	}
	logf("killed %v", victims)
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	view, err := job.WaitAgreed(wctx, outside)
	cancel()
	if err != nil {
		return phases, err
	}
	// Wait until every survivor's application has the new view.
	var announced time.Time
	wctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	done := map[core.NodeID]bool{}
	for from := 0; len(done) < len(survivors); {
		recs, ch := job.Records(from)
		from += len(recs)
		for _, rec := range recs {
			if v, ok := ViewChangedOf(rec); ok && v.Epoch >= view.Epoch && slices.Contains(survivors, rec.Node) && !done[rec.Node] {
				done[rec.Node] = true
				announced = maxTime(announced, rec.Time)
			}
		}
		if len(done) == len(survivors) {
			break
		}
		select {
		case <-ch:
		case <-wctx.Done():
			return phases, fmt.Errorf("%w: %d of %d survivors announced view %d to the application", runner.ErrJob, len(done), len(survivors), view.Epoch)
		}
	}
	logf("view %d: %d survivors, announced %v after the kill", view.Epoch, len(survivors), announced.Sub(killAt).Round(time.Millisecond))
	if err := sleep(ctx, time.Until(killAt.Add(cfg.After))); err != nil {
		return phases, err
	}
	recs, _ := job.Records(0)
	kill := measurePhase("kill", recs, survivors, killAt, time.Now())
	kill.Killed = victims
	kill.ViewChange = announced.Sub(killAt)
	for _, rec := range recs {
		if v, ok := ViewChangedOf(rec); ok && v.Epoch >= view.Epoch && slices.Contains(survivors, rec.Node) {
			kill.Flush = max(kill.Flush, v.Flush)
		}
	}
	var derr error
	kill.Moves, derr = CheckSameDelivery(recs)
	kill.Agreed = derr == nil
	phases = append(phases, kill)
	return phases, derr
}

func startMulticastJob(ctx context.Context, cfg MulticastBenchConfig, o workload.MulticastOptions) (*runner.Job, error) {
	return runner.Start(ctx, runner.JobConfig{
		N: cfg.N, Fanout: cfg.Fanout, Detector: cfg.Detector, Seed: cfg.Seed, EventsDir: cfg.EventsDir,
		Env: []string{workload.MulticastEnv + "=" + o.String()},
	})
}

// steadyPhase waits warmup, then measures a phase of length d.
func steadyPhase(ctx context.Context, job *runner.Job, name string, nodes []core.NodeID, warmup, d time.Duration) (MulticastPhase, error) {
	if err := sleep(ctx, warmup); err != nil {
		return MulticastPhase{}, err
	}
	t0 := time.Now()
	if err := sleep(ctx, d); err != nil {
		return MulticastPhase{}, err
	}
	recs, _ := job.Records(0)
	return measurePhase(name, recs, nodes, t0, time.Now()), nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// measurePhase computes a phase's figures from the reports of nodes whose
// time stamps fall in [from, to]: for each node, the counters' difference
// between its first and last report in the window.
func measurePhase(name string, recs []record.Record, nodes []core.NodeID, from, to time.Time) MulticastPhase {
	p := MulticastPhase{Name: name, Nodes: len(nodes)}
	var hist [record.LatencyBuckets]uint64
	var bufSum, bufN float64
	var span time.Duration
	for _, id := range nodes {
		var first, last *record.MulticastReport
		var firstAt, lastAt time.Time
		for _, r := range recs {
			if r.Node != id || r.Time.Before(from) || r.Time.After(to) {
				continue
			}
			m, ok := ReportOf(r)
			if !ok {
				continue
			}
			if first == nil {
				first, firstAt = &m, r.Time
				continue // its histogram covers the time before the window
			}
			last, lastAt = &m, r.Time
			for i, c := range m.Lat {
				hist[m.LatFrom+i] += c
			}
			bufSum += float64(m.Buffered)
			bufN++
		}
		if first == nil || last == nil {
			continue
		}
		dt := lastAt.Sub(firstAt)
		span = max(span, dt)
		s := dt.Seconds()
		p.SentRate += float64(last.Sent-first.Sent) / s
		p.DeliveredRate += float64(last.Delivered-first.Delivered) / s / float64(len(nodes))
		p.DeliveredMBps += float64(last.DeliveredBytes-first.DeliveredBytes) / s / 1e6 / float64(len(nodes))
		p.PeakBuffered = max(p.PeakBuffered, last.PeakBuffered)
		p.PeakBytes = max(p.PeakBytes, last.PeakBytes)
		p.Resent += last.Resent - first.Resent
		p.Throttled += last.Throttled - first.Throttled
	}
	p.Duration = span
	if bufN > 0 {
		p.MeanBuffered = bufSum / bufN
	}
	for _, c := range hist {
		p.Samples += c
	}
	p.P50 = percentile(hist[:], p.Samples, 0.50)
	p.P99 = percentile(hist[:], p.Samples, 0.99)
	p.Max = percentile(hist[:], p.Samples, 1)
	return p
}

// percentile returns the upper bound of the bucket holding quantile q.
func percentile(hist []uint64, total uint64, q float64) time.Duration {
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for b, c := range hist {
		seen += c
		if seen >= rank {
			return record.LatencyBucketStart(b + 1)
		}
	}
	return record.LatencyBucketStart(len(hist))
}

// WriteMulticastTable prints the phases of a multicast benchmark: a row
// per phase, steady against raw, and what each kill showed.
func WriteMulticastTable(w io.Writer, cfg MulticastBenchConfig, phases []MulticastPhase) {
	if len(phases) == 0 {
		return
	}
	fmt.Fprintf(w, "multicast: %d processes, %g msg/s × %d B each, window %d, %v every %v\n",
		cfg.N, cfg.Options.Rate, cfg.Options.Size, cfg.Options.Window, cfg.Options.Protocol, cfg.Options.Period)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tnodes\tspan\tgroup msg/s\tdeliv/s/node\tMB/s/node\tp50\tp99\tmax\tpeak msgs\tpeak KiB\tmean held\tresent\tthrottled\t")
	for _, p := range phases {
		fmt.Fprintf(tw, "%s\t%d\t%.1fs\t%.0f\t%.0f\t%.2f\t%v\t%v\t%v\t%d\t%.0f\t%.1f\t%d\t%d\t\n",
			p.Name, p.Nodes, p.Duration.Seconds(), p.SentRate, p.DeliveredRate, p.DeliveredMBps,
			roundDuration(p.P50), roundDuration(p.P99), roundDuration(p.Max), p.PeakBuffered, float64(p.PeakBytes)/1024, p.MeanBuffered, p.Resent, p.Throttled)
	}
	tw.Flush()
	var raw, steady *MulticastPhase
	for i := range phases {
		switch phases[i].Name {
		case "raw":
			raw = &phases[i]
		case "steady":
			steady = &phases[i]
		}
	}
	if raw != nil && steady != nil && raw.DeliveredRate > 0 && raw.P50 > 0 && raw.P99 > 0 {
		fmt.Fprintf(w, "steady vs raw: delivered/s ×%.2f, p50 ×%.1f, p99 ×%.1f\n",
			steady.DeliveredRate/raw.DeliveredRate, float64(steady.P50)/float64(raw.P50), float64(steady.P99)/float64(raw.P99))
	}
	for _, p := range phases {
		if p.Name != "kill" {
			continue
		}
		same := "IDENTICAL"
		if !p.Agreed {
			same = "DIFFERENT"
		}
		ids := make([]string, len(p.Killed))
		for i, id := range p.Killed {
			ids[i] = id.String()
		}
		fmt.Fprintf(w, "killed %s: every survivor's application in the new view %v after the kill (longest flush %v); deliveries of the old view across %d view changes: %s\n",
			strings.Join(ids, ","), roundDuration(p.ViewChange), roundDuration(p.Flush), p.Moves, same)
	}
}

// roundDuration rounds d to a precision that suits its size.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}
