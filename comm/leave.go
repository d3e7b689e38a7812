package comm

import (
	"context"
	"errors"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/member"
)

// # Leaving the job
//
// A rank that finalizes has finished its program: it is gone, but it did
// not fail. Finalize first waits until what the rank sent has reached its
// peers, then hands its membership machine member.LeaveRequest: the machine
// sends LEAVE to the members and stops, and the transport is flushed again
// so that the announcement reaches them before the process ends. The
// members exclude the rank as they would a failed one, and the view change
// that does carries the leave (member.ViewInstalled.Left): every survivor
// that installs that view sees the rank as left, never some as left and
// others as failed. A rank that crashes before any member heard its
// announcement is failed, everywhere alike: the membership's proposal
// decides, not each process.
//
// At a survivor, a rank that left is gone as a failed rank is (Session.failed:
// nothing waits for it any more), but marked left (Session.left,
// commState.left):
//
//   - it is not reported on Session.Failures, nor counted by Comm.Failed,
//     nor among the failures an AnySource receive or probe must
//     acknowledge (it no longer needs the rank);
//   - an operation that needs it fails with a *ProcLeftError naming it
//     rather than waiting for ever: a send to it, a receive from it once
//     the messages it sent before leaving are consumed, a step of a
//     collective that sends to it or waits for it (on shared memory: a
//     wait for its slot), and an Agree it left before contributing to
//     (agree.go: the agreed value lists the ranks that left, so every
//     member returns the same error);
//   - a collective it had done its part of still completes where it runs
//     late, and Shrink leaves it out as it does a failed rank.
//
// A replicated session has its own end (replicated.go) and announces no
// leave.

// announceLeave tells the membership that this process leaves the job and
// waits until the announcement has reached the others (as far as the
// transport can tell).
func (s *Session) announceLeave(ctx context.Context) error {
	if s.rep != nil {
		return nil
	}
	err := s.host.Do(ctx, func(m core.Machine, _ core.Env) { m.Handle(member.LeaveRequest{}) })
	if errors.Is(err, host.ErrStopped) {
		return nil // excluded already: nobody to tell
	}
	if err != nil {
		return err
	}
	if f, ok := s.tr.(interface{ Flush(context.Context) error }); ok {
		return f.Flush(ctx)
	}
	return nil
}

// markLeftLocked records that the processes listed left the job, as the
// view that excludes them says (under mu, before the view fails them).
func (s *Session) markLeftLocked(ids []core.NodeID) {
	for _, id := range ids {
		if r := int(id); r < s.limit() && !s.failed[r] {
			s.left[r] = true
		}
	}
}

// markGoneLocked records that member r of c is gone, left says whether it
// left the job rather than failed (under mu).
func (c *commState) markGoneLocked(r int, left bool) {
	if c.failed[r] {
		return
	}
	c.failed[r] = true
	c.nfailed++
	if left {
		c.left[r] = true
		c.nleft++
	}
}

// goneErrLocked is the error of an operation that needs member r of c,
// which is gone (under mu).
func (c *commState) goneErrLocked(r int) error {
	if c.left[r] {
		return &ProcLeftError{Ranks: []int{r}}
	}
	return &ProcFailedError{Ranks: []int{r}}
}

// goneRanks lists the members gone, failed or left (under mu).
func (c *commState) goneRanks() []int {
	var rs []int
	for r, f := range c.failed {
		if f {
			rs = append(rs, r)
		}
	}
	return rs
}

// leftRanks lists the members that left (under mu).
func (c *commState) leftRanks() []int {
	var rs []int
	for r, l := range c.left {
		if l {
			rs = append(rs, r)
		}
	}
	return rs
}

// tellGone reports the processes just found gone: on Failures and in the
// log as failed, or in the log only as having left.
func (s *Session) tellGone(ranks []int, epoch uint64, cause error) {
	var failed, left []int
	s.mu.Lock()
	for _, r := range ranks {
		if s.left[r] && cause == nil {
			left = append(left, r)
		} else {
			failed = append(failed, r)
		}
	}
	s.mu.Unlock()
	for _, r := range failed {
		select {
		case s.failures <- Failure{Rank: r, Epoch: epoch, Err: cause}:
		default:
		}
	}
	switch {
	case cause != nil:
		s.log.Error("comm: cut off", "ranks", failed, "epoch", epoch, "err", cause)
	case len(failed) > 0:
		s.log.Info("comm: ranks failed", "ranks", failed, "epoch", epoch)
	}
	if len(left) > 0 {
		s.log.Info("comm: ranks left the job", "ranks", left, "epoch", epoch)
	}
}
