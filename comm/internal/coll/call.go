package coll

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Phases of a collective: the low 8 bits of a tag. Messages between one pair
// within one phase are matched in FIFO order; distinct phases keep the parts
// of an algorithm (fold-in, main loop, unfold, final hop) apart.
const (
	phaseMain = iota
	phaseFold
	phaseUnfold
	phaseGather
	phaseHop
	phaseScatter
	phaseAllgather
)

// call is one collective invocation on one rank.
type call struct {
	ctx        context.Context
	t          Transport
	eager      bool       // t's Send never waits for the receiver (EagerSender)
	into       RecvIntoer // t receives into caller buffers, or nil
	name       string
	rank, size int
	base       int   // seq·256
	mismatch   error // first size disagreement with a peer (sticky)
	// hs is halving's state (reduce.go), kept in the call so that its
	// slices are used again by the next call from the pool.
	hs halvingState
	// pre holds the receives posted ahead of their steps (prepost); done
	// withdraws those an error left.
	pre []preposted
	// lent holds the sends whose data the transport still holds (Lender);
	// done reclaims them.
	lent []any
	// scratch holds the call's scratch buffers (callScratch); done puts
	// them back only after it has withdrawn the receives posted into them
	// and reclaimed the sends lent from them, which a failed step leaves.
	scratch []*[]byte
}

// preposted is a receive posted ahead of its exchange (Preposter).
type preposted struct {
	from, tag int
	dst       []byte
	posted    any
}

// prepost posts the receive of a later exchange with `from` in phase into
// dst, if the Transport can (Preposter, and PostInto gives a receive);
// sendrecvInto then uses it. A call preposts at most one receive per sender
// and phase.
func (c *call) prepost(from, phase int, dst []byte) error {
	p, ok := c.t.(Preposter)
	if !ok {
		return nil
	}
	posted, err := p.PostInto(from, c.base+phase, dst)
	if err != nil {
		return c.recvErr(from, err)
	}
	if posted == nil { // none: the exchange posts its own
		return nil
	}
	c.pre = append(c.pre, preposted{from: from, tag: c.base + phase, dst: dst, posted: posted})
	return nil
}

// takePosted returns the receive preposted from `from` with tag, and takes
// it off the list.
func (c *call) takePosted(from, tag int, dst []byte) (any, bool) {
	for i, e := range c.pre {
		if e.from == from && e.tag == tag {
			if len(e.dst) != len(dst) || len(dst) > 0 && &e.dst[0] != &dst[0] {
				panic("coll: an exchange into another buffer than its preposted receive's")
			}
			c.pre = append(c.pre[:i], c.pre[i+1:]...)
			return e.posted, true
		}
	}
	return nil, false
}

// begin takes the call's sequence number. It is called before any argument
// check so that ranks stay in step on NextSeq even when a call fails early.
func begin(ctx context.Context, t Transport, name string) *call {
	seq := t.NextSeq()
	c := callPool.Get().(*call) // cleared by done, but for hs's arrays
	c.ctx, c.t, c.name, c.rank, c.size = ctx, t, name, t.Rank(), t.Size()
	c.base = int(seq&(1<<54-1)) << 8
	if e, ok := t.(EagerSender); ok {
		c.eager = e.EagerSend()
	}
	c.into, _ = t.(RecvIntoer)
	return c
}

// errorf returns a bad-input error for this call, wrapping sentinel.
func (c *call) errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", sentinel, c.name, fmt.Sprintf(format, args...))
}

// callPool recycles the calls: a collective costs no allocation for its
// state. A call goes back in done, which every collective calls last; one
// that returns early with an error leaves its call to the collector.
var callPool = sync.Pool{New: func() any { return new(call) }}

// done returns the call's result: err, or else a recorded size mismatch;
// c must not be used afterwards.
func (c *call) done(err error) error {
	if err == nil {
		err = c.mismatch
	}
	if len(c.pre) > 0 { // left by an error
		p := c.t.(Preposter)
		for _, e := range c.pre {
			p.Withdraw(e.posted)
		}
		clear(c.pre)
	}
	if len(c.lent) > 0 {
		c.t.(Lender).Reclaim(c.lent)
		clear(c.lent)
	}
	for _, b := range c.scratch {
		putScratch(b)
	}
	clear(c.scratch)
	displs, steps, pre, lent, scratch := c.hs.displs[:0], c.hs.steps[:0], c.pre[:0], c.lent[:0], c.scratch[:0]
	*c = call{}
	c.hs.displs, c.hs.steps, c.pre, c.lent, c.scratch = displs, steps, pre, lent, scratch
	callPool.Put(c)
	return err
}

func (c *call) sendErr(to int, err error) error {
	return fmt.Errorf("coll: %s: send to rank %d: %w", c.name, to, err)
}

func (c *call) recvErr(from int, err error) error {
	return fmt.Errorf("coll: %s: recv from rank %d: %w", c.name, from, err)
}

func (c *call) send(to, phase int, data []byte) error {
	if err := c.t.Send(c.ctx, to, c.base+phase, data); err != nil {
		return c.sendErr(to, err)
	}
	return nil
}

func (c *call) recv(from, phase int) ([]byte, error) {
	b, err := c.t.Recv(c.ctx, from, c.base+phase)
	if err != nil {
		return nil, c.recvErr(from, err)
	}
	return b, nil
}

// note records a mismatch when a message from `from` has n bytes instead of
// want. The algorithm goes on with the message trimmed or zero-padded, so
// every peer still gets its messages: a disagreement is reported, not turned
// into a hang.
func (c *call) note(from, n, want int) {
	if n != want && c.mismatch == nil {
		c.mismatch = fmt.Errorf("%w: %s: rank %d sent %d bytes, this rank expected %d",
			ErrCount, c.name, from, n, want)
	}
}

// fit is note for a received slice, which it trims or pads to want bytes.
func (c *call) fit(from int, b []byte, want int) []byte {
	c.note(from, len(b), want)
	switch {
	case len(b) > want:
		return b[:want]
	case len(b) < want:
		return append(b, make([]byte, want-len(b))...)
	}
	return b
}

// recvInto receives a message from `from` into dst.
func (c *call) recvInto(from, phase int, dst []byte) error {
	if c.into != nil {
		n, err := c.into.RecvInto(c.ctx, from, c.base+phase, dst)
		if err != nil {
			return c.recvErr(from, err)
		}
		c.note(from, n, len(dst))
		if n < len(dst) {
			clear(dst[n:])
		}
		return nil
	}
	b, err := c.recv(from, phase)
	if err != nil {
		return err
	}
	copy(dst, c.fit(from, b, len(dst)))
	return nil
}

// exchange sends sdata to `to` while receiving the next message from `from`
// with recv. With an eager Transport it sends first; otherwise (a Send that
// may wait for the receiver, where sending first on both sides would
// deadlock) it sends from a second goroutine, and a failure of either half
// cancels the other, so the call never waits on a half that cannot finish.
// It returns only after the send has.
func (c *call) exchange(to int, sdata []byte, from, tag int, recv func(ctx context.Context) error) error {
	if c.eager {
		if err := c.t.Send(c.ctx, to, tag, sdata); err != nil {
			return c.sendErr(to, err)
		}
		if err := recv(c.ctx); err != nil {
			return c.recvErr(from, err)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		err := c.t.Send(ctx, to, tag, sdata)
		if err != nil {
			cancel()
		}
		sent <- err
	}()
	rerr := recv(ctx)
	if rerr != nil {
		cancel()
	}
	serr := <-sent
	// When one half fails, the other sees our cancel: report the half that
	// failed on its own.
	ownCancel := func(err error) bool { return errors.Is(err, context.Canceled) && c.ctx.Err() == nil }
	switch {
	case serr != nil && !ownCancel(serr):
		return c.sendErr(to, serr)
	case rerr != nil:
		return c.recvErr(from, rerr)
	case serr != nil:
		return c.sendErr(to, serr)
	}
	return nil
}

// sendrecv exchanges: sends sdata to `to`, returns the next message from
// `from`.
func (c *call) sendrecv(to int, sdata []byte, from, phase int) ([]byte, error) {
	tag := c.base + phase
	var b []byte
	err := c.exchange(to, sdata, from, tag, func(ctx context.Context) error {
		var err error
		b, err = c.t.Recv(ctx, from, tag)
		return err
	})
	return b, err
}

// sendrecvInto is sendrecv receiving into dst.
func (c *call) sendrecvInto(to int, sdata []byte, from, phase int, dst []byte) error {
	return c.sendrecvIntoKeep(to, sdata, from, phase, dst, false)
}

// sendrecvIntoLent is sendrecvInto for sdata that the call leaves alone
// until it returns: a Lender transport may keep it past the exchange
// (done reclaims it).
func (c *call) sendrecvIntoLent(to int, sdata []byte, from, phase int, dst []byte) error {
	return c.sendrecvIntoKeep(to, sdata, from, phase, dst, true)
}

func (c *call) sendrecvIntoKeep(to int, sdata []byte, from, phase int, dst []byte, lend bool) error {
	if c.into == nil {
		b, err := c.sendrecv(to, sdata, from, phase)
		if err != nil {
			return err
		}
		copy(dst, c.fit(from, b, len(dst)))
		return nil
	}
	tag := c.base + phase
	var n int
	var err error
	var serr, rerr error
	if posted, ok := c.takePosted(from, tag, dst); ok {
		if l, ok := c.t.(Lender); ok && lend {
			var lent any
			n, lent, serr, rerr = l.ExchangeLent(c.ctx, to, sdata, tag, posted)
			if lent != nil {
				c.lent = append(c.lent, lent)
			}
		} else {
			n, serr, rerr = c.t.(Preposter).ExchangePosted(c.ctx, to, sdata, tag, posted)
		}
	} else if x, ok := c.into.(ExchangeIntoer); ok {
		n, serr, rerr = x.ExchangeInto(c.ctx, to, sdata, from, tag, dst)
	} else {
		err = c.exchange(to, sdata, from, tag, func(ctx context.Context) error {
			var err error
			n, err = c.into.RecvInto(ctx, from, tag, dst)
			return err
		})
	}
	switch {
	case serr != nil:
		err = c.sendErr(to, serr)
	case rerr != nil:
		err = c.recvErr(from, rerr)
	}
	if err != nil {
		return err
	}
	c.note(from, n, len(dst))
	if n < len(dst) {
		clear(dst[n:])
	}
	return nil
}

// recvElems receives len(scratch) elements of T from `from`, into scratch
// when the Transport can receive into a buffer.
func recvElems[T Elem](c *call, from, phase int, scratch []T) ([]T, error) {
	if c.into != nil {
		return scratch, c.recvInto(from, phase, AsBytes(scratch))
	}
	b, err := c.recv(from, phase)
	if err != nil {
		return nil, err
	}
	return elems[T](c, from, b, len(scratch)), nil
}

// sendrecvElems exchanges: sends s to `to`, receives len(scratch) elements
// from `from` (into scratch when it can). s and scratch must not overlap.
func sendrecvElems[T Elem](c *call, to int, s []T, from, phase int, scratch []T) ([]T, error) {
	return sendrecvElemsKeep(c, to, s, from, phase, scratch, false)
}

// sendrecvElemsKeep is sendrecvElems; lend says s is left alone until
// the call returns (sendrecvIntoLent).
func sendrecvElemsKeep[T Elem](c *call, to int, s []T, from, phase int, scratch []T, lend bool) ([]T, error) {
	if c.into != nil {
		return scratch, c.sendrecvIntoKeep(to, AsBytes(s), from, phase, AsBytes(scratch), lend)
	}
	b, err := c.sendrecv(to, AsBytes(s), from, phase)
	if err != nil {
		return nil, err
	}
	return elems[T](c, from, b, len(scratch)), nil
}

func elems[T Elem](c *call, from int, b []byte, n int) []T {
	b = c.fit(from, b, n*SizeOf[T]())
	out, _ := FromBytes[T](b) // length is a multiple of the element size
	return out
}

// realFromRel maps a rank relative to root back to a real rank.
func (c *call) realFromRel(v, root int) int { return (v + root) % c.size }

// relOf returns this rank relative to root.
func (c *call) relOf(root int) int { return (c.rank - root + c.size) % c.size }

// checkRoot validates a root.
func (c *call) checkRoot(root int) error {
	if root < 0 || root >= c.size {
		return c.errorf(ErrRoot, "root %d with %d ranks", root, c.size)
	}
	return nil
}

// checkCounts validates a count vector of one entry per rank and returns its
// packed displacements (len size+1, the last being the total).
func (c *call) checkCounts(what string, counts []int) ([]int, error) {
	if len(counts) != c.size {
		return nil, c.errorf(ErrCount, "%s has %d entries for %d ranks", what, len(counts), c.size)
	}
	displs := make([]int, c.size+1)
	for i, n := range counts {
		if n < 0 {
			return nil, c.errorf(ErrCount, "%s[%d] = %d is negative", what, i, n)
		}
		displs[i+1] = displs[i] + n
	}
	return displs, nil
}

// lowbit returns the lowest set bit of v > 0.
func lowbit(v int) int { return v & -v }

// pof2Floor returns the largest power of two ≤ n (n ≥ 1).
func pof2Floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// pof2Ceil returns the smallest power of two ≥ n (n ≥ 1).
func pof2Ceil(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// log2Ceil returns ⌈log₂ n⌉ (n ≥ 1).
func log2Ceil(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
