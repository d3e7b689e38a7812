package comm

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// The replication protocol's control messages: everything the layer sends
// but Data (acknowledgements, commits, decisions and their
// acknowledgements and commits, the end of a program). The layer resends
// only Data, so none of these may be dropped: a lost commit leaves sends
// in a fellow replica's backup table for good (it fills, and the fellow's
// program stops), a lost decision or its acknowledgement leaves both
// replicas waiting for it, a lost Fin leaves a peer's Finalize waiting.
// transport/tcp carries them in its control lane, which its writer drains
// before the data queue, so a peer whose data queue is full still gets
// them next; over a socket with nothing queued they are written at once
// on the sender's goroutine (tcp.Transport.SendNow), a system call that
// never waits, instead of waking the writer goroutine for each. They go
// to the transport at once, never waiting (the layer's lock is held);
// when the control lane itself is full, they wait here, in a lane of
// their own per process, drained by one goroutine, in order.
//
// The lane is bounded by the protocol: acknowledgements and commits are
// cumulative per channel, so a new one replaces the one of its channel
// still waiting (which it supersedes); a rank's decisions wait for each
// other's acknowledgements, and a program finishes once.

// ctlLane is the backlog of the replication protocol's control messages
// to one process.
type ctlLane struct {
	r    *replicated
	to   core.NodeID
	ctx  context.Context // cancelled when the process leaves the view or the session ends
	stop context.CancelFunc

	mu      sync.Mutex
	backlog []ctlFrame
	// running: a goroutine drains the backlog; it holds the frame it
	// sends, which is no longer in backlog.
	running bool
	idle    chan struct{} // closed when the drain ends; nil if never waited on
}

// ctlFrame is a control message waiting in a lane, encoded (its payload
// its own), and the channel whose cumulative level it carries (for an
// Ack or a Commit).
type ctlFrame struct {
	f   wire.Frame
	key ctlKey
}

// ctlKey names what a cumulative control message supersedes: the
// previous one of its kind and channel. The zero key supersedes nothing.
type ctlKey struct {
	kind     core.Kind
	comm     uint64
	src, dst int
}

func ctlKeyOf(m core.Msg) ctlKey {
	switch m := m.(type) {
	case *replica.Ack:
		return ctlKey{kind: replica.KindAck, comm: m.Comm, src: m.Src, dst: m.Dst}
	case *replica.Commit:
		return ctlKey{kind: replica.KindCommit, comm: m.Comm, src: m.Src, dst: m.Dst}
	}
	return ctlKey{}
}

// lane returns process p's control lane; lmu is held.
func (r *replicated) lane(p core.NodeID) *ctlLane {
	if r.lanes == nil {
		r.lanes = make([]*ctlLane, r.layout.Size())
	}
	l := r.lanes[p]
	if l == nil {
		ctx, stop := context.WithCancel(r.sess.base)
		l = &ctlLane{r: r, to: p, ctx: ctx, stop: stop}
		r.lanes[p] = l
	}
	return l
}

// sendControl hands m, a control message of the layer, to the transport
// for process to without waiting, or queues it in to's lane; lmu is held.
func (r *replicated) sendControl(to core.NodeID, m core.Msg) {
	r.enc.B = r.enc.B[:0]
	if err := r.codec.Encode(&r.enc, m); err != nil {
		panic("comm: the replica layer sent a message its codec cannot encode: " + err.Error())
	}
	f := wire.Frame{Kind: m.Kind(), Epoch: r.sess.epoch.Load(), Payload: r.enc.B}
	l := r.lane(to)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return // the process left the view: nobody waits for it
	}
	if !l.running {
		if t := r.sess.tcpTr; t != nil && t.SendNow(to, f) {
			// Written at once, without waiting and without a wake-up of
			// the peer's writer goroutine (a socket with nothing queued).
			r.controlNow.Add(1)
			return
		}
		var err error
		if c, ok := r.sess.tr.(transport.Copier); ok {
			err = c.SendCopy(doneCtx, to, f)
		} else {
			f.Payload = slices.Clone(f.Payload)
			err = r.sess.tr.Send(doneCtx, to, f)
		}
		if err == nil {
			return
		}
		if !errors.Is(err, transport.ErrQueueFull) {
			r.dropped.Add(1)
			return
		}
	}
	f.Payload = slices.Clone(r.enc.B)
	if key := ctlKeyOf(m); key != (ctlKey{}) {
		for i := range l.backlog {
			if l.backlog[i].key == key {
				r.laned.Add(1)
				l.backlog[i].f = f
				return
			}
		}
	}
	r.laned.Add(1)
	l.backlog = append(l.backlog, ctlFrame{f: f, key: ctlKeyOf(m)})
	if !l.running {
		l.running = true
		go l.drain()
	}
}

// drain hands the lane's frames to the transport, in order, each as soon
// as the control lane has room, until the lane is empty or its process
// left the view.
func (l *ctlLane) drain() {
	for {
		l.mu.Lock()
		if len(l.backlog) == 0 || l.ctx.Err() != nil {
			clear(l.backlog)
			l.backlog = l.backlog[:0]
			l.running = false
			if l.idle != nil {
				close(l.idle)
				l.idle = nil
			}
			l.mu.Unlock()
			return
		}
		f := l.backlog[0].f
		l.backlog[0] = ctlFrame{}
		l.backlog = l.backlog[1:]
		l.mu.Unlock()
		if err := l.r.sess.tr.Send(l.ctx, l.to, f); err != nil {
			l.r.dropped.Add(1)
		}
	}
}

// wait returns once the lane is empty, or ctx is done.
func (l *ctlLane) wait(ctx context.Context) error {
	l.mu.Lock()
	if !l.running {
		l.mu.Unlock()
		return nil
	}
	if l.idle == nil {
		l.idle = make(chan struct{})
	}
	idle := l.idle
	l.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitLanes returns once every control lane is empty (Finalize: the last
// messages of the protocol, its Fin among them, leave before the
// transport closes), or ctx is done.
func (r *replicated) waitLanes(ctx context.Context) error {
	r.lmu.Lock()
	lanes := slices.Clone(r.lanes)
	r.lmu.Unlock()
	for _, l := range lanes {
		if l == nil {
			continue
		}
		if err := l.wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stopLanes drops what waits for the given processes, which left the view.
func (r *replicated) stopLanes(ps ...core.NodeID) {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	for _, p := range ps {
		if r.lanes != nil && int(p) < len(r.lanes) && r.lanes[p] != nil {
			r.lanes[p].stop()
		}
	}
}
