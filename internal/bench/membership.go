package bench

import (
	"context"
	"fmt"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/tracker"
	"github.com/cohort-mp/cohort/internal/workload"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/model"
	"github.com/cohort-mp/cohort/topo"
)

// ReportMode says who reports a benchmark's failures to the root.
type ReportMode uint8

// The report modes of [BenchConfig].
const (
	// ReportOne isolates the protocol as the paper's experiment does (its
	// T_s is the stabilization after one detector reports the failure,
	// §7): the nodes run quiet detectors ([Detector.NewQuiet]) and once
	// the killed process is reaped (its teardown is the kernel's work on
	// the survivors' processors, not the protocol's) the orchestrator tells
	// one survivor, the victim's parent in the radix tree, to report it
	// ([runner.Job.InjectFailure]). The default.
	ReportOne ReportMode = iota + 1
	// ReportAll leaves the detection to the nodes' detectors: every
	// survivor's detector declares the crash within a few milliseconds of
	// the others' and reports it to the root, and all n processes run at
	// once during the stabilization.
	ReportAll
)

var reportNames = map[ReportMode]string{ReportOne: "one", ReportAll: "all"}

func (m ReportMode) String() string {
	if s, ok := reportNames[m]; ok {
		return s
	}
	return fmt.Sprintf("report(%d)", uint8(m))
}

// MarshalText implements encoding.TextMarshaler.
func (m ReportMode) MarshalText() ([]byte, error) {
	if _, ok := reportNames[m]; !ok {
		return nil, fmt.Errorf("bench: unknown report mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: "one" or "all".
func (m *ReportMode) UnmarshalText(text []byte) error {
	for k, name := range reportNames {
		if string(text) == name {
			*m = k
			return nil
		}
	}
	return fmt.Errorf("bench: unknown report mode %q (want one or all)", text)
}

func (m ReportMode) orDefault() ReportMode {
	if m == 0 {
		return ReportOne
	}
	return m
}

// BenchConfig configures [RunBench].
type BenchConfig struct {
	// Sizes are the job sizes n and Fanouts the fan-outs a; every pair is
	// one point.
	Sizes, Fanouts []int
	// Samples is the number of failures measured per point (≥ 2 for a
	// confidence interval).
	Samples int
	// Detector is the nodes' failure detector (0: DetectorBRR).
	Detector runner.Detector
	// Report says who reports each failure (0: ReportOne).
	Report ReportMode
	// Seed chooses the victims and seeds the nodes.
	Seed uint64
	// PingCount is the number of round trips of the ping-pong that
	// measures L (default 200).
	PingCount int
	// Command and Env are passed to [runner.JobConfig].
	Command []string
	Env     []string
	// SampleTimeout bounds one failure's handling, from the kill until
	// the survivors agree (default 30 s).
	SampleTimeout time.Duration
	// Progress, if not nil, receives one line per sample.
	Progress io.Writer
	// EventsDir, if not empty, keeps every node's event stream and log
	// there, one subdirectory per point (n<n>-a<a>).
	EventsDir string
	// InProcess runs each point's n nodes as hosts inside this process
	// ([runner.StartInProcess]: one event loop goroutine and one TCP transport on
	// 127.0.0.1 per node, the same stacks, codecs and seeds) instead of
	// n `cohort node` processes ([runner.Start]): the protocol and the TCP stack
	// are measured without waking one process per node. A kill then
	// stops the node's loop and closes its sockets ([runner.InProcessJob.Kill]).
	// Command and Env are not used.
	InProcess bool
	// Gap is how long the job stays idle before each failure, and before
	// the tree echo measured alone ahead of it (default DefaultGap): a
	// stabilization starts from whatever state the machine's idle
	// threads, processors and caches fell into, and so does its floor.
	Gap time.Duration
	// Transport is what in-process hosts talk over: runner.TransportTCP
	// (also the zero value) or runner.TransportMem (one in-memory hub, its
	// direct path from loop to loop). The echo baseline runs over the
	// same transport in the same job.
	Transport string
}

// DefaultGap is BenchConfig.Gap's default: on this kind of machine a
// stabilization takes about as long after 20 ms of idleness as after
// 100 ms, and a third longer than right after other work.
const DefaultGap = 20 * time.Millisecond

func (cfg BenchConfig) gap() time.Duration {
	if cfg.Gap == 0 {
		return DefaultGap
	}
	return cfg.Gap
}

// transport is the transport cfg's nodes use, for headers.
func (cfg BenchConfig) transport() string {
	if cfg.InProcess && cfg.Transport == runner.TransportMem {
		return runner.TransportMem
	}
	return runner.TransportTCP
}

// benchJob is a running job as the membership benchmark drives it: a [runner.Job]
// of processes or an [runner.InProcessJob] of hosts.
type benchJob interface {
	// Records returns the records from index from on and a channel closed
	// when the next one arrives.
	Records(from int) ([]record.Record, <-chan struct{})
	// NumRecords returns the index the next record will have.
	NumRecords() int
	// Inspect calls f with the job's tracker under the job's lock.
	Inspect(f func(t *tracker.Tracker))
	// WaitAgreed waits until the live nodes agree on a view of exactly
	// themselves.
	WaitAgreed(ctx context.Context, outside map[core.NodeID]bool) (member.ViewInstalled, error)
	// Kill stops a node abruptly (its peers see their connections drop).
	Kill(id core.NodeID) error
	// InjectFailure makes reporter declare failed failed, as its detector
	// would.
	InjectFailure(reporter, failed core.NodeID) error
	// StartEcho asks node id for one tree echo over its view
	// (record.EchoOnce).
	StartEcho(id core.NodeID) error
	// Spawn adds a node that joins the running group.
	Spawn(ctx context.Context, o runner.SpawnOptions) error
	Close() error
}

// startBenchJob starts a point's job in the mode cfg asks for.
func startBenchJob(ctx context.Context, cfg BenchConfig, jc runner.JobConfig) (benchJob, error) {
	if cfg.InProcess {
		j, err := runner.StartInProcess(ctx, jc)
		if err != nil {
			return nil, err
		}
		return j, nil
	}
	j, err := runner.Start(ctx, jc)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// BenchSample is one measured failure.
type BenchSample struct {
	Victim  core.NodeID
	Epoch   uint64        // the view that excludes it
	Ts      time.Duration // the root's T_s: report received → every ACK held
	Ocp     time.Duration // median FAILED_NODE handling time over the nodes
	Agreed  time.Duration // SIGKILL → the last survivor installed the view
	Members int           // members of the new view
	// Reporter is the node told to report the failure (ReportOne), or
	// core.None (ReportAll).
	Reporter core.NodeID
	// ReportsFrom are the distinct senders of the failure reports the
	// root received for this view (its [record.Reports] event); empty when the
	// root itself was the only one to declare the failure.
	ReportsFrom []core.NodeID
	// Verdicts counts the core.Failed events about the victim that the
	// nodes' detectors emitted from the kill until the survivors agreed
	// (under ReportOne there must be none: the injected verdict is not a
	// detector's and is not counted).
	Verdicts int
	// CPU is the processor time the whole process used from the kill to
	// the root's Stabilized (in-process only; 0 otherwise): every host's
	// share of the report, the proposal and the ACKs, and whatever else
	// ran meanwhile (the collector, the detectors' periodic traffic).
	CPU time.Duration
	// EchoOnce is the tree echo the root ran over the view alone, after
	// the same idle gap as the failure (BenchConfig.Gap), right before it:
	// this failure's floor. EchoOnceCPU is the processor time the whole
	// process used for it (in-process only; 0 otherwise).
	EchoOnce, EchoOnceCPU time.Duration
	// Hop is the median delay of one tree hop of FAILED_NODE during this
	// stabilization: from the parent having handled (and passed on) the
	// proposal to the child starting to handle it, on the machine's wall
	// clock. It is L as the stabilization met it, under the load of the
	// other processes (the paper's contention model, §7.2, replaces L by
	// such a latency).
	Hop time.Duration
}

// BenchPoint is the result of one (n, a) pair.
type BenchPoint struct {
	N, Fanout int
	// Height is H of the view the failures stabilize, n−1 members.
	Height  int
	Samples []BenchSample
	// PingPong is the round trip measured between node 0 (the root) and
	// node 1 (its first child); L is half its median.
	PingPong record.PingPong
	L        time.Duration
	// Echo is the series of tree echoes the root ran over the n-member
	// view right after the ping-pong, one after the other: the
	// stabilization's messages along the same tree with nothing computed,
	// with every loop, thread and cache kept busy by the previous echo.
	Echo record.TreeEchoTime
	// EchoOnce summarizes the samples' echoes run alone after the same
	// idle gap as their failure (BenchSample.EchoOnce): the floor of T_s
	// in the state a failure finds the machine in.
	EchoOnce Estimate
	// Ts, Ocp, Agreed and Hop summarize the samples.
	Ts, Ocp, Agreed, Hop Estimate
	// CPUPerNode is the median over the samples of BenchSample.CPU per
	// member of the new view, and EchoCPUPerNode the processor time of the
	// tree echoes per echo and member (in-process only; 0 otherwise).
	// EchoOnceCPUPerNode is the median of BenchSample.EchoOnceCPU per
	// member of the view.
	CPUPerNode, EchoCPUPerNode, EchoOnceCPUPerNode time.Duration
	// Reporters is the mean number of distinct nodes whose reports
	// reached the root per failure (len(BenchSample.ReportsFrom)).
	Reporters float64
	// Model is the base model T_s = 2·L·(H−1) + O_cp·H with the measured L
	// and the median O_cp; LoadModel is the same with L replaced by the
	// median hop delay measured during the stabilizations.
	Model, LoadModel time.Duration
	// DetectorTimeout is the detector's configured detection time for n
	// members, and DetectorDesc its parts.
	DetectorTimeout time.Duration
	DetectorDesc    string
}

// RunBench runs the membership benchmark: for each point it starts a job
// of n nodes (processes, or hosts in this process with cfg.InProcess),
// measures L by ping-pong, then Samples times kills a random non-root node
// (SIGKILL, or its in-process equivalent), waits until the survivors agree
// on the view without it, reads T_s from the root's member.Stabilized, and
// admits a new node (NEW_NODE) so that the next failure again happens in n
// nodes. Both modes share every step but the job's start.
func RunBench(ctx context.Context, cfg BenchConfig) ([]BenchPoint, error) {
	if cfg.Samples < 1 {
		return nil, fmt.Errorf("%w: %d samples", runner.ErrJob, cfg.Samples)
	}
	if cfg.PingCount == 0 {
		cfg.PingCount = 200
	}
	if cfg.SampleTimeout == 0 {
		cfg.SampleTimeout = 30 * time.Second
	}
	if cfg.InProcess {
		// See inProcessHeap.
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(2 * inProcessHeap))
		pregrowHeap()
	}
	var points []BenchPoint
	for _, n := range cfg.Sizes {
		for _, a := range cfg.Fanouts {
			p, err := benchPoint(ctx, cfg, n, a)
			if err != nil {
				return points, fmt.Errorf("n = %d, a = %d: %w", n, a, err)
			}
			points = append(points, p)
		}
	}
	return points, nil
}

func benchPoint(ctx context.Context, cfg BenchConfig, n, a int) (BenchPoint, error) {
	pt := BenchPoint{N: n, Fanout: a}
	if n < 3 {
		return pt, fmt.Errorf("%w: a point needs at least 3 nodes", runner.ErrJob)
	}
	h, err := model.TreeHeight(n-1, a)
	if err != nil {
		return pt, err
	}
	pt.Height = h
	pt.DetectorTimeout, pt.DetectorDesc = runner.LocalConfig(0, cfg.Detector, a).DetectionBound(n)
	seed := cfg.Seed ^ uint64(n)<<32 ^ uint64(a)
	job, err := startBenchJob(ctx, cfg, runner.JobConfig{
		N: n, Fanout: a, Detector: cfg.Detector, Seed: seed,
		Command: cfg.Command, Env: cfg.Env, PingCount: cfg.PingCount,
		QuietDetector: cfg.Report.orDefault() == ReportOne,
		EventsDir:     eventsSubdir(cfg.EventsDir, n, a),
		Transport:     cfg.transport(),
	})
	if err != nil {
		return pt, err
	}
	defer job.Close()

	rec, _, err := waitRecord(ctx, job, 0, cfg.SampleTimeout, func(r record.Record) bool { _, ok := r.Event.(record.PingPong); return ok && r.Node == 0 })
	if err != nil {
		return pt, fmt.Errorf("waiting for the ping-pong: %w", err)
	}
	pt.PingPong = rec.Event.(record.PingPong)
	pt.L = pt.PingPong.Median / 2
	pingCPU := rec.CPU
	rec, _, err = waitRecord(ctx, job, 0, cfg.SampleTimeout, func(r record.Record) bool { _, ok := r.Event.(record.TreeEchoTime); return ok && r.Node == 0 })
	if err != nil {
		return pt, fmt.Errorf("waiting for the tree echo: %w", err)
	}
	pt.Echo = rec.Event.(record.TreeEchoTime)
	if echoes := pt.Echo.Count + workload.EchoWarmup; pingCPU > 0 && rec.CPU > pingCPU {
		// The root starts the echoes as it reports the ping-pong.
		pt.EchoCPUPerNode = (rec.CPU - pingCPU) / time.Duration(echoes*pt.Echo.Members)
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(n)<<8|uint64(a)))
	view, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		return pt, err
	}
	next := core.NodeID(n)
	for s := 0; s < cfg.Samples; s++ {
		sample, err := benchSample(ctx, cfg, job, a, view, rng)
		if err != nil {
			return pt, fmt.Errorf("sample %d: %w", s+1, err)
		}
		pt.Samples = append(pt.Samples, sample)
		if cfg.Progress != nil {
			who := "detectors"
			if sample.Reporter != core.None {
				who = "told " + sample.Reporter.String()
			}
			fmt.Fprintf(cfg.Progress, "n=%d a=%d sample %d/%d: killed %v (%s), epoch %s: T_s %s, O_cp %s, hop %s, crash→agreed %s, reports from [%s]\n",
				n, a, s+1, cfg.Samples, sample.Victim, who, member.FormatEpoch(sample.Epoch), us(sample.Ts), us(sample.Ocp), us(sample.Hop), ms(sample.Agreed), tracker.FormatIDs(sample.ReportsFrom))
		}
		if s == cfg.Samples-1 {
			break
		}
		// Back to n members: a new node joins at the bottom of the tree.
		sctx, cancel := context.WithTimeout(ctx, cfg.SampleTimeout)
		err = job.Spawn(sctx, runner.SpawnOptions{ID: next})
		if err == nil {
			view, err = job.WaitAgreed(sctx, nil)
		}
		cancel()
		if err != nil {
			return pt, fmt.Errorf("re-admitting a node after sample %d: %w", s+1, err)
		}
		next++
	}
	var ts, ocp, agreed, hop, cpu, once, onceCPU []time.Duration
	for _, s := range pt.Samples {
		if s.CPU > 0 {
			cpu = append(cpu, s.CPU/time.Duration(s.Members))
		}
		if s.EchoOnceCPU > 0 {
			onceCPU = append(onceCPU, s.EchoOnceCPU/time.Duration(s.Members+1))
		}
		once = append(once, s.EchoOnce)
		ts = append(ts, s.Ts)
		ocp = append(ocp, s.Ocp)
		agreed = append(agreed, s.Agreed)
		hop = append(hop, s.Hop)
		pt.Reporters += float64(len(s.ReportsFrom)) / float64(len(pt.Samples))
	}
	pt.Ts, pt.Ocp, pt.Agreed, pt.Hop = Estimate95(ts), Estimate95(ocp), Estimate95(agreed), Estimate95(hop)
	pt.EchoOnce = Estimate95(once)
	if len(cpu) > 0 {
		pt.CPUPerNode = Median(cpu)
	}
	if len(onceCPU) > 0 {
		pt.EchoOnceCPUPerNode = Median(onceCPU)
	}
	if pt.Model, err = model.StabilizationTime(pt.L, pt.Ocp.Median, pt.Height); err != nil {
		return pt, err
	}
	pt.LoadModel, err = model.StabilizationTime(max(pt.Hop.Median, 0), pt.Ocp.Median, pt.Height)
	return pt, err
}

// inProcessHeap is the heap above which an in-process run collects
// garbage, between samples. The n nodes share one heap (with the collector
// off, a run of ten samples at n = 64 peaks at 66 MB resident over TCP):
// a collection that starts during a stabilization takes
// a quarter of the cores and assists from every loop, and a collection
// forced before each kill, as this benchmark did, halves the stack of
// every idle host loop, each of which then copies its stack back up
// during the stabilization (a quarter of its processor time at n = 64).
// n processes, whose background allocates nothing and whose collectors
// therefore rarely run, suffer neither. So the collector is off during an
// in-process run (debug.SetGCPercent(-1), with a memory limit of twice
// this as a guard) and a full cycle is forced before a kill only once the
// heap has passed this.
const inProcessHeap = 1 << 30

// heapReserve is how much heap an in-process run grows, touches and frees
// before its first job (pregrowHeap).
const heapReserve = 256 << 20

// pregrowHeap grows the heap by heapReserve, touching every page, and
// collects it: the run's allocations then reuse pages the process already
// has. With the collector off, every allocation of a stabilization
// otherwise took memory the process had never touched, and the kernel's
// first-touch fault of each page (3.3 µs here, about 75 per failure at
// n = 64) was a cost no node pays in its own process, whose collector
// recycles its heap. The freed pages stay: with the collector off the
// runtime returns memory to the system only near the memory limit.
func pregrowHeap() {
	b := make([]byte, heapReserve)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	b = nil
	runtime.GC()
}

// benchSample kills one random non-root member of view (a radix tree of
// fan-out a) and measures the view change that excludes it.
func benchSample(ctx context.Context, cfg BenchConfig, job benchJob, a int, view member.ViewInstalled, rng *rand.Rand) (BenchSample, error) {
	pos := 1 + rng.IntN(len(view.Members)-1)
	victim := view.Members[pos]
	s := BenchSample{Victim: victim, Reporter: core.None}
	if cfg.InProcess {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > inProcessHeap {
			runtime.GC()
		}
	}
	// This failure's floor: one tree echo from the same idle state.
	if err := sleep(ctx, cfg.gap()); err != nil {
		return s, err
	}
	var err error
	if s.EchoOnce, s.EchoOnceCPU, err = echoOnce(ctx, cfg, job, view); err != nil {
		return s, err
	}
	if err := sleep(ctx, cfg.gap()); err != nil {
		return s, err
	}
	from := job.NumRecords()
	var killedAt time.Time
	if err := job.Kill(victim); err != nil {
		return s, err
	}
	if cfg.Report.orDefault() == ReportOne {
		tree, err := topo.NewRadix(len(view.Members), runner.MemberConfig(a).Fanout)
		if err != nil {
			return s, err
		}
		s.Reporter = view.Members[tree.Parent(pos)]
		if err := job.InjectFailure(s.Reporter, victim); err != nil {
			return s, err
		}
	}
	job.Inspect(func(t *tracker.Tracker) { killedAt = t.Node(victim).KilledAt })
	sctx, cancel := context.WithTimeout(ctx, cfg.SampleTimeout)
	defer cancel()
	// The survivors cannot agree before they have written a record since
	// the kill: the orchestrator checks nothing until then, so that its
	// check does not take a core from the stabilization.
	if _, changed := job.Records(job.NumRecords()); changed != nil {
		select {
		case <-changed:
		case <-sctx.Done():
		}
	}
	if _, err := job.WaitAgreed(sctx, nil); err != nil {
		return s, err
	}
	recs, _ := job.Records(from)
	// The view change of this failure: the first view installed after the
	// kill that excludes the victim.
	for _, r := range recs {
		if v, ok := r.Event.(member.ViewInstalled); ok && !slices.Contains(v.Members, victim) {
			s.Epoch = v.Epoch
			break
		}
	}
	if s.Epoch == 0 {
		return s, fmt.Errorf("%w: no view excluding %v", runner.ErrJob, victim)
	}
	want := slices.DeleteFunc(slices.Clone(view.Members), func(id core.NodeID) bool { return id == victim })
	var es tracker.EpochState
	job.Inspect(func(t *tracker.Tracker) { es = *t.Epoch(s.Epoch) })
	if !slices.Equal(es.Members, want) {
		return s, fmt.Errorf("%w: view %s has members [%s], want [%s] (a live node was excluded: the machine is too loaded for the detector's timing)",
			runner.ErrJob, member.FormatEpoch(s.Epoch), tracker.FormatIDs(es.Members), tracker.FormatIDs(want))
	}
	if es.Stabilized == nil {
		return s, fmt.Errorf("%w: the root of view %s reported no stabilization", runner.ErrJob, member.FormatEpoch(s.Epoch))
	}
	s.Ts = es.Stabilized.At - es.Stabilized.Began
	s.Members = len(es.Members)
	s.Agreed = es.Last.Sub(killedAt)
	var took []time.Duration
	done := map[core.NodeID]time.Time{} // when each node had passed the proposal on
	var handled []record.Record
	root := member.EpochRoot(s.Epoch)
	var killCPU time.Duration
	for _, r := range recs {
		switch e := r.Event.(type) {
		case record.Killed:
			if r.Node == victim {
				killCPU = r.CPU
			}
		case member.Stabilized:
			if e.Epoch == s.Epoch && r.Node == root && killCPU > 0 && r.CPU > killCPU {
				s.CPU = r.CPU - killCPU
			}
		case core.Failed:
			if e.Node == victim {
				s.Verdicts++
			}
		case record.Reports:
			if e.Epoch == s.Epoch && r.Node == root {
				s.ReportsFrom = e.From
			}
		case record.ProcessTime:
			if e.Epoch == s.Epoch && e.Kind == member.KindName(member.KindFailedNode) {
				took = append(took, e.Took)
				done[r.Node] = e.Began(r).Add(e.Took)
				handled = append(handled, r)
			}
		case member.StabilizationStarted:
			if e.Epoch == s.Epoch && r.Node == member.EpochRoot(s.Epoch) {
				done[r.Node] = r.Time // the root sends as it starts
			}
		}
	}
	if s.Reporter != core.None && s.Verdicts > 0 {
		return s, fmt.Errorf("%w: %d detector verdict(s) about %v although the detectors are quiet (--report one)", runner.ErrJob, s.Verdicts, victim)
	}
	if len(took) == 0 {
		return s, fmt.Errorf("%w: no node reported handling FAILED_NODE of view %s", runner.ErrJob, member.FormatEpoch(s.Epoch))
	}
	s.Ocp = Median(took)
	var hops []time.Duration
	for _, r := range handled {
		e := r.Event.(record.ProcessTime)
		if parent, ok := done[e.From]; ok {
			hops = append(hops, e.Began(r).Sub(parent))
		}
	}
	s.Hop = Median(hops)
	return s, nil
}

// echoOnce has the root of view run one tree echo over it and returns its
// time and, in-process, the processor time the process used meanwhile.
func echoOnce(ctx context.Context, cfg BenchConfig, job benchJob, view member.ViewInstalled) (took, cpu time.Duration, err error) {
	root := view.Members[0]
	from := job.NumRecords()
	var before time.Duration
	if cfg.InProcess {
		before = runner.ProcessCPU()
	}
	if err := job.StartEcho(root); err != nil {
		return 0, 0, err
	}
	r, _, err := waitRecord(ctx, job, from, cfg.SampleTimeout, func(r record.Record) bool {
		_, ok := r.Event.(record.EchoOnce)
		return ok && r.Node == root
	})
	if err != nil {
		return 0, 0, fmt.Errorf("waiting for a tree echo: %w", err)
	}
	e := r.Event.(record.EchoOnce)
	if e.Err != "" {
		return 0, 0, fmt.Errorf("%w: %v refused a tree echo: %s", runner.ErrJob, root, e.Err)
	}
	if before > 0 && r.CPU > before {
		cpu = r.CPU - before
	}
	return e.Took, cpu, nil
}

// waitRecord waits for the first record from index from on that match
// accepts, for at most timeout.
func waitRecord(ctx context.Context, job benchJob, from int, timeout time.Duration, match func(record.Record) bool) (record.Record, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		recs, changed := job.Records(from)
		for i, r := range recs {
			if match(r) {
				return r, from + i, nil
			}
		}
		from += len(recs)
		select {
		case <-changed:
		case <-ctx.Done():
			return record.Record{}, from, ctx.Err()
		}
	}
}

// WriteBenchTable writes the points as a table, followed by the check of
// the goal T_s < 1 ms at the largest n.
func WriteBenchTable(w io.Writer, cfg BenchConfig, points []BenchPoint) {
	if len(points) == 0 {
		return
	}
	det := runner.DetectorOrDefault(cfg.Detector)
	fmt.Fprintf(w, "Membership stabilization, %s, detector %s, %d failure(s) per point, mean ± 95%% CI (Student t).\n", BenchMode(cfg), det, cfg.Samples)
	kill, nodes := "SIGKILL", "processes"
	if cfg.InProcess {
		kill, nodes = "kill (loop stopped, sockets closed)", "hosts"
		tr := "its own TCP transport on 127.0.0.1"
		if cfg.transport() == runner.TransportMem {
			kill = "kill (loop stopped, endpoint closed)"
			tr = "an endpoint of one in-memory hub (transport/mem: a frame goes from the sender's loop to the receiver's, no system call)"
		}
		fmt.Fprintf(w, "In-process: each node its own host loop goroutine and %s (stack, codecs and seed of cohort node); the garbage collector is off (the nodes share one heap), a full cycle is forced before a kill only past %d MiB of heap; the heap is grown by %d MiB and collected first, so that allocations reuse touched pages.\n", tr, inProcessHeap>>20, heapReserve>>20)
	}
	switch cfg.Report.orDefault() {
	case ReportOne:
		fmt.Fprintf(w, "Reports: one (--report one): quiet detectors (no verdicts, no probes on dropped connections); after each %s the victim's parent alone is told to declare it failed (the paper's experiment).\n", kill)
	default:
		fmt.Fprintf(w, "Reports: all (--report all): every survivor's %s detector declares the crash and reports it; all n %s compete for the cores.\n", det, nodes)
	}
	fmt.Fprintf(w, "T_s: root receives the failure report → root holds every FAILURE_ACK (member.Stabilized, the root's monotonic clock).\n")
	fmt.Fprintf(w, "Model: T_s = 2·L·(H−1) + O_cp·H (paper §4), H for the n−1 members left; L = ½ median ping-pong RTT root↔child in the same job,\n")
	fmt.Fprintf(w, "O_cp = median FAILED_NODE handling per node. Load model: the same with L = the median tree hop measured during the stabilizations.\n")
	fmt.Fprintf(w, "Echo (baseline, same job): time for a message to go down the radix tree of the n-member view and every answer to come back up\n")
	fmt.Fprintf(w, "(tree echo: the stabilization's messages along the same tree, nothing computed); T_s/echo is the protocol's cost over that floor.\n")
	fmt.Fprintf(w, "Echo once: before each failure, one echo after the failure's idle gap of %v, from the same state (median). Echo series: %d+ echoes back to back after the ping-pong (median),\n", cfg.gap(), workload.EchoWarmup)
	fmt.Fprintf(w, "each finding the loops, threads and caches the previous one left busy: a floor no single event after idleness reaches.\n")
	if cfg.InProcess {
		fmt.Fprintf(w, "CPU/node: the process's processor time from the kill to the root's Stabilized per member of the new view (median), per echo once and per echo of the series, per member.\n")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "n\ta\tH\tT_s (ms)\tmin\techo once (ms)\tT_s/echo once\techo series (ms)\tT_s/echo series\tCPU/node (µs)\techo once CPU/node (µs)\techo series CPU/node (µs)\tmodel (ms)\tL (µs)\tO_cp (µs)\thop (µs)\tload model (ms)\tcrash→agreed (ms)\tdetector timeout (ms)\treporters\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%.3f\t%.3f\t%.2f\t%.3f\t%.2f\t%s\t%s\t%s\t%.3f\t%.1f\t%.1f\t%.0f\t%.3f\t%s\t%.0f\t%.1f\t\n",
			p.N, p.Fanout, p.Height, pm(p.Ts, 1e6, "%.3f"), msf(p.Ts.Min), msf(p.EchoOnce.Median), p.overOnce(), msf(p.Echo.Median), p.overSeries(),
			usOrDash(p.CPUPerNode), usOrDash(p.EchoOnceCPUPerNode), usOrDash(p.EchoCPUPerNode), msf(p.Model),
			float64(p.L)/1e3, float64(p.Ocp.Median)/1e3, float64(p.Hop.Median)/1e3, msf(p.LoadModel),
			pm(p.Agreed, 1e6, "%.0f"), msf(p.DetectorTimeout), p.Reporters)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, p := range points {
		if p.N == points[0].N {
			fmt.Fprintf(w, "detector timeout at n = %d: %s\n", p.N, p.DetectorDesc)
			break
		}
	}
	maxN := 0
	for _, p := range points {
		maxN = max(maxN, p.N)
	}
	var parts []string
	met := true
	for _, p := range points {
		if p.N == maxN {
			parts = append(parts, fmt.Sprintf("a = %d: %.3f ms, %.2f× the echo once, %.2f× the echo series", p.Fanout, msf(p.Ts.Mean), p.overOnce(), p.overSeries()))
			met = met && p.Ts.Mean < time.Millisecond && p.overOnce() <= goalOverEcho
		}
	}
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	mode := "processes"
	if cfg.InProcess {
		mode = "in-process, " + cfg.transport()
	}
	fmt.Fprintf(w, "goal T_s < 1 ms and ≤ %.1f× the echo once at n = %d (--report %s, %s): %s (%s)\n", goalOverEcho, maxN, cfg.Report.orDefault(), mode, verdict, strings.Join(parts, "; "))
}

// goalOverEcho is the goal's bound on T_s over its floor, the echo once.
const goalOverEcho = 1.3

// overOnce is the median T_s over the median echo once (NaN if unmeasured).
func (p BenchPoint) overOnce() float64 { return ratio(p.Ts.Median, p.EchoOnce.Median) }

// overSeries is the median T_s over the echo series' median.
func (p BenchPoint) overSeries() float64 { return ratio(p.Ts.Median, p.Echo.Median) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// BenchMode describes how cfg runs the nodes, for a table's header:
// "in-process: n hosts in one OS process, GOMAXPROCS=2, real TCP on
// loopback" or "n processes (cohort node, GOMAXPROCS=1 each), real TCP on
// loopback".
func BenchMode(cfg BenchConfig) string {
	if cfg.InProcess {
		if cfg.transport() == runner.TransportMem {
			return fmt.Sprintf("in-process: n hosts in one OS process, GOMAXPROCS=%d, in-memory transport", runtime.GOMAXPROCS(0))
		}
		return fmt.Sprintf("in-process: n hosts in one OS process, GOMAXPROCS=%d, real TCP on loopback", runtime.GOMAXPROCS(0))
	}
	procs := "GOMAXPROCS=1" // what Start gives every node unless told otherwise
	for _, kv := range slices.Concat(os.Environ(), cfg.Env) {
		if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
			procs = "GOMAXPROCS=" + v
		}
	}
	return fmt.Sprintf("n processes (cohort node, %s each), real TCP on loopback", procs)
}

// pm renders an estimate as "mean ± half" in the given unit.
func pm(e Estimate, unit float64, format string) string {
	if e.N < 2 || e.HalfCI == time.Duration(math.MaxInt64) {
		return fmt.Sprintf(format, float64(e.Mean)/unit)
	}
	return fmt.Sprintf(format+" ± "+format, float64(e.Mean)/unit, float64(e.HalfCI)/unit)
}

func msf(d time.Duration) float64 { return float64(d) / 1e6 }

// usOrDash renders d in µs, or "–" when it was not measured (0).
func usOrDash(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(d)/1e3)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

// eventsSubdir is where the point (n, a) keeps its event streams, or "".
func eventsSubdir(dir string, n, a int) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, fmt.Sprintf("n%d-a%d", n, a))
}
