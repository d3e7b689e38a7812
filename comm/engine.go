// The matching engine: communicators' state, the receives posted and the
// messages arrived unexpected in each context, and the matching between
// them share the session's lock and its invariants, so they stay in one
// file. The requests they complete are in request.go.

package comm

import (
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
)

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

	failed  []bool // under mu: by rank; the members gone, failed or left
	nfailed int    // under mu
	// left marks, and nleft counts, the members gone that left the job
	// by finalizing (Session.left): they sent everything they meant to,
	// so only a step that needs them fails for them, with a
	// *ProcLeftError (collFailedLocked, goneErrLocked). Under mu.
	left    []bool
	nleft   int
	acked   []bool // under mu: failures acknowledged by AckFailed (or Agree)
	revoked bool   // under mu

	agree      map[uint64]*agreeInst // under mu: by instance
	agreeCalls uint64                // under mu: agreements called here
	virt       *virtState            // under mu

	collSeq atomic.Uint64 // collective calls (coll.Transport.NextSeq)
	seg     segState      // the collectives' shared memory (coll_shm.go)
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
// [*ProcFailedError] in c's ranks (c may be nil: world ranks). It is
// called on every send's and receive's outcome: the common nil is
// decided where it is inlined, without a call.
func (c *commState) translate(err error) error {
	if err == nil {
		return nil
	}
	return c.translateErr(err)
}

// translateErr is translate of a non-nil err.
func (c *commState) translateErr(err error) error {
	pf, ok := err.(*peerFailedError)
	if !ok {
		return err
	}
	r := pf.world
	if c != nil {
		cr, ok := c.rankOf(core.NodeID(pf.world))
		if !ok {
			return err
		}
		r = cr
	}
	if pf.left {
		return &ProcLeftError{Ranks: []int{r}}
	}
	return &ProcFailedError{Ranks: []int{r}}
}

// failedRanks lists the failed ranks, not those that left (under mu).
func (c *commState) failedRanks() []int {
	var rs []int
	for r, f := range c.failed {
		if f && !c.left[r] {
			rs = append(rs, r)
		}
	}
	return rs
}

// unackedRanks lists the failed ranks not acknowledged (under mu). A rank
// that left is no failure to acknowledge: an AnySource receive does not
// fail for it.
func (c *commState) unackedRanks() []int {
	var rs []int
	for r, f := range c.failed {
		if f && !c.acked[r] && !c.left[r] {
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
		left:    make([]bool, len(members)),
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
			c.markGoneLocked(r, s.left[n])
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

// Communicators a peer may address before this process has them. Members
// derive a communicator's id without talking (childID), so a member that
// runs ahead sends on a communicator the others have not created yet; its
// frames wait in a queue made for the context. But a queue made for any
// id a peer names would let a peer grow this process's state without
// bound, so a frame (or an agreement step, a mapping update, a
// revocation) is taken only for a communicator this process has, or one
// of the next commWindow it will derive from one it has, or one of the
// first commWindow derived from those: a member may run up to commWindow
// Dup or Shrink calls ahead on a communicator, two levels deep (a Shrink
// followed by Dups of the survivors' communicator). A peer that names
// another id is cut off ([*ContextError]), so the contexts a peer can
// open here are bounded by the window (each communicator's three
// contexts), and what waits in them by the credit and the unexpected
// limit (credit.go). Replicated jobs are exempt (expectedCommLocked).
const commWindow = 8

// ContextError reports a process cut off for naming a context (Context,
// with its communicator's id in all but the low three bits) of no
// communicator this process has or is about to create (it would run more
// than 8 Dup or Shrink calls ahead of this process).
type ContextError struct {
	Rank    int
	Context uint64
}

// Error names the process and the context.
func (e *ContextError) Error() string {
	return fmt.Sprintf("comm: rank %d sent to context %#x, of no communicator this process has or is about to create", e.Rank, e.Context)
}

// Is makes errors.Is(err, ErrOverrun) true.
func (e *ContextError) Is(target error) bool { return target == ErrOverrun }

// expectedCommLocked reports whether id is the id of a communicator this
// process has, or one a peer may address before this process creates it
// (commWindow).
func (s *Session) expectedCommLocked(id uint64) bool {
	if _, ok := s.comms[id]; ok || s.rep != nil || s.preWelcomeLocked() {
		// A replica may be behind its rank's master by any number of
		// communicators: the frames of a replicated job come through
		// package replica's layer, which bounds them on its side.
		return true
	}
	for _, c := range s.comms {
		n := c.created.Load() // Dup and Shrink take their number before registering
		for k := max(n, 1); k <= n+commWindow; k++ {
			child := childID(c.id, k)
			if child == id {
				return true
			}
			if _, ok := s.comms[child]; ok {
				continue // its own window is looked at as its entry
			}
			for j := uint64(1); j <= commWindow; j++ {
				if childID(child, j) == id {
					return true
				}
			}
		}
	}
	return false
}

// contextErrLocked reports the error that cuts off src for a frame in
// context ctxID, which has no queue here: nil if the context is one of a
// communicator this process has or expects.
func (s *Session) contextErrLocked(src core.NodeID, ctxID uint64) error {
	switch ctxID & subMask {
	case subP2P, subColl, subVirt:
		if s.expectedCommLocked(ctxID &^ subMask) {
			return nil
		}
	}
	return &ContextError{Rank: int(src), Context: ctxID}
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
	// addr, if not 0, is where the data lies in the sender's memory: the
	// receiver may read it from there (singlecopy.go).
	addr uint64
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
		b = newBufs(c)
	}
	return (*b)[:n], b
}

// newBufs returns a new buffer of class c; one of a small class is cut
// from a slab of bufSlabBytes, and the slab's other buffers go to the
// class's pool, so that a class's pool grows by many buffers for one
// allocation. It grows whenever more messages are unexpected at once than
// ever before, or after the collector emptied the pools: a replica that
// runs behind its rank's master (replicas share the cores) may hold
// hundreds, each allocated on its own until the pool covers them.
func newBufs(c int) *[]byte {
	size := 1 << c
	k := bufSlabBytes / size
	if k < 2 {
		nb := make([]byte, size)
		return &nb
	}
	slab, heads := make([]byte, k*size), make([][]byte, k)
	for i := range heads {
		heads[i] = slab[i*size : (i+1)*size : (i+1)*size]
	}
	for i := 1; i < k; i++ {
		unexpectedBufs[c].Put(&heads[i])
	}
	return &heads[0]
}

// bufSlabBytes is the size of the slab newBufs cuts small buffers from:
// 256 of 64 B, 4 of 4 KiB.
const bufSlabBytes = 16 << 10

// recycleOwned recycles a message that is dropped: its pooled buffer, if
// the engine owns it.
func (m *message) recycleOwned(owned bool) {
	if owned {
		m.recycle()
	}
}

// recycle returns a message's pooled buffer once its data was copied out.
// It is inlined: a message taken from a frame (most) has none.
func (m *message) recycle() {
	if m.buf != nil {
		m.putBuf()
	}
}

func (m *message) putBuf() { unexpectedBufs[bufClass(cap(*m.buf))].Put(m.buf) }

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
	cut := s.matchLocked(src, ctxID, &m, owned, &out)
	s.mu.Unlock()
	s.sendOne(out)
	if cut != nil {
		s.cutOff(src, cut)
	}
}

// unpost removes the i-th posted receive of q: the last one, most often
// the only one, without slices.Delete's call to clear the slot.
func (q *queue) unpost(i int) {
	if last := len(q.posted) - 1; i == last {
		q.posted[last] = nil // the array keeps no receive that is done
		q.posted = q.posted[:last]
		return
	}
	q.posted = slices.Delete(q.posted, i, i+1)
}

// matchLocked is deliverMsg under s.mu; the frame the matching calls for,
// if any, is stored in *out. (The message and that frame go by pointer:
// copied by value, the compiler spills a struct with word stores and
// copies it with wider loads, which wait for those stores to leave the
// store buffer, several times per message.) If the sender goes beyond
// its eager credit or the unexpected limit with m (credit.go), or names a
// context of no communicator this process has or expects (commWindow), m
// is refused and the error that cuts the sender off is returned, for the
// caller to act on once the lock is released.
func (s *Session) matchLocked(src int, ctxID uint64, m *message, owned bool, out *outgoing) error {
	node, tag, vnode := m.src, m.tag, m.vnode
	if s.state != nil || s.failed[src] {
		s.stats.dropped.Add(1)
		m.recycleOwned(owned)
		return nil
	}
	charge := 0
	if m.rdv == 0 {
		charge = s.chargeOf(node, ctxID, len(m.data))
	}
	// The credit's check (overrunLocked's first) is made here, and
	// overrunLocked called only to build the error.
	if charge > 0 {
		if pc := &s.credit[node]; pc.held+pc.owed+charge > s.eagerCredit {
			err := s.overrunLocked(ctxID, m, charge, false)
			s.stats.dropped.Add(1)
			m.recycleOwned(owned)
			return err
		}
	}
	q := s.lastQ
	if q == nil || q.id != ctxID {
		if s.queues[ctxID] == nil {
			if err := s.contextErrLocked(node, ctxID); err != nil {
				s.stats.dropped.Add(1)
				m.recycleOwned(owned)
				return err
			}
		}
		q = s.queueLocked(ctxID)
	}
	if c := q.comm; c != nil {
		if c.revoked {
			s.stats.dropped.Add(1)
			s.returnCreditLocked(node, charge, out)
			m.recycleOwned(owned)
			return nil
		}
		if _, ok := c.rankOf(node); !ok {
			s.stats.malformed.Add(1)
			s.returnCreditLocked(node, charge, out)
			m.recycleOwned(owned)
			return nil
		}
	} else if s.revokedID[ctxID&^subMask] {
		s.stats.dropped.Add(1)
		s.returnCreditLocked(node, charge, out)
		m.recycleOwned(owned)
		return nil
	}
	for i, op := range q.posted {
		if op.matches(node, tag, vnode) {
			q.unpost(i)
			s.completeRecvLocked(q, op, m, owned, charge, out)
			return nil
		}
	}
	if err := s.overrunLocked(ctxID, m, 0, true); err != nil {
		s.stats.dropped.Add(1)
		m.recycleOwned(owned)
		return err
	}
	if !owned && m.rdv == 0 {
		m.data, m.buf = keepCopy(m.data)
	}
	q.unexpected = append(q.unexpected, *m)
	s.holdLocked(q, m, 1)
	if len(q.probes) > 0 {
		q.probes = slices.DeleteFunc(q.probes, func(op *recvOp) bool {
			if !op.matches(node, tag, vnode) {
				return false
			}
			op.req.complete(s.statusLocked(q, m), nil)
			return true
		})
	}
	return nil
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
// makes it wait for the data and stores the answer to the sender. charge
// is m's msgCharge, which matchLocked has already worked out.
func (s *Session) completeRecvLocked(q *queue, op *recvOp, m *message, owned bool, charge int, out *outgoing) {
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
	// The request's only possible completer: matched under the lock and
	// off its queue, so neither Cancel nor a failure can reach it. A
	// pooled one needs no claim, nor an atomic operation: its other
	// writers, park (reqParked) and doneChan (reqChan), set their bits
	// under s.mu too, so the state loaded here is the state until the
	// store, which sets reqClaimed and reqDone together. The store is a
	// release (hotsync.StoreRelease32): a call that polls and loads reqDone sees
	// st and err, stored before it. wakePooled runs only when a Done
	// channel or a parked call waits.
	if r := op.req; r.wake != nil {
		r.st, r.err = st, err
		old := r.state.Load()
		hotsync.StoreRelease32(&r.state, old|reqClaimed|reqDone)
		if old&(reqChan|reqParked) != 0 {
			r.wakePooled(old)
		}
	} else {
		r.complete(st, err)
	}
	// returnCreditLocked, without its call.
	if charge != 0 {
		pc := &s.credit[m.src]
		if pc.owed += charge; pc.owed >= s.eagerCredit/creditReturnDiv {
			s.creditFrameLocked(m.src, pc, out)
		}
	}
}

// post matches op against the queued messages of context c.id|sub, or
// leaves it posted, or fails it if it involves a failed rank.
func (s *Session) post(c *commState, sub uint64, op *recvOp) {
	var out outgoing
	s.mu.Lock()
	s.postLocked(c, sub, op, &out)
	s.mu.Unlock()
	if out.kind != 0 || out.addr != 0 { // a frame or a pull is due
		s.sendOne(out)
	}
}

// postLocked is post under s.mu; the frame the matching calls for, if
// any, is stored in *out.
func (s *Session) postLocked(c *commState, sub uint64, op *recvOp, out *outgoing) {
	q := s.queueLocked(c.id | sub)
	// quiet: nothing opErrLocked or failErrLocked checks can fail the
	// receive (the session runs, unreplicated, and q's communicator is
	// neither revoked nor has a member gone), decided without their calls.
	quiet := s.state == nil && s.rep == nil && !q.comm.revoked && q.comm.nfailed == 0
	if !quiet {
		if err := s.opErrLocked(q, op.src, op.probe); err != nil {
			op.req.complete(Status{}, err)
			return
		}
	}
	for i := range q.unexpected {
		m := &q.unexpected[i]
		if op.matches(m.src, m.tag, m.vnode) {
			if op.probe {
				op.req.complete(s.statusLocked(q, m), nil)
				return
			}
			msg := s.unqueueLocked(q, i)
			s.completeRecvLocked(q, op, &msg, true, s.msgCharge(q, &msg), out)
			return
		}
	}
	if !quiet {
		if err := s.failErrLocked(q, op.src); err != nil {
			op.req.complete(Status{}, err)
			return
		}
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
	if q.sub == subColl && c.collFailedLocked() {
		return &ProcFailedError{Ranks: c.failedRanks()}
	}
	return nil
}

// collFailedLocked reports whether a member of c failed other than by
// finalizing: then no collective step starts or waits on c (ULFM; see
// sendPlanLocked). A member that finalized fails only the steps that send
// to it or wait for it.
func (c *commState) collFailedLocked() bool { return c.nfailed > c.nleft }

// failErrLocked reports the failure that a receive from src (core.None:
// any) on q cannot wait through: src failed, or (any source) a failure of
// the communicator is not acknowledged, or (collective context) any member
// failed.
func (s *Session) failErrLocked(q *queue, src core.NodeID) error {
	c := q.comm
	if c.nfailed == 0 {
		return nil
	}
	if q.sub == subColl && c.collFailedLocked() {
		return &ProcFailedError{Ranks: c.failedRanks()}
	}
	if src != core.None {
		if r, ok := c.rankOf(src); ok && c.failed[r] {
			return c.goneErrLocked(r)
		}
		return nil
	}
	if un := c.unackedRanks(); len(un) > 0 {
		return &ProcFailedError{Ranks: un}
	}
	if c.nleft > 0 && c.nfailed == len(c.members)-1 {
		// Every other member is gone, some left: no message can come.
		return &ProcLeftError{Ranks: c.leftRanks()}
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
