package comm

import (
	"context"
	"errors"
	"sync"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/wire"
)

// Replication (P2P-MPI §4): with launch.Bootstrap.Replicas = R > 1, each
// logical rank of the job runs as R processes, and package replica's layer
// sits above the membership in every process's stack. The session is
// then the logical rank's: its world has the logical ranks, and every frame
// comm sends to a rank (data, collective steps, revocations, agreement
// steps) is a replica.Send toward that logical rank, which the layer's
// master/commit protocol delivers exactly once and in order at every live
// replica of the destination, whichever replica of the source survives.
// Frames come back as replica.Delivered events and enter the matching
// engine as if they had come from the source rank. A replica's death is
// invisible (the layer's ReplicaLost is only logged); a rank fails, with
// the ordinary ULFM error naming it, when its last replica leaves the view
// (replica.RankFailed).
//
// Every replica must run the same deterministic program: the same sends in
// the same order. What depends on timing (wildcard receives and probes,
// Iprobe, Test, WaitAny, Session.Seed and Session.Decide) is decided by the
// rank's master replica (decide.go); a nonblocking receive from AnySource
// is refused with [ErrReplicatedWildcard].
//
// The path is slower than the unreplicated one: a send is handed to the
// process's event loop (the replication layer is a protocol machine), and
// each message costs acknowledgements and commits.

// replicated is a session's replication state.
type replicated struct {
	layout replica.Layout
	phys   core.NodeID

	mu    sync.Mutex
	queue []replica.Send // sends not yet handed to the event loop, in order
	busy  bool           // the pusher is handing a batch over
	wake  chan struct{}  // signalled (never blocking) when queue grows
	idle  chan struct{}  // closed when queue and batch are done; nil if nobody waits

	finished chan struct{} // closed on replica.Finished

	decMu   sync.Mutex             // one decision at a time, in program order
	decK    uint64                 // the last decision requested
	decided map[uint64]chan []byte // decision → its waiter (under mu)
}

func newReplicated(layout replica.Layout, phys core.NodeID) *replicated {
	return &replicated{layout: layout, phys: phys, wake: make(chan struct{}, 1), finished: make(chan struct{})}
}

// replicaSend queues frame f (payload f.Payload then body) for logical
// rank to. The frame is copied: the caller may reuse body at once. req, if
// not nil, completes when the frame is queued (sends are eager).
func (s *Session) replicaSend(to int, f wire.Frame, body []byte, req *Request) error {
	// A send to a failed rank does not fail here: a replica behind its
	// master may reach a send its master made while the destination lived
	// (the destination has since finished or died), and failing it would
	// make the replicas' programs diverge on timing. The layer drops sends
	// to a failed rank; the failure shows on receives and collectives,
	// which every replica meets at the same point of its program.
	s.mu.Lock()
	state := s.state
	s.mu.Unlock()
	var err error
	switch {
	case state != nil:
		err = state
	default:
		payload := make([]byte, 0, len(f.Payload)+len(body))
		payload = append(append(payload, f.Payload...), body...)
		s.rep.push(replica.Send{Comm: uint64(f.Kind), Dst: to, Payload: payload})
	}
	if req != nil {
		req.complete(Status{}, err)
	}
	return err
}

func (r *replicated) push(e replica.Send) {
	r.mu.Lock()
	r.queue = append(r.queue, e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run hands the queued sends to the event loop, in order, until the
// session ends. A goroutine of its own: sends come from the program's
// goroutines and from the loop itself (frames the engine answers with),
// which must never wait for the loop.
func (r *replicated) run(s *Session) {
	for {
		select {
		case <-r.wake:
		case <-s.base.Done():
			return
		}
		for {
			r.mu.Lock()
			batch := r.queue
			r.queue = nil
			r.busy = len(batch) > 0
			if !r.busy && r.idle != nil {
				close(r.idle)
				r.idle = nil
			}
			r.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, e := range batch {
				if err := s.host.Handle(s.base, e); err != nil {
					return
				}
			}
		}
	}
}

// wait returns once every send queued so far went through the event loop
// (the replication layer handed its messages to the transport), or ctx is
// done.
func (r *replicated) wait(ctx context.Context, s *Session) error {
	r.mu.Lock()
	if len(r.queue) > 0 || r.busy {
		if r.idle == nil {
			r.idle = make(chan struct{})
		}
		idle := r.idle
		r.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		r.mu.Unlock()
	}
	// A barrier: the loop has handled every event queued before this.
	if err := s.host.Do(ctx, func(core.Machine, core.Env) {}); err != nil && !errors.Is(err, host.ErrStopped) {
		return err
	}
	return nil
}

// finish waits, at Finalize, until every process of the job has finished
// its program or left (replica.Finish): a replica behind its peers may
// still need messages and collective steps of ranks whose replicas would
// otherwise be gone, and so failed for it.
func (r *replicated) finish(ctx context.Context, s *Session) error {
	if err := s.host.Handle(ctx, replica.Finish{}); err != nil {
		return s.endErr(err)
	}
	select {
	case <-r.finished:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.base.Done():
		return s.stateErr()
	}
}

// onReplicaEvent takes the replication layer's events (on the loop).
func (s *Session) onReplicaEvent(e core.Event) {
	switch e := e.(type) {
	case replica.Delivered:
		if e.Comm > 0xffff || core.Kind(e.Comm).Proto() != core.ProtoComm {
			s.stats.malformed.Add(1)
			return
		}
		s.dataPath(wire.Frame{Kind: core.Kind(e.Comm), Src: core.NodeID(e.Src), Payload: e.Payload})
	case replica.Decided:
		s.rep.onDecided(e)
	case replica.RankFailed:
		s.fail([]int{e.Rank}, s.epoch.Load())
	case replica.Finished:
		close(s.rep.finished)
	case replica.ReplicaLost:
		s.log.Info("comm: a replica was lost; its rank lives on", "rank", e.Rank, "process", uint32(e.Phys))
	}
}

// processesOf returns the transport ids of world rank r's processes.
func (s *Session) processesOf(r int) []core.NodeID {
	if s.rep == nil {
		return []core.NodeID{core.NodeID(r)}
	}
	ps := make([]core.NodeID, s.rep.layout.Replicas)
	for j := range ps {
		ps[j] = s.rep.layout.Phys(r, j)
	}
	return ps
}
