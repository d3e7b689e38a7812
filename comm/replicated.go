package comm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

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
//
// Memory: the layer keeps each send in its backup table until every live
// replica of the destination acknowledged it, so a destination that does
// not acknowledge would grow the table without bound. The pusher (run)
// therefore hands the layer no send while its table is full
// (replica.Config.MaxBackup sends or MaxBackupBytes bytes: 4096 and 64
// MiB by default) and waits for replica.BackupRoom; meanwhile the
// program's sends do not complete (a blocking Send waits, an Isend's
// request stays pending), so the program is held back rather than its
// sends piling up. Frames the engine answers with (no request) still
// queue: the protocol bounds them.

// replicated is a session's replication state.
type replicated struct {
	layout replica.Layout
	phys   core.NodeID
	layer  *replica.Layer // read on the event loop only (BackupFull)

	mu    sync.Mutex
	queue []pendingSend // sends not yet handed to the event loop, in order
	busy  bool          // the pusher is handing a batch over
	wake  chan struct{} // signalled (never blocking) when queue grows
	idle  chan struct{} // closed when queue and batch are done; nil if nobody waits
	// room is signalled (never blocking) on replica.BackupRoom; stalled
	// is set while the pusher waits for it, and a program's send then
	// completes only once handed to the layer.
	room    chan struct{}
	stalled atomic.Bool

	finished chan struct{} // closed on replica.Finished

	decMu   sync.Mutex             // one decision at a time, in program order
	decK    uint64                 // the last decision requested
	decided map[uint64]chan []byte // decision → its waiter (under mu)
}

// pendingSend is a send waiting for the pusher, and the request to
// complete once it is handed to the layer (nil: completed already).
type pendingSend struct {
	send replica.Send
	req  *Request
}

func newReplicated(layout replica.Layout, phys core.NodeID, layer *replica.Layer) *replicated {
	return &replicated{layout: layout, phys: phys, layer: layer,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), finished: make(chan struct{})}
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
	if state != nil {
		if req != nil {
			req.complete(Status{}, state)
		}
		return state
	}
	payload := make([]byte, 0, len(f.Payload)+len(body))
	payload = append(append(payload, f.Payload...), body...)
	e := pendingSend{send: replica.Send{Comm: uint64(f.Kind), Dst: to, Payload: payload}}
	if req != nil {
		if s.rep.stalled.Load() {
			// The backup table is full: the request completes once the
			// pusher hands the send over. A pooled request must not go
			// back to its pool before.
			req.unpooled.Store(true)
			e.req = req
		} else {
			req.complete(Status{}, nil)
		}
	}
	s.rep.push(e)
	return nil
}

func (r *replicated) push(e pendingSend) {
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
			if !r.hand(s, batch) {
				return
			}
		}
	}
}

// hand gives the layer the sends of batch, in order, on the loop, holding
// back while its backup table is full; it reports false when the session
// ended first (the requests left then fail).
func (r *replicated) hand(s *Session, batch []pendingSend) bool {
	for i := 0; i < len(batch); {
		from := i
		err := s.host.Do(s.base, func(m core.Machine, _ core.Env) {
			for i < len(batch) && !r.layer.BackupFull() {
				m.Handle(batch[i].send)
				i++
			}
		})
		for _, e := range batch[from:i] {
			if e.req != nil {
				e.req.complete(Status{}, nil)
			}
		}
		if err == nil && i < len(batch) {
			r.stalled.Store(true)
			select {
			case <-r.room:
			case <-s.base.Done():
				err = s.base.Err()
			}
			r.stalled.Store(false)
		}
		if err != nil {
			r.failPending(s, batch[i:])
			return false
		}
	}
	return true
}

// failPending fails the requests of sends the session ended before handing
// over, and of those still queued.
func (r *replicated) failPending(s *Session, rest []pendingSend) {
	r.mu.Lock()
	rest = append(rest, r.queue...)
	r.queue = nil
	r.mu.Unlock()
	err := s.stateErr()
	for _, e := range rest {
		if e.req != nil {
			e.req.complete(Status{}, err)
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
	case replica.BackupFull:
		s.log.Info("comm: the replication backup table is full; sends wait for acknowledgements", "sends", e.Sends, "bytes", e.Bytes)
	case replica.BackupRoom:
		select {
		case s.rep.room <- struct{}{}:
		default:
		}
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
