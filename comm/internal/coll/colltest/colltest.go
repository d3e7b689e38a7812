// Package colltest provides an in-memory coll.Transport for tests and
// benchmarks of the collective algorithms: n endpoints in one process, one per
// rank, each run by its own goroutine, with unbounded per-(sender, tag)
// queues, so Send never blocks (New) or with rendezvous sends (NewSync), and
// with injectable failures.
//
// Usage:
//
//	net, err := colltest.New(n)
//	errs := net.Run(func(ep *colltest.Endpoint) error {
//		return coll.Allreduce(ctx, ep, send[ep.Rank()], recv[ep.Rank()], coll.Sum[float64]())
//	})
//
// Failures model what comm does after ULFM: once a rank is known failed, every
// pending and later Recv of the communicator, on every rank, returns an error
// naming it (*PeerFailedError); the failed rank's own calls return ErrCrashed.
package colltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ErrCrashed is returned by every call of an endpoint that FailAt crashed.
var ErrCrashed = errors.New("colltest: this rank crashed (injected)")

// PeerFailedError is returned by Recv once rank Rank is known failed.
type PeerFailedError struct{ Rank int }

func (e *PeerFailedError) Error() string {
	return fmt.Sprintf("colltest: rank %d failed", e.Rank)
}

// Net is an in-memory communicator of n ranks.
type Net struct {
	eps      []*Endpoint
	sync     bool // Send waits until the receiver has taken the message
	unpaced  bool // Endpoint.Paced reports false
	failOnce sync.Once
	failed   chan struct{} // closed when failErr is set
	failErr  error
}

// ErrSize is returned by New and NewSync for fewer than one rank.
var ErrSize = errors.New("colltest: a communicator needs at least one rank")

// New returns a communicator of n ≥ 1 ranks.
func New(n int) (*Net, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: New(%d)", ErrSize, n)
	}
	net := &Net{failed: make(chan struct{})}
	net.eps = make([]*Endpoint, n)
	for r := range net.eps {
		net.eps[r] = &Endpoint{net: net, rank: r, queues: map[key][]message{},
			wake: make(chan struct{}), failAt: -1}
	}
	return net, nil
}

// NewSync is New with rendezvous sends: Send returns only once the receiver
// has taken the message (or ctx ends, or the communicator fails), as a
// transport that sends large messages without buffering would. An algorithm
// that sends before receiving on both sides of an exchange deadlocks here.
func NewSync(n int) (*Net, error) {
	net, err := New(n)
	if err != nil {
		return nil, err
	}
	net.sync = true
	return net, nil
}

// NewUnpaced is New with endpoints whose Paced reports false, as a
// replicated rank's transport does: a collective then posts no receive
// into memory it has yet to send from.
func NewUnpaced(n int) (*Net, error) {
	net, err := New(n)
	if err != nil {
		return nil, err
	}
	net.unpaced = true
	return net, nil
}

// Err returns the error the communicator failed with, or nil.
func (n *Net) Err() error {
	select {
	case <-n.failed:
		return n.failErr
	default:
		return nil
	}
}

// Endpoint returns rank r's Transport.
func (n *Net) Endpoint(r int) *Endpoint { return n.eps[r] }

// Size returns the number of ranks.
func (n *Net) Size() int { return len(n.eps) }

// Fail marks the communicator failed with err: every pending and later Recv,
// on every rank, returns err. Only the first call has an effect.
func (n *Net) Fail(err error) {
	n.failOnce.Do(func() {
		n.failErr = err
		close(n.failed)
	})
}

// FailAt makes rank r crash at its k-th transport call (0-based, counting
// Send and Recv): that call and every later call of r return ErrCrashed, and
// the communicator is marked failed with &PeerFailedError{r} at that moment.
// Call before Run.
func (n *Net) FailAt(r int, k int64) { n.eps[r].failAt = k }

// Run calls fn for every rank, each on its own goroutine, and returns their
// errors indexed by rank once all have returned.
func (n *Net) Run(fn func(ep *Endpoint) error) []error {
	errs := make([]error, len(n.eps))
	var wg sync.WaitGroup
	for r, ep := range n.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(ep)
		}()
	}
	wg.Wait()
	return errs
}

type key struct{ from, tag int }

type message struct {
	data  []byte
	taken chan struct{} // closed by Recv (sync nets only)
}

// Endpoint is one rank's view of a Net; it implements coll.Transport and its
// optional interfaces coll.EagerSender, coll.RecvIntoer, coll.Preposter,
// coll.Paced and coll.Lender (hide them by embedding the Endpoint in a struct that
// has only Transport's methods, to test the fallbacks).
type Endpoint struct {
	net  *Net
	rank int
	seq  atomic.Uint64

	calls  atomic.Int64
	failAt int64 // -1: never

	// lent counts the exchanges' data ExchangeLent lent and Reclaim has
	// not taken back; lentWritten those that changed before Reclaim.
	lent, lentWritten atomic.Int64

	mu     sync.Mutex
	queues map[key][]message
	posted map[key][]*Posted // receives posted ahead (PostInto), in order
	wake   chan struct{}     // closed and replaced on every delivery
	loans  []*Lent           // lent and not reclaimed, for settle
}

// Posted is a receive posted by PostInto. A message sent to it is copied
// into its buffer by the sender's Send, as a transport that reads into
// posted buffers writes them whenever the message comes. The caller must
// leave the buffer alone until then: a buffer that changed between
// PostInto and the message fails the exchange (ErrPostedWritten).
type Posted struct {
	key     key
	buf     []byte
	snap    []byte // buf when posted
	n       int
	filled  bool // under the endpoint's mu
	written bool // buf differed from snap when the message came
}

// ErrPostedWritten is returned by ExchangePosted when the caller wrote the
// buffer of a receive it had posted before the message came (which a
// transport may write at any moment).
var ErrPostedWritten = errors.New("colltest: a posted receive's buffer was written before its message came")

// fill copies data into p's buffer (under the endpoint's mu).
func (p *Posted) fill(data []byte) {
	p.written = !bytes.Equal(p.buf, p.snap)
	copy(p.buf, data)
	p.n, p.filled = len(data), true
}

// Rank implements coll.Transport.
func (e *Endpoint) Rank() int { return e.rank }

// Size implements coll.Transport.
func (e *Endpoint) Size() int { return len(e.net.eps) }

// NextSeq implements coll.Transport.
func (e *Endpoint) NextSeq() uint64 { return e.seq.Add(1) - 1 }

// crashed counts a call and reports whether this endpoint has crashed.
func (e *Endpoint) crashed() bool {
	if e.failAt < 0 {
		return false
	}
	if e.calls.Add(1)-1 >= e.failAt {
		e.net.Fail(&PeerFailedError{Rank: e.rank})
		return true
	}
	return false
}

// failure is what a call of e that the net's failure interrupted returns:
// ErrCrashed when e is the rank that crashed (a call of it on another
// goroutine did: a collective may send and receive at once), the failure
// otherwise. failErr is set before failed is closed.
func (e *Endpoint) failure() error {
	if pf, ok := e.net.failErr.(*PeerFailedError); ok && pf.Rank == e.rank {
		return ErrCrashed
	}
	return e.net.failErr
}

// Send implements coll.Transport: it copies data into the receiver's queue
// and returns at once (New) or once the receiver has taken it (NewSync).
func (e *Endpoint) Send(ctx context.Context, to, tag int, data []byte) error {
	if e.crashed() {
		return ErrCrashed
	}
	if to < 0 || to >= len(e.net.eps) {
		return fmt.Errorf("colltest: send to rank %d of %d", to, len(e.net.eps))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	msg := message{data: make([]byte, len(data))}
	copy(msg.data, data)
	if e.net.sync {
		msg.taken = make(chan struct{})
	}
	dst := e.net.eps[to]
	dst.mu.Lock()
	k := key{e.rank, tag}
	if ps := dst.posted[k]; len(ps) > 0 {
		p := ps[0]
		dst.posted[k] = ps[1:]
		dst.settleLocked(p)
		p.fill(data)
		msg.taken = nil
	} else {
		dst.queues[k] = append(dst.queues[k], msg)
	}
	close(dst.wake)
	dst.wake = make(chan struct{})
	dst.mu.Unlock()
	if msg.taken == nil {
		return nil
	}
	select {
	case <-msg.taken:
		return nil
	case <-e.net.failed:
		return e.failure()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Paced implements coll.Paced: true unless the Net was made with
// NewUnpaced. A message is copied at its Send, so a peer that answers it
// has it.
func (e *Endpoint) Paced() bool { return !e.net.unpaced }

// EagerSend implements coll.EagerSender: true unless the Net was made with
// NewSync.
func (e *Endpoint) EagerSend() bool { return !e.net.sync }

// RecvInto implements coll.RecvIntoer.
func (e *Endpoint) RecvInto(ctx context.Context, from, tag int, buf []byte) (int, error) {
	msg, err := e.Recv(ctx, from, tag)
	if err != nil {
		return 0, err
	}
	copy(buf, msg)
	return len(msg), nil
}

// PostInto implements coll.Preposter: the next message from `from` with
// tag (after those posted before it) goes into buf.
func (e *Endpoint) PostInto(from, tag int, buf []byte) (any, error) {
	if err := e.checkFrom(from); err != nil {
		return nil, err
	}
	p := &Posted{key: key{from, tag}, buf: buf, snap: bytes.Clone(buf)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.posted[p.key]) == 0 {
		if msg, ok := e.popLocked(p.key); ok {
			msg.took()
			e.settleLocked(p)
			p.fill(msg.data)
			return p, nil
		}
	}
	if e.posted == nil {
		e.posted = map[key][]*Posted{}
	}
	e.posted[p.key] = append(e.posted[p.key], p)
	return p, nil
}

// ExchangePosted implements coll.Preposter: Send, then wait for the posted
// receive (a Recv for FailAt).
func (e *Endpoint) ExchangePosted(ctx context.Context, to int, sdata []byte, tag int, posted any) (int, error, error) {
	p := posted.(*Posted)
	if err := e.Send(ctx, to, tag, sdata); err != nil {
		e.Withdraw(p)
		return 0, err, nil
	}
	if e.crashed() {
		e.Withdraw(p)
		return 0, nil, ErrCrashed
	}
	for {
		e.mu.Lock()
		if p.filled {
			e.mu.Unlock()
			if p.written {
				return 0, nil, ErrPostedWritten
			}
			return p.n, nil, nil
		}
		wake := e.wake
		e.mu.Unlock()
		select {
		case <-wake:
		case <-e.net.failed:
			e.Withdraw(p)
			return 0, nil, e.failure()
		case <-ctx.Done():
			e.Withdraw(p)
			return 0, nil, ctx.Err()
		}
	}
}

// Lent is what ExchangeLent lent: the data, a copy of it as it was sent,
// and the peer it was sent to.
type Lent struct {
	data, snap []byte
	to         int
	// settled: a receive from to overwrote the data, which was unchanged
	// until then (settleLocked); under the endpoint's mu.
	settled bool
}

// ExchangeLent implements coll.Lender: ExchangePosted, and sdata counts
// as lent until Reclaim, which checks that it did not change meanwhile
// (a transport that lends may read it again at any moment: a resend),
// or until a receive from the same peer overwrites it, which must find
// it unchanged (the peer has it then: coll.Lender).
func (e *Endpoint) ExchangeLent(ctx context.Context, to int, sdata []byte, tag int, posted any) (int, any, error, error) {
	l := &Lent{data: sdata, snap: bytes.Clone(sdata), to: to}
	e.mu.Lock()
	e.loans = append(e.loans, l)
	e.mu.Unlock()
	n, serr, rerr := e.ExchangePosted(ctx, to, sdata, tag, posted)
	if serr != nil {
		e.mu.Lock()
		e.dropLoanLocked(l)
		e.mu.Unlock()
		return n, nil, serr, rerr
	}
	e.lent.Add(1)
	return n, l, nil, rerr
}

// settleLocked settles the loans to p's sender that p's buffer, about to
// be filled, overlaps, counting one that changed before as written.
func (e *Endpoint) settleLocked(p *Posted) {
	for _, l := range e.loans {
		if l.settled || l.to != p.key.from || !overlaps(l.data, p.buf) {
			continue
		}
		if !bytes.Equal(l.data, l.snap) {
			e.lentWritten.Add(1)
		}
		l.settled = true
	}
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// dropLoanLocked removes l from e's loans.
func (e *Endpoint) dropLoanLocked(l *Lent) {
	for i, x := range e.loans {
		if x == l {
			e.loans = append(e.loans[:i], e.loans[i+1:]...)
			return
		}
	}
}

// Reclaim implements coll.Lender.
func (e *Endpoint) Reclaim(lent []any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range lent {
		l := x.(*Lent)
		if !l.settled && !bytes.Equal(l.data, l.snap) {
			e.lentWritten.Add(1)
		}
		e.dropLoanLocked(l)
		e.lent.Add(-1)
	}
}

// Unreclaimed returns the number of lent exchanges' data not reclaimed
// yet, and of those reclaimed that had changed before (a collective
// must leave lent data alone and reclaim it before it returns).
func (e *Endpoint) Unreclaimed() (pending, written int) {
	return int(e.lent.Load()), int(e.lentWritten.Load())
}

// ExchangeInto implements coll.ExchangeIntoer: PostInto, then
// ExchangePosted.
func (e *Endpoint) ExchangeInto(ctx context.Context, to int, sdata []byte, from, tag int, buf []byte) (int, error, error) {
	p, err := e.PostInto(from, tag, buf)
	if err != nil {
		return 0, nil, err
	}
	return e.ExchangePosted(ctx, to, sdata, tag, p)
}

// Withdraw implements coll.Preposter.
func (e *Endpoint) Withdraw(posted any) {
	p := posted.(*Posted)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !p.filled {
		e.posted[p.key] = slices.DeleteFunc(e.posted[p.key], func(q *Posted) bool { return q == p })
	}
}

// Recv implements coll.Transport.
func (e *Endpoint) Recv(ctx context.Context, from, tag int) ([]byte, error) {
	if e.crashed() {
		return nil, ErrCrashed
	}
	if err := e.checkFrom(from); err != nil {
		return nil, err
	}
	k := key{from, tag}
	for {
		select {
		case <-e.net.failed:
			return nil, e.failure()
		default:
		}
		e.mu.Lock()
		if msg, ok := e.popLocked(k); ok {
			e.mu.Unlock()
			msg.took()
			return msg.data, nil
		}
		wake := e.wake
		e.mu.Unlock()
		select {
		case <-wake:
		case <-e.net.failed:
			return nil, e.failure()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// checkFrom refuses a source rank outside the net.
func (e *Endpoint) checkFrom(from int) error {
	if from < 0 || from >= len(e.net.eps) {
		return fmt.Errorf("colltest: recv from rank %d of %d", from, len(e.net.eps))
	}
	return nil
}

// popLocked takes the first message queued under k (under e.mu).
func (e *Endpoint) popLocked(k key) (message, bool) {
	q := e.queues[k]
	if len(q) == 0 {
		return message{}, false
	}
	msg := q[0]
	if len(q) == 1 {
		delete(e.queues, k)
	} else {
		q[0] = message{}
		e.queues[k] = q[1:]
	}
	return msg, true
}

// took tells the sender, if it waits (Send), that m was received.
func (m message) took() {
	if m.taken != nil {
		close(m.taken)
	}
}

// Pending returns the number of messages delivered to this endpoint and not
// yet received (a test can check that a collective left nothing behind).
func (e *Endpoint) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, q := range e.queues {
		n += len(q)
	}
	return n
}
