package comm

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/transport/mem"
	"github.com/cohort-mp/cohort/wire"
)

// Local starts a job of n ranks inside this process, over an in-memory
// network (transport/mem): each rank is a full node (failure detector,
// membership, matching engine) exactly as in a real job, only the transport
// differs. It is for tests and examples: run one goroutine per session.
//
// When ctx is done every session is finalized (newcomers' too, see
// [JoinLocal]). Finalize each session when done with it; a rank's
// finalized endpoint stays on the network until every process of the job
// has finalized, so that what it sent before finalizing is still
// delivered.
func Local(ctx context.Context, n int, opts ...Option) ([]*Session, error) {
	return LocalSpares(ctx, n, 0, opts...)
}

// LocalSpares is [Local] for a job of n ranks and spares spare processes
// (see spares.go): it returns n+spares sessions, the last spares of them
// the spares'.
func LocalSpares(ctx context.Context, n, spares int, opts ...Option) ([]*Session, error) {
	if n < 1 || spares < 0 {
		return nil, fmt.Errorf("%w: a job of %d ranks and %d spares", ErrBadArg, n, spares)
	}
	n += spares
	if n > int(core.None) {
		return nil, fmt.Errorf("%w: a job of %d ranks", ErrBadArg, n)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	o.spares = spares
	det, err := detectorOf(o.detector)
	if err != nil {
		return nil, err
	}
	if _, _, err := o.flowLimits(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hub, err := mem.NewHub(mem.Config{})
	if err != nil {
		return nil, err
	}
	events := o.events
	if events != nil {
		events = host.NewLockedWriter(events)
	}
	codec, err := stack.NewCodec()
	if err != nil {
		return nil, err
	}
	job := &localJob{hub: hub, codec: codec, o: o, det: det, events: events, size: n, done: make(chan struct{})}
	for r := range n {
		if _, err := job.join(core.NodeID(r)); err != nil {
			job.closeAll()
			return nil, err
		}
	}
	for r := range n {
		if err := job.start(core.NodeID(r), nil); err != nil {
			job.closeAll()
			return nil, err
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			job.mu.Lock()
			sessions := slices.Clone(job.sessions)
			job.mu.Unlock()
			for _, s := range sessions {
				if s != nil {
					s.Finalize(context.Background())
				}
			}
		case <-job.done:
		}
	}()
	return slices.Clone(job.sessions), nil
}

// JoinLocal starts a new process in the in-process job of s (a session of
// [Local] or [LocalSpares]): a newcomer (newcomer.go), with the next free
// process number, that asks the job's processes to admit it through the
// membership and then waits, as a spare, for a [Comm.Grow] to add it
// ([Session.Welcome]). It fails when the job has had [MaxNewcomers]
// newcomers or every process of the job has finalized.
func JoinLocal(s *Session) (*Session, error) {
	job := s.local
	if job == nil {
		return nil, fmt.Errorf("%w: JoinLocal with a session not of Local", ErrBadArg)
	}
	job.mu.Lock()
	id := core.NodeID(len(job.eps))
	full := int(id) >= job.size+MaxNewcomers
	job.mu.Unlock()
	if full {
		return nil, fmt.Errorf("%w: the job has had %d newcomers already", ErrBadArg, MaxNewcomers)
	}
	contacts, err := job.join(id)
	if err != nil {
		return nil, err
	}
	if err := job.start(id, contacts); err != nil {
		return nil, err
	}
	job.mu.Lock()
	defer job.mu.Unlock()
	return job.sessions[id], nil
}

// localJob is the in-process job of Local: its network, and its
// processes' endpoints and sessions by process number. The endpoints
// close when the last session started is finalized (or crashes, see
// kill).
type localJob struct {
	hub    *mem.Hub
	codec  *wire.Codec
	o      options
	det    stack.Detector
	events io.Writer
	size   int // processes at the start

	mu       sync.Mutex
	eps      []*mem.Endpoint
	sessions []*Session
	started  int  // sessions started
	left     int  // sessions finalized
	closed   bool // every session was finalized: the endpoints are closed
	done     chan struct{}
}

// join puts process id's endpoint on the network, every other endpoint
// knowing its address (the hub is the job's address table), and returns
// the processes before it.
func (j *localJob) join(id core.NodeID) ([]core.NodeID, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, fmt.Errorf("%w: every process of the job has finalized", ErrFinalized)
	}
	ep, err := j.hub.Join(id)
	if err != nil {
		return nil, err
	}
	before := make([]core.NodeID, len(j.eps))
	for p, other := range j.eps {
		before[p] = core.NodeID(p)
		other.SetPeer(id, mem.Addr(id))
		ep.SetPeer(core.NodeID(p), mem.Addr(core.NodeID(p)))
	}
	j.eps = append(j.eps, ep)
	j.sessions = append(j.sessions, nil) // start sets it
	return before, nil
}

// start builds and runs the session of process id: one of the job's
// start (contacts nil), or a newcomer that asks contacts to admit it.
func (j *localJob) start(id core.NodeID, contacts []core.NodeID) error {
	ids := make([]core.NodeID, j.size)
	for i := range ids {
		ids[i] = core.NodeID(i)
	}
	j.mu.Lock()
	ep := j.eps[id]
	j.mu.Unlock()
	st, err := newStackJoin(id, ids, contacts, j.o, j.det)
	if err != nil {
		return err
	}
	s := newSession(ep, j.size, j.o)
	s.local = j
	if j.o.collShm {
		s.collHost = make([]int, j.size)
		copy(s.collHost, j.o.collHosts)
	}
	s.onFinal = func() {
		j.mu.Lock()
		j.left++
		last := j.left == j.started && !j.closed
		j.closed = j.closed || last
		j.mu.Unlock()
		if last {
			j.closeAll()
			close(j.done)
		}
	}
	s.crash = func() {
		ep.Close()
		s.onFinal()
	}
	o := j.o
	if o.seed != 0 {
		o.seed += uint64(id)
	}
	j.mu.Lock()
	j.sessions[id] = s
	j.started++
	j.mu.Unlock()
	return s.run(st, j.codec, o, j.events)
}

func (j *localJob) closeAll() {
	j.mu.Lock()
	eps := slices.Clone(j.eps)
	j.mu.Unlock()
	for _, ep := range eps {
		ep.Close()
	}
}

// detectorOf parses a detector name ("" is the default).
func detectorOf(name string) (stack.Detector, error) {
	d := stack.Detector(name)
	if err := d.Validate(); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadArg, err)
	}
	return d, nil
}

// stackEdit changes a stack's configuration before it is built
// (options.editStack).
type stackEdit func(*stack.Config)

// newStackJoin builds rank self's machines (detector and membership) in
// a job of the listed ranks, as package group assembles every node, with
// the loopback timings of stack.DefaultLocalConfig. A process that joins
// a running job (newcomer.go) gives contacts: it asks them, in order, to
// admit it; nil starts with the job.
func newStackJoin(self core.NodeID, ids, contacts []core.NodeID, o options, det stack.Detector, layers ...core.Machine) (*core.Stack, error) {
	cfg := stack.DefaultLocalConfig()
	cfg.ID = self
	cfg.Detector = det
	cfg.AlignHeartbeats = true
	if o.fanout != 0 {
		cfg.Fanout = o.fanout
	}
	if o.editStack != nil {
		o.editStack(&cfg)
	}
	st, err := stack.New(cfg, ids, stack.Options{Layers: layers, Join: contacts != nil, Contacts: contacts, QuietDetector: o.quietDetector})
	if err != nil {
		return nil, err
	}
	return st.Machine, nil
}
