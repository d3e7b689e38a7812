package comm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// outq orders the frames to one peer: a frame goes straight to the
// transport when nothing waits before it, and to the backlog (drained by
// one goroutine) when the transport's queue is full, so a non-blocking send
// never waits and frames are never reordered. A peer has two: one for its
// data and, in its ctl, one for comm's control frames (controlKind), which
// the transport carries in its control lane: they never wait behind data
// (package doc, "Control frames").
type outq struct {
	s    *Session
	to   core.NodeID
	ctx  context.Context // cancelled when the peer fails or the session ends
	stop context.CancelFunc
	ctl  *outq // the control frames' queue (nil in that one)
	// peer is the transport's memory of to for sendData's direct write.
	peer tcp.DirectRef

	mu      sync.Mutex
	hdr     []byte       // sendData's frame header (mu)
	cts     [maxCTS]byte // sendCTS's payload (mu)
	backlog []sendOp
	// running: a goroutine drains the backlog (set and cleared under mu;
	// atomic for sendData's look without it).
	running atomic.Bool
	idle    chan struct{} // closed when the backlog empties; nil if never waited on
}

type sendOp struct {
	f   wire.Frame
	req *Request
}

func (q *outq) send(f wire.Frame, body []byte, req *Request) error {
	q.mu.Lock()
	return q.sendLocked(f, body, req)
}

// sendData sends a data frame of the session's current epoch, its header
// (kind and h) built in q's own array: under q.mu, which the frame leaves
// before the lock is released (written, or copied into the transport's
// queue or the backlog).
//
// Without a backlog, it first tries the direct write of transport/tcp
// without q.mu, its header in an array of its own: frames to one peer are
// still ordered as their sends are (by happens-before). A send that
// follows one that went to the backlog sees running set, which that one set
// under q.mu before it returned, and queues behind it; the transport
// orders the direct write after whatever it has queued (it then declines
// it, and the locked path queues the frame there). Two sends that nothing
// orders, from two goroutines, may leave in either order, as with the
// lock.
func (q *outq) sendData(kind core.Kind, h dataHeader, body []byte) error {
	return q.sendDataCtx(context.Background(), kind, h, body)
}

// sendDataCtx is sendData whose direct write watches ctx, a blocking
// Send's: when ctx ends before the kernel has taken the frame, the
// transport's writer completes it (the message is still delivered) and
// the send fails with ctx's error.
func (q *outq) sendDataCtx(ctx context.Context, kind core.Kind, h dataHeader, body []byte) error {
	if t := q.s.tcpTr; t != nil && body != nil && !q.running.Load() {
		f := wire.Frame{Kind: kind, Epoch: q.s.epoch.Load()}
		// A small message's header (appendDataHeader's first case) is
		// written here, without the call, in an array of its size: the
		// larger one is zeroed only for the other headers.
		var small [3]byte
		if zt := uint64(h.tag) << 1; kind == kindCData && h.tag >= 0 && h.credit|h.ctxID|zt < 0x80 {
			small[0], small[1], small[2] = byte(h.credit), byte(h.ctxID), byte(zt)
			f.Payload = small[:]
		} else {
			var hdr [maxRTS]byte
			f.Payload = appendDataHeader(hdr[:0], kind, h)
		}
		if ok, err := t.TrySendDirectRef(ctx, &q.peer, q.to, &f, body); ok {
			return q.s.sendErr(q.to, err)
		}
	}
	return q.sendDataQueued(kind, h, body)
}

// sendDataQueued is sendData once the direct write declined (or was not
// tried): the frame goes by sendLocked, under q.mu.
func (q *outq) sendDataQueued(kind core.Kind, h dataHeader, body []byte) error {
	q.mu.Lock()
	q.hdr = appendDataHeader(q.hdr[:0], kind, h)
	return q.sendLocked(wire.Frame{Kind: kind, Epoch: q.s.epoch.Load(), Payload: q.hdr}, body, nil)
}

// sendLocked is send with q.mu held; it releases it.
func (q *outq) sendLocked(f wire.Frame, body []byte, req *Request) error {
	if len(q.backlog) == 0 {
		var err error
		if d := q.s.tcpTr; d != nil && body != nil {
			err = d.SendDirect(q.s.try, q.to, f, body)
		} else {
			if body != nil {
				// A new array: f.Payload may be a pooled request's header
				// array, used again once the send returns.
				f.Payload = append(f.Payload[:len(f.Payload):len(f.Payload)], body...)
				body = nil
			}
			err = q.s.tr.Send(q.s.try, q.to, f)
		}
		if err == nil || !errors.Is(err, transport.ErrQueueFull) {
			q.mu.Unlock()
			if err != nil {
				err = q.s.sendErr(q.to, err)
			}
			if req != nil {
				req.complete(Status{}, err)
			}
			return err
		}
	}
	if q.ctx.Err() != nil {
		q.mu.Unlock()
		err := q.s.sendErr(q.to, q.ctx.Err())
		if req != nil {
			req.complete(Status{}, err)
		}
		return err
	}
	if body != nil {
		// The caller may reuse body once it returns or gives up waiting.
		f.Payload = append(f.Payload[:len(f.Payload):len(f.Payload)], body...)
	}
	q.backlog = append(q.backlog, sendOp{f: f, req: req})
	q.s.stats.backlogged.Add(1)
	if !q.running.Load() {
		q.running.Store(true)
		go q.drain()
	}
	q.mu.Unlock()
	return nil
}

func (q *outq) drain() {
	for {
		q.mu.Lock()
		if len(q.backlog) == 0 {
			q.running.Store(false)
			if q.idle != nil {
				close(q.idle)
				q.idle = nil
			}
			q.mu.Unlock()
			return
		}
		op := q.backlog[0]
		q.mu.Unlock()
		err := q.s.tr.Send(q.ctx, q.to, op.f)
		if err != nil {
			err = q.s.sendErr(q.to, err)
		}
		q.mu.Lock()
		q.backlog[0] = sendOp{}
		q.backlog = q.backlog[1:]
		q.mu.Unlock()
		if op.req != nil {
			op.req.complete(Status{}, err)
		}
	}
}

// wait returns when the backlog is empty or ctx is done.
func (q *outq) wait(ctx context.Context) error {
	q.mu.Lock()
	if !q.running.Load() {
		q.mu.Unlock()
		return nil
	}
	if q.idle == nil {
		q.idle = make(chan struct{})
	}
	idle := q.idle
	q.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (q *outq) cancel() { q.stop() }
