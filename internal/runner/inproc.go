package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/tracker"
	"github.com/cohort-mp/cohort/internal/workload"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/mem"
	"github.com/cohort-mp/cohort/transport/tcp"
)

// InProcessJob is a job whose nodes are hosts inside the calling process
// rather than `cohort node` processes: each node is a [host.Host] running
// its own event loop on its own goroutine, with the machine stack [NewNode]
// builds for `cohort node`, the same codecs ([NewCodec]) and the same
// seeds, over the transport JobConfig.Transport names: its own
// [tcp.Transport] listening on 127.0.0.1 (TransportTCP: the authenticated
// TCP of a real job, through the kernel's loopback), or an endpoint of one
// in-memory hub shared by the job's nodes (TransportMem: package
// transport/mem, whose direct path hands a frame to the receiver's loop
// from the sender's, with no system call). It measures the protocol
// (and, over TCP, the TCP stack) without the cost of waking one
// operating-system process per node, and it offers the methods of [Job]
// that the membership benchmark uses.
//
// Each node's loop hands every event it emits to a buffer in memory as the
// [record.Record] that a job of processes decodes from the node's JSON
// line ([record.FromEvent]: nothing is encoded or decoded on the way, so the
// loops spend no time on the stream); a collector goroutine takes the
// buffers at the pace of [Job]'s file tailer, so the records and the
// [tracker.Tracker] are those of a job of processes. A node's loop never
// waits for the collector. With JobConfig.EventsDir the collector writes
// the JSON lines `cohort node` would have written.
//
// [InProcessJob.Kill] stops a node the way SIGKILL stops a process: its
// loop is cancelled and its transport closed at once (every socket closed,
// queued frames dropped, no message of farewell), so its peers see their
// connections drop; nothing it emits afterwards reaches the records.
// The methods are safe for concurrent use.
type InProcessJob struct {
	cfg    JobConfig
	ID     string // the job id, "cohort-<hex>"
	secret []byte
	// log is a Job without processes: its record list, tracker and
	// waiters hold the in-process nodes' records.
	log *Job

	mu     sync.Mutex
	nodes  map[core.NodeID]*inprocNode
	closed bool
	runs   sync.WaitGroup // one per node, until its loop and transport stopped

	stopCollect chan struct{}
	collectDone chan struct{}
	// killed tells the collector of a kill (see collectLoop).
	killed chan struct{}

	hub *mem.Hub // the nodes' in-memory network (JobConfig.Transport mem), or nil
}

// inprocNode is one node of an InProcessJob.
type inprocNode struct {
	id     core.NodeID
	join   bool
	tr     transport.Transport
	host   *host.Host
	ctx    context.Context
	cancel context.CancelFunc
	logger *slog.Logger
	// killed: Kill stopped it; claimed: its loop was started, or it was
	// abandoned before (whoever claims it owns its share of runs).
	killed, claimed bool
	done            chan struct{} // closed once its loop returned and its transport closed
	sink            *eventSink
	// collecting serializes the collection of its records, so that they
	// reach the job's in the order it emitted them.
	collecting sync.Mutex
	events     *os.File // the copy of its stream in JobConfig.EventsDir, or nil
	logs       *os.File // its logs in JobConfig.EventsDir, or nil
}

// eventSink is a node's event stream: the host's loop adds one record per
// event (host.Config.OnEvent), the collector takes them.
type eventSink struct {
	mu     sync.Mutex
	recs   []record.Record
	spare  []record.Record // the buffer the collector gave back, for recs
	silent bool            // killed: further records are dropped
}

// add keeps r. The loop writes into a buffer the collector gave back
// (giveBack): growing a fresh one, record by record, would touch new
// memory on every loop during a stabilization.
func (s *eventSink) add(r record.Record) {
	s.mu.Lock()
	if !s.silent {
		if s.recs == nil {
			s.recs, s.spare = s.spare, nil
		}
		s.recs = append(s.recs, r)
	}
	s.mu.Unlock()
}

// silence drops every later record, as a killed process writes nothing more.
func (s *eventSink) silence() {
	s.mu.Lock()
	s.silent = true
	s.mu.Unlock()
}

// take returns the records added since the last call, in order.
func (s *eventSink) take() []record.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := s.recs
	s.recs = nil
	return recs
}

// giveBack returns a buffer take returned, once its records are copied,
// for add to reuse (a small one only).
func (s *eventSink) giveBack(recs []record.Record) {
	if cap(recs) > maxSpareRecords {
		return
	}
	clear(recs)
	s.mu.Lock()
	s.spare = recs[:0]
	s.mu.Unlock()
}

// maxSpareRecords bounds the buffer a sink keeps between collections.
const maxSpareRecords = 64

// StartInProcess starts the job's N nodes as hosts in this process (see
// [InProcessJob]): every node listens on its own port of 127.0.0.1 and
// knows the others' addresses before any of them starts its machines, as
// the supervised processes of [Start] do, and StartInProcess returns once
// every node has installed the same first view. Of cfg it uses N, Fanout,
// Detector, QuietDetector, Seed, PingCount, EventsDir (where each node's
// event stream, n<id>.jsonl, its warnings, n<id>.log, and the job's
// records, job.jsonl, are copied) and StartTimeout; a node's GOMAXPROCS is
// the process's. ctx bounds the start only: the nodes run until Close.
// On error every node started is stopped.
func StartInProcess(ctx context.Context, cfg JobConfig) (_ *InProcessJob, err error) {
	if cfg.N < 1 {
		return nil, fmt.Errorf("%w: %d nodes", ErrJob, cfg.N)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	idb := make([]byte, 6)
	rand.Read(idb)
	start := time.Now()
	j := &InProcessJob{
		cfg:    cfg,
		ID:     "cohort-" + hex.EncodeToString(idb),
		secret: secret,
		log: &Job{cfg: cfg, start: start, changed: make(chan struct{}),
			tracker: tracker.NewTracker(start), procs: map[core.NodeID]*proc{}},
		nodes:       map[core.NodeID]*inprocNode{},
		stopCollect: make(chan struct{}),
		killed:      make(chan struct{}, 1),
		collectDone: make(chan struct{}),
	}
	j.log.ID = j.ID
	switch cfg.Transport {
	case TransportTCP, "":
	case TransportMem:
		if j.hub, err = mem.NewHub(mem.Config{}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
	default:
		return nil, fmt.Errorf("%w: unknown transport %q", ErrJob, cfg.Transport)
	}
	if cfg.EventsDir != "" {
		if err := os.MkdirAll(cfg.EventsDir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
		if j.log.jobLog, err = os.Create(filepath.Join(cfg.EventsDir, "job.jsonl")); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
	}
	go j.collectLoop()
	defer func() {
		if err != nil {
			j.Close()
		}
	}()
	// Every node listens before any starts (the supervisor's "start"):
	// a detector then watches peers that are already there.
	ids := make([]core.NodeID, cfg.N)
	peers := make([]Peer, cfg.N)
	nodes := make([]*inprocNode, cfg.N)
	for i := range ids {
		ids[i] = core.NodeID(i)
		if nodes[i], err = j.listen(ids[i], secret, false); err != nil {
			return nil, err
		}
		peers[i] = Peer{ID: ids[i], Addr: nodes[i].tr.Addr()}
	}
	for _, n := range nodes {
		for _, p := range peers {
			n.tr.SetPeer(p.ID, p.Addr) // its own id is ignored
		}
	}
	for _, n := range nodes {
		if err := j.run(n, ids); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if _, err := j.WaitAgreed(sctx, nil); err != nil {
		return nil, fmt.Errorf("%w: waiting for the first view: %w", ErrJob, err)
	}
	return j, nil
}

// listen opens node id's transport and registers the node.
func (j *InProcessJob) listen(id core.NodeID, secret []byte, join bool) (*inprocNode, error) {
	n := &inprocNode{id: id, join: join, sink: &eventSink{}, done: make(chan struct{})}
	n.logger = slog.New(slog.DiscardHandler)
	if dir := j.cfg.EventsDir; dir != "" {
		var err error
		if n.events, err = os.Create(filepath.Join(dir, fmt.Sprintf("n%d.jsonl", uint32(id)))); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
		if n.logs, err = os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", uint32(id)))); err != nil {
			closeAll(n.events)
			return nil, fmt.Errorf("%w: %w", ErrJob, err)
		}
		// `cohort node`'s default level.
		n.logger = slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	tr, err := j.openTransport(id, secret, n.logger)
	if err != nil {
		closeAll(n.events, n.logs)
		return nil, fmt.Errorf("%w: %v: %w", ErrListen, id, err)
	}
	n.tr = tr
	n.ctx, n.cancel = context.WithCancel(context.Background())
	j.mu.Lock()
	if j.closed || j.nodes[id] != nil {
		closed := j.closed
		j.mu.Unlock()
		tr.Close()
		closeAll(n.events, n.logs)
		if closed {
			return nil, fmt.Errorf("%w: closed", ErrJob)
		}
		return nil, fmt.Errorf("%w: node %v exists", ErrJob, id)
	}
	j.nodes[id] = n
	j.runs.Add(1) // done by run's goroutine, or by abandon
	j.mu.Unlock()
	j.log.add(record.Record{Node: id, Time: time.Now(), Type: "record.Spawned", Event: record.Spawned{Addr: tr.Addr(), Join: join}})
	j.log.add(record.Record{Node: id, Time: time.Now(), Type: "record.Listening", Event: record.Listening{Addr: tr.Addr()}})
	return n, nil
}

// openTransport opens node id's transport: a TCP transport on 127.0.0.1
// (JobConfig.Transport tcp), or an endpoint of the job's hub (mem).
func (j *InProcessJob) openTransport(id core.NodeID, secret []byte, logger *slog.Logger) (transport.Transport, error) {
	if j.hub != nil {
		return j.hub.Join(id)
	}
	tcfg := tcp.DefaultConfig()
	tcfg.Node = id
	tcfg.ListenAddr = "127.0.0.1:0" // the kernel's choice: no port can be taken under us
	tcfg.JobID = j.ID
	tcfg.Secret = secret
	tcfg.Logger = logger
	return tcp.Listen(tcfg)
}

// run builds node n's stack as `cohort node` does (listed: the nodes it
// starts from, itself among them) and starts its loop.
func (j *InProcessJob) run(n *inprocNode, listed []core.NodeID) error {
	opts := NodeOptions{
		Fanout:        MemberConfig(j.cfg.Fanout).Fanout,
		Detector:      DetectorOrDefault(j.cfg.Detector),
		QuietDetector: j.cfg.QuietDetector,
		Join:          n.join,
		Seed:          nodeSeed(j.cfg.Seed, n.id),
	}
	if j.cfg.PingCount > 0 && n.id == 0 && j.cfg.N > 1 {
		opts.PingPeer, opts.PingCount = 1, j.cfg.PingCount
	}
	h, err := j.newHost(n, listed, opts)
	j.mu.Lock()
	if n.claimed { // Close abandoned it
		j.mu.Unlock()
		return fmt.Errorf("%w: closed", ErrJob)
	}
	n.claimed = true
	if err == nil && j.closed {
		err = fmt.Errorf("%w: closed", ErrJob)
	}
	if err != nil {
		j.mu.Unlock()
		j.abandon(n)
		return err
	}
	n.host = h
	j.mu.Unlock()
	go func() {
		defer j.runs.Done()
		runErr := h.Run(n.ctx)
		n.tr.Close()
		j.mu.Lock()
		killed := n.killed
		j.mu.Unlock()
		ex := record.Exited{}
		switch {
		case killed:
			ex = record.Exited{ExitCode: -1, Err: "killed"}
		case runErr != nil:
			ex = record.Exited{ExitCode: 1, Err: runErr.Error()}
		}
		// Its last records come before its exit, as for a process.
		j.collect(n)
		j.log.add(record.Record{Node: n.id, Time: time.Now(), Type: "record.Exited", Event: ex})
		close(n.done)
	}()
	return nil
}

func (j *InProcessJob) newHost(n *inprocNode, listed []core.NodeID, opts NodeOptions) (*host.Host, error) {
	node, err := NewNode(n.id, listed, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: building %v: %w", ErrJob, n.id, err)
	}
	codec, err := NewCodec()
	if err != nil {
		return nil, err
	}
	keep := node.keepLinks(n.tr)
	return host.New(node.Stack, host.Config{
		Transport: n.tr,
		Codec:     codec,
		Seed:      opts.Seed,
		Logger:    n.logger,
		// The records a node of a job of processes writes as JSON lines
		// and its job decodes, taken as they are: the loop encodes
		// nothing the records hold as values (see record.FromEvent).
		OnEvent: func(at time.Duration, ev core.Event) {
			r := record.FromEvent(n.id, time.Now(), at, ev)
			switch ev.(type) {
			case record.PingPong, record.TreeEchoTime, record.EchoOnce, member.Stabilized:
				r.CPU = ProcessCPU()
			}
			n.sink.add(r)
			keep(at, ev)
		},
	})
}

// abandon releases a node whose loop never started; the caller claimed it.
func (j *InProcessJob) abandon(n *inprocNode) {
	n.cancel()
	n.tr.Close()
	j.log.add(record.Record{Node: n.id, Time: time.Now(), Type: "record.Exited", Event: record.Exited{ExitCode: 1, Err: "not started"}})
	close(n.done)
	j.runs.Done()
}

// collectLoop reads the nodes' event streams until Close, polling like
// [Job]'s file tailer: every tailMin after new records, backing off to tailMax
// while the streams stay quiet.
//
// A kill puts the next poll off to tailMin after it, once per poll: the
// survivors' view change then runs without the collector, and without the
// waiters it wakes, on the processors it shares with them (a poll takes
// every node's lock, and a waiter checks the tracker). Without that, the
// polls of the back-off fell on a benchmark's kill, 20 ms after its last
// records, in one sample of ten.
func (j *InProcessJob) collectLoop() {
	defer close(j.collectDone)
	wait := tailMin
	tm := time.NewTimer(wait)
	defer tm.Stop()
	due := time.Now().Add(wait)
	deferred := false
	for {
		select {
		case <-tm.C:
		case <-j.killed:
			if later := time.Now().Add(tailMin); !deferred && later.After(due) {
				deferred = true
				tm.Reset(time.Until(later))
				due = later
			}
			continue
		case <-j.stopCollect:
			return
		}
		deferred = false
		j.mu.Lock()
		nodes := make([]*inprocNode, 0, len(j.nodes))
		for _, id := range slices.Sorted(maps.Keys(j.nodes)) {
			nodes = append(nodes, j.nodes[id])
		}
		j.mu.Unlock()
		got := false
		for _, n := range nodes {
			got = j.collect(n) || got
		}
		if got {
			wait = tailMin
		} else {
			wait = min(2*wait, tailMax)
		}
		tm.Reset(wait)
		due = time.Now().Add(wait)
	}
}

// collect adds the records node n emitted since the last call to the
// job's, writes them to its events file if any, and reports whether there
// were any.
func (j *InProcessJob) collect(n *inprocNode) bool {
	n.collecting.Lock()
	defer n.collecting.Unlock()
	recs := n.sink.take()
	if len(recs) == 0 {
		return false
	}
	if n.events != nil {
		var buf []byte
		for _, r := range recs {
			buf = append(buf, record.EncodeLine(r)...)
		}
		n.events.Write(buf)
	}
	for _, r := range recs {
		j.log.add(r)
	}
	n.sink.giveBack(recs)
	return true
}

// liveNode returns running node id, or an error saying why not.
func (j *InProcessJob) liveNode(id core.NodeID) (*inprocNode, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.liveNodeLocked(id)
}

func (j *InProcessJob) liveNodeLocked(id core.NodeID) (*inprocNode, error) {
	n := j.nodes[id]
	if n == nil {
		return nil, fmt.Errorf("%w: no node %v", ErrJob, id)
	}
	if n.killed || n.host == nil || j.closed {
		return nil, fmt.Errorf("%w: %v is not running", ErrJob, id)
	}
	select {
	case <-n.done:
		return nil, fmt.Errorf("%w: %v is not running", ErrJob, id)
	default:
	}
	return n, nil
}

// Kill stops node id abruptly, as SIGKILL stops a process: nothing it
// emits from now on is recorded, its loop is cancelled and its transport
// closed (its sockets close without any message, its queued frames are
// lost), so its peers see the connections drop. It records when, and
// returns once the node's loop has returned and its exit is recorded (or
// after killReapWait): a caller that goes on to measure what the survivors
// do (the membership benchmark) is not woken by that record meanwhile.
func (j *InProcessJob) Kill(id core.NodeID) error {
	j.mu.Lock()
	n, err := j.liveNodeLocked(id)
	if err != nil {
		j.mu.Unlock()
		return err
	}
	n.killed = true
	j.mu.Unlock()
	at, cpu := time.Now(), ProcessCPU()
	n.sink.silence()
	n.cancel()
	n.tr.Close()
	j.log.add(record.Record{Node: id, Time: at, Type: "record.Killed", Event: record.Killed{}, CPU: cpu})
	awaitGone(n.done)
	select {
	case j.killed <- struct{}{}:
	default: // the collector has one to handle
	}
	return nil
}

// ProcessCPU returns the processor time this process has used so far
// (user and system, every thread), or 0 if the system does not say.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// StartEcho hands [workload.StartEcho] to node id's machines, as a
// supervised node does on its supervisor's "echo" line. It returns once
// the request is queued on the node's loop.
func (j *InProcessJob) StartEcho(id core.NodeID) error {
	n, err := j.liveNode(id)
	if err != nil {
		return err
	}
	if err := n.host.Handle(n.ctx, workload.StartEcho{}); err != nil {
		return fmt.Errorf("%w: asking %v for a tree echo: %w", ErrJob, id, err)
	}
	return nil
}

// InjectFailure hands core.Failed{Node: failed} to node reporter's
// machines (host.Handle), as if its detector had declared failed failed,
// after writing a [record.FailureInjected] event to its stream, as a supervised
// node does on its supervisor's "fail" line. It returns once the verdict is
// queued on the node's loop, not once the node acted on it.
func (j *InProcessJob) InjectFailure(reporter, failed core.NodeID) error {
	n, err := j.liveNode(reporter)
	if err != nil {
		return err
	}
	n.sink.add(record.Record{Node: reporter, Time: time.Now(), Type: "record.FailureInjected", Event: record.FailureInjected{Node: failed}})
	if err := n.host.Handle(n.ctx, core.Failed{Node: failed}); err != nil {
		return fmt.Errorf("%w: telling %v that %v failed: %w", ErrJob, reporter, failed, err)
	}
	return nil
}

// Spawn starts a node that joins the running group (NEW_NODE, §3.7): it
// listens, every live node learns its address, and its machines start with
// Join set and o.Contacts (default: the live members of the newest view, in
// view order) as the nodes to ask. It returns once the node runs, not once
// it is admitted.
func (j *InProcessJob) Spawn(ctx context.Context, o SpawnOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	secret := o.Secret
	if secret == nil {
		secret = j.secret
	}
	contacts := o.Contacts
	if contacts == nil {
		j.log.mu.Lock()
		contacts = j.log.liveViewLocked()
		j.log.mu.Unlock()
	}
	var peers []Peer
	var live []*inprocNode
	j.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(j.nodes)) {
		if n := j.nodes[id]; !n.killed && n.host != nil {
			live = append(live, n)
		}
	}
	for _, c := range contacts {
		if n := j.nodes[c]; n != nil && !n.killed {
			peers = append(peers, Peer{ID: c, Addr: n.tr.Addr()})
		}
	}
	j.mu.Unlock()
	if len(peers) == 0 {
		return fmt.Errorf("%w: no contact for joiner %v", ErrJob, o.ID)
	}
	n, err := j.listen(o.ID, secret, true)
	if err != nil {
		return err
	}
	listed := []core.NodeID{}
	for _, p := range peers {
		n.tr.SetPeer(p.ID, p.Addr)
		listed = append(listed, p.ID)
	}
	// The members of the view that will admit it must be able to send to
	// it before it asks.
	for _, m := range live {
		m.tr.SetPeer(o.ID, n.tr.Addr())
	}
	return j.run(n, append(listed, o.ID))
}

// Records returns the records from index from on (a copy), and a channel
// closed when the next record arrives.
func (j *InProcessJob) Records(from int) ([]record.Record, <-chan struct{}) {
	return j.log.Records(from)
}

// NumRecords is Job.NumRecords.
func (j *InProcessJob) NumRecords() int { return j.log.NumRecords() }

// Inspect calls f with the job's tracker under the job's lock.
func (j *InProcessJob) Inspect(f func(t *tracker.Tracker)) { j.log.Inspect(f) }

// Wait waits until cond, called with the job's tracker each time a record
// arrives, returns true or an error, or ctx is done (see [Job.Wait]).
func (j *InProcessJob) Wait(ctx context.Context, cond func(t *tracker.Tracker) (bool, error)) error {
	return j.log.Wait(ctx, cond)
}

// WaitAgreed waits until every live node except those in outside has
// installed the same view, holding exactly those nodes, and returns it
// (see [Job.WaitAgreed]).
func (j *InProcessJob) WaitAgreed(ctx context.Context, outside map[core.NodeID]bool) (member.ViewInstalled, error) {
	return j.log.WaitAgreed(ctx, outside)
}

// Started returns the time the job was started, the origin of the
// tracker's time stamps.
func (j *InProcessJob) Started() time.Time { return j.log.start }

// Close stops every node (its loop, then its transport), collects the
// last records of their streams, and returns once every goroutine of the job
// has ended. It may be called more than once.
func (j *InProcessJob) Close() error {
	j.mu.Lock()
	first := !j.closed
	j.closed = true
	var nodes, idle []*inprocNode
	for _, n := range j.nodes {
		nodes = append(nodes, n)
		if first && !n.claimed {
			n.claimed = true
			idle = append(idle, n)
		}
	}
	j.mu.Unlock()
	if !first {
		j.runs.Wait()
		<-j.collectDone
		return nil
	}
	for _, n := range idle {
		j.abandon(n)
	}
	for _, n := range nodes {
		n.cancel()
	}
	j.runs.Wait()
	close(j.stopCollect)
	<-j.collectDone
	for _, n := range nodes {
		j.collect(n)
		closeAll(n.events, n.logs)
	}
	return j.log.Close() // closes job.jsonl; the Job has no processes
}
