package comm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// Large messages between two ranks of one host in one copy. Through the
// shared-memory rings a rendezvous's data is copied twice, into the ring
// and out of it, and each copy passes through the caches of both cores;
// the kernel can instead copy it once, from the sender's process straight
// into the receive's buffer (transport/tcp's Pull: process_vm_readv). So:
//
//  1. The sender's ready-to-send carries the address of the caller's
//     buffer when the transport can read from its peer (tcp's
//     SingleCopy: a shared-memory connection, the peer's process known
//     from its socket's credentials). The buffer is the caller's until
//     the send completes, as for any send, and a Go heap object never
//     moves, so the address holds until then. The transport backs a
//     large buffer with huge pages when it is first offered (tcp's
//     BufferAddr), so that the kernel pins it for the read in a few
//     pieces instead of one per 4 KiB page.
//  2. The receive that takes it (rdvMatchLocked) reads the data from
//     there once the session's lock is released (rdvPull), and answers a
//     clear-to-send with flag 1: the sender completes the send without
//     writing the data.
//  3. If the read fails (the kernel refuses, or the sender's process is
//     gone), the receiver answers a plain clear-to-send instead and the
//     data comes through the ring as it would without an offer; once the
//     kernel refused, the transport offers no more (it says so once in
//     its log).
//
// A blocking Send that gives up waiting must free the caller's buffer,
// which the receiver may be reading: it withdraws the offer (kindRStop)
// and waits for the receiver's answer — a clear-to-send with flag 2 when
// no read has started (none will: the receive then asks for the data,
// which the sender copied), the read's own answer otherwise. The wait is
// bounded by the receiver's liveness, not by its receive: a receiver that
// fails ends it with the send's error.
//
// A failure ends a receive that is reading only once the read is done
// (rdvRecheckLocked leaves it to rdvPull): the kernel writes into the
// receive's buffer until then, which must not be the caller's again. The
// read takes no longer than a copy: the sender's death makes it fail at
// once (ESRCH), and the receive then fails with the sender's failure
// once it is known, as a receive waiting for data does.

// singleCopier reads messages from the memory of the ranks of this host
// (*tcp.Transport; tests put one in front of it).
type singleCopier interface {
	// SingleCopy reports whether Pull can read from peer's memory.
	SingleCopy(peer core.NodeID) bool
	// Pull copies len(dst) bytes at addr in peer's memory into dst.
	Pull(peer core.NodeID, dst []byte, addr uint64) error
}

// rdvOffer returns the address to offer in the ready-to-send of data to
// world rank to, or 0 for none.
func (s *Session) rdvOffer(to core.NodeID, data []byte) uint64 {
	if s.single == nil || len(data) == 0 || !s.single.SingleCopy(to) {
		return 0
	}
	return tcp.BufferAddr(data)
}

// rdvPull reads the data of ready-to-send id from src, offered at addr,
// into the buffer of the receive that took it (rdvMatchLocked), then
// completes the receive and tells the sender; if the read fails, it asks
// for the data instead.
func (s *Session) rdvPull(src core.NodeID, id, addr uint64) {
	key := rdvKey{src, id}
	s.mu.Lock()
	e, ok := s.rdvIn[key]
	s.mu.Unlock()
	if !ok || !e.pulling {
		return // nothing else takes a reading receive away
	}
	var dst []byte
	if e.op.alloc {
		dst = make([]byte, e.st.Count)
	} else {
		dst = e.op.buf[:e.st.Count]
	}
	err := s.single.Pull(src, dst, addr)
	s.mu.Lock()
	e.pulling = false
	ferr := s.opErrLocked(e.q, src, false)
	if ferr == nil {
		ferr = s.failErrLocked(e.q, src)
	}
	if ferr != nil {
		delete(s.rdvIn, key)
		s.mu.Unlock()
		e.op.req.complete(Status{}, ferr)
		return
	}
	if err != nil {
		s.rdvIn[key] = e // waits for the data, or for the sender's failure
		credit := s.owedLocked(src)
		s.mu.Unlock()
		s.stats.pullFallbacks.Add(1)
		if !errors.Is(err, tcp.ErrSingleCopyGone) && !errors.Is(err, tcp.ErrSingleCopyRefused) {
			s.log.Warn("comm: reading a message from its sender's memory failed; asking for it", "from", int(src), "err", err)
		}
		s.rdvAnswer(src, id, 0, credit)
		return
	}
	delete(s.rdvIn, key)
	if e.op.alloc {
		e.op.req.data = dst
	}
	credit := s.owedLocked(src)
	s.mu.Unlock()
	s.stats.pulled.Add(1)
	e.op.req.complete(e.st, nil)
	s.rdvAnswer(src, id, 1, credit)
}

// maxCTS bounds a clear-to-send's payload: two varints and the flag.
const maxCTS = 2*binary.MaxVarintLen64 + 1

// rdvAnswer sends a clear-to-send that no request's header array holds
// (the receive it answers may be used again at once).
func (s *Session) rdvAnswer(to core.NodeID, id uint64, flag byte, credit int) {
	if q := s.outq(int(to)); q != nil {
		q.sendCTS(id, flag, credit)
	}
}

// sendCTS sends a clear-to-send built in q's own array, under q.mu, which
// the frame leaves before the lock is released: transport/tcp copies it
// into memory of its own (in order behind the backlog); otherwise, and
// into the backlog, it is copied here.
func (q *outq) sendCTS(id uint64, flag byte, credit int) {
	epoch := q.s.epoch.Load()
	q.mu.Lock()
	p := binary.AppendUvarint(append(binary.AppendUvarint(q.cts[:0], id), flag), uint64(credit))
	if t := q.s.tcpTr; t != nil && len(q.backlog) == 0 {
		err := t.SendCopy(q.s.try, q.to, wire.Frame{Kind: kindCTS, Epoch: epoch, Payload: p})
		if err == nil || !errors.Is(err, transport.ErrQueueFull) {
			q.mu.Unlock()
			return
		}
	}
	q.sendLocked(wire.Frame{Kind: kindCTS, Epoch: epoch, Payload: bytes.Clone(p)}, nil, nil)
}

// rdvWithdraw takes back the address that r's ready-to-send (id) offered,
// for a blocking Send that gives up waiting, and waits until the receiver
// can no longer be reading the caller's buffer: its answer to the
// withdrawal, or the send's completion (the receiver read it, or failed).
// It is called under s.mu, which it releases.
func (s *Session) rdvWithdraw(id uint64, r *Request) {
	stopped := make(chan struct{})
	r.rdv.stopped = stopped
	to, ctxID := r.rdv.to, r.rdv.ctxID
	s.mu.Unlock()
	p := binary.AppendUvarint(binary.AppendUvarint(nil, id), ctxID)
	s.stats.withdrawals.Add(1)
	if s.sendFrame(int(to), wire.Frame{Kind: kindRStop, Payload: p}, nil, nil) != nil {
		// Not sent: the session ended or the receiver failed, which
		// completes the send.
		<-r.doneChan()
		return
	}
	select {
	case <-stopped:
	case <-r.doneChan():
	}
}

// rdvWithdrawnLocked handles the receiver's answer to a withdrawal: it
// will not read the caller's buffer, and asks for the data (the copy)
// when a receive takes the message.
func (s *Session) rdvWithdrawnLocked(req *Request) {
	req.rdv.addr = 0
	if req.rdv.stopped != nil {
		close(req.rdv.stopped)
		req.rdv.stopped = nil
	}
}

// onRStop handles a sender's withdrawal of an offered address: a
// ready-to-send not yet taken by a receive loses its address (its data
// will be asked for), and the answer is a clear-to-send with flag 2 —
// except when a read from that address is in progress, whose own answer
// comes once it is done.
func (s *Session) onRStop(src int, p []byte) error {
	id, ctxID, err := parseRStop(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if e, ok := s.rdvIn[rdvKey{core.NodeID(src), id}]; ok && e.pulling {
		s.mu.Unlock()
		return nil
	}
	if q := s.queues[ctxID]; q != nil {
		for i := range q.unexpected {
			if m := &q.unexpected[i]; m.src == core.NodeID(src) && m.rdv == id {
				m.addr = 0
			}
		}
	}
	s.mu.Unlock()
	s.rdvAnswer(core.NodeID(src), id, 2, 0)
	return nil
}

func parseRStop(p []byte) (id, ctxID uint64, err error) {
	d := wire.NewDecoder(p)
	id = d.Uvarint()
	ctxID = d.Uvarint()
	if err := d.Finish(); err != nil {
		return 0, 0, fmt.Errorf("%w: rstop: %w", errMalformed, err)
	}
	return id, ctxID, nil
}
