package comm

import (
	"context"
	"fmt"
	"sync"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/transport/mem"
)

// Local starts a job of n ranks inside this process, over an in-memory
// network (transport/mem): each rank is a full node (failure detector,
// membership, matching engine) exactly as in a real job, only the transport
// differs. It is for tests and examples: run one goroutine per session.
//
// When ctx is done every session is finalized. Finalize each session when
// done with it; a rank's finalized endpoint stays on the network until every
// rank of the job has finalized, so that what it sent before finalizing is
// still delivered.
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
	ids := make([]core.NodeID, n)
	for i := range ids {
		ids[i] = core.NodeID(i)
	}
	codec, err := stack.NewCodec()
	if err != nil {
		return nil, err
	}
	// Endpoints close when the last session of the job is finalized (or
	// crashes, see kill).
	var (
		mu       sync.Mutex
		left     int
		eps      = make([]*mem.Endpoint, n)
		sessions = make([]*Session, n)
		done     = make(chan struct{})
	)
	closeAll := func() {
		for _, ep := range eps {
			if ep != nil {
				ep.Close()
			}
		}
	}
	for r := range n {
		ep, err := hub.Join(core.NodeID(r))
		if err != nil {
			closeAll()
			return nil, err
		}
		eps[r] = ep
		for p := range n {
			if p != r {
				ep.SetPeer(core.NodeID(p), mem.Addr(core.NodeID(p)))
			}
		}
	}
	for r := range n {
		stack, err := newStack(core.NodeID(r), ids, o, det)
		if err != nil {
			closeAll()
			return nil, err
		}
		s := newSession(eps[r], n, o)
		ep := eps[r]
		s.onFinal = func() {
			mu.Lock()
			left++
			last := left == n
			mu.Unlock()
			if last {
				closeAll()
				close(done)
			}
		}
		s.crash = func() {
			ep.Close()
			s.onFinal()
		}
		seed := o.seed
		if seed != 0 {
			seed += uint64(r)
		}
		o2 := o
		o2.seed = seed
		if err := s.run(stack, codec, o2, events); err != nil {
			closeAll()
			return nil, err
		}
		sessions[r] = s
	}
	go func() {
		select {
		case <-ctx.Done():
			for _, s := range sessions {
				s.Finalize(context.Background())
			}
		case <-done:
		}
	}()
	return sessions, nil
}

// detectorOf parses a detector name ("" is the default).
func detectorOf(name string) (stack.Detector, error) {
	d := stack.Detector(name)
	if err := d.Validate(); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadArg, err)
	}
	return d, nil
}

// newStack builds rank self's machines (detector and membership) in a job
// of the listed ranks, as package group assembles every node, with the
// loopback timings of stack.DefaultLocalConfig.
func newStack(self core.NodeID, ids []core.NodeID, o options, det stack.Detector, layers ...core.Machine) (*core.Stack, error) {
	cfg := stack.DefaultLocalConfig()
	cfg.ID = self
	cfg.Detector = det
	cfg.AlignHeartbeats = true
	if o.fanout != 0 {
		cfg.Fanout = o.fanout
	}
	st, err := stack.New(cfg, ids, stack.Options{Layers: layers})
	if err != nil {
		return nil, err
	}
	return st.Machine, nil
}
