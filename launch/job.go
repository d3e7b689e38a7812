package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Job errors.
var (
	// ErrConfig: a Config is invalid (the message names the field).
	ErrConfig = errors.New("launch: bad job")
	// ErrStart: a rank's process could not be started.
	ErrStart = errors.New("launch: cannot start the program")
	// ErrTimeout: the job ran longer than Config.Timeout and was stopped.
	ErrTimeout = errors.New("launch: the job timed out")
	// ErrNotRunning: Kill or KillAt named a rank whose process has ended.
	ErrNotRunning = errors.New("launch: the rank is not running")
)

// Kill is a crash to inject: SIGKILL to Rank, After the job's start,
// which is the moment every rank has registered with the rendezvous:
// the time a Go program takes to load and the ranks to find each other
// varies from run to run, and a crash before the job exists would only
// test the launcher's abort.
type Kill struct {
	Rank  int
	After time.Duration
}

// Config describes a job of N processes of one program on this machine.
type Config struct {
	// N is the number of ranks, 1 to MaxSize.
	N int
	// Program is the executable (a path, or a name looked up in PATH) and
	// Args its arguments; every rank runs the same command line.
	Program string
	Args    []string
	// Dir is the ranks' working directory ("" = the launcher's).
	Dir string
	// Env holds extra environment entries ("NAME=value"). Each rank's
	// environment is the launcher's without its bootstrap variables (the
	// Env* constants), then Env, then the rank's bootstrap.
	Env []string
	// EventsDir, if not "", asks every rank for its node's event stream:
	// rank r gets EnvEvents=EventsDir/rank-r.jsonl (see [EventsPath]),
	// which package comm creates and fills with JSON lines
	// (host.EventLine). The directory must exist.
	EventsDir string
	// JobID names the job ("" = "cohort-" and 12 random hex digits).
	JobID string
	// Fanout and Detector are passed to the ranks (COHORT_FANOUT,
	// COHORT_DETECTOR); zero values leave the ranks' defaults.
	Fanout   int
	Detector string
	// Stdout and Stderr receive the ranks' standard output and error,
	// line by line, never two lines mixed; nil discards.
	Stdout, Stderr io.Writer
	// Prefix starts every forwarded line with "[rank] ".
	Prefix bool
	// Kills are crashes to inject, each counted from the end of the
	// rendezvous (see [Kill]). A program that never registers (one that
	// does not use package comm) never reaches that moment: its kills do
	// not happen. [Job.MissedKills] says which did not, and why.
	Kills []Kill
	// Grace is how long a stopping job lets its ranks end after SIGTERM
	// before it sends SIGKILL. Default 3 s.
	Grace time.Duration
	// DumpStacks stops a job that outlives its time — Timeout passed, or
	// its context's deadline — with SIGQUIT instead of SIGTERM: a Go
	// program then prints every goroutine's stack on its standard error
	// (forwarded to Stderr) and exits with code 2, so the log shows where
	// each rank waited. Every other stop (a cancelled context, Stop, a
	// failed rendezvous, AbortOnFailure) still sends SIGTERM.
	DumpStacks bool
	// RendezvousTimeout bounds the rendezvous, from the first rank's
	// registration to the last's. Default 30 s. (A program that never
	// registers, such as a plain command, is not held to it.)
	RendezvousTimeout time.Duration
	// Timeout, if positive, stops the job that long after its start
	// (its error then wraps ErrTimeout).
	Timeout time.Duration
	// AbortOnFailure stops the whole job as soon as one rank fails (a
	// non-zero exit or a signal), as mpirun does. By default the other
	// ranks keep running: cohort's ranks see a failure as an error and
	// decide for themselves.
	AbortOnFailure bool
	// StartWithout: a process that ends before it registers at the
	// rendezvous does not fail the start; the job starts without it
	// (Rendezvous.Excuse), its rank failed from the others' first view,
	// as if it died just after the rendezvous. Otherwise the rendezvous
	// is aborted and the job stopped, naming the process (unless Spares
	// is positive: a spare then takes its rank).
	StartWithout bool
	// Replicas, if above 1, runs each of the N ranks as that many
	// processes (replicas, see Bootstrap.Replicas): N·Replicas processes,
	// process p being replica p/N of rank p mod N. The ranks' output is
	// forwarded once: a line of a rank is written when its first replica
	// writes it (the replicas run the same program). Kills, exits and
	// errors name processes.
	Replicas int
	// Spares, if positive, starts that many more processes, N to
	// N+Spares−1, that hold no rank at first and take the rank of a
	// process that fails (see Bootstrap.Spares; the program takes them
	// with package resil). Kills, exits and errors name processes; with
	// Prefix a spare's lines start with its process number. Spares
	// imply StartWithout: a spare takes the rank of a process that ends
	// before it registers. Spares and Replicas > 1 do not go together.
	Spares int
	// Encrypt runs the ranks' connections over TLS 1.3 with a certificate
	// made for the job (NewJobTLS), handed to the ranks in their
	// environment.
	Encrypt bool
	// Respawn, if positive, starts a process again when a signal ends
	// it (a crash, a kill; an exit code is the program's own verdict)
	// once the job has started: the new process, with the next free number
	// from N+Spares on, joins the running job as a spare (a newcomer,
	// see Bootstrap.Newcomer). Each process of the start may be
	// started again at most Respawn times (the deaths of its
	// restarts count against it), and the job at most MaxNewcomers
	// times. Needs Spares (the program takes spares). See respawn.go.
	Respawn int
	// Notices, if set, receives a line for each restart, each restart
	// refused (its limit reached) or that failed to start, and each idle
	// restart stopped at the job's end; lines carry no prefix or newline.
	// It is called between the ranks' forwarded lines, never inside one.
	Notices func(string)
}

// Exit is how one rank's process ended.
type Exit struct {
	Rank int
	// Code is the exit code, or -1 if a signal ended the process.
	Code int
	// Signal is the signal that ended the process, or 0.
	Signal syscall.Signal
	// Killed: the launcher's crash injection (Kill, KillAt) sent SIGKILL.
	Killed bool
	// Stopped: the launcher was stopping the job (its context ended, a
	// timeout, a failed rendezvous, AbortOnFailure) and sent SIGTERM, then
	// SIGKILL after the grace period.
	Stopped bool
	// Quit: the stop sent SIGQUIT rather than SIGTERM (Config.DumpStacks):
	// the rank's goroutine stacks are in its standard error.
	Quit bool
	// Registered: the rank took part in the rendezvous.
	Registered bool
	// Of is, for a process the launcher started again (Config.Respawn),
	// the process of the job's start it replaces; else Rank.
	Of int
	// Idle: a process started again that the launcher stopped because
	// every process of the job's start had ended: the job never needed
	// it. Its exit does not fail the job.
	Idle bool
	// Excluded: the others' views excluded the process while it lived
	// (see excluded.go); if it still ran once they had all ended, the
	// launcher stopped it (Stopped). Its exit fails the job.
	Excluded bool
	// Err is set when the process could not be started or waited for.
	Err error
	// Time is how long the process ran.
	Time time.Duration
	// CPU is the processor time the process used, user and system, as the
	// kernel accounted it (rusage); 0 if it could not be waited for.
	CPU time.Duration
}

// OK reports whether the process exited with code 0.
func (e Exit) OK() bool { return e.Err == nil && e.Code == 0 && e.Signal == 0 }

// How says how the process ended: "exit code 1", "killed by the
// launcher's crash injection (SIGKILL)", "stopped by the launcher
// (SIGTERM)", "signal SIGSEGV".
func (e Exit) How() string {
	switch {
	case e.Err != nil:
		return e.Err.Error()
	case e.Killed && e.Signal == syscall.SIGKILL:
		return "killed by the launcher's crash injection (SIGKILL)"
	case e.Excluded:
		return e.howExcluded()
	case e.Stopped && e.Signal != 0:
		return "stopped by the launcher (" + signalName(e.Signal) + ")"
	case e.Signal != 0:
		return "killed by " + signalName(e.Signal)
	case e.Stopped && e.Quit:
		return fmt.Sprintf("exit code %d after the launcher's SIGQUIT (its goroutine stacks are in its standard error)", e.Code)
	case e.Stopped:
		return fmt.Sprintf("exit code %d after the launcher's SIGTERM", e.Code)
	default:
		return fmt.Sprintf("exit code %d", e.Code)
	}
}

// FailedError is the error of a job in which some rank failed or that
// the launcher had to stop. errors.As finds it; Unwrap returns Cause.
type FailedError struct {
	// Failed lists the ranks that did not exit with code 0, by rank.
	Failed []Exit
	// Cause is why the launcher stopped the job, if it did: ctx's error,
	// ErrTimeout, ErrRendezvous, or the first failure under
	// AbortOnFailure.
	Cause error
}

// Ranks returns the failed ranks, in order.
func (e *FailedError) Ranks() []int {
	out := make([]int, len(e.Failed))
	for i, x := range e.Failed {
		out[i] = x.Rank
	}
	return out
}

// Error names the cause and every failed rank with how it ended (see
// [FormatExits]).
func (e *FailedError) Error() string {
	var b strings.Builder
	b.WriteString("launch: ")
	if e.Cause != nil {
		b.WriteString(strings.TrimPrefix(e.Cause.Error(), "launch: "))
		if len(e.Failed) > 0 {
			b.WriteString("; ")
		}
	}
	b.WriteString(FormatExits(e.Failed, Exit.How))
	return b.String()
}

// FormatExits describes failed ranks in one line with how(x) for each
// (Exit.How, or a caller's wording): "rank 2 failed: exit code 7", or
// "3 ranks failed: rank 3: …; ranks 0, 1: …" where ranks that ended the
// same way are grouped, in the order of their first rank.
func FormatExits(failed []Exit, how func(Exit) string) string {
	switch len(failed) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("rank %d failed: %s", failed[0].Rank, how(failed[0]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d ranks failed: ", len(failed))
	var order []string
	groups := map[string][]int{}
	for _, x := range failed {
		h := how(x)
		if groups[h] == nil {
			order = append(order, h)
		}
		groups[h] = append(groups[h], x.Rank)
	}
	for i, h := range order {
		if i > 0 {
			b.WriteString("; ")
		}
		if ranks := groups[h]; len(ranks) == 1 {
			fmt.Fprintf(&b, "rank %d: %s", ranks[0], h)
		} else {
			fmt.Fprintf(&b, "ranks %s: %s", formatRanks(ranks), h)
		}
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *FailedError) Unwrap() error { return e.Cause }

// Job is a running job: N processes of one program, each with its
// bootstrap in its environment, and the rendezvous through which they
// find each other. Its methods are safe for concurrent use.
type Job struct {
	ID string

	cfg   Config
	rz    *Rendezvous
	start time.Time

	outMu  sync.Mutex // shared by every lineWriter: lines never interleave
	spawn  spawner    // what starting a process takes (respawn.go)
	exitCh chan Exit
	stopCh chan error // Stop's requests
	done   chan struct{}

	mu       sync.Mutex
	procs    []*rankProc
	timers   []*time.Timer
	planned  []plannedKill // Config.Kills, in order
	rzAt     time.Time     // when every rank had registered (zero: never)
	ended    bool          // the last rank has ended: planned kills no longer fire
	endAt    time.Time
	stopping bool
	cause    error
	exits    []Exit
	err      error
	re       respawns // the processes started again (respawn.go)
}

// plannedKill is one of Config.Kills and what became of it.
type plannedKill struct {
	Kill
	fired bool  // its time came while the job ran
	again bool  // an earlier kill of the same rank had fired
	err   error // Kill's error when it fired
}

type rankProc struct {
	rank     int
	cmd      *exec.Cmd
	running  bool
	killed   bool
	stopped  bool
	quit     bool // the stop's signal was SIGQUIT
	of       int  // the process of the start it replaces (itself if of the start)
	idle     bool // stopped at the job's end, never needed (Exit.Idle)
	excluded bool // stopped at the job's end, excluded by it (excluded.go)
}

// Start checks cfg, opens the rendezvous, starts the N ranks and the
// crashes of cfg.Kills, and returns the running job; [Job.Wait] waits
// for its end. The job stops (SIGTERM, then SIGKILL after cfg.Grace) when
// ctx ends, when cfg.Timeout passes, and when its rendezvous fails: a rank
// died before registering while others had registered, or the ranks did
// not all register within cfg.RendezvousTimeout of the first.
//
// If a process cannot be started, Start kills those it started, waits for
// them and returns an error wrapping ErrStart.
func Start(ctx context.Context, cfg Config) (*Job, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	logicalN, replicas := cfg.N, max(cfg.Replicas, 1)
	cfg.N = cfg.N*replicas + cfg.Spares // from here on the job's "ranks" are its processes
	if cfg.Grace <= 0 {
		cfg.Grace = 3 * time.Second
	}
	if cfg.RendezvousTimeout <= 0 {
		cfg.RendezvousTimeout = 30 * time.Second
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	path, err := exec.LookPath(cfg.Program)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrStart, cfg.Program, err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	if cfg.JobID == "" {
		id := make([]byte, 6)
		rand.Read(id)
		cfg.JobID = "cohort-" + hex.EncodeToString(id)
	}
	rz, err := NewRendezvous(RendezvousConfig{JobID: cfg.JobID, Secret: secret, Size: cfg.N})
	if err != nil {
		return nil, err
	}
	j := &Job{
		ID:     cfg.JobID,
		cfg:    cfg,
		rz:     rz,
		exitCh: make(chan Exit, cfg.N+MaxNewcomers),
		stopCh: make(chan error, 1),
		done:   make(chan struct{}),
		procs:  make([]*rankProc, cfg.N),
	}
	var certPEM, keyPEM []byte
	if cfg.Encrypt {
		if certPEM, keyPEM, err = NewJobTLS(cfg.JobID); err != nil {
			rz.Close()
			return nil, fmt.Errorf("%w: the job's certificate: %w", ErrStart, err)
		}
	}
	j.spawn = spawner{path: path, env: inheritedEnv(), logicalN: logicalN,
		boot: Bootstrap{JobID: cfg.JobID, Size: cfg.N, Rendezvous: rz.Addr(), Secret: secret, Fanout: cfg.Fanout,
			Detector: cfg.Detector, TLSCert: certPEM, TLSKey: keyPEM, Replicas: cfg.Replicas, Spares: cfg.Spares}}
	j.start = time.Now()
	// The replicas of a rank share their output streams' line counters.
	j.spawn.outs, j.spawn.errs = make([]*dedup, logicalN), make([]*dedup, logicalN)
	for r := range logicalN {
		j.spawn.outs[r], j.spawn.errs[r] = &dedup{}, &dedup{}
	}
	for rank := range cfg.N {
		p, err := j.startProc(rank, rank)
		if err != nil {
			j.abortStart()
			return nil, fmt.Errorf("%w %q (rank %d): %w", ErrStart, cfg.Program, rank, err)
		}
		j.procs[rank] = p
	}
	for _, k := range cfg.Kills {
		j.planned = append(j.planned, plannedKill{Kill: k})
	}
	go j.monitor(ctx)
	return j, nil
}

// check validates a Config.
func (cfg Config) check() error {
	switch {
	case cfg.N < 1 || cfg.N > MaxSize:
		return fmt.Errorf("%w: %d ranks, want 1 to %d", ErrConfig, cfg.N, MaxSize)
	case cfg.Program == "":
		return fmt.Errorf("%w: no program", ErrConfig)
	case cfg.Fanout < 0:
		return fmt.Errorf("%w: fan-out %d", ErrConfig, cfg.Fanout)
	case cfg.Grace < 0 || cfg.RendezvousTimeout < 0 || cfg.Timeout < 0:
		return fmt.Errorf("%w: negative duration", ErrConfig)
	case cfg.Replicas < 0 || cfg.Replicas > MaxReplicas || cfg.N*max(cfg.Replicas, 1) > MaxSize:
		return fmt.Errorf("%w: %d replicas of %d ranks (want 0 to %d replicas, at most %d processes)", ErrConfig, cfg.Replicas, cfg.N, MaxReplicas, MaxSize)
	case cfg.Spares < 0 || cfg.N*max(cfg.Replicas, 1)+cfg.Spares > MaxSize:
		return fmt.Errorf("%w: %d spares for %d ranks (want 0 or more, at most %d processes)", ErrConfig, cfg.Spares, cfg.N, MaxSize)
	case cfg.Spares > 0 && cfg.Replicas > 1:
		return fmt.Errorf("%w: %d spares with %d replicas: spares and replicas do not go together", ErrConfig, cfg.Spares, cfg.Replicas)
	}
	procs := cfg.N*max(cfg.Replicas, 1) + cfg.Spares
	boot := Bootstrap{JobID: "check", Size: procs, Rendezvous: "127.0.0.1:1", Secret: make([]byte, MinSecretLen),
		Fanout: cfg.Fanout, Detector: cfg.Detector, Replicas: cfg.Replicas, Spares: cfg.Spares}
	if cfg.JobID != "" {
		boot.JobID = cfg.JobID
	}
	if err := boot.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, k := range cfg.Kills {
		if err := checkKill(procs, k.Rank, k.After); err != nil {
			return err
		}
	}
	return cfg.respawnable()
}

func checkKill(n, rank int, after time.Duration) error {
	if rank < 0 || rank >= n {
		return fmt.Errorf("%w: kill of rank %d, out of range for %d ranks (0 to %d)", ErrConfig, rank, n, n-1)
	}
	if after < 0 {
		return fmt.Errorf("%w: kill of rank %d after a negative duration %v", ErrConfig, rank, after)
	}
	return nil
}

// EnvEvents names the file where a rank writes its node's event stream
// (optional; set by Config.EventsDir, read by comm.Init).
const EnvEvents = "COHORT_EVENTS"

// EventsPath is the event stream file of rank in dir (Config.EventsDir).
func EventsPath(dir string, rank int) string {
	return filepath.Join(dir, fmt.Sprintf("rank-%d.jsonl", rank))
}

// inheritedEnv is the launcher's environment without the bootstrap
// variables (the optional ones too: listen host, job certificate, dial-out only, link notices) and EnvEvents (a job started from inside a rank must not
// inherit that rank's place or write to its events file).
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(envNames, name) && !slices.Contains([]string{EnvEvents, EnvListenHost, EnvTLSCert, EnvTLSKey, EnvDialOutOnly, EnvLinkNotices}, name) {
			env = append(env, kv)
		}
	}
	return env
}

// startProc starts process rank, which replaces process of (itself for
// a process of the start; a newcomer's rank is N or more), and the
// goroutine that reaps it; the caller records it in j.procs.
func (j *Job) startProc(rank, of int) (*rankProc, error) {
	cfg, sp := j.cfg, &j.spawn
	boot := sp.boot
	boot.Rank, boot.Newcomer = rank, rank >= cfg.N
	cmd := exec.Command(sp.path, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = append(append(slices.Clip(sp.env), cfg.Env...), boot.Environ()...)
	if cfg.EventsDir != "" {
		cmd.Env = append(cmd.Env, EnvEvents+"="+EventsPath(cfg.EventsDir, rank))
	}
	var prefix []byte
	if cfg.Prefix {
		who := rank % sp.logicalN // a replica's rank
		if cfg.Spares > 0 {
			who = rank // a spare's process number
		}
		prefix = fmt.Appendf(nil, "[%d] ", who)
	}
	stdout := &lineWriter{mu: &j.outMu, w: cfg.Stdout, prefix: prefix}
	stderr := &lineWriter{mu: &j.outMu, w: cfg.Stderr, prefix: prefix}
	if max(cfg.Replicas, 1) > 1 {
		stdout.dedup, stderr.dedup = sp.outs[rank%sp.logicalN], sp.errs[rank%sp.logicalN]
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A rank's children may hold its output open after it ends:
	// Wait gives up on them after this delay.
	cmd.WaitDelay = cfg.Grace
	isolate(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &rankProc{rank: rank, cmd: cmd, running: true, of: of}
	go j.reap(p, stdout, stderr)
	return p, nil
}

// abortStart kills and reaps the processes started so far.
func (j *Job) abortStart() {
	for _, p := range j.procs {
		if p != nil {
			signalGroup(p.cmd.Process, syscall.SIGKILL)
		}
	}
	for _, p := range j.procs {
		if p != nil {
			p.cmd.Wait()
		}
	}
	j.rz.Close()
}

// reap waits for one process and reports its exit to the monitor.
func (j *Job) reap(p *rankProc, stdout, stderr *lineWriter) {
	err := p.cmd.Wait()
	stdout.flush()
	stderr.flush()
	ps := p.cmd.ProcessState
	x := Exit{Rank: p.rank, Code: ps.ExitCode(), Signal: exitSignal(ps), Time: time.Since(j.start)}
	if ps != nil {
		x.CPU = ps.UserTime() + ps.SystemTime()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		x.Err = err
	}
	j.mu.Lock()
	p.running = false
	x.Killed, x.Stopped, x.Quit, x.Of, x.Idle = p.killed, p.stopped, p.quit, p.of, p.idle
	x.Excluded = p.excluded
	j.mu.Unlock()
	j.exitCh <- x
}

// monitor follows the job until every process has ended: exits,
// registrations, the rendezvous timeout, the job's timeout, ctx and the
// grace period of a stop.
func (j *Job) monitor(ctx context.Context) {
	exits := make([]Exit, j.cfg.N)
	alive, startAlive := j.cfg.N, j.cfg.N
	var idle <-chan time.Time   // every process of the start ended: idle newcomers go
	var unregistered []Exit     // ranks that ended before the rendezvous completed
	succeeded := map[int]bool{} // the processes that exited with code 0
	excludedNews := j.rz.excl.news
	var rzTimeout, jobTimeout, grace <-chan time.Time
	var timers []*time.Timer
	after := func(d time.Duration) <-chan time.Time {
		t := time.NewTimer(d)
		timers = append(timers, t)
		return t.C
	}
	if j.cfg.Timeout > 0 {
		jobTimeout = after(j.cfg.Timeout)
	}
	ctxDone, rzDone, notify := ctx.Done(), j.rz.Done(), j.rz.notify
	stop := func(cause error) {
		if j.stop(cause, syscall.SIGTERM) && grace == nil {
			grace = after(j.cfg.Grace)
		}
	}
	// late stops a job that outlived its time: with DumpStacks, by
	// SIGQUIT.
	late := func(cause error) {
		sig := syscall.SIGTERM
		if j.cfg.DumpStacks {
			sig = syscall.SIGQUIT
		}
		if j.stop(cause, sig) && grace == nil {
			grace = after(j.cfg.Grace)
		}
	}
	// orphaned fails the rendezvous if a rank ended without registering
	// while others wait for it. With StartWithout or spares the job
	// starts without it instead.
	orphaned := func() {
		if rzDone == nil || len(unregistered) == 0 {
			return
		}
		if j.cfg.StartWithout || j.cfg.Spares > 0 {
			for _, x := range unregistered {
				j.rz.Excuse(x.Rank)
			}
			unregistered = nil
			return
		}
		if ranks, _ := j.rz.Registered(); len(ranks) == 0 {
			return
		}
		x := unregistered[0]
		stop(fmt.Errorf("%w: rank %d ended before every rank registered (%s)", ErrRendezvous, x.Rank, x.How()))
	}
	for alive > 0 {
		select {
		case x := <-j.exitCh:
			alive--
			if rzDone != nil {
				registered, _ := j.rz.Registered()
				x.Registered = slices.Contains(registered, x.Rank)
				if !x.Registered {
					unregistered = append(unregistered, x)
				}
			} else {
				x.Registered = x.Rank < j.cfg.N || slices.Contains(j.rz.Joined(), x.Rank)
			}
			if x.Rank < j.cfg.N {
				startAlive--
			}
			for len(exits) <= x.Rank {
				exits = append(exits, Exit{})
			}
			exits[x.Rank] = x
			if j.cfg.AbortOnFailure && !x.OK() && alive > 0 {
				stop(fmt.Errorf("rank %d failed (%s) and the job aborts on a failure", x.Rank, x.How()))
			}
			orphaned()
			if j.respawnAfter(x) {
				alive++
			}
			if startAlive == 0 && alive > 0 && idle == nil {
				idle = after(idleNewcomerWait)
			}
			if x.OK() {
				succeeded[x.Rank] = true
			}
			if alive > 0 && j.stopExcluded(succeeded) && grace == nil {
				grace = after(j.cfg.Grace)
			}
		case <-excludedNews:
			if j.stopExcluded(succeeded) && grace == nil {
				grace = after(j.cfg.Grace)
			}
		case <-idle:
			if j.stopIdle() && grace == nil {
				grace = after(j.cfg.Grace)
			}
		case <-notify:
			if rzTimeout == nil && rzDone != nil {
				rzTimeout = after(j.cfg.RendezvousTimeout)
			}
			orphaned()
		case <-rzDone:
			rzDone, notify, rzTimeout = nil, nil, nil
			if _, err := j.rz.Wait(context.Background()); err == nil { // done: Wait does not block
				j.schedulePlanned()
			}
		case <-rzTimeout:
			rzTimeout = nil
			stop(fmt.Errorf("%w: ranks %s did not register within %v of the first", ErrRendezvous, formatRanks(j.rz.Missing()), j.cfg.RendezvousTimeout))
		case <-jobTimeout:
			jobTimeout = nil
			late(fmt.Errorf("%w after %v", ErrTimeout, j.cfg.Timeout))
		case <-ctxDone:
			ctxDone = nil
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				late(ctx.Err())
			} else {
				stop(ctx.Err())
			}
		case cause := <-j.stopCh:
			stop(cause)
		case <-grace:
			grace = nil
			j.signalAll(syscall.SIGKILL)
		}
	}
	for _, t := range timers {
		t.Stop()
	}
	j.mu.Lock()
	for _, t := range j.timers {
		t.Stop()
	}
	if rzDone != nil && j.rzAt.IsZero() && j.rz.completed() {
		// The last rank may end before the loop saw the rendezvous end,
		// even before Done is closed (it had its table while the others'
		// were being sent): it ended all the same, and the kills missed
		// their time.
		j.rzAt = time.Now()
	}
	j.ended, j.endAt = true, time.Now()
	j.markExcluded(exits, succeeded)
	cause := j.cause
	j.exits = exits
	j.mu.Unlock()
	j.rz.Close()
	var failed []Exit
	for _, x := range exits {
		if !x.OK() && !x.Idle {
			failed = append(failed, x)
		}
	}
	if cause != nil || len(failed) > 0 {
		j.err = &FailedError{Failed: failed, Cause: cause}
	}
	close(j.done)
}

// stop begins the job's stop with its cause (the first cause wins): the
// rendezvous is aborted with the cause as reason and every running rank
// is sent sig (SIGTERM, or SIGQUIT for a late job under DumpStacks). It
// reports whether this call began it.
func (j *Job) stop(cause error, sig syscall.Signal) bool {
	j.mu.Lock()
	if j.stopping {
		j.mu.Unlock()
		return false
	}
	j.stopping, j.cause = true, cause
	// Every rank still running is stopped by us from now on, even one that
	// ends on the rendezvous's abort before it gets SIGTERM.
	for _, p := range j.procs {
		if p.running {
			p.stopped = true
		}
	}
	j.mu.Unlock()
	j.rz.Abort("the job is stopping: " + strings.TrimPrefix(cause.Error(), "launch: "))
	j.signalAll(sig)
	return true
}

// signalAll sends sig to every running rank, marking them stopped.
func (j *Job) signalAll(sig syscall.Signal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range j.procs {
		if p.running {
			p.stopped = true
			p.quit = p.quit || sig == syscall.SIGQUIT
			signalGroup(p.cmd.Process, sig)
		}
	}
}

// Kill injects a crash: it sends SIGKILL to rank's process (and its
// process group), now; rank may be a process started again
// (Config.Respawn). Its Exit will say Killed.
func (j *Job) Kill(rank int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := checkKill(len(j.procs), rank, 0); err != nil {
		return err
	}
	p := j.procs[rank]
	if !p.running {
		return fmt.Errorf("%w: rank %d", ErrNotRunning, rank)
	}
	p.killed = true
	return signalGroup(p.cmd.Process, syscall.SIGKILL)
}

// KillAt schedules a crash: SIGKILL to rank at the given time after the
// job's start (at once if that is past). A rank that has already ended
// by then is left alone.
func (j *Job) KillAt(rank int, after time.Duration) error {
	if err := checkKill(j.cfg.N, rank, after); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	select {
	case <-j.done:
		return fmt.Errorf("%w: rank %d (the job has ended)", ErrNotRunning, rank)
	default:
	}
	d := max(0, after-time.Since(j.start))
	j.timers = append(j.timers, time.AfterFunc(d, func() { j.Kill(rank) }))
	return nil
}

// schedulePlanned starts the timers of Config.Kills, counted from now: the
// end of the rendezvous.
func (j *Job) schedulePlanned() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rzAt = time.Now()
	for i := range j.planned {
		j.timers = append(j.timers, time.AfterFunc(j.planned[i].After, func() { j.firePlanned(i) }))
	}
}

// firePlanned kills the rank of planned kill i, unless the job has ended,
// and notes what happened.
func (j *Job) firePlanned(i int) {
	j.mu.Lock()
	if j.ended {
		j.mu.Unlock()
		return
	}
	k := &j.planned[i]
	k.fired = true
	k.again = j.procs[k.Rank].killed
	j.mu.Unlock()
	if k.again {
		return
	}
	err := j.Kill(k.Rank)
	j.mu.Lock()
	k.err = err
	j.mu.Unlock()
}

// MissedKill is one of Config.Kills that did not happen.
type MissedKill struct {
	Kill
	// Why says why, in a phrase: "the job ended 130ms after every rank
	// registered", "its process had already ended (exit code 0)".
	Why string
}

// MissedKills waits for the job's end (see [Job.Wait]) and returns the
// kills of Config.Kills that did not kill their rank, in the order of
// Config.Kills: those whose time came after the job's end (or that never
// came, the ranks never all registered), and those that found their rank
// already ended or already killed.
func (j *Job) MissedKills() []MissedKill {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	var missed []MissedKill
	for _, k := range j.planned {
		x := j.exits[k.Rank]
		var why string
		switch {
		case j.rzAt.IsZero():
			why = "the job ended before every rank registered"
		case !k.fired:
			why = fmt.Sprintf("the job ended %v after every rank registered", j.endAt.Sub(j.rzAt).Round(time.Millisecond))
		case k.again:
			why = "its process had already been killed"
		case k.err != nil || !x.Killed || x.Signal != syscall.SIGKILL:
			why = fmt.Sprintf("its process had already ended (%s)", x.How())
		default:
			continue
		}
		missed = append(missed, MissedKill{Kill: k.Kill, Why: why})
	}
	return missed
}

// Stop stops the job as if its context had ended, with the given cause
// (nil: context.Canceled); it does not wait (see Wait).
func (j *Job) Stop(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	select {
	case j.stopCh <- cause:
	default: // a stop is already asked for
	}
}

// RendezvousAddr returns the address of the job's rendezvous listener.
func (j *Job) RendezvousAddr() string { return j.rz.Addr() }

// Addrs waits for the rendezvous and returns every rank's registered
// address, by rank.
func (j *Job) Addrs(ctx context.Context) ([]string, error) { return j.rz.Wait(ctx) }

// Started returns when the first rank was started.
func (j *Job) Started() time.Time { return j.start }

// Done is closed once every rank has ended and Wait's results are known.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait waits until every rank has ended and returns each rank's Exit,
// by rank. The error is nil if every rank exited with code 0 and the
// launcher did not have to stop the job; otherwise it is a
// [*FailedError] naming the failed ranks and the cause.
func (j *Job) Wait() ([]Exit, error) {
	<-j.done
	return slices.Clone(j.exits), j.err
}
