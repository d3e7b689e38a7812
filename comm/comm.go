package comm

import (
	"context"
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/comm/internal/coll"
	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Comm is a communicator: a group of processes, each with a rank from 0 to
// Size()-1, and a private context in which their messages travel (messages
// of two communicators never match each other, even between the same
// processes). Get the world communicator from [Session.World] and derive
// others with [Comm.Dup] and [Comm.Shrink]. A Comm is safe for concurrent
// use: several goroutines may send and receive on it at once.
type Comm struct {
	s  *Session
	st *commState
}

// Wildcards of a receive or a probe.
const (
	// AnySource matches a message from any rank (MPI_ANY_SOURCE).
	AnySource = -1
	// AnyTag matches a message with any tag (MPI_ANY_TAG).
	AnyTag = -1
)

// Status describes a received (or probed) message.
type Status struct {
	Source int // the sender's rank in the communicator
	Tag    int
	// Count is the message's length: in bytes for the []byte API, in
	// elements for the typed API.
	Count int
	// VNode is the virtual node the message was addressed to (receives of
	// a [Virtual] layer only).
	VNode VNode
}

// Rank returns this process's rank in the communicator.
func (c *Comm) Rank() int { return c.st.self }

// Size returns the number of ranks of the communicator (failed ones
// included).
func (c *Comm) Size() int { return len(c.st.members) }

// WorldRank returns the world rank of rank r of this communicator, or -1 if
// r is out of range.
func (c *Comm) WorldRank(r int) int {
	if r < 0 || r >= len(c.st.members) {
		return -1
	}
	return int(c.st.members[r])
}

// checkDest and checkSource decide the valid case where they are inlined,
// without a call; the error is built out of line.
func (c *Comm) checkDest(dest, tag int) error {
	if uint(dest) < uint(len(c.st.members)) && tag >= 0 {
		return nil
	}
	return c.destErr(dest, tag)
}

func (c *Comm) destErr(dest, tag int) error {
	if dest < 0 || dest >= c.Size() {
		return fmt.Errorf("%w: destination %d, communicator of %d ranks", ErrRank, dest, c.Size())
	}
	return fmt.Errorf("%w: tag %d (tags are ≥ 0; AnyTag is for receives)", ErrTag, tag)
}

func (c *Comm) checkSource(src, tag int) error {
	// AnySource and AnyTag are -1: the valid values are those from -1.
	if src >= AnySource && src < len(c.st.members) && tag >= AnyTag {
		return nil
	}
	return c.sourceErr(src, tag)
}

func (c *Comm) sourceErr(src, tag int) error {
	if src != AnySource && (src < 0 || src >= c.Size()) {
		return fmt.Errorf("%w: source %d, communicator of %d ranks", ErrRank, src, c.Size())
	}
	return fmt.Errorf("%w: tag %d (tags are ≥ 0, or AnyTag)", ErrTag, tag)
}

// Send sends buf to rank dest with the given tag (≥ 0) and returns when buf
// may be reused (MPI's standard mode). A message of at most [EagerMax]
// bytes is handed to the transport at once, without waiting for the
// matching receive, while it fits in dest's credit toward this process
// (credit.go); a larger one, or one beyond the credit, waits until dest
// has posted a receive that takes it (the rendezvous protocol:
// rendezvous.go), so a program where two ranks both Send to each other
// before either receives may block, as it may under MPI (use Isend, or
// Sendrecv-style ordering). Messages from one rank to another are received
// in the order they were sent when they match the same receives
// (non-overtaking), whichever way each went. If dest has failed, Send
// returns a [*ProcFailedError] naming it; if the communicator is revoked,
// [ErrRevoked]. ctx bounds the wait (for the receive, and for the kernel
// to take an eager message, or a large one's data once the receive asked
// for it), and Send then fails with an error wrapping ctx's. As a
// cancelled send may have completed under MPI, a message whose Send
// failed so may still be delivered: one the kernel had taken in part is
// completed by the transport (a stream cannot drop half a frame), and one
// whose wait for its receive ctx ended is delivered when dest asks for it
// (it was copied). Either way buf is free once Send returns, and dest
// receives the message whole or not at all.
func (c *Comm) Send(ctx context.Context, buf []byte, dest, tag int) error {
	if err := c.checkDest(dest, tag); err != nil {
		return err
	}
	// send's steps, without its call, and sendPlanLocked's in its common
	// case (the session runs unreplicated, c is neither revoked nor has
	// a member gone, dest is another process already sent to, and the
	// message fits in its credit), without that call either.
	s, st := c.s, c.st
	var p sendPlan
	s.mu.Lock()
	if node := st.members[dest]; s.state == nil && !st.revoked && st.nfailed == 0 && s.rep == nil && node != s.self &&
		s.out[node] != nil && len(buf) <= EagerMax && eagerCharge(len(buf)) <= s.credit[node].avail {
		pc := &s.credit[node]
		pc.avail -= eagerCharge(len(buf))
		p.q, p.eager, p.credit = s.out[node], true, pc.owed
		pc.owed = 0
	} else {
		s.sendPlanLocked(&p, st, subP2P, dest, len(buf))
	}
	s.mu.Unlock()
	if p.err == nil && p.eager && p.q != nil {
		q, h := p.q, dataHeader{credit: uint64(p.credit), ctxID: st.id | subP2P, tag: tag}
		// sendData's direct write of a small message (a credit and a
		// context of one byte each: its header written in place), without
		// its call.
		if t := s.tcpTr; t != nil && p.credit > 0 && h.credit|h.ctxID|uint64(tag)<<1 < 0x80 && !q.running.Load() {
			var f wire.Frame
			f.Kind, f.Epoch = kindCData, s.epoch.Load()
			var small [3]byte
			small[0], small[1], small[2] = byte(h.credit), byte(h.ctxID), byte(uint64(tag)<<1)
			f.Payload = small[:]
			if ok, err := t.TrySendDirectRef(ctx, &q.peer, q.to, &f, nonNil(buf)); ok {
				if err != nil {
					return st.translate(s.sendErr(q.to, err))
				}
				return nil
			}
			return st.translate(q.sendDataQueued(kindCData, h, nonNil(buf)))
		}
		return st.translate(q.sendDataCtx(ctx, p.kind(false), h, nonNil(buf)))
	}
	return s.sendPlanned(ctx, st, subP2P, dest, tag, buf, &p)
}

// Isend starts sending buf to rank dest and returns its request at once.
// buf must not be modified until the request completes: at once for a
// message sent eagerly (at most [EagerMax] bytes, within dest's credit),
// once dest posted its receive for another (which is never copied: it
// stays in buf until then). Errors (bad arguments included) are reported
// by the request.
func (c *Comm) Isend(buf []byte, dest, tag int) *Request {
	if err := c.checkDest(dest, tag); err != nil {
		return failedRequest(c, err)
	}
	return c.s.isend(c.st, subP2P, dest, tag, 0, buf)
}

// Recv receives a message from rank src (or AnySource) with tag tag (or
// AnyTag) into buf and returns its status. A message longer than buf fills
// buf and fails with a [*TruncateError] (the message is consumed). If src
// has failed, Recv fails with a [*ProcFailedError] naming it once the
// messages src sent before failing are received; an AnySource receive fails
// while some failure of the communicator is not acknowledged
// ([Comm.AckFailed]). When ctx is done the receive is withdrawn and ctx's
// error returned.
func (c *Comm) Recv(ctx context.Context, buf []byte, src, tag int) (Status, error) {
	if err := c.checkSource(src, tag); err != nil {
		return Status{}, err
	}
	if c.s.rep != nil {
		var err error
		if src, err = c.resolveSource(ctx, src, tag); err != nil {
			return Status{}, err
		}
	}
	// recv's steps, and irecvReq's and post's, without their calls (a
	// pooled request's elem is 0).
	s, st := c.s, c.st
	node := core.None
	if src != AnySource {
		node = st.members[src]
	}
	// pooledRequest's take of the session's spare under the lock the
	// receive takes anyway.
	s.mu.Lock()
	req := s.takeSpareLocked()
	if req == nil {
		s.mu.Unlock()
		req = requestPool.Get().(*Request)
		s.mu.Lock()
	}
	req.s, req.comm = s, st
	op := &req.op
	op.src, op.tag, op.vnode, op.anyV, op.buf = node, tag, 0, true, buf
	op.alloc, op.probe, op.req, op.seq = false, false, req, 0
	// postLocked's common case, without its call: the last queue looked
	// at is the communicator's, nothing can fail the receive (as
	// postLocked's quiet) and no message waits there unexpected, so the
	// receive is posted.
	if q := s.lastQ; q != nil && q.id == st.id|subP2P && len(q.unexpected) == 0 &&
		s.state == nil && s.rep == nil && !q.comm.revoked && q.comm.nfailed == 0 {
		req.cancelQ, req.cancelOp = q, op
		s.posts++
		op.seq = s.posts
		q.posted = append(q.posted, op)
		s.mu.Unlock()
		return req.awaitRecv(ctx)
	}
	var out outgoing
	s.postLocked(st, subP2P, op, &out)
	s.mu.Unlock()
	if out.kind != 0 || out.addr != 0 { // a frame or a pull is due
		s.sendOne(out)
	}
	return req.awaitRecv(ctx)
}

// Irecv posts a receive into buf and returns its request at once; buf must
// not be touched until the request completes.
func (c *Comm) Irecv(buf []byte, src, tag int) *Request {
	if err := c.checkSource(src, tag); err != nil {
		return failedRequest(c, err)
	}
	return c.s.irecv(c.st, subP2P, buf, false, src, tag, 0, true)
}

// Probe blocks until a message from src (or AnySource) with tag (or AnyTag)
// can be received, and returns its status without receiving it. It fails as
// Recv does when the source has failed.
func (c *Comm) Probe(ctx context.Context, src, tag int) (Status, error) {
	if err := c.checkSource(src, tag); err != nil {
		return Status{}, err
	}
	if c.s.rep != nil && src == AnySource {
		return c.probeAny(ctx, tag)
	}
	return c.probeLocal(ctx, src, tag)
}

func (c *Comm) probeLocal(ctx context.Context, src, tag int) (Status, error) {
	req := newRequest(c.s, c.st)
	c.s.post(c.st, subP2P, &recvOp{src: c.node(src), tag: tag, anyV: true, probe: true, req: req})
	return waitRecv(ctx, req)
}

// Iprobe reports whether a message from src with tag can be received now,
// and its status, without waiting.
func (c *Comm) Iprobe(src, tag int) (Status, bool, error) {
	if err := c.checkSource(src, tag); err != nil {
		return Status{}, false, err
	}
	st, ok, err := c.s.iprobe(c.st, subP2P, c.node(src), tag)
	_, ok, st, err = c.s.decideOutcome(c.s.base, 0, ok, st, err)
	return st, ok, err
}

// Dup returns a new communicator with the same ranks and a new context
// (MPI_Comm_dup). Every rank must call Dup (and Shrink) on a communicator in
// the same order; no message is exchanged.
func (c *Comm) Dup() (*Comm, error) {
	if err := c.s.commErr(c.st); err != nil {
		return nil, err
	}
	return c.s.newComm(childID(c.st.id, c.st.created.Add(1)), slices.Clone(c.st.members)), nil
}

// node returns the world node of rank r, or core.None for AnySource.
func (c *Comm) node(r int) core.NodeID {
	if r == AnySource {
		return core.None
	}
	return c.st.members[r]
}

// commErr reports why no new operation may start on c: the session ended
// or c is revoked.
func (s *Session) commErr(c *commState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != nil {
		return s.state
	}
	if c.revoked {
		return ErrRevoked
	}
	return nil
}

func failedRequest(c *Comm, err error) *Request {
	r := newRequest(c.s, c.st)
	r.complete(Status{}, err)
	return r
}

// waitRecv waits for a receive or probe; when ctx ends first the operation
// is withdrawn (unless it completed meanwhile).
func waitRecv(ctx context.Context, req *Request) (Status, error) {
	st, err := req.Wait(ctx)
	if err != nil && ctx.Err() != nil && err == ctx.Err() {
		if !req.Cancel() {
			return req.result()
		}
	}
	return st, err
}

// send is a blocking send (a pooled request).
func (s *Session) send(ctx context.Context, c *commState, sub uint64, dest, tag int, data []byte) error {
	var p sendPlan
	s.mu.Lock()
	s.sendPlanLocked(&p, c, sub, dest, len(data))
	s.mu.Unlock()
	if p.err == nil && p.eager && p.q != nil && sub != subVirt {
		// The common case: nothing waits for an eager message once the
		// transport has it, so it needs no request; its header is built
		// in the queue's own array (outq.sendData).
		err := p.q.sendDataCtx(ctx, p.kind(false), dataHeader{credit: uint64(p.credit), ctxID: c.id | sub, tag: tag}, nonNil(data))
		return c.translate(err)
	}
	return s.sendPlanned(ctx, c, sub, dest, tag, data, &p)
}

// sendPlanned is send of a message that needs a request: a rendezvous, a
// send to this process, one that fails at once, or a virtual node's.
func (s *Session) sendPlanned(ctx context.Context, c *commState, sub uint64, dest, tag int, data []byte, p *sendPlan) error {
	req := pooledRequest(s, c)
	if ctx.Done() != nil {
		req.rdv.ctx = ctx // a rendezvous's data is written watching it
	}
	req = s.isendPlanned(req, c, sub, dest, tag, 0, data, p)
	_, err := req.block(ctx)
	if err != nil && req.rdv.body != nil && !req.isDone() {
		s.rdvDetach(req) // the caller's buffer is free once Send returns
	}
	req.release()
	return err
}

// recv is a blocking receive into buf (a pooled request); elem is the
// element size of a typed receive (0: bytes).
func (s *Session) recv(ctx context.Context, c *commState, sub uint64, buf []byte, src, tag, elem int) (Status, error) {
	req := s.irecvReq(pooledRequest(s, c), c, sub, buf, false, src, tag, 0, true)
	req.elem = elem
	return req.awaitRecv(ctx)
}

// awaitRecv waits for a pooled receive request as a blocking call does:
// when ctx ends first the receive is withdrawn (or, if it completed or is
// being filled meanwhile, its outcome is taken), and the request goes back
// to the pool.
func (req *Request) awaitRecv(ctx context.Context) (Status, error) {
	// block's steps, without its call.
	var st Status
	var err error
	if req.isDone() || req.poll() || req.park(ctx.Done()) {
		if req.elem <= 1 { // result's bytes, without its call
			st, err = req.st, req.comm.translate(req.err)
		} else {
			st, err = req.result()
		}
	} else if err = ctx.Err(); !req.Cancel() {
		st, err = req.result()
	}
	req.release()
	return st, err
}

// isend sends data to rank dest of c in context c.id|sub.
func (s *Session) isend(c *commState, sub uint64, dest, tag int, vnode VNode, data []byte) *Request {
	return s.isendReq(newRequest(s, c), c, sub, dest, tag, vnode, data)
}

func (s *Session) isendReq(req *Request, c *commState, sub uint64, dest, tag int, vnode VNode, data []byte) *Request {
	var p sendPlan
	s.mu.Lock()
	s.sendPlanLocked(&p, c, sub, dest, len(data))
	s.mu.Unlock()
	return s.isendPlanned(req, c, sub, dest, tag, vnode, data, &p)
}

// sendPlan is how a send goes, decided under the session's lock.
type sendPlan struct {
	err    error // the send fails with it
	q      *outq // the backlog toward the destination; nil for this process, or a replicated job
	eager  bool  // false: through the rendezvous (rendezvous.go)
	credit int   // the credit the data frame returns to the destination
}

// kind is the data frame's kind.
func (p *sendPlan) kind(virtual bool) core.Kind {
	switch {
	case virtual:
		return kindVData
	case p.credit > 0:
		return kindCData
	}
	return kindData
}

// sendPlanLocked decides how a send of n bytes to rank dest of c, in
// context c.id|sub, goes (under s.mu: it spends the destination's credit
// and takes what it is owed).
func (s *Session) sendPlanLocked(p *sendPlan, c *commState, sub uint64, dest, n int) {
	node := c.members[dest]
	// Field by field, as irecvReq fills its operation.
	p.err, p.q, p.eager, p.credit = nil, nil, true, 0
	// One test for the common case: the session runs, and c is neither
	// revoked nor has a member gone.
	if s.state != nil || c.revoked || c.nfailed != 0 {
		if p.err = s.sendErrLocked(c, sub, dest); p.err != nil {
			return
		}
	}
	if s.rep == nil && node != s.self {
		if p.q = s.out[node]; p.q == nil {
			p.q = s.outqLocked(int(node)) // the first send to node
		}
		if sub == subP2P {
			// A point-to-point message is eager if it is small and fits
			// in the credit toward dest (credit.go).
			p.eager = n <= EagerMax && s.spendCreditLocked(node, n)
		}
		if p.eager && sub != subVirt {
			p.credit = s.owedLocked(node) // returned with the data
		}
	}
}

// sendErrLocked reports why a send to rank dest of c, in context
// c.id|sub, fails at once: the session ended, c is revoked, dest is gone,
// or (a collective step) a member of c failed.
func (s *Session) sendErrLocked(c *commState, sub uint64, dest int) error {
	switch {
	case s.state != nil:
		return s.state
	case c.revoked:
		return ErrRevoked
	case c.failed[dest]:
		return c.goneErrLocked(dest)
	case sub == subColl && c.collFailedLocked():
		// ULFM: a collective step starts on no communicator with a known
		// failed member, a send no more than a receive (opErrLocked) —
		// otherwise a rank whose part is only sends (a Bcast root whose
		// subtree is alive) completes collective after collective with
		// eager sends while the others fail theirs.
		return &ProcFailedError{Ranks: c.failedRanks()}
	}
	return nil
}

// isendPlanned is isendReq once its plan is made.
func (s *Session) isendPlanned(req *Request, c *commState, sub uint64, dest, tag int, vnode VNode, data []byte, p *sendPlan) *Request {
	node := c.members[dest]
	if p.err != nil {
		req.complete(Status{}, p.err)
		return req
	}
	if node == s.self {
		s.deliver(int(node), c.id|sub, tag, vnode, slices.Clone(data), true)
		req.complete(Status{}, nil)
		return req
	}
	if !p.eager {
		s.rdvStart(req, c.id|sub, node, tag, data)
		return req
	}
	kind := p.kind(sub == subVirt)
	head := appendDataHeader(req.hdr[:0], kind, dataHeader{credit: uint64(p.credit), ctxID: c.id | sub, tag: tag, vnode: uint64(vnode)})
	if p.q != nil {
		p.q.sendEpoch(wire.Frame{Kind: kind, Payload: head}, nonNil(data), req)
	} else {
		s.sendFrame(int(node), wire.Frame{Kind: kind, Payload: head}, nonNil(data), req)
	}
	return req
}

// nonNil is data, or an empty slice for nil: the transport's direct path
// takes a nil body for "no body" (outq.send).
func nonNil(data []byte) []byte {
	if data == nil {
		return []byte{}
	}
	return data
}

// irecv posts a receive on context c.id|sub.
func (s *Session) irecv(c *commState, sub uint64, buf []byte, alloc bool, src, tag int, vnode VNode, anyV bool) *Request {
	return s.irecvReq(newRequest(s, c), c, sub, buf, alloc, src, tag, vnode, anyV)
}

func (s *Session) irecvReq(req *Request, c *commState, sub uint64, buf []byte, alloc bool, src, tag int, vnode VNode, anyV bool) *Request {
	node := core.None
	if src != AnySource {
		node = c.members[src]
	}
	// Field by field, not a composite literal: that is built on the stack
	// and copied with wide loads that wait for its stores.
	op := &req.op
	op.src, op.tag, op.vnode, op.anyV, op.buf = node, tag, vnode, anyV, buf
	op.alloc, op.probe, op.req, op.seq = alloc, false, req, 0
	s.post(c, sub, op)
	return req
}

// collTransport is the communicator's private channel for the collectives
// (package coll): its messages travel in their own context, so they never
// match user point-to-point traffic, and every pending and later receive,
// and every later send, fails once a member of the communicator is known
// failed.
func (c *Comm) collTransport() coll.Transport { return collTransport{c} }

type collTransport struct{ c *Comm }

func (t collTransport) Rank() int       { return t.c.Rank() }
func (t collTransport) Size() int       { return t.c.Size() }
func (t collTransport) NextSeq() uint64 { return t.c.st.collSeq.Add(1) - 1 }

func (t collTransport) Send(ctx context.Context, to, tag int, data []byte) error {
	if to < 0 || to >= t.c.Size() {
		return fmt.Errorf("%w: collective step to rank %d of %d", ErrRank, to, t.c.Size())
	}
	err := t.c.s.send(ctx, t.c.st, subColl, to, tag, data)
	return err
}

func (t collTransport) Recv(ctx context.Context, from, tag int) ([]byte, error) {
	if from < 0 || from >= t.c.Size() {
		return nil, fmt.Errorf("%w: collective step from rank %d of %d", ErrRank, from, t.c.Size())
	}
	req := t.c.s.irecv(t.c.st, subColl, nil, true, from, tag, 0, true)
	if _, err := waitRecv(ctx, req); err != nil {
		return nil, err
	}
	return req.bytes(), nil
}
