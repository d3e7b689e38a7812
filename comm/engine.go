// The matching engine in one file, a little under 700 lines: matching,
// the unexpected queue and request completion share one lock and its
// invariants.

package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
)

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

// Context ids. Every communicator has an id whose low three bits are zero;
// its traffic travels in contexts id|sub, one per kind of traffic, so that
// point-to-point messages, collective steps and virtual-node messages of one
// communicator, and the traffic of different communicators, never match each
// other.
const (
	worldID  uint64 = 0
	subP2P   uint64 = 0 // the user's point-to-point messages
	subColl  uint64 = 1 // collective steps (coll.Transport)
	subVirt  uint64 = 3 // messages to virtual nodes
	subMask  uint64 = 7
	idStride        = 8
)

// childID derives the id of the n-th communicator created from parent (n ≥
// 1): every member computes the same id without talking, because members
// create communicators in the same order. The ids are a 61-bit hash
// (splitmix64), so two communicators of a job share an id with probability
// about k²/2^62 for k communicators.
func childID(parent, n uint64) uint64 {
	z := parent + n*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	z &^= subMask
	if z == worldID {
		z = idStride
	}
	return z
}

// commState is a communicator's state inside the session. Fields marked
// "under mu" are guarded by the session's mu.
type commState struct {
	id      uint64
	members []core.NodeID       // by rank
	ranks   map[core.NodeID]int // nil for the world (rank = node id)
	self    int

	failed  []bool // under mu: by rank
	nfailed int    // under mu
	acked   []bool // under mu: failures acknowledged by AckFailed (or Agree)
	revoked bool   // under mu

	agree      map[uint64]*agreeInst // under mu: by instance
	agreeCalls uint64                // under mu: agreements called here
	virt       *virtState            // under mu

	collSeq atomic.Uint64 // collective calls (coll.Transport.NextSeq)
	created atomic.Uint64 // communicators derived from this one
}

func (c *commState) rankOf(n core.NodeID) (int, bool) {
	if c.ranks == nil {
		r := int(n)
		return r, r < len(c.members)
	}
	r, ok := c.ranks[n]
	return r, ok
}

// translate turns a send's failure toward a failed world rank into a
// [*ProcFailedError] in c's ranks (c may be nil: world ranks).
func (c *commState) translate(err error) error {
	if err == nil {
		return nil
	}
	pf, ok := err.(*peerFailedError)
	if !ok {
		return err
	}
	if c == nil {
		return &ProcFailedError{Ranks: []int{pf.world}}
	}
	if cr, ok := c.rankOf(core.NodeID(pf.world)); ok {
		return &ProcFailedError{Ranks: []int{cr}}
	}
	return err
}

// failedRanks lists the failed ranks (under mu).
func (c *commState) failedRanks() []int {
	var rs []int
	for r, f := range c.failed {
		if f {
			rs = append(rs, r)
		}
	}
	return rs
}

// unackedRanks lists the failed ranks not acknowledged (under mu).
func (c *commState) unackedRanks() []int {
	var rs []int
	for r, f := range c.failed {
		if f && !c.acked[r] {
			rs = append(rs, r)
		}
	}
	return rs
}

// newComm registers a communicator of the given world ranks (in rank order).
func (s *Session) newComm(id uint64, members []core.NodeID) *Comm {
	c := &commState{
		id:      id,
		members: members,
		failed:  make([]bool, len(members)),
		acked:   make([]bool, len(members)),
		agree:   map[uint64]*agreeInst{},
		self:    -1,
	}
	world := id == worldID
	if !world {
		c.ranks = make(map[core.NodeID]int, len(members))
	}
	for r, n := range members {
		if !world {
			c.ranks[n] = r
		}
		if n == s.self {
			c.self = r
		}
	}
	if c.self < 0 {
		panic("comm: a communicator without this process")
	}
	s.mu.Lock()
	for r, n := range members {
		if s.failed[n] {
			c.failed[r] = true
			c.nfailed++
		}
	}
	if s.revokedID[id] {
		c.revoked = true
		delete(s.revokedID, id)
	}
	s.comms[id] = c
	var sends []outgoing
	for _, sub := range []uint64{subP2P, subColl, subVirt} {
		q := s.queueLocked(id | sub)
		q.comm = c
		// Drop what arrived from non-members before the communicator
		// existed here (none should).
		sends = append(sends, s.dropUnexpectedLocked(q, func(m message) bool {
			_, ok := c.rankOf(m.src)
			return !ok
		})...)
	}
	notes := s.agreeBuf[id]
	delete(s.agreeBuf, id)
	for _, n := range notes {
		sends = append(sends, s.agreeStepLocked(c, n.from, n.m)...)
	}
	s.mu.Unlock()
	s.sendAll(sends)
	return &Comm{s: s, st: c}
}

// queue is the matching state of one context: receives posted and not yet
// matched (in post order), messages arrived and not yet received (in arrival
// order), and blocked probes. MPI's matching rules follow: a message matches
// the first posted receive it fits, a receive takes the first queued message
// it fits, and since one sender's frames arrive in order, messages between a
// pair never overtake each other.
type queue struct {
	id         uint64
	sub        uint64
	comm       *commState // nil until the communicator is created here
	posted     []*recvOp
	unexpected []message
	probes     []*recvOp
}

type message struct {
	src   core.NodeID
	tag   int
	vnode VNode
	data  []byte  // owned by the queue
	buf   *[]byte // data's array, from unexpectedBufs (nil: not pooled)
	// rdv, if not 0, is the id of a ready-to-send (rendezvous.go): the
	// message is size bytes that the sender writes once a receive takes it.
	rdv  uint64
	size int
}

// Messages that arrive before their receive is posted are copied into
// buffers of size classes 64 B … 16 MiB (the largest frame) taken from
// pools, and the buffer goes back once a receive has copied the message
// out: an unexpected message costs no allocation in the steady state.
// Point-to-point messages above EagerMax come by rendezvous and are never
// unexpected; the large classes serve the collectives' steps, which stay
// eager (a 1 MiB Allreduce on 4 ranks sends steps of 256 KiB).
const (
	minBufClass = 6  // 64 B
	maxBufClass = 24 // 16 MiB
)

var unexpectedBufs [maxBufClass + 1]sync.Pool

// bufClass returns the size class of n bytes (≥ minBufClass).
func bufClass(n int) int {
	c := minBufClass
	for 1<<c < n {
		c++
	}
	return c
}

// keepCopy copies data into a pooled buffer (a new slice above the largest
// class).
func keepCopy(data []byte) ([]byte, *[]byte) {
	b, p := pooledBuf(len(data))
	copy(b, data)
	return b, p
}

// pooledBuf returns n bytes from the pool of their class (a new slice
// above the largest class), and the pooled array (nil for a new slice).
func pooledBuf(n int) ([]byte, *[]byte) {
	if n > 1<<maxBufClass {
		return make([]byte, n), nil
	}
	c := bufClass(n)
	b, _ := unexpectedBufs[c].Get().(*[]byte)
	if b == nil {
		nb := make([]byte, 1<<c)
		b = &nb
	}
	return (*b)[:n], b
}

// recycle returns a message's pooled buffer once its data was copied out.
func (m message) recycle() {
	if m.buf != nil {
		unexpectedBufs[bufClass(cap(*m.buf))].Put(m.buf)
	}
}

// recvOp is a posted receive or probe.
type recvOp struct {
	src   core.NodeID // core.None: any source
	tag   int         // AnyTag: any
	vnode VNode
	anyV  bool   // virtual context: any of this process's virtual nodes
	buf   []byte // the receive buffer
	alloc bool   // allocate a buffer of the message's size instead
	probe bool
	req   *Request
	seq   uint64 // post order (Session.posts), to put it back in place
}

func (op *recvOp) matches(src core.NodeID, tag int, vnode VNode) bool {
	return (op.src == core.None || op.src == src) &&
		(op.tag == AnyTag || op.tag == tag) &&
		(op.anyV || op.vnode == vnode)
}

func (s *Session) queueLocked(id uint64) *queue {
	// The last queue used: a program's messages mostly go to one context
	// at a time, and a queue, once made, stays.
	if q := s.lastQ; q != nil && q.id == id {
		return q
	}
	q := s.queues[id]
	if q == nil {
		q = &queue{id: id, sub: id & subMask}
		if c := s.comms[id&^subMask]; c != nil {
			q.comm = c
		}
		s.queues[id] = q
	}
	s.lastQ = q
	return q
}

// deliver hands an arrived message to the matching engine. data is owned by
// the engine if owned is true; otherwise it is copied if it must be kept.
func (s *Session) deliver(src int, ctxID uint64, tag int, vnode VNode, data []byte, owned bool) {
	s.deliverMsg(src, ctxID, message{src: core.NodeID(src), tag: tag, vnode: vnode, data: data}, owned)
}

// deliverMsg is deliver of a message (its data, or a ready-to-send), and
// sends the answers the matching calls for once the lock is released.
func (s *Session) deliverMsg(src int, ctxID uint64, m message, owned bool) {
	var out outgoing
	s.mu.Lock()
	s.matchLocked(src, ctxID, &m, owned, &out)
	s.mu.Unlock()
	s.sendOne(out)
}

// matchLocked is deliverMsg under s.mu; the frame the matching calls for,
// if any, is stored in *out. (The message and that frame go by pointer:
// copied by value, the compiler spills a struct with word stores and
// copies it with wider loads, which wait for those stores to leave the
// store buffer, several times per message.)
func (s *Session) matchLocked(src int, ctxID uint64, m *message, owned bool, out *outgoing) {
	node, tag, vnode := m.src, m.tag, m.vnode
	if s.state != nil || s.failed[src] {
		s.stats.dropped.Add(1)
		return
	}
	q := s.queueLocked(ctxID)
	if c := q.comm; c != nil {
		if c.revoked {
			s.stats.dropped.Add(1)
			s.returnCreditLocked(node, s.msgCharge(q, m), out)
			return
		}
		if _, ok := c.rankOf(node); !ok {
			s.stats.malformed.Add(1)
			s.returnCreditLocked(node, s.msgCharge(q, m), out)
			return
		}
	} else if s.revokedID[ctxID&^subMask] {
		s.stats.dropped.Add(1)
		s.returnCreditLocked(node, s.msgCharge(q, m), out)
		return
	}
	for i, op := range q.posted {
		if op.matches(node, tag, vnode) {
			q.posted = slices.Delete(q.posted, i, i+1)
			s.completeRecvLocked(q, op, m, owned, out)
			return
		}
	}
	if !owned && m.rdv == 0 {
		m.data, m.buf = keepCopy(m.data)
	}
	q.unexpected = append(q.unexpected, *m)
	s.credit[node].held += s.msgCharge(q, m)
	if len(q.probes) > 0 {
		q.probes = slices.DeleteFunc(q.probes, func(op *recvOp) bool {
			if !op.matches(node, tag, vnode) {
				return false
			}
			op.req.complete(s.statusLocked(q, m), nil)
			return true
		})
	}
}

func (s *Session) statusLocked(q *queue, m *message) Status {
	r, _ := q.comm.rankOf(m.src)
	n := len(m.data)
	if m.rdv != 0 {
		n = m.size
	}
	return Status{Source: r, Tag: m.tag, Count: n, VNode: m.vnode}
}

// completeRecvLocked completes receive op with message m and stores in
// *out the credit frame its sender may be owed, or (a ready-to-send)
// makes it wait for the data and stores the answer to the sender.
func (s *Session) completeRecvLocked(q *queue, op *recvOp, m *message, owned bool, out *outgoing) {
	if m.rdv != 0 {
		s.rdvMatchLocked(q, op, m, out)
		return
	}
	st := s.statusLocked(q, m)
	var err error
	if op.alloc {
		if owned && m.buf == nil {
			op.req.data = m.data
		} else {
			op.req.data = slices.Clone(m.data)
			m.recycle()
		}
		if op.req.data == nil {
			op.req.data = []byte{}
		}
	} else {
		copy(op.buf, m.data)
		if len(m.data) > len(op.buf) {
			err = &TruncateError{Need: len(m.data), Have: len(op.buf), Source: st.Source, Tag: st.Tag}
		}
		m.recycle()
	}
	op.req.completeOwned(st, err)
	s.returnCreditLocked(m.src, s.msgCharge(q, m), out)
}

// post matches op against the queued messages of context c.id|sub, or
// leaves it posted, or fails it if it involves a failed rank.
func (s *Session) post(c *commState, sub uint64, op *recvOp) {
	var out outgoing
	s.mu.Lock()
	s.postLocked(c, sub, op, &out)
	s.mu.Unlock()
	s.sendOne(out)
}

// postLocked is post under s.mu; the frame the matching calls for, if
// any, is stored in *out.
func (s *Session) postLocked(c *commState, sub uint64, op *recvOp, out *outgoing) {
	q := s.queueLocked(c.id | sub)
	if err := s.opErrLocked(q, op.src, op.probe); err != nil {
		op.req.complete(Status{}, err)
		return
	}
	for i := range q.unexpected {
		m := &q.unexpected[i]
		if op.matches(m.src, m.tag, m.vnode) {
			if op.probe {
				op.req.complete(s.statusLocked(q, m), nil)
				return
			}
			msg := s.unqueueLocked(q, i)
			s.completeRecvLocked(q, op, &msg, true, out)
			return
		}
	}
	if err := s.failErrLocked(q, op.src); err != nil {
		op.req.complete(Status{}, err)
		return
	}
	op.req.cancelQ, op.req.cancelOp = q, op
	s.posts++
	op.seq = s.posts
	if op.probe {
		q.probes = append(q.probes, op)
	} else {
		q.posted = append(q.posted, op)
	}
}

// iprobe looks for a matching queued message without waiting.
func (s *Session) iprobe(c *commState, sub uint64, src core.NodeID, tag int) (Status, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queueLocked(c.id | sub)
	if err := s.opErrLocked(q, src, true); err != nil {
		return Status{}, false, err
	}
	op := recvOp{src: src, tag: tag, anyV: true}
	for i := range q.unexpected {
		if m := &q.unexpected[i]; op.matches(m.src, m.tag, m.vnode) {
			return s.statusLocked(q, m), true, nil
		}
	}
	if err := s.failErrLocked(q, src); err != nil {
		return Status{}, false, err
	}
	return Status{}, false, nil
}

// withdraw removes a posted receive or probe; it reports false if it had
// completed already.
func (s *Session) withdraw(q *queue, op *recvOp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range []*[]*recvOp{&q.posted, &q.probes} {
		if i := slices.Index(*l, op); i >= 0 {
			*l = slices.Delete(*l, i, i+1)
			return true
		}
	}
	return false
}

// opErrLocked reports why no operation may start on q: the session ended,
// the communicator is revoked, or (collective context, or a probe there)
// a member failed.
func (s *Session) opErrLocked(q *queue, src core.NodeID, probe bool) error {
	if s.state != nil {
		return s.state
	}
	if s.rep != nil && src == core.None && !probe {
		return ErrReplicatedWildcard
	}
	c := q.comm
	if c.revoked {
		return ErrRevoked
	}
	if q.sub == subColl && c.nfailed > 0 {
		return &ProcFailedError{Ranks: c.failedRanks()}
	}
	return nil
}

// failErrLocked reports the failure that a receive from src (core.None:
// any) on q cannot wait through: src failed, or (any source) a failure of
// the communicator is not acknowledged, or (collective context) any member
// failed.
func (s *Session) failErrLocked(q *queue, src core.NodeID) error {
	c := q.comm
	if c.nfailed == 0 {
		return nil
	}
	if q.sub == subColl {
		return &ProcFailedError{Ranks: c.failedRanks()}
	}
	if src != core.None {
		if r, ok := c.rankOf(src); ok && c.failed[r] {
			return &ProcFailedError{Ranks: []int{r}}
		}
		return nil
	}
	if un := c.unackedRanks(); len(un) > 0 {
		return &ProcFailedError{Ranks: un}
	}
	return nil
}

// recheckLocked fails the posted operations of q that can no longer
// complete (after a failure, a revocation or the end of the session).
func (s *Session) recheckLocked(q *queue) {
	if q.comm == nil {
		return
	}
	check := func(op *recvOp) bool {
		err := s.opErrLocked(q, op.src, op.probe)
		if err == nil {
			err = s.failErrLocked(q, op.src)
		}
		if err != nil {
			op.req.complete(Status{}, err)
			return true
		}
		return false
	}
	q.posted = slices.DeleteFunc(q.posted, check)
	q.probes = slices.DeleteFunc(q.probes, check)
}

// failAllLocked fails every pending receive, probe and agreement with err.
func (s *Session) failAllLocked(err error) {
	for _, q := range s.queues {
		for _, op := range q.posted {
			op.req.complete(Status{}, err)
		}
		for _, op := range q.probes {
			op.req.complete(Status{}, err)
		}
		q.posted, q.probes = nil, nil
	}
	s.rdvRecheckLocked() // s.state is err
	for _, c := range s.comms {
		for _, in := range c.agree {
			in.fail(err)
		}
	}
}

// Request is a non-blocking operation in progress (MPI_Request). Wait for it
// with [Request.Wait], poll it with [Request.Test], or wait for several with
// [WaitAll] and [WaitAny]. A send request completes when the message has
// been handed to the transport (its buffer may then be reused); a receive
// request when the message is in the buffer. A request whose peer fails
// completes with a [*ProcFailedError], so waiting never hangs on a dead
// rank. Requests are safe for concurrent use.
type Request struct {
	state  atomic.Uint32 // reqClaimed, reqDone, and on pooled requests reqParked and reqChan
	dmu    sync.Mutex
	done   chan struct{} // made by the first waiter that must block (dmu)
	waiter chan struct{} // the pooled channel of the goroutine in await, if any (dmu)
	st     Status
	err    error
	data   []byte     // alloc receives: the message
	comm   *commState // for translating failures to its ranks
	elem   int        // element size for typed Counts; 0 or 1 for bytes
	// cancelQ and cancelOp locate a posted receive for Cancel (set under
	// the session's mu; a method value instead of a closure: no allocation).
	cancelQ  *queue
	cancelOp *recvOp
	op       recvOp  // the receive's operation (no separate allocation)
	rdv      rdvSend // a large send through the rendezvous (rendezvous.go)
	// unpooled: a frame still queued in the transport may point into hdr
	// (a rendezvous failed before its answer came), so the request never
	// goes back to the pool.
	unpooled atomic.Bool
	hdr      [maxRTS]byte // a send's data header or ready-to-send; a receive's clear-to-send
	s        *Session
	// wake, on the requests of blocking calls (pooled), is signalled
	// instead of done: the request never leaves the call, so nobody else
	// waits on it, and a buffered channel can be used again. It is
	// signalled only if the call parked on it (reqParked, see complete):
	// a call that polled its request to completion costs no channel
	// operation, and no lock. owed: the call parked, and its token has
	// not been taken yet (only the call's goroutine reads and writes it).
	wake chan struct{}
	owed bool
}

// The bits of Request.state. A request is claimed by the first complete,
// which then sets st and err, then reqDone. A pooled request's call sets
// reqParked before it blocks on wake, and reqChan once a Done channel is
// made for it (Cancel, WaitAll): complete learns both from the same
// atomic operation that sets reqDone, so that exactly one of the two
// sides sees the other (see complete).
const (
	reqClaimed uint32 = 1 << iota
	reqDone
	reqParked
	reqChan
)

// isDone reports whether r has completed: its st and err are set.
func (r *Request) isDone() bool { return r.state.Load()&reqDone != 0 }

// newRequest returns a request of a non-blocking call: the caller gets it,
// and may give it back with Free once it completed.
func newRequest(s *Session, c *commState) *Request {
	r := userRequests.Get().(*Request)
	r.comm, r.s = c, s
	return r
}

// userRequests holds the requests given back by Free.
var userRequests = sync.Pool{New: func() any { return new(Request) }}

// Free gives a completed request back for reuse by a later Isend, Irecv
// or other non-blocking call, as MPI_Request_free does after MPI_Wait: a
// loop of non-blocking calls that frees its requests allocates nothing
// per message. Free a request only once its outcome was read (Wait, Test,
// WaitAll or WaitAny reported it complete), and use it no more
// afterwards, nor let another goroutine wait on it. Free of a request not
// yet complete, of nil, or of one of the requests that cohort keeps (a
// large send whose announcement may still be queued) does nothing: the
// garbage collector reclaims it.
func (r *Request) Free() {
	if r == nil || r.wake != nil || !r.isDone() || r.unpooled.Load() {
		return
	}
	r.dmu.Lock() // complete has returned
	r.reset()
	r.dmu.Unlock()
	userRequests.Put(r)
}

// reset clears a completed request for reuse.
func (r *Request) reset() {
	storeRelease32(&r.state, 0) // no one else touches r now
	r.owed = false
	r.done, r.err, r.data, r.comm, r.elem, r.s = nil, nil, nil, nil, 0, nil
	r.cancelQ, r.cancelOp, r.waiter = nil, nil, nil
	// The structs one statement each: in a tuple assignment their zero
	// values are built in temporaries and copied with wide loads, which
	// wait for the temporaries' stores.
	r.st = Status{}
	r.op = recvOp{}
	r.rdv = rdvSend{}
}

// The requests of blocking calls (Send, Recv and their typed forms, the
// collectives' steps) come from a pool and go back once the call has read
// their outcome: a message costs no allocation in the steady state.
var requestPool = sync.Pool{New: func() any { return &Request{wake: make(chan struct{}, 1)} }}

func pooledRequest(s *Session, c *commState) *Request {
	// The session keeps one request of its own beside the pool: a rank
	// that makes one blocking call at a time (most do) takes it back
	// with one swap, for less than the pool's bookkeeping.
	r := s.spare.Swap(nil)
	if r == nil {
		r = requestPool.Get().(*Request)
	}
	r.s, r.comm = s, c
	return r
}

// block waits for a pooled request as Wait does.
func (r *Request) block(ctx context.Context) (Status, error) {
	if r.isDone() || r.poll() {
		return r.result()
	}
	if !r.park(ctx.Done()) {
		return Status{}, ctx.Err()
	}
	return r.result()
}

// park waits, on its call's goroutine, until the pooled request r
// completes or stop (nil: never) is closed, and reports whether r
// completed. Once it has set reqParked without finding reqDone, a token
// is owed: complete sends it, and the call takes it here or in release.
func (r *Request) park(stop <-chan struct{}) bool {
	if !r.owed {
		if r.state.Or(reqParked)&reqDone != 0 {
			return true // completed meanwhile: complete saw no reqParked
		}
		r.owed = true
	}
	select {
	case <-r.wake:
		r.owed = false
		return true
	case <-stop:
		return false
	}
}

// release returns a pooled request once it completed and its outcome was
// read; a request still pending (a send in a backlog when ctx ended) is
// left to the garbage collector. It first waits until complete no longer
// touches r: complete sends an owed token last, and closes a Done channel
// made for r under dmu.
func (r *Request) release() {
	if r.wake == nil || !r.isDone() || r.unpooled.Load() {
		return
	}
	if r.owed {
		<-r.wake
		r.owed = false
	}
	if r.state.Load()&reqChan != 0 {
		r.dmu.Lock()
		done := r.done
		r.dmu.Unlock()
		// Closed by complete under dmu (or by doneChan, if r had
		// completed): complete reads none of r's fields after it, and a
		// next use that takes dmu waits for its Unlock.
		<-done
	}
	s := r.s
	r.reset()
	// The spare is given back by a release store, not a compare-and-swap
	// (a locked instruction, and this is the end of a receive, which the
	// peer waits for): two calls that release at once may both find it
	// empty, and the second store then drops the first's request, which
	// no one holds any more, to the garbage collector. pooledRequest's
	// Swap still hands a request to one call only.
	if s != nil && s.spare.Load() == nil {
		storeReleasePtr(&s.spare, r)
		return
	}
	requestPool.Put(r)
}

// closedChan is the Done channel of a request completed before anyone
// asked for one (most sends on the direct path, receives of messages that
// had arrived): no channel is made for them.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// complete records the outcome; only the first call counts.
func (r *Request) complete(st Status, err error) {
	if r.wake != nil {
		r.completePooled(st, err)
		return
	}
	r.dmu.Lock()
	if r.state.Load()&reqClaimed != 0 {
		r.dmu.Unlock()
		return
	}
	r.st, r.err = st, err
	r.state.Store(reqClaimed | reqDone)
	if r.done != nil {
		close(r.done)
	} else {
		r.done = closedChan
	}
	if r.waiter != nil {
		r.waiter <- struct{}{} // buffered, and signalled once: never blocks
	}
	r.dmu.Unlock()
}

// completePooled is complete on the request of a blocking call, without
// the lock: one atomic operation claims r, and one sets reqDone and
// returns the bits its call set before it. reqParked: the call waits on
// wake, so it gets a token; reqChan: a Done channel was made, so it is
// closed. A call that sets either bit later finds reqDone instead and
// does not wait. Once reqDone is set, complete touches r only for those
// two, which release waits for: a call that saw reqDone otherwise may
// reuse r at once. A request polled to completion (the common case)
// costs its completion two atomic operations (one: completeOwned).
func (r *Request) completePooled(st Status, err error) {
	if r.state.Or(reqClaimed)&reqClaimed != 0 {
		return
	}
	r.st, r.err = st, err
	r.wakePooled(r.state.Or(reqDone))
}

// completeOwned is complete by a request's only possible completer: a
// receive that the session matched under its lock, having taken it off
// its queue (or never queued it), so that neither Cancel nor a failure
// (which complete what they find queued, under the same lock) can reach
// it. A pooled request then needs no claim: one atomic operation sets
// reqClaimed and reqDone together.
func (r *Request) completeOwned(st Status, err error) {
	if r.wake == nil {
		r.complete(st, err)
		return
	}
	r.st, r.err = st, err
	r.wakePooled(r.state.Or(reqClaimed | reqDone))
}

// wakePooled ends the completion of a pooled request whose state was old
// before reqDone was set: it closes the Done channel made for it, and
// sends the token its parked call is owed.
func (r *Request) wakePooled(old uint32) {
	if old&reqChan != 0 {
		r.dmu.Lock()
		close(r.done)
		r.dmu.Unlock()
	}
	if old&reqParked != 0 {
		r.wake <- struct{}{} // buffered, and owed once per use of r: never blocks
	}
}

// doneChan returns the channel closed on completion, making it if needed.
func (r *Request) doneChan() chan struct{} {
	r.dmu.Lock()
	defer r.dmu.Unlock()
	if r.done == nil {
		if r.isDone() {
			return closedChan // a pooled request that completed without one
		}
		r.done = make(chan struct{})
		if r.wake != nil && r.state.Or(reqChan)&reqDone != 0 {
			close(r.done) // completed meanwhile: complete saw no reqChan
		}
	}
	return r.done
}

// result is the status and error to report, once done.
func (r *Request) result() (Status, error) {
	st, err := r.st, r.comm.translate(r.err)
	if r.elem > 1 && (err == nil || isTruncate(err)) {
		if st.Count%r.elem != 0 && err == nil {
			err = fmt.Errorf("%w: %d bytes from rank %d for %d-byte elements", ErrElemSize, st.Count, st.Source, r.elem)
		}
		st.Count /= r.elem
	}
	return st, err
}

func isTruncate(err error) bool {
	_, ok := err.(*TruncateError)
	return ok
}

// Wait blocks until the request completes or ctx is done, and returns its
// status and error (ctx's error if ctx ended first; the request then stays
// pending: wait again, or Cancel it).
func (r *Request) Wait(ctx context.Context) (Status, error) {
	if r.isDone() || r.poll() {
		return r.result()
	}
	if err := r.await(ctx, nil); err != nil {
		return Status{}, err
	}
	return r.result()
}

// waiters are the wake-up channels of goroutines blocked in Wait or
// WaitAll on a request, pooled: waiting allocates nothing, where a Done
// channel made for each request waited on did.
var waiters = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// await blocks until r completes, wake (nil: never) is signalled, or ctx
// ends; it returns ctx's error in the last case. One goroutine at a time
// waits on a pooled channel (Request.waiter); others, and the requests of
// blocking calls, wait on the Done channel.
func (r *Request) await(ctx context.Context, wake <-chan struct{}) error {
	r.dmu.Lock()
	if r.isDone() {
		r.dmu.Unlock()
		return nil
	}
	if r.waiter != nil || r.wake != nil {
		r.dmu.Unlock()
		select {
		case <-r.doneChan():
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	w := waiters.Get().(chan struct{})
	r.waiter = w
	r.dmu.Unlock()
	var err error
	select {
	case <-w:
	case <-wake:
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.dmu.Lock()
	r.waiter = nil
	r.dmu.Unlock()
	select { // complete signalled it before we left
	case <-w:
	default:
	}
	waiters.Put(w)
	return err
}

// Test reports whether the request has completed and, if so, its status and
// error; it never blocks.
//
// On a replicated rank the outcome is the master replica's (a replica
// told "complete" waits for its own copy of the request to complete).
func (r *Request) Test() (Status, bool, error) {
	if r.s != nil && r.s.rep != nil {
		st, done, err := r.test()
		_, done, _, derr := r.s.decideOutcome(r.s.base, 0, done, st, err)
		if derr != nil && !done {
			return Status{}, false, derr
		}
		if !done {
			return Status{}, false, nil
		}
		return r.waitDecided()
	}
	return r.test()
}

// waitDecided waits for a request that the master replica saw complete.
func (r *Request) waitDecided() (Status, bool, error) {
	select {
	case <-r.doneChan():
	case <-r.s.base.Done():
		return Status{}, true, r.s.stateErr()
	}
	st, err := r.result()
	return st, true, err
}

func (r *Request) test() (Status, bool, error) {
	if !r.isDone() {
		return Status{}, false, nil
	}
	st, err := r.result()
	return st, true, err
}

// Done returns a channel closed when the request completes.
func (r *Request) Done() <-chan struct{} { return r.doneChan() }

// Cancel withdraws a pending receive (it then completes with
// context.Canceled). It reports whether it did: false if the request had
// completed already or is a send (a send cannot be withdrawn).
func (r *Request) Cancel() bool {
	if r.s == nil {
		return false
	}
	r.s.mu.Lock()
	q, op := r.cancelQ, r.cancelOp
	r.s.mu.Unlock()
	if q == nil || !r.s.withdraw(q, op) {
		if op != nil {
			// Completed, or its message is being read into its buffer
			// (place.go): wait for that, so that the buffer is no longer
			// written once Cancel returns.
			<-r.doneChan()
		}
		return false
	}
	r.complete(Status{}, context.Canceled)
	return true
}

// data returns the received bytes of an allocating receive.
func (r *Request) bytes() []byte { return r.data }

// WaitAll waits for every request (or until ctx is done) and returns the
// first error among them in order, or nil. nil requests are an error.
//
// A failure does not wait for the rest: as soon as one request has failed
// because a process failed (a [*ProcFailedError]) or the communicator was
// revoked, WaitAll returns that error, even if other requests are still
// pending — they may involve ranks that will never send again (a rank that
// saw the failure one step earlier and left its loop), and waiting for them
// would hang. Those requests stay pending: Wait for them or Cancel them
// before reusing their buffers.
func WaitAll(ctx context.Context, reqs ...*Request) error {
	for i, r := range reqs {
		if r == nil {
			return fmt.Errorf("%w: request %d is nil", ErrBadArg, i)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	for {
		// Take the wake channel before looking, so that a failure after
		// the look wakes us.
		var wake chan struct{}
		if s := reqs[0].s; s != nil {
			s.mu.Lock()
			wake = s.failWake
			s.mu.Unlock()
		}
		var first error
		var pending *Request // the first request not complete
		for _, r := range reqs {
			if !r.isDone() {
				if pending == nil {
					pending = r
				}
				continue
			}
			if _, err := r.result(); err != nil && first == nil {
				first = err
			}
		}
		if pending == nil {
			return first
		}
		if first != nil && stopsWaitAll(first) {
			return first
		}
		// Wait for the first pending request, or for a failure that may
		// have failed another one.
		if pending.poll() {
			continue
		}
		if err := pending.await(ctx, wake); err != nil {
			return err
		}
	}
}

// stopsWaitAll reports whether err, the outcome of a completed request,
// ends WaitAll before the others complete: a failed process or a revoked
// communicator. (A function of its own: the pointer errors.As fills
// escapes, and WaitAll allocates nothing on its way.)
func stopsWaitAll(err error) bool {
	var pf *ProcFailedError
	return errors.As(err, &pf) || errors.Is(err, ErrRevoked)
}

// WaitAny waits until one of the requests completes and returns its index,
// status and error; the lowest index wins among requests already complete.
// It returns -1 and ctx's error if ctx ends first.
func WaitAny(ctx context.Context, reqs ...*Request) (int, Status, error) {
	if len(reqs) == 0 {
		return -1, Status{}, fmt.Errorf("%w: WaitAny of no request", ErrBadArg)
	}
	for i, r := range reqs {
		if r == nil {
			return -1, Status{}, fmt.Errorf("%w: request %d is nil", ErrBadArg, i)
		}
	}
	i, st, err := waitAny(ctx, reqs)
	if s := sessionOf(reqs); s != nil && s.rep != nil {
		// The master replica's index; this replica waits for its request.
		i, _, _, derr := s.decideOutcome(ctx, i, i >= 0, st, err)
		if i < 0 || i >= len(reqs) {
			if derr == nil {
				derr = fmt.Errorf("comm: WaitAny: the master replica's index %d is out of range", i)
			}
			return -1, Status{}, derr
		}
		st, _, err := reqs[i].waitDecided()
		return i, st, err
	}
	return i, st, err
}

// sessionOf returns the session of the first request that has one.
func sessionOf(reqs []*Request) *Session {
	for _, r := range reqs {
		if r.s != nil {
			return r.s
		}
	}
	return nil
}

func waitAny(ctx context.Context, reqs []*Request) (int, Status, error) {
	for i, r := range reqs {
		if st, ok, err := r.test(); ok {
			return i, st, err
		}
	}
	// One goroutine per request would leak on ctx; instead, a shared
	// channel fed by per-request waiters that stop with the call.
	stop := make(chan struct{})
	defer close(stop)
	first := make(chan int, len(reqs))
	for i, r := range reqs {
		go func() {
			select {
			case <-r.doneChan():
				first <- i
			case <-stop:
			}
		}()
	}
	select {
	case <-first:
		// The lowest index among those complete now.
		for i, r := range reqs {
			if st, ok, err := r.test(); ok {
				return i, st, err
			}
		}
		panic("comm: WaitAny woke with no request complete")
	case <-ctx.Done():
		return -1, Status{}, ctx.Err()
	}
}
