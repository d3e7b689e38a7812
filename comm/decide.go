package comm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/wire"
)

// Decisions on replicated ranks. The outcome of some operations depends on
// timing, not only on the program: which message a receive from AnySource
// matches, whether Iprobe finds a message or Test a completed request,
// which request WaitAny returns. Replicas of one rank run at different
// speeds, so left alone they could see different outcomes and diverge.
// On a replicated rank each such outcome is a decision of the replication
// layer (replica.Decide): every replica computes its own outcome, the
// rank's master replica's wins, and every replica returns it. The master's
// outcome is one its fellows can also reach: a message the master matched
// is on its way to every replica (the layer delivers each channel in the
// same order everywhere), and a request the master saw complete completes
// at every replica (a fellow decided "complete" waits for its own copy).
//
// Decisions are numbered in program order, so a replicated program makes
// its non-deterministic calls from one goroutine (or in an order that does
// not depend on timing), as it does its sends. On an unreplicated rank
// none of this costs anything: the local outcome is returned.
//
// Receives from AnySource: a blocking one (Recv, RecvValue) is a decided
// Probe followed by a receive from the source the master's probe found (the
// first unmatched message of that source that the receive matches: the
// same message at every replica, since every replica received that
// source's messages in the same order and matched the same ones before). A
// nonblocking one (Irecv from AnySource) is refused with
// [ErrReplicatedWildcard]: its match would be decided at a time that does
// not follow the program's order.

// ErrReplicatedWildcard: a nonblocking receive from AnySource on a
// replicated rank (its replicas could match different messages).
var ErrReplicatedWildcard = errors.New("comm: nonblocking receives from AnySource (Irecv) are not supported when ranks are replicated; use Recv, Probe or Iprobe, whose outcome the master replica decides")

// Decide returns the value that every replica of this rank agrees on as
// its next decision: on a replicated rank, the master replica's proposal
// (every replica passes its own v, computed the same way, for example
// from the clock or from what it observed); on an unreplicated rank, v
// itself. Programs use it for anything they decide from timing: replicas
// that decide through Decide never diverge. Every replica must call
// Decide, and the other non-deterministic operations, in the same order.
func (s *Session) Decide(ctx context.Context, v []byte) ([]byte, error) {
	if s.rep == nil {
		return v, nil
	}
	return s.rep.decide(ctx, s, v)
}

// Seed returns a random seed that every replica of this rank shares (a
// decision on replicated ranks), for a random source (math/rand/v2) whose
// draws the replicas then agree on.
func (s *Session) Seed(ctx context.Context) (uint64, error) {
	var e wire.Encoder
	e.Uvarint(rand.Uint64())
	v, err := s.Decide(ctx, e.B)
	if err != nil {
		return 0, err
	}
	d := wire.NewDecoder(v)
	seed := d.Uvarint()
	if err := d.Finish(); err != nil {
		return 0, fmt.Errorf("comm: a malformed seed decision: %w", err)
	}
	return seed, nil
}

// decide hands the layer this rank's next decision request and waits for
// its value.
func (r *replicated) decide(ctx context.Context, s *Session, v []byte) ([]byte, error) {
	r.decMu.Lock()
	defer r.decMu.Unlock()
	r.decK++
	k := r.decK
	ch := make(chan []byte, 1)
	r.mu.Lock()
	if r.decided == nil {
		r.decided = map[uint64]chan []byte{}
	}
	r.decided[k] = ch
	r.mu.Unlock()
	if err := s.host.Handle(ctx, replica.Decide{K: k, Value: v}); err != nil {
		return nil, s.endErr(err)
	}
	select {
	case val := <-ch:
		return val, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.base.Done():
		return nil, s.stateErr()
	}
}

// onDecided hands a decision's value to its waiter (on the loop).
func (r *replicated) onDecided(e replica.Decided) {
	r.mu.Lock()
	ch := r.decided[e.K]
	delete(r.decided, e.K)
	r.mu.Unlock()
	if ch != nil {
		ch <- e.Value
	}
}

// endErr is the error of an operation that could not reach the event loop.
func (s *Session) endErr(err error) error {
	if serr := s.stateErr(); serr != nil {
		return serr
	}
	return err
}

// Outcome errors travel as kinds: the ones a program acts on keep their
// type; any other error keeps its text.
const (
	outcomeOK = iota
	outcomeProcFailed
	outcomeRevoked
	outcomeOther
)

// decideOutcome decides a probe's or a request's outcome: found (or
// complete), its status, its error. Index is WaitAny's index (0 otherwise).
func (s *Session) decideOutcome(ctx context.Context, index int, found bool, st Status, err error) (int, bool, Status, error) {
	if s.rep == nil {
		return index, found, st, err
	}
	v, derr := s.rep.decide(ctx, s, encodeOutcome(index, found, st, err))
	if derr != nil {
		return -1, false, Status{}, derr
	}
	return decodeOutcome(v)
}

// encodeOutcome is the decision value of an outcome (decodeOutcome reads
// it back).
func encodeOutcome(index int, found bool, st Status, err error) []byte {
	var e wire.Encoder
	e.Varint(int64(index))
	e.Bool(found)
	e.Varint(int64(st.Source))
	e.Varint(int64(st.Tag))
	e.Varint(int64(st.Count))
	e.Uvarint(uint64(st.VNode))
	var pf *ProcFailedError
	switch {
	case err == nil:
		e.Uint8(outcomeOK)
	case errors.As(err, &pf):
		e.Uint8(outcomeProcFailed)
		e.Uvarint(uint64(len(pf.Ranks)))
		for _, r := range pf.Ranks {
			e.Uvarint(uint64(r))
		}
	case errors.Is(err, ErrRevoked):
		e.Uint8(outcomeRevoked)
	default:
		e.Uint8(outcomeOther)
		e.String(err.Error())
	}
	return e.B
}

func decodeOutcome(v []byte) (int, bool, Status, error) {
	d := wire.NewDecoder(v)
	index := int(d.Varint())
	found := d.Bool()
	st := Status{Source: int(d.Varint()), Tag: int(d.Varint()), Count: int(d.Varint()), VNode: VNode(d.Uvarint())}
	var err error
	switch kind := d.Uint8(); kind {
	case outcomeOK:
	case outcomeProcFailed:
		n := d.Uvarint()
		if n > uint64(d.Remaining()) {
			d.Fail("ranks", errors.New("more ranks than bytes"))
			break
		}
		pf := &ProcFailedError{Ranks: make([]int, n)}
		for i := range pf.Ranks {
			pf.Ranks[i] = int(d.Uvarint())
		}
		err = pf
	case outcomeRevoked:
		err = ErrRevoked
	case outcomeOther:
		err = fmt.Errorf("comm: at this rank's master replica: %s", d.String())
	default:
		d.Fail("outcome", fmt.Errorf("unknown error kind %d", kind))
	}
	if ferr := d.Finish(); ferr != nil {
		return -1, false, Status{}, fmt.Errorf("comm: a malformed decision: %w", ferr)
	}
	return index, found, st, err
}

// probeAny is a blocking probe from AnySource on a replicated rank: this
// replica's own probe, then the master's outcome.
func (c *Comm) probeAny(ctx context.Context, tag int) (Status, error) {
	st, err := c.probeLocal(ctx, AnySource, tag)
	if ctx.Err() != nil {
		return Status{}, ctx.Err()
	}
	_, _, st, err = c.s.decideOutcome(ctx, 0, err == nil, st, err)
	return st, err
}

// resolveSource turns a blocking receive's AnySource into the source the
// master replica's probe found (on replicated ranks; elsewhere src is
// returned as it is).
func (c *Comm) resolveSource(ctx context.Context, src, tag int) (int, error) {
	if c.s.rep == nil || src != AnySource {
		return src, nil
	}
	st, err := c.probeAny(ctx, tag)
	if err != nil {
		return 0, err
	}
	return st.Source, nil
}
