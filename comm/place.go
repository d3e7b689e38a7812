package comm

import (
	"cmp"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/wire"
)

// Receiving straight into the user's buffer. A stream transport offers the
// session every large frame before reading its payload (transport.Placer).
// If the frame is a message whose receive is already posted, the receive is
// taken off the posted list and the transport reads the rest of the message
// from the kernel directly into the receive's buffer: one copy instead of
// two, and the reader's own buffer never grows to the message's size. The
// receive completes when the last byte is in (Placed ok).
//
// While its message is being read, the receive is on no list: a failure,
// a revocation or the end of the session does not complete it, and Cancel
// waits for it, so its buffer is never written after the caller got it
// back. The read ends either way: a sender that fails is removed from the
// transport (its connection closed), which fails the read, and the
// receive is then put back among the posted ones in its place and failed
// or matched as if the frame had never begun (a frame cut off in the
// middle is lost, as any frame in flight on a broken connection).
//
// A large message whose receive is not posted yet is read the same way into
// the pooled buffer it is kept in while unexpected (engine.go's keepCopy),
// not into the reader's buffer first: it is copied once more, by the
// receive that takes it, not twice. It joins the unexpected ones (or a
// receive posted meanwhile) when its last byte is in; until then it has not
// arrived, for receives and probes alike, as a frame still in the kernel
// has not.

// placement is a receive being filled from one sender's stream, or an
// unexpected message (held).
type placement struct {
	q  *queue
	op *recvOp
	st Status
	// rdv: the data of a rendezvous (rendezvous.go), not a posted
	// receive (isRdv).
	rdv   rdvKey
	isRdv bool
	// held: no receive was posted; msg is the message, its data the
	// pooled buffer being filled, for context ctxID.
	held  bool
	msg   message
	ctxID uint64
	// active: the sender's placement is in use (Session.placing keeps one
	// per sender).
	active bool
}

// placer is the session's transport.Placer (host.Config.Placer).
type placer struct{ s *Session }

// Place takes a data message whose receive is posted.
func (p placer) Place(f wire.Frame, n int) (int, []byte) {
	s := p.s
	if f.Kind == replica.KindData && s.rep != nil {
		return s.rep.place(f, n)
	}
	if f.Kind == kindRData && int(f.Src) < s.limit() {
		return s.placeRData(f, n)
	}
	if (f.Kind != kindData && f.Kind != kindCData) || s.rep != nil || int(f.Src) >= s.limit() {
		return 0, nil
	}
	skip, dst, credit := s.placeData(f, n)
	s.sendOne(credit)
	return skip, dst
}

// placeData is Place of a data frame; it also returns the credit frame the
// sender may be owed for it (its receive has taken it).
func (s *Session) placeData(f wire.Frame, n int) (int, []byte, outgoing) {
	h, data, err := parseData(f.Payload, f.Kind)
	ctxID, tag := h.ctxID, h.tag
	if err != nil {
		return 0, nil, outgoing{} // delivered as usual, and refused there
	}
	skip := len(f.Payload) - len(data)
	size := n - skip
	src := f.Src
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != nil || s.failed[src] {
		return 0, nil, outgoing{}
	}
	q := s.queues[ctxID]
	if q == nil || q.comm == nil || q.comm.revoked {
		return 0, nil, outgoing{}
	}
	// A message beyond its sender's limits is refused where the usual
	// path takes it (matchLocked), which cuts the sender off.
	m := message{src: src}
	if c := s.chargeOf(src, ctxID, size); c > 0 && s.overrunLocked(ctxID, &m, c, false) != nil {
		return 0, nil, outgoing{}
	}
	for i, op := range q.posted {
		if !op.matches(src, tag, 0) {
			continue
		}
		if !op.alloc && len(op.buf) < size {
			return 0, nil, outgoing{} // truncated: the usual path says so
		}
		var dst []byte
		if op.alloc {
			dst = make([]byte, size)
			op.req.data = dst
		} else {
			dst = op.buf[:size]
		}
		q.unpost(i)
		r, _ := q.comm.rankOf(src)
		s.startPlacingLocked(src, placement{q: q, op: op, st: Status{Source: r, Tag: tag, Count: size}})
		s.addCreditLocked(src, h.credit) // not delivered: nobody else will
		var out outgoing
		s.returnCreditLocked(src, s.chargeOf(src, ctxID, size), &out)
		return skip, dst, out
	}
	// Unexpected: into the buffer it will be kept in (see above).
	dst, buf := pooledBuf(size)
	s.startPlacingLocked(src, placement{held: true, ctxID: ctxID,
		msg: message{src: src, tag: tag, vnode: VNode(h.vnode), data: dst, buf: buf}})
	s.addCreditLocked(src, h.credit)
	return skip, dst, outgoing{}
}

// placeRData takes the data of a rendezvous whose receive waits for it.
func (s *Session) placeRData(f wire.Frame, n int) (int, []byte) {
	id, rest, ok := parseRData(f.Payload)
	if !ok {
		return 0, nil
	}
	skip := len(f.Payload) - len(rest)
	key := rdvKey{f.Src, id}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.rdvIn[key]
	if !ok || e.pulling || e.st.Count != n-skip {
		return 0, nil // dropped or refused by onRData
	}
	delete(s.rdvIn, key)
	dst := e.op.buf[:e.st.Count:e.st.Count]
	if e.op.alloc {
		dst = make([]byte, e.st.Count)
		e.op.req.data = dst
	}
	s.startPlacingLocked(f.Src, placement{q: e.q, op: e.op, st: e.st, rdv: key, isRdv: true})
	return skip, dst
}

func (s *Session) startPlacingLocked(src core.NodeID, pl placement) {
	p := s.placing[src]
	if p == nil { // once per sender: the map never stores a placement by value, which would allocate each time
		if s.placing == nil {
			s.placing = make(map[core.NodeID]*placement)
		}
		p = new(placement)
		s.placing[src] = p
	}
	*p = pl
	p.active = true
	if pl.held {
		s.stats.placedHeld.Add(1)
	} else {
		s.stats.placed.Add(1)
	}
}

// Placed completes the receive that Place took, or puts it back; or it
// delivers the unexpected message Place took.
func (p placer) Placed(f wire.Frame, ok bool) {
	s := p.s
	if f.Kind == replica.KindData && s.rep != nil {
		s.rep.placed(f, ok)
		return
	}
	s.mu.Lock()
	out, cut := s.placedLocked(f, ok)
	s.mu.Unlock()
	s.sendOne(out)
	if cut != nil {
		s.cutOff(int(f.Src), cut)
	}
}

// placedLocked is Placed under s.mu; it returns the frame to send, and the
// error that cuts the sender off if the message goes beyond its limits.
func (s *Session) placedLocked(f wire.Frame, ok bool) (outgoing, error) {
	p := s.placing[f.Src]
	if p == nil || !p.active {
		return outgoing{}, nil
	}
	pl := *p
	*p = placement{}
	op := pl.op
	switch {
	case pl.held && ok:
		var out outgoing
		cut := s.matchLocked(int(f.Src), pl.ctxID, &pl.msg, true, &out)
		return out, cut
	case pl.held: // cut off: lost, as any frame in flight
		pl.msg.recycle()
	case ok:
		op.req.complete(pl.st, nil)
	case s.state != nil:
		op.req.complete(Status{}, s.state)
	case pl.isRdv:
		// The data was cut off: the receive waits on, and fails if the
		// sender did (the connection of a failed rank is closed).
		if op.alloc {
			op.req.data = nil
		}
		s.rdvIn[pl.rdv] = rdvRecv{q: pl.q, op: op, st: pl.st}
		s.rdvRecheckLocked()
	default:
		if op.alloc {
			op.req.data = nil
		}
		q := pl.q
		i, _ := slices.BinarySearchFunc(q.posted, op.seq, func(o *recvOp, seq uint64) int {
			return cmp.Compare(o.seq, seq)
		})
		q.posted = slices.Insert(q.posted, i, op)
		s.recheckLocked(q)
	}
	return outgoing{}, nil
}
