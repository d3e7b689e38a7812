package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// The handshake flood benchmark (`cohort bench flood`): a job of two ranks
// started by package launch over loopback TCP (COHORT_UNIX=off, so that the
// flood and the job meet on the same TCP listener), with their failure
// detector and membership running as in any job. Rank 0 pings rank 1 (8
// bytes each way, [RunFloodRank]) through a quiet phase, then through a
// flooded one, in which this process holds Conns connections open at
// rank 1's listener without the job secret: each sends a hello that claims
// rank 0's node id in the job's id, then nothing (it waits for the rank's
// handshake deadline) or garbage (the rank refuses it at once), and is
// opened again as soon as it is closed. The connections come from Sources
// loopback addresses (127.0.0.10, 127.0.0.11, …; all of 127.0.0.0/8 is
// loopback on Linux), so that the bound per source does not hide the bound
// per listener.
//
// The attack costs the machine too: on a machine of few cores, shared by
// the flooder and the ranks, the flooder's processor time and the kernel's
// work on its connections slow the ranks whatever the ranks do with the
// connections. So each round also runs a control phase: the same flood at
// a listener of this process that closes each connection at once, which
// the ranks never see. The flooded phase over the control phase is what
// the rank itself pays.
//
// The report gives the ping-pong's round trip in each kind of phase
// (median, p99) and their ratios, what the flooding connections met (as this process saw
// them: the rank writes its hello as soon as it takes a connection into
// its handshake, so a connection closed before any byte arrived was shed
// over a bound), the suspicions, failures and exclusions in the ranks'
// event streams (none is right: no rank fails), and the processor time of
// each rank and of this process per phase.

// Flood describes a run of the handshake flood benchmark.
type Flood struct {
	Conns    int           // unauthenticated connections held open at once (default 1000)
	Sources  int           // loopback source addresses they come from, 1 to 240 (default 8)
	Duration time.Duration // the length of each phase, quiet and flooded (default 10 s)
	// Rounds is how many times a quiet phase, a control phase (if
	// Control) and a flooded phase run, in this order (default 2): a
	// shared machine's slow and fast spells, which last seconds to
	// minutes, then fall on every kind of phase alike.
	Rounds int
	// Control runs the control phase (default true): the same flood at a
	// listener of this process that closes each connection at once.
	Control  bool
	Warmup   time.Duration // before the quiet phase, not measured (default 1 s)
	Interval time.Duration // between two round trips of the ping-pong; 0: back to back (default 1 ms)
	// Payload is what a flooding connection sends after its hello:
	// "silent" (nothing), "garbage" (a proof of random bytes) or "mixed"
	// (every other connection each; the default).
	Payload string
	// Program is the executable whose hidden command `flood-worker` runs
	// a rank ("" = this executable).
	Program  string
	Progress io.Writer // progress lines; nil discards
}

// FloodPayloads lists the values of Flood.Payload.
var FloodPayloads = []string{"mixed", "silent", "garbage"}

// floodSourceBase is the last byte of the first source address.
const floodSourceBase = 10

// MaxFloodSources bounds Flood.Sources (127.0.0.10 to 127.0.0.249).
const MaxFloodSources = 240

// DefaultFlood returns the benchmark's defaults.
func DefaultFlood() Flood {
	return Flood{Conns: 1000, Sources: 8, Duration: 10 * time.Second, Rounds: 2, Control: true, Warmup: time.Second,
		Interval: time.Millisecond, Payload: "mixed"}
}

// Validate checks f.
func (f Flood) Validate() error {
	switch {
	case f.Conns < 1 || f.Conns > 100_000:
		return fmt.Errorf("%w: %d connections: want 1 to 100000", ErrFlood, f.Conns)
	case f.Sources < 1 || f.Sources > MaxFloodSources:
		return fmt.Errorf("%w: %d sources: want 1 to %d", ErrFlood, f.Sources, MaxFloodSources)
	case f.Duration <= 0 || f.Duration > time.Hour:
		return fmt.Errorf("%w: phase of %v: want more than 0 and at most 1h", ErrFlood, f.Duration)
	case f.Rounds < 1 || f.Rounds > 100:
		return fmt.Errorf("%w: %d rounds: want 1 to 100", ErrFlood, f.Rounds)
	case f.Warmup < 0 || f.Warmup > time.Hour:
		return fmt.Errorf("%w: warm-up of %v: want 0 to 1h", ErrFlood, f.Warmup)
	case f.Interval < 0 || f.Interval > time.Second:
		return fmt.Errorf("%w: interval of %v: want 0 to 1s", ErrFlood, f.Interval)
	case !slices.Contains(FloodPayloads, f.Payload):
		return fmt.Errorf("%w: payload %q: want one of %s", ErrFlood, f.Payload, strings.Join(FloodPayloads, ", "))
	}
	return nil
}

// FloodLatency summarizes the round trips of one phase.
type FloodLatency struct {
	Samples     int
	Median, P99 time.Duration
	Max         time.Duration
}

// FloodCounts is what the flooding connections met, as the flooder saw it.
type FloodCounts struct {
	Attempted      uint64 // connections opened (dials started)
	DialFailed     uint64 // dials that failed
	Admitted       uint64 // connections that got the rank's hello: taken into its handshake
	Shed           uint64 // connections closed before any byte came: over a bound on handshakes in progress
	Refused        uint64 // admitted, then closed by the rank before its handshake deadline (garbage)
	TimedOut       uint64 // admitted, then closed by the rank at its handshake deadline (silence)
	MaxOpen        int64  // the most connections open at once
	MaxInHandshake int64  // the most connections the rank held in its handshake at once (admitted, not yet closed)
}

// FloodPhase is a kind of phase of the benchmark.
type FloodPhase int

// The kinds of phase, in the order each round runs them.
const (
	PhaseQuiet   FloodPhase = iota // no flood
	PhaseControl                   // the flood at a listener of the flooder's that closes each connection at once
	PhaseFlooded                   // the flood at rank 1
	numFloodPhases
)

func (k FloodPhase) String() string {
	return [...]string{"quiet", "control", "flooded"}[k]
}

// phaseList names kinds, comma-separated.
func phaseList(kinds []FloodPhase) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}

// FloodCPU is the processor time of one process in each kind of phase, as
// a fraction of one CPU (1 = a whole CPU for the phases' length).
type FloodCPU struct {
	Name    string
	ByPhase [numFloodPhases]float64
	Known   bool // false where /proc is not there
}

// FloodReport is a run's result.
type FloodReport struct {
	Config Flood
	Target string // rank 1's listen address
	// Latency holds the round trips of each kind of phase.
	Latency [numFloodPhases]FloodLatency
	// Counts is what the connections at rank 1 met; ControlCounts what
	// those of the control phases met (all shed, by the flooder's
	// listener).
	Counts, ControlCounts FloodCounts
	// Suspicions, Failures and Exclusions are the core.Suspected and
	// core.Failed events and the views without a rank that the ranks'
	// event streams hold; Events lists them. No rank fails, so each is a
	// live rank wrongly suspected.
	Suspicions, Failures, Exclusions int
	Events                           []string
	CPU                              []FloodCPU
	JobErr                           error // how the job ended, if not well

	phases []floodPhase // in time order
}

// Ratio is the median round trip of phase a over that of phase b, and
// the same for p99 (0 where b has none).
func (r *FloodReport) Ratio(a, b FloodPhase) (median, p99 float64) {
	la, lb := r.Latency[a], r.Latency[b]
	if lb.Median > 0 {
		median = float64(la.Median) / float64(lb.Median)
	}
	if lb.P99 > 0 {
		p99 = float64(la.P99) / float64(lb.P99)
	}
	return median, p99
}

// floodFlowGoal is the bound on the flooded latency's ratio to the quiet one.
const floodFlowGoal = 2.0

// Run runs the benchmark.
func (f Flood) Run(ctx context.Context) (*FloodReport, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	progress := f.Progress
	if progress == nil {
		progress = io.Discard
	}
	exe := f.Program
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "cohort-flood-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	samplesPath, stopPath := filepath.Join(dir, "samples"), filepath.Join(dir, "stop")
	phases := 2
	if f.Control {
		phases = 3
	}
	limit := f.Warmup + time.Duration(phases*f.Rounds)*f.Duration + time.Minute
	var nonce [6]byte
	rand.Read(nonce[:])
	jobID := "cohort-flood-" + hex.EncodeToString(nonce[:])
	pids := &pidLines{pids: map[int]int{}, changed: make(chan struct{}, 1)}
	job, err := launch.Start(ctx, launch.Config{N: 2, Program: exe, JobID: jobID,
		Args: []string{"flood-worker", "--samples", samplesPath, "--stop", stopPath,
			"--interval", f.Interval.String(), "--limit", limit.String()},
		Env: []string{"COHORT_UNIX=off"}, EventsDir: dir, Stdout: pids, Stderr: progress,
		Timeout: limit + time.Minute})
	if err != nil {
		return nil, err
	}
	defer job.Stop(errors.New("bench: the flood benchmark ended"))
	rep := &FloodReport{Config: f}
	addrs, err := job.Addrs(ctx)
	if err != nil {
		return nil, err
	}
	rep.Target = addrs[1]
	rankPids, err := pids.wait(ctx, 2, job.Done())
	if err != nil {
		return nil, err
	}
	procs := []floodProc{{name: "rank 0", pid: rankPids[0]}, {name: "rank 1", pid: rankPids[1]}, {name: "flooder (this process)", pid: os.Getpid()}}

	kinds := []FloodPhase{PhaseQuiet, PhaseFlooded}
	control := &flooder{jobID: jobID, payload: f.Payload, sources: f.Sources}
	if f.Control {
		kinds = []FloodPhase{PhaseQuiet, PhaseControl, PhaseFlooded}
		sink, err := newFloodSink()
		if err != nil {
			return nil, err
		}
		defer sink.Close()
		control.target = sink.Addr().String()
	}
	fmt.Fprintf(progress, "bench: flood: warm-up %v, then %d rounds of %v phases (%s) with %d connections from %d sources at rank 1 (%s)…\n",
		f.Warmup, f.Rounds, f.Duration, phaseList(kinds), f.Conns, f.Sources, rep.Target)
	if err := sleepCtx(ctx, f.Warmup); err != nil {
		return nil, err
	}
	flood := &flooder{target: rep.Target, jobID: jobID, payload: f.Payload, sources: f.Sources}
	cpu := make([][numFloodPhases]time.Duration, len(procs)) // by process, by kind of phase
	cpuKnown := true
	for round := 1; round <= f.Rounds; round++ {
		for _, kind := range kinds {
			ph := floodPhase{round: round, kind: kind, from: time.Now()}
			before := cpuTimes(procs)
			var wg sync.WaitGroup
			fctx, stopFlood := context.WithCancel(ctx)
			if fl := map[FloodPhase]*flooder{PhaseControl: control, PhaseFlooded: flood}[kind]; fl != nil {
				for i := range f.Conns {
					wg.Go(func() { fl.run(fctx, i) })
				}
			}
			err := sleepCtx(ctx, f.Duration)
			ph.to = time.Now()
			after := cpuTimes(procs)
			stopFlood()
			wg.Wait()
			if err != nil {
				return nil, err
			}
			for i := range procs {
				if before[i] < 0 || after[i] < 0 {
					cpuKnown = false
					continue
				}
				cpu[i][kind] += after[i] - before[i]
			}
			rep.phases = append(rep.phases, ph)
		}
	}
	rep.Counts, rep.ControlCounts = flood.counts(), control.counts()

	if err := os.WriteFile(stopPath, nil, 0o600); err != nil {
		return nil, err
	}
	if _, err := job.Wait(); err != nil {
		rep.JobErr = err
	}
	span := time.Duration(f.Rounds) * f.Duration
	for i, p := range procs {
		c := FloodCPU{Name: p.name, Known: cpuKnown}
		for _, k := range kinds {
			c.ByPhase[k] = cpu[i][k].Seconds() / span.Seconds()
		}
		rep.CPU = append(rep.CPU, c)
	}
	rep.readEvents(dir)
	samples, err := readFloodSamples(samplesPath)
	if err != nil {
		if rep.JobErr != nil {
			return rep, rep.JobErr
		}
		return rep, err
	}
	for _, k := range kinds {
		rep.Latency[k] = rep.latency(samples, k)
	}
	return rep, nil
}

// floodPhase is one phase of a run, [from, to) on the machine's clock
// (which the ranks share).
type floodPhase struct {
	round    int
	kind     FloodPhase
	from, to time.Time
}

func (p floodPhase) String() string { return fmt.Sprintf("%v %d", p.kind, p.round) }

// phaseAt names the phase that holds t: warm-up before the first, after
// past the last.
func (r *FloodReport) phaseAt(t time.Time) string {
	for _, p := range r.phases {
		if !t.Before(p.from) && t.Before(p.to) {
			return p.String()
		}
	}
	if len(r.phases) == 0 || t.Before(r.phases[0].from) {
		return "warm-up"
	}
	return "after"
}

// latency summarizes the round trips that started in the phases of kind.
func (r *FloodReport) latency(samples []floodSample, kind FloodPhase) FloodLatency {
	var rtts []time.Duration
	for _, s := range samples {
		for _, p := range r.phases {
			if p.kind == kind && !s.at.Before(p.from) && s.at.Before(p.to) {
				rtts = append(rtts, s.rtt)
				break
			}
		}
	}
	return floodLatency(rtts)
}

// floodLatency summarizes round trips.
func floodLatency(rtts []time.Duration) FloodLatency {
	l := FloodLatency{Samples: len(rtts)}
	if len(rtts) == 0 {
		return l
	}
	slices.Sort(rtts)
	l.Median = median(rtts)
	l.P99 = rtts[min(len(rtts)-1, len(rtts)*99/100)]
	l.Max = rtts[len(rtts)-1]
	return l
}

// readEvents counts the suspicions, failures and exclusions in the ranks'
// event streams in dir.
func (r *FloodReport) readEvents(dir string) {
	for rank := range 2 {
		b, err := os.ReadFile(launch.EventsPath(dir, rank))
		if err != nil {
			r.Events = append(r.Events, fmt.Sprintf("rank %d: no event stream (%v)", rank, err))
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			rec, err := record.DecodeRecord(sc.Bytes())
			if err != nil {
				continue
			}
			at := rec.Time.Format("15:04:05.000") + " (" + r.phaseAt(rec.Time) + ")"
			switch e := rec.Event.(type) {
			case core.Suspected:
				r.Suspicions++
				r.Events = append(r.Events, fmt.Sprintf("%s rank %d suspects rank %d", at, rec.Node, e.Node))
			case core.Failed:
				r.Failures++
				r.Events = append(r.Events, fmt.Sprintf("%s rank %d declares rank %d failed", at, rec.Node, e.Node))
			case member.ViewInstalled:
				if len(e.Members) < 2 && len(e.Left) == 0 { // a rank that finished leaves
					r.Exclusions++
					r.Events = append(r.Events, fmt.Sprintf("%s rank %d installs view %d of %v", at, rec.Node, e.Epoch, e.Members))
				}
			}
		}
	}
}

// Write prints the report.
func (r *FloodReport) Write(w io.Writer) {
	f := r.Config
	fmt.Fprintf(w, "# handshake flood: %d unauthenticated connections (%s) from %d sources at rank 1 (%s) over TCP\n",
		f.Conns, f.Payload, f.Sources, r.Target)
	every := "back to back"
	if f.Interval > 0 {
		every = "one every " + f.Interval.String()
	}
	kinds := []FloodPhase{PhaseQuiet, PhaseFlooded}
	if f.Control {
		kinds = []FloodPhase{PhaseQuiet, PhaseControl, PhaseFlooded}
	}
	fmt.Fprintf(w, "# ping-pong rank 0 ↔ rank 1, %d B, %s; rounds of %s phases, %v each: %d\n", FloodMessage, every, phaseList(kinds), f.Duration, f.Rounds)
	fmt.Fprintf(w, "%-18s %9s %12s %12s %12s\n", "phase", "samples", "median µs", "p99 µs", "max µs")
	for _, k := range kinds {
		l := r.Latency[k]
		fmt.Fprintf(w, "%-18s %9d %12.1f %12.1f %12.1f\n", k, l.Samples, micros(l.Median), micros(l.P99), micros(l.Max))
	}
	ratios := [][2]FloodPhase{{PhaseFlooded, PhaseQuiet}}
	if f.Control {
		ratios = append(ratios, [2]FloodPhase{PhaseControl, PhaseQuiet}, [2]FloodPhase{PhaseFlooded, PhaseControl})
	}
	for _, q := range ratios {
		med, p99 := r.Ratio(q[0], q[1])
		fmt.Fprintf(w, "%-18s %9s %12.2f %12.2f\n", q[0].String()+" ÷ "+q[1].String(), "", med, p99)
	}
	c := r.Counts
	fmt.Fprintf(w, "connections at rank 1: %d attempted, %d dials failed, %d taken into the handshake, %d shed at once, %d refused, %d closed at the handshake deadline\n",
		c.Attempted, c.DialFailed, c.Admitted, c.Shed, c.Refused, c.TimedOut)
	fmt.Fprintf(w, "  at most %d open at once, %d of them answered and not yet closed (the rank's bounds on handshakes in progress: %d per listener, %d per source)\n",
		c.MaxOpen, c.MaxInHandshake, tcp.DefaultMaxHandshakes, tcp.DefaultMaxHandshakesPerSource)
	if f.Control {
		fmt.Fprintf(w, "connections in the control phases: %d attempted, %d closed at once by this process\n", r.ControlCounts.Attempted, r.ControlCounts.Shed)
	}
	fmt.Fprintf(w, "suspicions %d, failures declared %d, exclusions %d\n", r.Suspicions, r.Failures, r.Exclusions)
	for _, e := range r.Events {
		fmt.Fprintf(w, "  %s\n", e)
	}
	fmt.Fprintf(w, "CPU (fraction of one CPU in %s phases; %d CPUs):\n", phaseList(kinds), runtime.NumCPU())
	for _, p := range r.CPU {
		fmt.Fprintf(w, "  %-24s", p.Name)
		for i, k := range kinds {
			sep := " → "
			if i == 0 {
				sep = " "
			}
			if p.Known {
				fmt.Fprintf(w, "%s%.2f", sep, p.ByPhase[k])
			} else {
				fmt.Fprintf(w, "%s?", sep)
			}
		}
		fmt.Fprintln(w)
	}
	if r.JobErr != nil {
		fmt.Fprintf(w, "job: %v\n", r.JobErr)
	}
	med, p99 := r.Ratio(PhaseFlooded, PhaseQuiet)
	ok := med > 0 && med <= floodFlowGoal && p99 <= floodFlowGoal && r.Suspicions+r.Failures+r.Exclusions == 0 && r.JobErr == nil
	verdict := "met"
	if !ok {
		verdict = "NOT met"
	}
	fmt.Fprintf(w, "goal (flooded median and p99 within %.0f× quiet, no live rank suspected): %s\n", floodFlowGoal, verdict)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pidLines reads the ranks' "pid RANK PID" lines from their standard
// output.
type pidLines struct {
	mu      sync.Mutex
	pids    map[int]int
	changed chan struct{}
}

func (p *pidLines) Write(b []byte) (int, error) {
	f := strings.Fields(string(b))
	if len(f) == 3 && f[0] == "pid" {
		rank, err1 := strconv.Atoi(f[1])
		pid, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil {
			p.mu.Lock()
			p.pids[rank] = pid
			p.mu.Unlock()
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
	}
	return len(b), nil
}

// wait returns the pids of ranks 0 to n-1 once all have written theirs.
func (p *pidLines) wait(ctx context.Context, n int, done <-chan struct{}) ([]int, error) {
	for {
		p.mu.Lock()
		if len(p.pids) >= n {
			out := make([]int, n)
			for r := range n {
				out[r] = p.pids[r]
			}
			p.mu.Unlock()
			return out, nil
		}
		p.mu.Unlock()
		select {
		case <-p.changed:
		case <-done:
			return nil, errors.New("bench: the flood job ended before its ranks started")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// floodProc is a process whose processor time the report gives.
type floodProc struct {
	name string
	pid  int
}

// cpuTimes reads each process's processor time (user and system) from
// /proc/PID/stat; -1 where it cannot.
func cpuTimes(procs []floodProc) []time.Duration {
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		out[i] = procCPU(p.pid)
	}
	return out
}

// procCPU is a process's processor time, or -1. The clock tick of
// /proc/PID/stat is USER_HZ, 100 on every Linux.
func procCPU(pid int) time.Duration {
	if pid == os.Getpid() {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return -1
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces: count from its ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}

// newFloodSink listens where the ranks do, for the control phases, and
// closes each connection it accepts at once, as a rank sheds one over its
// bounds.
func newFloodSink() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				c.Close()
			}
		}
	}()
	return ln, nil
}

// flooder holds connections open at a rank's listener without the secret.
type flooder struct {
	target, jobID, payload string
	sources                int

	attempted, dialFailed, admitted, shed, refused, timedOut atomic.Uint64
	open, maxOpen, inHandshake, maxInHandshake               atomic.Int64
}

func (fl *flooder) counts() FloodCounts {
	return FloodCounts{Attempted: fl.attempted.Load(), DialFailed: fl.dialFailed.Load(), Admitted: fl.admitted.Load(),
		Shed: fl.shed.Load(), Refused: fl.refused.Load(), TimedOut: fl.timedOut.Load(),
		MaxOpen: fl.maxOpen.Load(), MaxInHandshake: fl.maxInHandshake.Load()}
}

// raise sets m to v if v is larger.
func raise(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// floodRedialPause is how long a connection waits before it dials again
// after a failed dial (a full backlog, no port left): the flood keeps its
// pressure through the connections that do open.
const floodRedialPause = 10 * time.Millisecond

// run is connection i of the flood: it opens, is closed, and opens again
// until ctx ends.
func (fl *flooder) run(ctx context.Context, i int) {
	src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(floodSourceBase+i%fl.sources))}
	d := net.Dialer{LocalAddr: src, Timeout: 3 * time.Second}
	garbage := fl.payload == "garbage" || fl.payload == "mixed" && i%2 == 1
	buf := make([]byte, 512)
	for ctx.Err() == nil {
		fl.attempted.Add(1)
		nc, err := d.DialContext(ctx, "tcp", fl.target)
		if err != nil {
			if ctx.Err() == nil {
				fl.dialFailed.Add(1)
				sleepCtx(ctx, floodRedialPause)
			}
			continue
		}
		raise(&fl.maxOpen, fl.open.Add(1))
		stop := context.AfterFunc(ctx, func() { nc.Close() })
		opened := time.Now()
		fl.hello(nc, garbage)
		got := 0
		for {
			n, err := nc.Read(buf)
			if n > 0 && got == 0 {
				fl.admitted.Add(1)
				raise(&fl.maxInHandshake, fl.inHandshake.Add(1))
			}
			got += n
			if err != nil {
				break
			}
		}
		stop()
		nc.Close()
		fl.open.Add(-1)
		if got > 0 {
			fl.inHandshake.Add(-1)
		}
		if ctx.Err() != nil {
			return
		}
		switch {
		case got == 0:
			fl.shed.Add(1)
		case time.Since(opened) >= tcp.DefaultHandshakeTimeout*9/10:
			fl.timedOut.Add(1)
		default:
			fl.refused.Add(1)
		}
	}
}

// hello writes a hello that claims rank 0's node id in the job, then, if
// garbage, a proof of random bytes: it decodes, and the rank computes the
// proof's HMAC before it refuses the connection, the costliest refusal.
func (fl *flooder) hello(nc net.Conn, garbage bool) {
	h := wire.Hello{Version: wire.Version, JobID: fl.jobID, Node: 0}
	rand.Read(h.Nonce[:])
	fw := wire.NewFrameWriter(nc, 512)
	fw.WriteMessage(wire.Frame{Src: 0, Dst: core.None}, h)
	if garbage {
		var p wire.Proof
		rand.Read(p.MAC[:])
		fw.WriteMessage(wire.Frame{Src: 0, Dst: 1}, p)
	}
	fw.Flush()
}
