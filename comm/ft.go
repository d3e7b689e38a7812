package comm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/member"
)

// Failed returns the ranks of the communicator known to have failed, in
// increasing order (MPI_Comm_failure_get_acked's counterpart without the
// acknowledgement: every failure the views report). A rank is failed once a
// membership view excludes it; it never comes back. A rank that left the
// job by finalizing is not failed ([Comm.Left]).
func (c *Comm) Failed() []int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.st.failedRanks()
}

// Left returns the ranks of the communicator that left the job by
// finalizing (the membership's views say so), in increasing order. Like a
// failed rank, a rank that left never comes back; an operation that needs
// it fails with a [*ProcLeftError].
func (c *Comm) Left() []int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.st.leftRanks()
}

// AckFailed acknowledges every failure known now (MPI_Comm_failure_ack):
// AnySource receives and probes stop failing because of them (they fail
// again when another rank fails).
func (c *Comm) AckFailed() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for r, f := range c.st.failed {
		if f {
			c.st.acked[r] = true
		}
	}
}

// Revoke revokes the communicator at every member (MPI_Comm_revoke): the
// revocation is flooded (each member that learns it passes it to every
// other live member), so it reaches every live member even if this process
// dies while sending it. Every pending and later operation on the
// communicator, at every member, then fails with [ErrRevoked], except
// Agree, Shrink, Failed and AckFailed, which a program uses to repair it.
// Revoking twice is harmless.
func (c *Comm) Revoke() {
	s := c.s
	s.mu.Lock()
	if c.st.revoked || s.state != nil {
		s.mu.Unlock()
		return
	}
	targets := s.revokeLocked(c.st, core.None)
	s.mu.Unlock()
	s.sendAll(targets)
}

// revokeLocked marks c revoked, drops its queued messages, fails its
// pending operations and returns the frames that pass the revocation on to
// every live member but this process and from, and the credit owed for
// what it dropped.
func (s *Session) revokeLocked(c *commState, from core.NodeID) []outgoing {
	c.revoked = true
	var out []outgoing
	for _, sub := range []uint64{subP2P, subColl, subVirt} {
		if q := s.queues[c.id|sub]; q != nil {
			out = append(out, s.dropUnexpectedLocked(q, func(message) bool { return true })...)
			s.recheckLocked(q)
		}
	}
	s.rdvRecheckLocked()
	payload := binary.AppendUvarint(nil, c.id)
	for r, n := range c.members {
		if r != c.self && n != from && !c.failed[r] {
			out = append(out, outgoing{to: int(n), kind: kindRevoke, payload: payload})
		}
	}
	return out
}

// onRevoke handles a revocation from world rank src.
func (s *Session) onRevoke(src int, p []byte) error {
	id, n := binary.Uvarint(p)
	if n <= 0 || n != len(p) || id&subMask != 0 {
		return fmt.Errorf("%w: revocation", errMalformed)
	}
	s.mu.Lock()
	if s.state != nil {
		s.mu.Unlock()
		return nil
	}
	c := s.comms[id]
	if c == nil {
		if !s.expectedCommLocked(id) {
			s.mu.Unlock()
			s.cutOff(src, &ContextError{Rank: src, Context: id})
			return nil
		}
		s.revokedID[id] = true
		s.mu.Unlock()
		return nil
	}
	if c.revoked {
		s.mu.Unlock()
		return nil
	}
	if _, ok := c.rankOf(core.NodeID(src)); !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: revocation of a communicator by a non-member", errMalformed)
	}
	out := s.revokeLocked(c, core.NodeID(src))
	s.mu.Unlock()
	s.sendAll(out)
	return nil
}

// exclusions records the processes that the membership's views excluded
// from the job as failed (not those that left), for the launcher: a
// process that finalizes tells it (launch.Registration.ReportExcluded), so
// that a process excluded while it was stopped or cut off, which may run
// again once nobody is left to answer it EXCLUDED, does not keep the job
// alive (launch: Exit.Excluded).
type exclusions struct {
	mu    sync.Mutex
	procs map[core.NodeID]bool
}

// view notes the departures of an installed view; a process admitted again
// is not excluded any more.
func (x *exclusions) view(e member.ViewInstalled) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range e.Departed {
		if !slices.Contains(e.Left, id) {
			if x.procs == nil {
				x.procs = map[core.NodeID]bool{}
			}
			x.procs[id] = true
		}
	}
	for _, id := range e.Joined {
		delete(x.procs, id)
	}
}

// list returns the excluded processes in increasing order.
func (x *exclusions) list() []int {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]int, 0, len(x.procs))
	for id := range x.procs {
		out = append(out, int(id))
	}
	slices.Sort(out)
	return out
}

// reportExcluded tells the launcher which processes this process saw
// excluded (exclusionReport), as it finalizes.
func (s *Session) reportExcluded(reg *launch.Registration) {
	if err := reg.ReportExcluded(s.exclusionReport()); err != nil {
		s.log.Debug("comm: cannot tell the launcher which processes were excluded", "err", err)
	}
}

// exclusionReport returns the processes this process saw excluded, or
// nil if it was excluded itself: its own views, formed alone while the
// others went on, would name live processes.
func (s *Session) exclusionReport() []int {
	s.mu.Lock()
	evicted := errors.Is(s.state, ErrEvicted)
	s.mu.Unlock()
	if evicted {
		return nil
	}
	return s.excluded.list()
}
