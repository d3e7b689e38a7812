package comm

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/cohort-mp/cohort/comm/internal/coll"
)

// Collectives across hosts. When a communicator's ranks span hosts and
// some host runs several of them, its Allreduce is hierarchical: the
// ranks of each host reduce through their host's segment (coll_shm.go),
// the host's lowest rank (its leader) reduces the hosts' results with the
// other leaders over the transport, and hands the result back to its
// host's ranks through the segment. The leaders' messages travel in the
// communicator's collective context with tags of their own, so the
// communicator's other collectives never see them, and no communicator is
// created: the ranks need not agree on anything beyond the addresses
// every rank has. Every element is still combined in rank order when each
// host's ranks are contiguous; otherwise a non-commutative operator takes
// the transport's algorithms instead. Failures: a rank waits either on
// its host's segment or on the transport, which both fail once a member
// of the communicator is known failed or it is revoked.

// hierState is a communicator's layout across hosts, as this rank uses
// it.
type hierState struct {
	host       int           // this rank's host (Session.collHost)
	local      *subTransport // the ranks of this host
	leaders    *subTransport // the hosts' leaders; nil unless this rank leads
	contiguous bool          // every host's ranks are contiguous in the communicator
}

// Sequence spaces of the transports of a hierarchical collective: their
// tags (seq·256 + phase in package coll) never meet those of the
// communicator's own collectives, whose sequence numbers count from 0.
const (
	hierLeaderSeq = 1 << 52
	hierLocalSeq  = 1 << 53
)

// hierEligible reports whether c's collectives may go hierarchically:
// its ranks span hosts, some host runs several of them, none more than a
// segment holds, no replication, shared memory allowed.
func (c *Comm) hierEligible() bool {
	s := c.s
	if !segSupported || s.collHost == nil || s.rep != nil {
		return false
	}
	count := map[int]int{}
	for _, n := range c.st.members {
		if int(n) >= len(s.collHost) {
			return false
		}
		count[s.collHost[n]]++
	}
	shared := false
	for _, k := range count {
		if k > segMaxRanks {
			return false
		}
		shared = shared || k > 1
	}
	return len(count) > 1 && shared
}

// newHier lays c out across hosts.
func (c *Comm) newHier() *hierState {
	s := c.s
	host := func(r int) int { return s.collHost[c.st.members[r]] }
	h := &hierState{host: host(c.Rank()), contiguous: true}
	var local, leaders []int
	seen := map[int]bool{}
	for r := range c.Size() {
		if host(r) == h.host {
			local = append(local, r)
		}
		switch {
		case !seen[host(r)]:
			seen[host(r)] = true
			leaders = append(leaders, r)
		case host(r) != host(r-1):
			h.contiguous = false // a host's ranks resume after another's
		}
	}
	t := c.collTransport().(collTransport)
	h.local = newSubTransport(t, local, hierLocalSeq)
	if local[0] == c.Rank() {
		h.leaders = newSubTransport(t, leaders, hierLeaderSeq)
	}
	return h
}

// allreduceHier is Allreduce across hosts: among this host's ranks
// through its segment g (over the transport when they could not map
// one), among the leaders over the transport, and back to the host's
// ranks the same way.
func allreduceHier[T Elem](ctx context.Context, h *hierState, g *collSeg, send, recv []T, op Op[T]) error {
	if !op.Valid() {
		return fmt.Errorf("%w: allreduce: zero Op", ErrOp)
	}
	if len(recv) != len(send) {
		return fmt.Errorf("%w: allreduce: len(recv) = %d, want len(send) = %d", ErrCount, len(recv), len(send))
	}
	var err error
	switch {
	case g != nil:
		err = coll.AllreduceShared(ctx, g, g.self, g.p, send, recv, op)
	case h.local.Size() > 1:
		err = coll.Allreduce(ctx, h.local, send, recv, op)
	default:
		copy(recv, send)
	}
	if err == nil && h.leaders != nil {
		err = coll.Allreduce(ctx, h.leaders, recv, recv, op)
		if err != nil && ctx.Err() != nil && g != nil {
			g.abandon() // the host's ranks wait for this leader's result
		}
	}
	switch {
	case err != nil:
		return err
	case g != nil:
		return coll.BcastShared(ctx, g, g.self, g.p, recv, 0)
	case h.local.Size() > 1:
		return coll.Bcast(ctx, h.local, recv, 0)
	}
	return nil
}

// subTransport is the collective transport of some of a communicator's
// ranks (coll.Transport): rank i of it is rank ranks[i] of the
// communicator, and its sequence numbers count from base.
type subTransport struct {
	t     collTransport
	ranks []int
	self  int
	base  uint64
	seq   atomic.Uint64
}

func newSubTransport(t collTransport, ranks []int, base uint64) *subTransport {
	st := &subTransport{t: t, ranks: ranks, base: base, self: -1}
	for i, r := range ranks {
		if r == t.Rank() {
			st.self = i
		}
	}
	return st
}

func (t *subTransport) Rank() int       { return t.self }
func (t *subTransport) Size() int       { return len(t.ranks) }
func (t *subTransport) NextSeq() uint64 { return t.base + t.seq.Add(1) - 1 }
func (t *subTransport) EagerSend() bool { return t.t.EagerSend() }

func (t *subTransport) Send(ctx context.Context, to, tag int, data []byte) error {
	if to < 0 || to >= len(t.ranks) {
		return fmt.Errorf("%w: collective step to rank %d of %d", ErrRank, to, len(t.ranks))
	}
	return t.t.Send(ctx, t.ranks[to], tag, data)
}

func (t *subTransport) Recv(ctx context.Context, from, tag int) ([]byte, error) {
	if from < 0 || from >= len(t.ranks) {
		return nil, fmt.Errorf("%w: collective step from rank %d of %d", ErrRank, from, len(t.ranks))
	}
	return t.t.Recv(ctx, t.ranks[from], tag)
}

func (t *subTransport) RecvInto(ctx context.Context, from, tag int, buf []byte) (int, error) {
	if from < 0 || from >= len(t.ranks) {
		return 0, fmt.Errorf("%w: collective step from rank %d of %d", ErrRank, from, len(t.ranks))
	}
	return t.t.RecvInto(ctx, t.ranks[from], tag, buf)
}
