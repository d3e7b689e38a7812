package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/tracker"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// Errors of a job.
var (
	// ErrJob: a job could not be started or a request on it failed.
	ErrJob = errors.New("runner: job")
	// ErrPortTaken: a node found the port chosen for it taken (another
	// process bound it between the choice and the node's start).
	ErrPortTaken = errors.New("runner: a node's port was taken before it could listen")
)

// JobConfig describes a job of real processes on 127.0.0.1.
type JobConfig struct {
	// N is the number of initial nodes, with ids 0 … N−1 (N ≥ 1).
	N int
	// Fanout and Detector are passed to every node (see NodeOptions).
	Fanout   int
	Detector Detector
	// QuietDetector starts every node with a quiet detector (see
	// NodeOptions.QuietDetector): failures are then declared only through
	// [Job.InjectFailure].
	QuietDetector bool
	// Seed derives every node's seed; 0 lets each node draw its own.
	Seed uint64
	// Command starts one node: the program and its first arguments, to
	// which the node's flags are appended. Default: the running
	// executable and "node".
	Command []string
	// Env holds extra environment entries ("NAME=value") for the nodes.
	Env []string
	// NodeArgs are extra flags for every node (e.g. "--log-level=info").
	NodeArgs []string
	// PingCount > 0 makes node 0 run a ping-pong of that many round trips
	// with node 1 (see [record.PingPong]).
	PingCount int
	// EventsDir, if not empty, keeps every node's event stream
	// (n<id>.jsonl), its standard output and error (n<id>.log) and the
	// orchestrator's records (job.jsonl); otherwise they live in a
	// temporary directory removed by Close.
	EventsDir string
	// StartTimeout bounds the start: every node listening and then
	// holding its first view. Default 60 s.
	StartTimeout time.Duration
	// Transport is what the nodes of [StartInProcess] talk over:
	// TransportTCP (the default) or TransportMem. Jobs of processes always
	// use TCP (over Unix sockets between processes of this host).
	Transport string
	// OnLine, if not nil, receives the tracker's lines as records arrive,
	// in order. It is called with the job's lock held and must not call
	// the job's methods.
	OnLine func(line string)
}

// The transports of [JobConfig].Transport.
const (
	TransportTCP = "tcp"
	TransportMem = "mem"
)

// stopGrace is how long Close lets nodes stop on their own (their
// supervisor's stream closed) before it kills them.
const stopGrace = 3 * time.Second

// Job is a running job of node processes. Its methods are safe for
// concurrent use.
type Job struct {
	cfg    JobConfig
	ID     string // the job id, "cohort-<hex>"
	secret []byte
	start  time.Time

	dir     string // the nodes' files
	tempDir bool   // dir is ours to remove

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a record arrives
	tracker  *tracker.Tracker
	records  []record.Record
	procs    map[core.NodeID]*proc
	jobLog   *os.File
	closed   bool
	holding  bool           // until every node listens, OnLine's lines wait in held
	held     []string       // (dropped if the launch is made again on new ports)
	waiters  sync.WaitGroup // one per process, until it is reaped
	stopTail chan struct{}
	tailDone chan struct{}
}

// proc is one node's process.
type proc struct {
	id      core.NodeID
	addr    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	logPath string
	tail    *tailer
	done    chan struct{} // closed once the process is reaped
}

// Start launches the job's N nodes, waits until each listens, tells them
// all to start, and returns once every node has installed the same first
// view. If a node finds its port taken, the whole job is launched again
// with new ports (at most three times). On error every process started is
// stopped and reaped.
func Start(ctx context.Context, cfg JobConfig) (*Job, error) {
	if cfg.N < 1 {
		return nil, fmt.Errorf("%w: %d nodes", ErrJob, cfg.N)
	}
	if cfg.Command == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
		cfg.Command = []string{exe, "node"}
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	for attempt := 1; ; attempt++ {
		j, err := launch(ctx, cfg)
		if err == nil {
			return j, nil
		}
		if !errors.Is(err, ErrPortTaken) || attempt == 3 {
			return nil, err
		}
		if cfg.OnLine != nil {
			cfg.OnLine(fmt.Sprintf("%s; starting every process again on new ports", strings.TrimPrefix(err.Error(), "runner: ")))
		}
	}
}

func launch(ctx context.Context, cfg JobConfig) (_ *Job, err error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	idb := make([]byte, 6)
	rand.Read(idb)
	j := &Job{
		cfg:     cfg,
		ID:      "cohort-" + hex.EncodeToString(idb),
		secret:  secret,
		start:   time.Now(),
		changed: make(chan struct{}),
		procs:   map[core.NodeID]*proc{},
		holding: true,
	}
	j.tracker = tracker.NewTracker(j.start)
	if cfg.EventsDir != "" {
		if err := os.MkdirAll(cfg.EventsDir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
		j.dir = cfg.EventsDir
	} else {
		if j.dir, err = os.MkdirTemp("", "cohort-job-"); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
		j.tempDir = true
	}
	if j.jobLog, err = os.Create(filepath.Join(j.dir, "job.jsonl")); err != nil {
		if j.tempDir {
			os.RemoveAll(j.dir)
		}
		return nil, fmt.Errorf("%w: %w", ErrJob, err)
	}
	j.stopTail, j.tailDone = make(chan struct{}), make(chan struct{})
	go j.tailLoop()
	defer func() {
		if err != nil {
			// An attempt that Start makes again on new ports keeps its
			// processes' exits to itself: they are not the job's.
			j.release(!errors.Is(err, ErrPortTaken))
			j.Close()
		}
	}()
	addrs, err := pickAddrs(cfg.N)
	if err != nil {
		return nil, err
	}
	peers := make([]Peer, cfg.N)
	for i := range peers {
		peers[i] = Peer{ID: core.NodeID(i), Addr: addrs[i]}
	}
	for _, p := range peers {
		if err := j.spawn(p.ID, peers, j.secret, false); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	ids := make([]core.NodeID, cfg.N)
	for i := range ids {
		ids[i] = core.NodeID(i)
	}
	if err := j.awaitListening(ctx, ids); err != nil {
		return nil, err
	}
	j.release(true)
	for _, id := range ids {
		j.tell(id, "start")
	}
	if err := j.Wait(ctx, func(t *tracker.Tracker) (bool, error) {
		if dead := deadNodes(t, ids); dead != "" {
			return false, fmt.Errorf("%w: %s before the first view", ErrJob, dead)
		}
		_, ok := t.Agreement(nil)
		return ok, nil
	}); err != nil {
		return nil, j.describe(err, ids)
	}
	return j, nil
}

// awaitListening waits until every node of ids announced that it listens.
func (j *Job) awaitListening(ctx context.Context, ids []core.NodeID) error {
	err := j.Wait(ctx, func(t *tracker.Tracker) (bool, error) {
		all := true
		for _, id := range ids {
			n := t.Node(id)
			if n.Exited {
				if strings.Contains(readTail(j.procs[id].logPath), "address already in use") {
					return false, fmt.Errorf("%w (%v at %s)", ErrPortTaken, id, n.Addr)
				}
				return false, fmt.Errorf("%w: %v exited with status %d before listening", ErrJob, id, n.ExitCode)
			}
			all = all && n.Listening
		}
		return all, nil
	})
	return j.describe(err, ids)
}

// describe adds the standard error of the nodes that exited to err.
func (j *Job) describe(err error, ids []core.NodeID) error {
	if err == nil || errors.Is(err, ErrPortTaken) {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	var sb strings.Builder
	for _, id := range ids {
		if n := j.tracker.Node(id); n.Exited && !n.Killed {
			if tail := strings.TrimSpace(readTail(j.procs[id].logPath)); tail != "" {
				fmt.Fprintf(&sb, "\n%v's standard error (%s):\n%s", id, j.procs[id].logPath, tail)
			}
		}
	}
	if sb.Len() == 0 {
		return err
	}
	return fmt.Errorf("%w%s", err, sb.String())
}

func deadNodes(t *tracker.Tracker, ids []core.NodeID) string {
	var dead []string
	for _, id := range ids {
		if n := t.Node(id); n.Exited && !n.Killed {
			dead = append(dead, fmt.Sprintf("%v exited with status %d", id, n.ExitCode))
		}
	}
	return strings.Join(dead, ", ")
}

// pickAddrs is freeAddrs, replaced by tests that need a port taken.
var pickAddrs = freeAddrs

// freeAddrs returns n distinct free addresses on 127.0.0.1, found by
// listening on port 0 (all at once, so they differ) and closing.
func freeAddrs(n int) ([]string, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("%w: finding a free port: %w", ErrJob, err)
		}
		lns = append(lns, ln)
		addrs[i] = ln.Addr().String()
	}
	return addrs, nil
}

// nodeSeed derives node id's seed from the job's (0 stays 0: random).
func nodeSeed(seed uint64, id core.NodeID) uint64 {
	if seed == 0 {
		return 0
	}
	s := seed ^ (uint64(id)+1)*0x9E3779B97F4A7C15
	if s == 0 {
		s = 1
	}
	return s
}

// spawn starts node id's process with the given address book and secret.
func (j *Job) spawn(id core.NodeID, peers []Peer, secret []byte, join bool) error {
	boot := Bootstrap{JobID: j.ID, Self: id, Peers: peers, Secret: secret}
	args := slices.Clone(j.cfg.Command[1:])
	eventsPath := filepath.Join(j.dir, fmt.Sprintf("n%d.jsonl", uint32(id)))
	logPath := filepath.Join(j.dir, fmt.Sprintf("n%d.log", uint32(id)))
	args = append(args,
		"--supervised", "--events="+eventsPath,
		"--fanout="+strconv.Itoa(MemberConfig(j.cfg.Fanout).Fanout),
		"--detector="+DetectorOrDefault(j.cfg.Detector).String(),
		"--seed="+strconv.FormatUint(nodeSeed(j.cfg.Seed, id), 10),
	)
	if join {
		args = append(args, "--join")
	}
	if j.cfg.QuietDetector {
		args = append(args, "--quiet-detector")
	}
	if j.cfg.PingCount > 0 && id == 0 && j.cfg.N > 1 {
		args = append(args, "--ping=1", "--ping-count="+strconv.Itoa(j.cfg.PingCount))
	}
	args = append(args, j.cfg.NodeArgs...)
	cmd := exec.Command(j.cfg.Command[0], args...)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "COHORT_") && !strings.HasPrefix(kv, "COHORT_TEST") })
	if !hasVar(env, "GOMAXPROCS") && !hasVar(j.cfg.Env, "GOMAXPROCS") {
		// A node's loop is one goroutine; many nodes share a few cores.
		env = append(env, "GOMAXPROCS=1")
	}
	cmd.Env = append(append(env, boot.Environ()...), j.cfg.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrJob, err)
	}
	// The node writes its events to a file that we tail, never to a pipe
	// that we read: a slow orchestrator must not block a node's loop.
	events, err := os.Create(eventsPath)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrJob, err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		events.Close()
		return fmt.Errorf("%w: %w", ErrJob, err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logFile, logFile
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		events.Close()
		return fmt.Errorf("%w: closed", ErrJob)
	}
	if err := cmd.Start(); err != nil {
		j.mu.Unlock()
		events.Close()
		return fmt.Errorf("%w: starting %v: %w", ErrJob, id, err)
	}
	p := &proc{id: id, addr: boot.Addr(id), cmd: cmd, stdin: stdin, logPath: logPath,
		tail: &tailer{id: id, f: events}, done: make(chan struct{})}
	j.procs[id] = p
	j.addLocked(record.Record{Node: id, Time: time.Now(), Type: "record.Spawned", Event: record.Spawned{PID: cmd.Process.Pid, Addr: p.addr, Join: join}})
	j.waiters.Add(1)
	j.mu.Unlock()

	go func() {
		defer j.waiters.Done()
		err := cmd.Wait()
		p.tail.drain(j, true) // every line it wrote comes before its exit
		ex := record.Exited{ExitCode: cmd.ProcessState.ExitCode()}
		if err != nil {
			ex.Err = err.Error()
		}
		j.add(record.Record{Node: id, Time: time.Now(), Type: "record.Exited", Event: ex})
		close(p.done)
	}()
	return nil
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// DefaultDetector is the detector of a job that names none: the heartbeat
// detector, which agrees on a crash fastest, declares the fewest live
// members failed under partial partitions, and sends the least
// (docs/PERFORMANCE.md, "Choice of the default detector").
const DefaultDetector = DetectorHeartbeat

// DetectorOrDefault returns d, or DefaultDetector if d is empty.
func DetectorOrDefault(d Detector) Detector {
	if d == "" {
		return DefaultDetector
	}
	return d
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// add appends a record, updates the tracker and wakes the waiters.
func (j *Job) add(r record.Record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.addLocked(r)
}

func (j *Job) addLocked(r record.Record) {
	j.records = append(j.records, r)
	if j.jobLog != nil {
		switch r.Event.(type) {
		case record.Spawned, record.Killed, record.Exited:
			j.jobLog.Write(record.EncodeLine(r))
		}
	}
	for _, line := range j.tracker.Add(r) {
		if j.holding {
			j.held = append(j.held, line)
		} else if j.cfg.OnLine != nil {
			j.cfg.OnLine(line)
		}
	}
	close(j.changed)
	j.changed = make(chan struct{})
}

// release ends the holding of OnLine's lines while a launch's nodes come
// up and gives OnLine those held if show; otherwise it drops them and
// keeps holding (the lines of a launch abandoned for a taken port, whose
// processes are then stopped).
func (j *Job) release(show bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !show {
		j.held = nil
		return
	}
	if j.cfg.OnLine != nil {
		for _, line := range j.held {
			j.cfg.OnLine(line)
		}
	}
	j.holding, j.held = false, nil
}

// tell writes one line to node id's supervisor stream.
func (j *Job) tell(id core.NodeID, line string) {
	j.mu.Lock()
	p := j.procs[id]
	j.mu.Unlock()
	if p != nil {
		io.WriteString(p.stdin, line+"\n")
	}
}

// Wait waits until cond, called with the job's tracker under the job's
// lock each time a record arrives, returns true or an error, or ctx is
// done (ctx's error).
func (j *Job) Wait(ctx context.Context, cond func(t *tracker.Tracker) (bool, error)) error {
	for {
		j.mu.Lock()
		ok, err := cond(j.tracker)
		ch := j.changed
		j.mu.Unlock()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WaitAgreed waits until every live node except those in outside has
// installed the same view, holding exactly those nodes, and returns it. On
// ctx's end the error names who holds which view.
func (j *Job) WaitAgreed(ctx context.Context, outside map[core.NodeID]bool) (member.ViewInstalled, error) {
	var view member.ViewInstalled
	err := j.Wait(ctx, func(t *tracker.Tracker) (bool, error) {
		v, ok := t.Agreement(outside)
		view = v
		return ok, nil
	})
	if err != nil {
		j.mu.Lock()
		why := j.tracker.Disagreement(outside)
		j.mu.Unlock()
		return view, fmt.Errorf("%w: the live nodes do not agree (%w): %s", ErrJob, err, why)
	}
	return view, nil
}

// Records returns the records from index from on (a copy), and a channel
// closed when the next record arrives.
func (j *Job) Records(from int) ([]record.Record, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if from > len(j.records) {
		from = len(j.records)
	}
	return slices.Clone(j.records[from:]), j.changed
}

// NumRecords returns how many records the job has: the index the next
// one will have (Records clones, this does not).
func (j *Job) NumRecords() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.records)
}

// Inspect calls f with the job's tracker under the job's lock.
func (j *Job) Inspect(f func(t *tracker.Tracker)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(j.tracker)
}

// Started returns the time the job was launched, the origin of the
// tracker's time stamps.
func (j *Job) Started() time.Time { return j.start }

// Kill sends SIGKILL to node id, records when, and returns once the
// process is reaped and its exit recorded (or after killReapWait, if the
// kernel takes longer): the kernel tears a killed process down (its
// memory unmapped, its sockets closed) on the processors the survivors
// share, and a caller that goes on to measure what they do (the
// membership benchmark) measures them without that.
func (j *Job) Kill(id core.NodeID) error {
	j.mu.Lock()
	p := j.procs[id]
	if p == nil {
		j.mu.Unlock()
		return fmt.Errorf("%w: no node %v", ErrJob, id)
	}
	if n := j.tracker.Node(id); !n.Live() {
		j.mu.Unlock()
		return fmt.Errorf("%w: %v is not running", ErrJob, id)
	}
	at := time.Now()
	if err := p.cmd.Process.Kill(); err != nil {
		j.mu.Unlock()
		return fmt.Errorf("%w: killing %v: %w", ErrJob, id, err)
	}
	j.addLocked(record.Record{Node: id, Time: at, Type: "record.Killed", Event: record.Killed{}})
	j.mu.Unlock()
	awaitGone(p.done)
	return nil
}

// killReapWait bounds how long a kill waits for the node to be gone.
const killReapWait = 10 * time.Second

// awaitGone waits until done (a killed node's: a process reaped, an
// in-process loop returned, its exit recorded) is closed, at most
// killReapWait: the kernel may take longer over a process, and a machine
// stuck in a call returns from it only when the call does.
func awaitGone(done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(killReapWait):
	}
}

// StartEcho tells node id (through its supervisor stream) to run one tree
// echo over its view, reported as a [record.EchoOnce] ([workload.StartEcho]).
// It returns once the line is written.
func (j *Job) StartEcho(id core.NodeID) error {
	return j.tellLive(id, "echo\n", "asking for a tree echo")
}

// InjectFailure tells node reporter (through its supervisor stream) to
// hand core.Failed{Node: failed} to its machines, as if its detector had
// declared failed failed. The node writes a [record.FailureInjected] event first.
// It returns once the line is written, not once the node acted on it.
func (j *Job) InjectFailure(reporter, failed core.NodeID) error {
	return j.tellLive(reporter, fmt.Sprintf("fail %d\n", uint32(failed)), "telling it that "+failed.String()+" failed")
}

// tellLive writes line to the supervisor stream of node id, which must be
// running; what describes the line in an error about id.
func (j *Job) tellLive(id core.NodeID, line, what string) error {
	j.mu.Lock()
	p := j.procs[id]
	live := p != nil && j.tracker.Node(id).Live()
	j.mu.Unlock()
	if !live {
		return fmt.Errorf("%w: %v is not running", ErrJob, id)
	}
	if _, err := io.WriteString(p.stdin, line); err != nil {
		return fmt.Errorf("%w: %v: %s: %w", ErrJob, id, what, err)
	}
	return nil
}

// Close stops every node: it closes their supervisor streams, lets them
// stop on their own for a few seconds (each writes its [record.Exit] record),
// kills the rest with SIGKILL, and returns once every process is reaped
// and its event file read to the end. It removes the temporary directory
// of the files, if the job made one. It may be called more than once.
func (j *Job) Close() error {
	j.mu.Lock()
	first := !j.closed
	j.closed = true
	procs := make([]*proc, 0, len(j.procs))
	for _, p := range j.procs {
		procs = append(procs, p)
	}
	j.mu.Unlock()
	if !first {
		j.waiters.Wait()
		if j.tailDone != nil {
			<-j.tailDone
		}
		return nil
	}
	for _, p := range procs {
		p.stdin.Close()
	}
	grace := time.NewTimer(stopGrace)
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		case <-grace.C:
		}
		break
	}
	grace.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
		}
	}
	j.waiters.Wait()
	if j.stopTail != nil {
		close(j.stopTail)
		<-j.tailDone
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.jobLog != nil {
		j.jobLog.Close()
		j.jobLog = nil
	}
	if j.tempDir {
		os.RemoveAll(j.dir)
	}
	return nil
}
