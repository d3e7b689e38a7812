package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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
// alive (launch: Exit.Excluded). It also counts the notices that tell
// excluded processes so (tellExcluded).
type exclusions struct {
	mu    sync.Mutex
	procs map[core.NodeID]bool
	// members is how many members the latest installed view has.
	members int
	// telling counts the notices under way (tellExcluded); told is
	// closed when it falls to zero.
	telling int
	told    chan struct{}
}

// start counts a notice under way.
func (x *exclusions) start() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.telling == 0 {
		x.told = make(chan struct{})
	}
	x.telling++
}

// viewSize returns how many members the latest installed view has.
func (x *exclusions) viewSize() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.members
}

// done counts a notice sent.
func (x *exclusions) done() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.telling--; x.telling == 0 {
		close(x.told)
	}
}

// wait waits until no notice is under way, or ctx is done.
func (x *exclusions) wait(ctx context.Context) {
	x.mu.Lock()
	told := x.told
	pending := x.telling > 0
	x.mu.Unlock()
	if pending {
		select {
		case <-told:
		case <-ctx.Done():
		}
	}
}

// view notes the departures of an installed view; a process admitted again
// is not excluded any more.
func (x *exclusions) view(e member.ViewInstalled) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.members = len(e.Members)
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

// noticeWait bounds how long the EXCLUDED notices sent together to the
// processes a view excluded (tellExcluded) may take to reach them before
// their connections are dropped: a stopped process never acknowledges
// them, so the wait usually runs to the end. It holds back only the
// failure of what this process still sends them (their connections go
// after it).
const noticeWait = 150 * time.Millisecond

// tellExcluded tells the processes of the failed world ranks listed,
// which the latest view just excluded, that they are (an EXCLUDED
// notice of that view: member.NotifyExcluded), over the connections this
// process still holds to them, and then drops those connections and what
// is queued for them (dropPeers). A process that was only stopped,
// starved or cut off reads the notice when it runs again, and its session
// ends with ErrEvicted, even if every other process has ended by then and
// nobody is left to answer it, under any launcher (under SLURM none stops
// it; see launch.Registration.ReportExcluded). The notice must go before
// the connection: a stopped process cannot answer a new connection's
// handshake. The notice is final (it evicts the process whatever views it
// formed meanwhile) when the view holds a majority of the job's processes:
// a view of the side that was cut off, which excludes the live rest of the
// job, cannot, so a process that took the others for failed never evicts
// them. It is the notice a member answers an excluded process with, from
// a member of the view over a connection that proved the job's secret:
// nobody outside the job can send it. Best effort: a connection that
// died, or a socket full of data the process did not read, loses it.
// Finalize waits for it (excluded.wait), at most noticeWait.
func (s *Session) tellExcluded(failed []int) {
	defer s.excluded.done()
	nodes := make([]core.NodeID, len(failed))
	for i, r := range failed {
		nodes[i] = core.NodeID(r)
	}
	final := 2*s.excluded.viewSize() > s.size
	ctx, cancel := context.WithTimeout(context.Background(), noticeWait)
	defer cancel()
	err := s.host.Do(ctx, func(m core.Machine, _ core.Env) {
		m.Handle(member.NotifyExcluded{Nodes: nodes, Final: final})
	})
	if f, ok := s.tr.(interface{ Flush(context.Context) error }); ok && err == nil {
		f.Flush(ctx) // a stopped process acknowledges nothing: the bound ends it
	}
	s.dropPeers(failed)
}
