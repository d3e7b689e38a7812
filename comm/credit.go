package comm

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Credit-based flow control of eager point-to-point messages. Every
// process grants every other one a budget of eager bytes (the session's
// eagerCredit: [DefaultEagerCredit] unless [WithEagerCredit] says
// otherwise). A sender charges each eager message it sends to a peer
// against what remains of the budget toward that peer: eagerCharge, the
// message's length plus eagerOverhead, so that a flood of empty messages is
// bounded too. A message that does not fit in what remains goes through
// the rendezvous (rendezvous.go) instead, as a message larger than EagerMax
// does: the receiver keeps only its ready-to-send, and the data stays in
// the sender's buffer until a receive takes it.
//
// The receiver returns what a message cost once a receive consumed it (at
// once if a receive was posted when it arrived), and also when it drops it
// (a revoked communicator): whatever is owed rides on every data frame
// (kindCData instead of kindData) and every clear-to-send the receiver
// sends to the sender, so traffic both ways (a ping-pong) needs no frame
// of its own; and a credit frame (kindCredit) goes as soon as a quarter of
// the budget is owed, never one per message.
//
// Credit is per pair of world ranks, shared by all their communicators.
// So, counting a message's charge:
//
//   - the eager messages of one sender waiting in this process's
//     unexpected queues never exceed the budget (peerCredit.held); the
//     rest of what a sender sends ahead costs a ready-to-send record each;
//   - the eager messages a process has sent to one peer and that the peer
//     has not consumed — in comm's backlog, the transport's queue, on the
//     wire, or queued at the peer — never exceed the budget: a backlog
//     toward a slow peer holds at most the budget of eager data (and
//     ready-to-sends, which point into the callers' buffers);
//   - once a receiver has consumed everything a sender sent, the sender
//     may send more than three quarters of the budget eagerly again, so a
//     program that receives what it is sent never stays on the rendezvous.
//
// The receiver enforces the credit: the charges of a sender's eager
// messages it has received and not yet returned (held plus owed) never
// exceed the budget while the sender keeps to it, so a frame that would
// take them beyond it comes from a sender that ignores its credit (or
// was given another budget: every rank must use the same). That sender is
// cut off (cutOff): its frame is refused, the receiver counts it failed
// as if a view had excluded it, and [Session.Failures] reports an
// [*OverrunError] naming it. The messages it sent within its credit stay
// receivable.
//
// Only point-to-point messages count against the credit. Collective steps
// are outside it: each call's algorithm bounds what it has in flight
// toward a peer, the algorithms rely on a step's send never waiting for
// its receive (coll.EagerSender: an exchange sends before it receives),
// and stepping through a rendezvous would cost every step a round trip;
// but a rank that runs ahead by many collective calls (a Bcast root in a
// loop) is not held back. Messages to virtual nodes are outside too (the
// rendezvous does not carry a virtual node), and so are ready-to-sends.
// What a receiver holds of those for one sender is bounded by a limit of
// its own instead, the unexpected limit ([DefaultUnexpectedLimit],
// [WithUnexpectedLimit]): the bytes of its collective steps and
// virtual-node messages waiting unexpected here, each counted as its
// length plus eagerOverhead, plus eagerOverhead per ready-to-send waiting
// (about what its record costs). Nothing slows a sender down before that
// limit (no acknowledgement tells it what the receiver holds), so a
// sender that goes beyond it is cut off as one that overruns its credit
// is; the default is far above what a collective keeps in flight, so
// only a rank that runs ahead by hundreds of megabytes of collective
// calls meets it.
//
// Replicated ranks (replicated.go) send every frame eagerly through
// package replica's layer, which keeps each frame until every destination
// replica acknowledged it; neither the credit nor the unexpected limit
// applies to them (the replicas of a rank must all see the same
// failures, which a local cut-off would break): their sender's memory is
// bounded by the layer's backup bound (replica.Config.MaxBackup and
// MaxBackupBytes), which holds the program's sends back (replicated.go).
//
// A failed rank owes and is owed nothing that anyone waits for: a send to
// it fails as before, whatever its credit; the eager messages it sent
// before failing stay receivable; credit is not returned to it. A data
// frame lost with a broken connection between two live processes (not a
// failure: comm does not resend it either) keeps its credit spent, and the
// sender's later messages to that peer go through the rendezvous sooner.

// DefaultEagerCredit is the budget of eager bytes each process grants each
// other process of its job unless [WithEagerCredit] sets another.
const DefaultEagerCredit = 1 << 20

// MinEagerCredit is the smallest budget [WithEagerCredit] accepts: two of
// the largest eager messages.
const MinEagerCredit = 2 * (EagerMax + eagerOverhead)

// DefaultUnexpectedLimit is the unexpected limit each process sets for
// each other process unless [WithUnexpectedLimit] sets another: the bytes
// of its collective steps and virtual-node messages, and its
// ready-to-sends, that may wait unexpected here before it is cut off.
const DefaultUnexpectedLimit = 256 << 20

// MinUnexpectedLimit is the smallest limit [WithUnexpectedLimit] accepts:
// a frame of the largest size the transport carries by default.
const MinUnexpectedLimit = wire.DefaultMaxFrameSize + eagerOverhead

// eagerOverhead is what an eager message costs its sender's credit beyond
// its bytes: about what the receiver keeps for it (its record, the
// smallest buffer class).
const eagerOverhead = 1 << minBufClass

// creditReturnDiv: a receiver sends a credit frame when a
// 1/creditReturnDiv share of the budget is owed to a sender.
const creditReturnDiv = 4

// kindCredit's payload: uvarint bytes of credit returned.

// WithEagerCredit sets the budget of eager bytes this process grants each
// other process, and assumes each other process grants it (every rank of a
// job must pass the same value): at least [MinEagerCredit], 0 for
// [DefaultEagerCredit]. A lower budget bounds memory more tightly and sends
// more small messages through the rendezvous.
func WithEagerCredit(bytes int) Option { return func(o *options) { o.eagerCredit = bytes } }

// WithUnexpectedLimit sets the unexpected limit this process sets for each
// other process: the bytes of its collective steps and virtual-node
// messages (each counted as its length plus 64), plus 64 per
// ready-to-send, that may wait unexpected here before that process is cut
// off as misbehaving: at least [MinUnexpectedLimit], 0 for
// [DefaultUnexpectedLimit].
func WithUnexpectedLimit(bytes int) Option {
	return func(o *options) { o.unexpectedLimit = bytes }
}

// flowLimits returns the eager budget and the unexpected limit the options
// ask for.
func (o options) flowLimits() (budget, unexpected int, err error) {
	budget, unexpected = o.eagerCredit, o.unexpectedLimit
	if budget == 0 {
		budget = DefaultEagerCredit
	}
	if unexpected == 0 {
		unexpected = DefaultUnexpectedLimit
	}
	switch {
	case budget < MinEagerCredit:
		return 0, 0, fmt.Errorf("%w: eager credit of %d bytes, at least %d", ErrBadArg, budget, MinEagerCredit)
	case unexpected < MinUnexpectedLimit:
		return 0, 0, fmt.Errorf("%w: unexpected limit of %d bytes, at least %d", ErrBadArg, unexpected, MinUnexpectedLimit)
	}
	return budget, unexpected, nil
}

// peerCredit is the credit between this process and one other (under the
// session's mu).
type peerCredit struct {
	avail int // bytes this process may still send eagerly to the peer
	held  int // charges of the peer's messages queued unexpected here
	owed  int // charges of the peer's messages consumed here, not yet returned
	// loose is what the peer's messages outside the credit that wait
	// unexpected here count against the unexpected limit.
	loose int
}

// looseCharge is what message m, queued in context ctxID, counts against
// its sender's unexpected limit: 0 for an eager point-to-point message
// (the credit counts it), a message from this process, or any message of
// a replicated job.
func (s *Session) looseCharge(ctxID uint64, m *message) int {
	switch {
	case s.rep != nil || m.src == s.self:
		return 0
	case m.rdv != 0:
		return eagerOverhead
	case ctxID&subMask == subP2P:
		return 0
	}
	return eagerCharge(len(m.data))
}

// holdLocked records that message m waits unexpected in q (sign 1) or no
// longer does (sign -1).
func (s *Session) holdLocked(q *queue, m *message, sign int) {
	pc := &s.credit[m.src]
	pc.held += sign * s.msgCharge(q, m)
	pc.loose += sign * s.looseCharge(q.id, m)
}

// OverrunError reports a process cut off for sending beyond a limit of
// this one: its eager credit, or the unexpected limit. Rank is its world
// rank; Sent is what its messages would have counted with the refused
// one, Limit the limit, both in bytes.
type OverrunError struct {
	Rank  int
	Sent  int
	Limit int
	What  string // "eager credit" or "unexpected limit"
}

// Error names the process and the limit.
func (e *OverrunError) Error() string {
	return fmt.Sprintf("comm: rank %d sent %d bytes beyond its %s of %d", e.Rank, e.Sent, e.What, e.Limit)
}

// Is makes errors.Is(err, ErrOverrun) true.
func (e *OverrunError) Is(target error) bool { return target == ErrOverrun }

// overrunLocked reports the error that cuts off the sender of message m,
// arriving in context ctxID, if taking it would go beyond the sender's
// eager credit (charge: its cost to the credit) or, queued unexpected
// (queued), beyond the unexpected limit; nil otherwise.
func (s *Session) overrunLocked(ctxID uint64, m *message, charge int, queued bool) *OverrunError {
	pc := &s.credit[m.src]
	if charge > 0 {
		if n := pc.held + pc.owed + charge; n > s.eagerCredit {
			return &OverrunError{Rank: int(m.src), Sent: n, Limit: s.eagerCredit, What: "eager credit"}
		}
	}
	if queued {
		if c := s.looseCharge(ctxID, m); c > 0 && pc.loose+c > s.unexpectedLimit {
			return &OverrunError{Rank: int(m.src), Sent: pc.loose + c, Limit: s.unexpectedLimit, What: "unexpected limit"}
		}
	}
	return nil
}

// cutOff cuts off world rank r for err: r counts as failed here from now
// on (its later frames are dropped, its connection closed, operations with
// it fail with a [*ProcFailedError]), and Session.Failures reports err.
func (s *Session) cutOff(r int, err error) {
	s.failWith([]int{r}, s.epoch.Load(), err)
}

func eagerCharge(n int) int { return n + eagerOverhead }

// spendCreditLocked charges an eager message of n bytes to the credit
// toward world rank to, or reports false if it does not fit (the message
// then goes through the rendezvous).
func (s *Session) spendCreditLocked(to core.NodeID, n int) bool {
	pc := &s.credit[to]
	if c := eagerCharge(n); c <= pc.avail {
		pc.avail -= c
		return true
	}
	s.stats.creditFallbacks.Add(1)
	return false
}

// chargeOf returns what a message of size bytes from src in context ctxID
// cost its sender's credit: 0 unless it is an eager point-to-point message
// from another process of an unreplicated job.
func (s *Session) chargeOf(src core.NodeID, ctxID uint64, size int) int {
	if ctxID&subMask != subP2P || s.rep != nil || src == s.self {
		return 0
	}
	return eagerCharge(size)
}

// msgCharge is chargeOf of message m of queue q (a ready-to-send costs
// nothing).
func (s *Session) msgCharge(q *queue, m *message) int {
	if m.rdv != 0 {
		return 0
	}
	return s.chargeOf(m.src, q.id, len(m.data))
}

// returnCreditLocked records that messages of src that cost n were
// consumed or dropped here, and stores in *out the credit frame to send
// once a quarter of the budget is owed (nothing otherwise).
func (s *Session) returnCreditLocked(src core.NodeID, n int, out *outgoing) {
	if n == 0 {
		return
	}
	pc := &s.credit[src]
	pc.owed += n
	if pc.owed >= s.eagerCredit/creditReturnDiv {
		s.creditFrameLocked(src, pc, out)
	}
}

// creditFrameLocked is returnCreditLocked once a quarter of the budget is
// owed to src (out of line: returnCreditLocked is inlined).
func (s *Session) creditFrameLocked(src core.NodeID, pc *peerCredit, out *outgoing) {
	if s.failed[src] {
		return
	}
	p := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64), uint64(pc.owed))
	pc.owed = 0
	s.stats.creditFrames.Add(1)
	*out = outgoing{to: int(src), kind: kindCredit, payload: p}
}

// owedLocked returns and clears what is owed to src (returned with a
// clear-to-send or a data frame to src).
func (s *Session) owedLocked(src core.NodeID) int {
	n := s.credit[src].owed
	s.credit[src].owed = 0
	return n
}

// addCreditLocked takes back n bytes of credit toward src. A peer never
// returns more than was spent; the budget caps a peer that does.
func (s *Session) addCreditLocked(src core.NodeID, n uint64) {
	pc := &s.credit[src]
	pc.avail = int(min(uint64(pc.avail)+n, uint64(s.eagerCredit)))
}

// unqueueLocked removes message i of q's unexpected queue and returns it.
func (s *Session) unqueueLocked(q *queue, i int) message {
	m := q.unexpected[i]
	q.unexpected = slices.Delete(q.unexpected, i, i+1)
	s.holdLocked(q, &m, -1)
	return m
}

// dropUnexpectedLocked removes the messages of q for which drop reports
// true and returns the credit frames their senders are owed.
func (s *Session) dropUnexpectedLocked(q *queue, drop func(message) bool) []outgoing {
	var out []outgoing
	q.unexpected = slices.DeleteFunc(q.unexpected, func(m message) bool {
		if !drop(m) {
			return false
		}
		c := s.msgCharge(q, &m)
		s.holdLocked(q, &m, -1)
		var o outgoing
		if s.returnCreditLocked(m.src, c, &o); o.kind != 0 {
			out = append(out, o)
		}
		return true
	})
	return out
}

// onCredit handles a credit frame.
func (s *Session) onCredit(src int, p []byte) error {
	n, err := parseCredit(p)
	if err != nil {
		return err
	}
	s.creditIn(core.NodeID(src), n)
	return nil
}

// creditIn takes back n bytes of credit toward src.
func (s *Session) creditIn(src core.NodeID, n uint64) {
	s.mu.Lock()
	s.addCreditLocked(src, n)
	s.mu.Unlock()
}

func parseCredit(p []byte) (uint64, error) {
	d := wire.NewDecoder(p)
	n := d.Uvarint()
	if err := d.Finish(); err != nil {
		return 0, fmt.Errorf("%w: credit: %w", errMalformed, err)
	}
	return n, nil
}

// heldEager returns the charges of world rank src's eager messages that
// wait unexpected here (tests).
func (s *Session) heldEager(src int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.credit[src].held
}
