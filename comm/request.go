package comm

import (
	"context"
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"sync"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
)

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
	// lent completes the request once transport/tcp gives back the data
	// lent to it (lendRData); made at a request's first such send and kept
	// across the pool's reuses, so that a send lends without allocating.
	lent func()
	// lentTo is the peer that holds the data lent with a collective's
	// step (collTransport.sendStep), for Reclaim.
	lentTo core.NodeID
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
	hotsync.StoreRelease32(&r.state, 0) // no one else touches r now
	r.owed = false
	r.done, r.err, r.data, r.comm, r.elem, r.s = nil, nil, nil, nil, 0, nil
	r.cancelQ, r.cancelOp, r.waiter = nil, nil, nil
	// The structs one statement each: in a tuple assignment their zero
	// values are built in temporaries and copied with wide loads, which
	// wait for the temporaries' stores.
	r.st = Status{}
	// A receive sets every field of op (irecvReq) before the request is
	// posted: only the caller's buffer is let go, for the collector.
	r.op.buf = nil
	r.rdv = rdvSend{}
}

// The requests of blocking calls (Send, Recv and their typed forms, the
// collectives' steps) come from a pool and go back once the call has read
// their outcome: a message costs no allocation in the steady state.
var requestPool = sync.Pool{New: func() any { return &Request{wake: make(chan struct{}, 1)} }}

func pooledRequest(s *Session, c *commState) *Request {
	// The session keeps one request of its own beside the pool: a rank
	// that makes one blocking call at a time (most do) takes it back
	// for less than the pool's bookkeeping.
	s.mu.Lock()
	r := s.takeSpareLocked()
	s.mu.Unlock()
	if r == nil {
		r = requestPool.Get().(*Request)
	}
	r.s, r.comm = s, c
	return r
}

// takeSpareLocked takes the session's spare request, if it has one.
// Taking it under s.mu, by a load and a release store, hands it to one
// call only (as an atomic swap would, a locked instruction that Recv,
// which holds s.mu anyway, would pay per message): every taker holds
// s.mu. A release's store of another request between the load and the
// store here is overwritten, and that request left to the collector
// (release stores only into an empty spare, and no one holds it).
func (s *Session) takeSpareLocked() *Request {
	r := s.spare.Load()
	if r != nil {
		hotsync.StoreReleasePtr(&s.spare, nil)
	}
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
		// Under the session's lock, which completeRecvLocked holds: it
		// reads the state by a load and sets reqDone by a store (see
		// there). The Or stays atomic for completePooled, which runs
		// without the lock.
		s := r.s
		s.mu.Lock()
		old := r.state.Or(reqParked)
		s.mu.Unlock()
		if old&reqDone != 0 {
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
	// no one holds any more, to the garbage collector. Its takers hold
	// s.mu (takeSpareLocked), so it still goes to one call only.
	if s != nil && s.spare.Load() == nil {
		hotsync.StoreReleasePtr(&s.spare, r)
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
// costs its completion two atomic operations (none when the session
// matched it under its lock: see completeRecvLocked).
func (r *Request) completePooled(st Status, err error) {
	if r.state.Or(reqClaimed)&reqClaimed != 0 {
		return
	}
	r.st, r.err = st, err
	r.wakePooled(r.state.Or(reqDone))
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
	if r.wake != nil {
		// reqChan is set under the session's lock, as park sets
		// reqParked; taken before dmu, which wakePooled takes under it.
		r.s.mu.Lock()
		defer r.s.mu.Unlock()
	}
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
// WaitAll on a request, pooled so that waiting allocates nothing (a Done
// channel made for each request waited on would be one allocation per
// wait).
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
