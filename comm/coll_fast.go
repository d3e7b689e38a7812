package comm

import (
	"context"
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"time"

	"github.com/cohort-mp/cohort/comm/internal/coll"
	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// The optional interfaces of coll.Transport that let the collectives skip
// a goroutine and a copy per step.
var (
	_ coll.EagerSender    = collTransport{}
	_ coll.RecvIntoer     = collTransport{}
	_ coll.ExchangeIntoer = collTransport{}
	_ coll.Preposter      = collTransport{}
	_ coll.Lender         = collTransport{}
	_ coll.Paced          = collTransport{}
)

// Paced is true but on a replicated rank, whose backups trail its master,
// which its peers answer.
func (t collTransport) Paced() bool { return t.c.s.rep == nil }

// EagerSend is true: a send completes once the transport has the message
// (written to the connection, or queued), and the peer's reader takes
// messages whether or not a receive is posted, so an exchange can send first
// and receive next on one goroutine.
func (t collTransport) EagerSend() bool { return true }

// RecvInto receives the next collective message from rank from with tag tag
// straight into buf (a message that arrives after the receive is posted is
// copied once, from the connection's buffer into buf; one that arrived
// before, from comm's queue). A longer message fills buf and reports its
// full length without an error, as coll expects.
func (t collTransport) RecvInto(ctx context.Context, from, tag int, buf []byte) (int, error) {
	if from < 0 || from >= t.c.Size() {
		return 0, fmt.Errorf("%w: collective step from rank %d of %d", ErrRank, from, t.c.Size())
	}
	req, _ := t.post(from, tag, buf)
	t.poll(req)
	return intoCount(req.awaitRecv(ctx))
}

// intoCount turns a receive's outcome into RecvInto's: a truncated message
// reports its full length without an error.
func intoCount(st Status, err error) (int, error) {
	if err == nil {
		return st.Count, nil
	}
	// Declared here: its address escapes, and the common path must not
	// allocate it.
	var te *TruncateError
	if errors.As(err, &te) {
		return te.Need, nil
	}
	return 0, err
}

// ExchangeInto posts the receive into buf, then sends sdata, then waits
// for the receive: a large step from the peer finds its receive posted and
// is read from the socket straight into buf (place.go), with no copy and
// no buffer of comm's own.
func (t collTransport) ExchangeInto(ctx context.Context, to int, sdata []byte, from, tag int, buf []byte) (int, error, error) {
	req, err := t.post(from, tag, buf)
	if err != nil {
		return 0, err, nil
	}
	return t.ExchangePosted(ctx, to, sdata, tag, req)
}

// post posts a pooled receive from rank from with tag tag into buf.
func (t collTransport) post(from, tag int, buf []byte) (*Request, error) {
	if from < 0 || from >= t.c.Size() {
		return nil, fmt.Errorf("%w: collective step from rank %d of %d", ErrRank, from, t.c.Size())
	}
	s, c := t.c.s, t.c.st
	return s.irecvReq(pooledRequest(s, c), c, subColl, buf, false, from, tag, 0, true), nil
}

// PostInto posts the receive of a later exchange (ExchangePosted) from
// rank from with tag tag into buf.
func (t collTransport) PostInto(from, tag int, buf []byte) (any, error) {
	req, err := t.post(from, tag, buf)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// ExchangePosted sends sdata to rank to with tag tag, then waits for the
// receive PostInto posted, and for the transport to give sdata back if it
// was lent.
func (t collTransport) ExchangePosted(ctx context.Context, to int, sdata []byte, tag int, posted any) (int, error, error) {
	n, lent, serr, rerr := t.ExchangeLent(ctx, to, sdata, tag, posted)
	if lent != nil {
		req := lent.(*Request)
		t.c.s.tcpTr.ReleaseAcks(req.lentTo)
		req.block(context.Background())
		req.release()
	}
	return n, serr, rerr
}

// ExchangeLent is ExchangePosted without the wait for sdata: a step
// lent to the transport (sendStep) is returned as lent, for Reclaim.
// The peer acknowledges it once it has read it, behind its own step's
// data to this rank: waiting here would cost each step a second wake-up
// for the acknowledgement, where the collective reclaims its steps
// together at its end, by when most are back.
func (t collTransport) ExchangeLent(ctx context.Context, to int, sdata []byte, tag int, posted any) (int, any, error, error) {
	req := posted.(*Request)
	if to < 0 || to >= t.c.Size() {
		t.Withdraw(req)
		return 0, nil, fmt.Errorf("%w: collective step to rank %d of %d", ErrRank, to, t.c.Size()), nil
	}
	// The acknowledgements of the peers' steps are held from here to
	// Reclaim (tcp.Transport.HoldAcks): the peers reclaim their steps at
	// their end too, and one acknowledgement per peer then covers all.
	tr := t.c.s.tcpTr
	hold := tr != nil && t.c.s.rep == nil && len(sdata) >= tcp.LendMin
	if hold {
		tr.HoldAcks()
	}
	lent, serr := t.sendStep(ctx, to, tag, sdata)
	if hold && lent == nil {
		tr.ReleaseAcks(core.None) // only a lent step is reclaimed
	}
	if serr != nil {
		t.Withdraw(req)
		return 0, nil, serr, nil
	}
	t.poll(req)
	n, err := intoCount(req.awaitRecv(ctx))
	if lent == nil {
		return n, nil, nil, err // not a nil *Request in an interface
	}
	return n, lent, nil, err
}

// Reclaim waits until the transport gives back the data of the steps
// ExchangeLent lent: each peer acknowledged them or was removed. Not
// bounded by a ctx: a connection that breaks meanwhile resends from them.
// It first ends every step's hold of acknowledgements, writing the one
// held for each step's peer, and only then waits: a peer may hold ours
// until its own Reclaim, and a rank that waited for one partner before
// it wrote to the next would make that partner wait a round more.
func (t collTransport) Reclaim(lent []any) {
	for _, x := range lent {
		t.c.s.tcpTr.ReleaseAcks(x.(*Request).lentTo)
	}
	for _, x := range lent {
		req := x.(*Request)
		req.block(context.Background())
		req.release()
	}
}

// sendStep sends a collective step's data as Session.send does, except
// that over transport/tcp a step of at least tcp.LendMin bytes is lent to
// the transport's resend log instead of copied into it (as a large
// message's data is, lendRData): a large Allreduce's steps then cost the
// sender's processor one copy of their bytes, the kernel's. It returns
// the request that completes when the transport gives data back, for the
// caller to wait for before data is its own again, or nil when the step
// was sent otherwise.
func (t collTransport) sendStep(ctx context.Context, to, tag int, data []byte) (*Request, error) {
	s, c := t.c.s, t.c.st
	if s.tcpTr == nil || s.rep != nil || len(data) < tcp.LendMin {
		return nil, s.send(ctx, c, subColl, to, tag, data)
	}
	var p sendPlan
	s.mu.Lock()
	s.sendPlanLocked(&p, c, subColl, to, len(data))
	s.mu.Unlock()
	if p.err != nil || p.q == nil {
		req := s.isendPlanned(pooledRequest(s, c), c, subColl, to, tag, 0, data, &p)
		_, err := req.block(ctx)
		req.release()
		return nil, err
	}
	q, kind := p.q, p.kind(false)
	h := dataHeader{credit: uint64(p.credit), ctxID: c.id | subColl, tag: tag}
	req := pooledRequest(s, c)
	if req.lent == nil {
		req.lent = func() { req.complete(Status{}, nil) }
	}
	var hdr [maxRTS]byte
	f := wire.Frame{Kind: kind, Payload: appendDataHeader(hdr[:0], kind, h)}
	lent := false
	q.mu.Lock()
	if len(q.backlog) == 0 && !q.running.Load() {
		f.Epoch = s.epoch.Load()
		lent = s.tcpTr.TryLendDirect(q.to, f, data, req.lent)
	}
	q.mu.Unlock()
	if lent {
		req.lentTo = q.to
		return req, nil
	}
	req.complete(Status{}, nil) // unused: back to the pool
	req.release()
	return nil, c.translate(q.sendData(kind, h, data))
}

// Withdraw cancels a receive PostInto posted (or it completed: its outcome
// no longer matters); Cancel waits for a read into its buffer in progress.
func (t collTransport) Withdraw(posted any) {
	req := posted.(*Request)
	req.Cancel()
	req.release()
}

// A collective's receive polls the host's shared-memory rings on its own
// goroutine for collPoll before it parks, also where the session's polling
// time (spin.go) is off because the host has more ranks than cores: the
// ranks of a collective wait for one another within microseconds, and a
// parked rank pays each step a wake-up of its reader goroutine and then of
// itself. Between slices of collSlice it yields its core to the other
// processes (sched_yield), as Open MPI's shared-memory path does when
// oversubscribed, so that a rank it waits for can run. Measured on 2 busy
// cores (cohort bench allreduce --max 8, medians of 4 runs), it took the
// 8 B Allreduce on 4 ranks from about 100 µs to 76; on 8 ranks it made it
// several times slower (8 pollers for 2 cores), hence collPollFor. The
// yields matter most: slices of 8 µs made the 4-rank figure 220–420 µs
// where those of 0.5–2 µs gave 25–60, and windows of 50 or 200 µs did no
// better than 20.
const (
	collPoll  = 20 * time.Microsecond
	collSlice = 2 * time.Microsecond
)

// collPollFor returns a collective receive's polling time for a rank with
// local ranks on a host of cpus cores: collPoll up to two ranks per core,
// 0 beyond.
func collPollFor(cpus, local int) time.Duration {
	if local > 2*cpus {
		return 0
	}
	return collPoll
}

// poll polls for req for up to the session's collPoll before its wait
// parks. It stops at once on a transport without shared-memory rings
// (PollUntil returns well within a slice): the reader goroutines deliver
// there anyway.
func (t collTransport) poll(req *Request) {
	s := t.c.s
	if s.prog == nil || s.collPoll <= s.progTime || req.isDone() {
		return
	}
	start := time.Now()
	for {
		sliceStart := time.Now()
		if s.prog.PollUntil(&req.state, reqDone, collSlice) {
			return
		}
		now := time.Now()
		if now.Sub(sliceStart) < collSlice/2 || now.Sub(start) >= s.collPoll {
			return
		}
		hotsync.Yield()
	}
}
