package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// The rendezvous protocol for large point-to-point messages. A message of
// more than EagerMax bytes, or one that does not fit in the sender's
// credit toward the receiver (credit.go), is not sent at once: the sender
// sends a ready-to-send (kindRTS: an id, the context, the tag and the
// size) and keeps the message in the caller's buffer; the receiver matches
// the RTS as it would the message (in order with the sender's other
// messages, eager or not), and once a receive takes it, answers
// clear-to-send (kindCTS); only then does the sender write the data
// (kindRData), which the receiver reads straight into the receive's buffer
// (place.go). So:
//
//   - an unexpected large message costs the receiver a small record, not
//     its size: with the credit, what a process holds for another is
//     bounded by the budget plus a record per message sent ahead of its
//     receive, and the records by the unexpected limit (credit.go),
//     whatever the senders do;
//   - a sender that posts many large Isends ahead of the receiver holds
//     them in its own buffers (it may not touch them before the requests
//     complete, as in MPI) and copies none into a queue;
//   - the request of a large send completes once its data was handed to
//     the transport after the clear-to-send, which can wait for the
//     receiver to post its receive (as MPI_Send may).
//
// A blocking Send whose context ends before the clear-to-send returns the
// context's error after copying the message, which is sent when the
// receiver asks for it (the caller's buffer is free on return, as for an
// eager message left in the backlog). Once the clear-to-send came, a
// blocking Send whose context can end has its data's write watch that
// context: when the context ends while the receiver's kernel takes no
// bytes, the transport copies what is left of the frame and completes it
// on the connection, so that the receive gets the message whole; the
// data lent to the transport's resend log (lendRData), which would hold
// the caller's buffer until the receiver acknowledged it (a receiver that
// reads nothing never does), is then copied into the log (rdvDetach), and
// the Send returns the context's error with the caller's buffer free. A
// receive matched to an RTS whose sender fails, a send whose destination
// fails, and both on a revoked communicator or an ended session, fail as
// their eager forms do.
//
// Between two processes of one host whose connection runs over shared
// memory, the data moves in one copy instead (singlecopy.go): the
// ready-to-send carries the address of the sender's buffer, the receiver
// has the kernel read it straight into the receive's buffer, and its
// clear-to-send says that the data need not be sent.
//
// Collective steps (their own context) stay eager and outside the credit:
// their algorithms bound what is in flight, and an extra round trip per
// step would cost more than it saves. Replicated ranks stay eager too
// (package replica orders and acknowledges every frame).

// EagerMax is the largest point-to-point message sent eagerly; larger ones
// go through the rendezvous.
const EagerMax = 64 << 10

// The rendezvous frames' payloads:
//
//	kindRTS:   uvarint id | uvarint context id | varint tag | uvarint size [| uvarint address (singlecopy.go)]
//	kindCTS:   uvarint id | byte flag | uvarint credit returned (credit.go)
//	kindRData: uvarint id | data
//	kindRStop: uvarint id | uvarint context id (singlecopy.go)
//
// A clear-to-send's flag is 0 (send the data), 1 (do not: the receive's
// buffer is too small, or the receiver read the data itself) or 2 (the
// address is withdrawn: send the data when asked, singlecopy.go).
const (
	kindRTS   = core.Kind(core.ProtoComm)<<8 | 6
	kindCTS   = core.Kind(core.ProtoComm)<<8 | 7
	kindRData = core.Kind(core.ProtoComm)<<8 | 8
	// 9, 10: kindCredit, kindCData (wire.go)
	kindRStop = core.Kind(core.ProtoComm)<<8 | 11
)

// rdvSend is a large send waiting for its clear-to-send; it lives in the
// send's Request (no allocation per message).
type rdvSend struct {
	to    core.NodeID // world rank
	body  []byte
	owned bool // body is a copy (the blocking caller gave up waiting)
	// addr is the address of the caller's buffer offered to the receiver
	// (0: none), ctxID the message's context; stopped, once the caller
	// gave up waiting, is closed when the receiver has taken back the
	// offer (singlecopy.go).
	addr    uint64
	ctxID   uint64
	stopped chan struct{}
	// ctx is a blocking Send's context when it can end (nil for an
	// Isend's request, which no one gives up): its data's write watches
	// it (lendRData), and written is closed once that write has returned
	// (rdvWrite), for rdvDetach.
	ctx     context.Context
	written chan struct{}
}

// maxRTS bounds a ready-to-send's payload: five 10-byte varints. The
// request's header array holds it, then the data frame's header: the
// ready-to-send has been written by the time its clear-to-send comes
// back, and a receive's array holds its clear-to-send, written before the
// data it asks for can arrive; a rendezvous that fails before its answer
// leaves its request out of the pool (Request.unpooled).
const maxRTS = 50

// rdvKey names a matched RTS at the receiver.
type rdvKey struct {
	src core.NodeID
	id  uint64
}

// rdvRecv is a receive matched to an RTS, waiting for the data.
type rdvRecv struct {
	q  *queue
	op *recvOp
	st Status
	// pulling: the receiver is reading the data from the sender's memory
	// into op's buffer (singlecopy.go); the reader, not a failure, ends
	// the receive.
	pulling bool
}

// rdvStart sends the RTS of a large message (the send's checks are done).
func (s *Session) rdvStart(req *Request, ctxID uint64, to core.NodeID, tag int, data []byte) {
	// The data frame is written only once the receiver asked for it, too
	// late to refuse it: refuse it now, as the eager path's transport
	// would (the receiver's receive would wait for data that never comes).
	if l, ok := s.tr.(transport.Limited); ok {
		if body := wire.MaxHeaderSize + binary.MaxVarintLen64 + len(data); body > l.MaxFrameSize() {
			req.complete(Status{}, s.sendErr(to, fmt.Errorf("%w: a message of %d bytes, limit %d with its headers",
				transport.ErrFrameTooLarge, len(data), l.MaxFrameSize())))
			return
		}
	}
	s.mu.Lock()
	if s.rdvOut == nil {
		s.rdvOut = make(map[uint64]*Request)
	}
	s.rdvSeq++
	id := s.rdvSeq
	addr := s.rdvOffer(to, data)
	req.rdv = rdvSend{to: to, body: data, addr: addr, ctxID: ctxID, ctx: req.rdv.ctx}
	if req.rdv.ctx != nil {
		req.rdv.written = make(chan struct{})
	}
	s.rdvOut[id] = req
	s.mu.Unlock()
	p := binary.AppendUvarint(req.hdr[:0], id)
	p = binary.AppendUvarint(p, ctxID)
	p = binary.AppendVarint(p, int64(tag))
	p = binary.AppendUvarint(p, uint64(len(data)))
	if addr != 0 {
		p = binary.AppendUvarint(p, addr)
	}
	if err := s.sendFrame(int(to), wire.Frame{Kind: kindRTS, Payload: untilAnswered(p)}, nil, nil); err != nil {
		s.mu.Lock()
		_, waiting := s.rdvOut[id]
		delete(s.rdvOut, id)
		s.mu.Unlock()
		if waiting {
			req.complete(Status{}, err)
		}
	}
}

// rdvDetach is called when a blocking Send gives up waiting: a message
// still waiting for its clear-to-send is copied, so that the caller's
// buffer is free; one being written is waited for (its write watches the
// same context: lendRData), then, if lent, copied into the transport's
// resend log (tcp's Unlend), which gives the buffer back; and when its
// address was offered, the receiver's answer to its withdrawal is waited
// for (singlecopy.go).
func (s *Session) rdvDetach(req *Request) {
	s.mu.Lock()
	for id, r := range s.rdvOut {
		if r == req {
			if !r.rdv.owned {
				r.rdv.body, r.rdv.owned = slices.Clone(r.rdv.body), true
			}
			if r.rdv.addr != 0 {
				s.rdvWithdraw(id, r) // releases s.mu
				return
			}
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	if w := req.rdv.written; w != nil && s.tcpTr != nil {
		// A write watches the context that ended, and returns promptly;
		// then the data, if lent, is copied into the resend log, which
		// releases the caller's buffer and completes req. A send that
		// completes without a write (the receiver read the data itself,
		// or the send failed) ends the wait instead.
		select {
		case <-w:
			s.tcpTr.Unlend(req.rdv.to, req.rdv.body)
		case <-req.doneChan():
		}
	}
	<-req.doneChan()
}

// onRTS handles a ready-to-send: the message, without its data, goes to
// the matching engine.
func (s *Session) onRTS(src int, p []byte) error {
	id, ctxID, tag, size, addr, err := parseRTS(p)
	if err != nil {
		return err
	}
	s.deliverMsg(src, ctxID, message{src: core.NodeID(src), tag: tag, rdv: id, size: size, addr: addr}, true)
	return nil
}

// parseRTS decodes a ready-to-send; addr is 0 when it offers none.
func parseRTS(p []byte) (id, ctxID uint64, tag, size int, addr uint64, err error) {
	d := wire.NewDecoder(p)
	id = d.Uvarint()
	ctxID = d.Uvarint()
	t := d.Varint()
	sz := d.Uvarint()
	if d.Err() == nil && d.Remaining() > 0 {
		if addr = d.Uvarint(); addr == 0 && d.Err() == nil {
			return 0, 0, 0, 0, 0, fmt.Errorf("%w: rts address 0", errMalformed)
		}
	}
	if err = d.Finish(); err != nil {
		return 0, 0, 0, 0, 0, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if t != int64(int(t)) || sz > wire.DefaultMaxFrameSize<<8 {
		return 0, 0, 0, 0, 0, fmt.Errorf("%w: rts tag %d, size %d", errMalformed, t, sz)
	}
	return id, ctxID, int(t), int(sz), addr, nil
}

// rdvMatchLocked gives the receive op the RTS message m: the receive waits
// for the data (or fails at once if the buffer is too small, or the
// sender failed), and the returned frame is the answer to the sender.
func (s *Session) rdvMatchLocked(q *queue, op *recvOp, m *message, out *outgoing) {
	st := s.statusLocked(q, m)
	if !op.alloc && len(op.buf) < m.size {
		// The receive completes now: its array may be used again before
		// the answer is written.
		p := binary.AppendUvarint(append(binary.AppendUvarint(nil, m.rdv), 1), uint64(s.owedLocked(m.src)))
		op.req.complete(st, &TruncateError{Need: m.size, Have: len(op.buf), Source: st.Source, Tag: st.Tag})
		*out = outgoing{to: int(m.src), kind: kindCTS, payload: p}
		return
	}
	if err := s.failErrLocked(q, m.src); err != nil {
		op.req.complete(Status{}, err)
		return
	}
	if s.rdvIn == nil {
		s.rdvIn = make(map[rdvKey]rdvRecv)
	}
	if m.addr != 0 && s.single != nil && m.size > 0 {
		// Read from the sender's memory once the lock is released
		// (sendOne calls rdvPull): on the goroutine that matched, a
		// reader's or the receive's own call, as a copy out of the ring
		// would be.
		s.rdvIn[rdvKey{m.src, m.rdv}] = rdvRecv{q: q, op: op, st: st, pulling: true}
		*out = outgoing{to: int(m.src), pull: m.rdv, addr: m.addr}
		return
	}
	s.rdvIn[rdvKey{m.src, m.rdv}] = rdvRecv{q: q, op: op, st: st}
	p := append(binary.AppendUvarint(op.req.hdr[:0], m.rdv), 0)
	p = binary.AppendUvarint(p, uint64(s.owedLocked(m.src)))
	*out = outgoing{to: int(m.src), kind: kindCTS, payload: untilAnswered(p)}
}

// onCTS handles a clear-to-send: the data is written from a goroutine of
// its own (this is a reader goroutine, which must not block on a write).
func (s *Session) onCTS(src int, p []byte) error {
	id, flag, credit, err := parseCTS(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.addCreditLocked(core.NodeID(src), credit)
	req := s.rdvOut[id]
	if req == nil || req.rdv.to != core.NodeID(src) {
		s.mu.Unlock()
		if flag != 2 { // a withdrawal's answer may come after the send completed
			s.stats.dropped.Add(1)
		}
		return nil
	}
	if flag == 2 {
		s.rdvWithdrawnLocked(req)
		s.mu.Unlock()
		return nil
	}
	delete(s.rdvOut, id)
	s.mu.Unlock()
	if flag == 1 {
		// The receiver's buffer was too small (its error), or the
		// receiver read the data itself.
		req.complete(Status{}, nil)
		return nil
	}
	s.rdvDispatch(rdvJob{req: req, id: id})
	return nil
}

// rdvJob is the data of a large message to write.
type rdvJob struct {
	req *Request
	id  uint64
}

// rdvDispatch hands j to an idle writer goroutine, or starts one: the
// data is written off the reader goroutine (which must not block on a
// write: two readers writing to each other would wait for ever), and in
// the steady state without a goroutine start per message. Writers end
// with the session; there are as many as writes were ever in progress at
// once.
func (s *Session) rdvDispatch(j rdvJob) {
	select {
	case s.rdvJobs <- j:
	default:
		go s.rdvWriter(j)
	}
}

func (s *Session) rdvWriter(j rdvJob) {
	for {
		s.rdvWrite(j)
		select {
		case j = <-s.rdvJobs:
		case <-s.base.Done():
			return
		}
	}
}

// rdvWrite writes the data of j, lent where it can be (lendRData), and
// otherwise by sendFrame, which never waits for the socket (it copies
// into the transport's queue or the backlog); then it tells a blocking
// Send that may give up that the write has returned (rdvDetach).
func (s *Session) rdvWrite(j rdvJob) {
	req := j.req
	written := req.rdv.written // req may be used again once it completes
	head := binary.AppendUvarint(req.hdr[:0], j.id)
	f := wire.Frame{Kind: kindRData, Payload: head}
	if !s.lendRData(f, req) {
		s.sendFrame(int(req.rdv.to), f, req.rdv.body, req)
	}
	if written != nil {
		close(written)
	}
}

// lendRData writes a large message's data over transport/tcp lent, not
// copied, to the pair's resend log (tcp.TryLendDirect): the sender's
// processor then copies each byte once, into the kernel, instead of twice,
// and the send completes when the receiver acknowledges the frame (within
// about a small frame's trip: a frame this large is acknowledged as soon
// as it is delivered) or when the transport gives the data back otherwise
// (the receiver failed and was removed, the session closed). The caller's
// buffer stays untouched until then, as a send's buffer must until its
// request completes. The write of a blocking Send that may give up
// watches its context (tcp.TryLendDirectCtx: see rdvDetach). It reports
// false, having sent nothing, where the frame must take sendFrame's way:
// not over transport/tcp directly, a replicated rank, a small message, or
// frames waiting before it.
func (s *Session) lendRData(f wire.Frame, req *Request) bool {
	t, body := s.tcpTr, req.rdv.body
	if t == nil || s.rep != nil || len(body) < tcp.LendMin {
		return false
	}
	q := s.outq(int(req.rdv.to))
	if q == nil {
		return false
	}
	if req.lent == nil {
		req.lent = func() { req.complete(Status{}, nil) }
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.backlog) > 0 {
		return false
	}
	f.Epoch = s.epoch.Load()
	if ctx := req.rdv.ctx; ctx != nil && !req.rdv.owned {
		ok, _ := t.TryLendDirectCtx(ctx, q.to, f, body, req.lent)
		return ok
	}
	return t.TryLendDirect(q.to, f, body, req.lent)
}

func parseCTS(p []byte) (id uint64, flag byte, credit uint64, err error) {
	d := wire.NewDecoder(p)
	id = d.Uvarint()
	flag = d.Uint8()
	credit = d.Uvarint()
	if err := d.Finish(); err != nil {
		return 0, 0, 0, fmt.Errorf("%w: cts: %w", errMalformed, err)
	}
	if flag > 2 {
		return 0, 0, 0, fmt.Errorf("%w: cts flag %d", errMalformed, flag)
	}
	return id, flag, credit, nil
}

// parseRData splits a data frame's payload (the first bytes of it, when it
// is placed) into its rendezvous id and the data.
func parseRData(p []byte) (id uint64, data []byte, ok bool) {
	id, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, nil, false
	}
	return id, p[n:], true
}

// onRData handles the data of a matched RTS that was not placed.
func (s *Session) onRData(src int, p []byte) error {
	id, data, ok := parseRData(p)
	if !ok {
		return fmt.Errorf("%w: rdata id", errMalformed)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := rdvKey{core.NodeID(src), id}
	e, ok := s.rdvIn[key]
	if !ok || e.pulling { // data not asked for
		s.stats.dropped.Add(1)
		return nil
	}
	delete(s.rdvIn, key)
	if len(data) != e.st.Count {
		e.op.req.complete(Status{}, fmt.Errorf("%w: %d bytes of data for a message of %d", errMalformed, len(data), e.st.Count))
		return nil
	}
	if e.op.alloc {
		e.op.req.data = slices.Clone(data)
	} else {
		copy(e.op.buf, data)
	}
	e.op.req.complete(e.st, nil)
	return nil
}

// rdvRecheckLocked fails the rendezvous in progress that can no longer
// complete: the session ended, the communicator was revoked, the peer
// failed.
func (s *Session) rdvRecheckLocked() {
	for id, req := range s.rdvOut {
		err := s.state
		if err == nil && req.comm.revoked {
			err = ErrRevoked
		}
		if err == nil && s.failed[req.rdv.to] {
			err = &peerFailedError{world: int(req.rdv.to), left: s.left[req.rdv.to]}
		}
		if err != nil {
			delete(s.rdvOut, id)
			req.unpooled.Store(true) // its ready-to-send may still be queued
			req.complete(Status{}, err)
		}
	}
	for _, key := range slices.Collect(maps.Keys(s.rdvIn)) {
		e := s.rdvIn[key]
		if e.pulling {
			continue // rdvPull checks once the read is done
		}
		err := s.opErrLocked(e.q, key.src, false)
		if err == nil {
			err = s.failErrLocked(e.q, key.src)
		}
		if err != nil {
			delete(s.rdvIn, key)
			e.op.req.unpooled.Store(true) // its clear-to-send may still be queued
			e.op.req.complete(Status{}, err)
		}
	}
}
