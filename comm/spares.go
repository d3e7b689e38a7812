package comm

import (
	"errors"
	"fmt"
	"net"

	"github.com/cohort-mp/cohort/core"
)

// Spare processes. A job started with `cohort run -n N --spares S` has
// N+S processes: process p < N is rank p of the world communicator, and
// processes N to N+S−1 are spares, outside it, waiting to take the rank
// of a process that fails. Every process is a member of the membership
// service (their failures are detected alike) and of [Session.Processes],
// the communicator of all N+S on which a runtime such as package resil
// agrees on who failed and builds, with [Comm.Create], the communicator
// whose rank r is the process that now holds it. The rank number stays;
// the process behind it changes; the new communicator has a new context,
// so no message of the old one matches in it.

// ErrSpare: Init found this process to be a spare, and the program did
// not say it takes spares ([AllowSpares]).
var ErrSpare = errors.New("comm: this process is a spare (cohort run --spares), and the program does not take spares: run it under package resil, or without --spares")

// processesID is the context id of the communicator of every process of
// a job with spares. It differs from worldID and, like the ids childID
// derives, is one 61-bit value among 2^61.
const processesID uint64 = 0x7370617265730000 // "spares"

// AllowSpares lets [Init] return the session of a spare process (whose
// World is nil) rather than fail with [ErrSpare]: the program handles
// spares, as package resil does.
func AllowSpares() Option { return func(o *options) { o.allowSpares = true } }

// worldsOf builds the world communicator (nil at a spare) and the
// communicator of every process, for a job whose last spares processes
// are spares.
func (s *Session) worldsOf(spares int) (world, procs *Comm) {
	s.spares = spares
	if s.IsNewcomer() {
		return nil, nil // until a Grow adds it (newcomer.go)
	}
	ranks := s.size - spares
	if int(s.self) < ranks {
		members := make([]core.NodeID, ranks)
		for i := range members {
			members[i] = core.NodeID(i)
		}
		world = s.newComm(worldID, members)
	}
	if spares == 0 {
		return world, world
	}
	all := make([]core.NodeID, s.size)
	for i := range all {
		all[i] = core.NodeID(i)
	}
	return world, s.newComm(processesID, all)
}

// Spares returns the number of spare processes of the job (0: none).
func (s *Session) Spares() int { return s.spares }

// IsSpare reports whether this process started as a spare: it is not in
// [Session.World] (which is nil here), only in [Session.Processes]. A
// newcomer ([Session.IsNewcomer]) is a spare too, in no communicator
// until a [Comm.Grow] adds it.
func (s *Session) IsSpare() bool { return int(s.self) >= s.size-s.spares }

// Processes returns the communicator of every process of the job's
// start: the world's ranks first (rank p is process p), then the spares.
// In a job without spares it is [Session.World]; at a newcomer, nil.
func (s *Session) Processes() *Comm { return s.procs }

// Create returns a new communicator of the listed ranks of c, rank i of
// the new one being rank members[i] of c (MPI_Comm_create_group without
// its messages): every member of c must call Create, in the same order as
// its other Create, Dup and Shrink calls on c, with the same list; a
// caller that is not listed gets nil (and must still call, so that the
// communicators derived later from c get the same ids everywhere).
// members must hold distinct ranks of c. A listed rank known to have
// failed is a failed rank of the new communicator.
func (c *Comm) Create(members []int) (*Comm, error) {
	if err := c.s.commErr(c.st); err != nil {
		return nil, err
	}
	seen := make(map[int]bool, len(members))
	nodes := make([]core.NodeID, len(members))
	mine := false
	for i, r := range members {
		if r < 0 || r >= c.Size() || seen[r] {
			return nil, fmt.Errorf("%w: Create with member %d of a communicator of %d ranks (ranks must be distinct and in range)", ErrRank, r, c.Size())
		}
		seen[r] = true
		nodes[i] = c.st.members[r]
		mine = mine || r == c.st.self
	}
	id := childID(c.st.id, c.st.created.Add(1))
	if !mine {
		return nil, nil
	}
	return c.s.newComm(id, nodes), nil
}

// HostOf returns the host of process p (as numbered in
// [Session.Processes]) as the job's address table names it: its IP
// address, every loopback address counting as one host. It returns ""
// when the session does not know (a job of [Local], or p out of range).
// Package resil places checkpoint copies on other hosts with it.
func (s *Session) HostOf(p int) string {
	addr := ""
	if p >= 0 && p < len(s.addrs) {
		addr = s.addrs[p]
	} else if i := p - s.size; i >= 0 && i < MaxNewcomers {
		s.mu.Lock()
		addr = s.nc.addrs[i]
		s.mu.Unlock()
	}
	if addr == "" {
		return ""
	}
	ip := hostIP(addr)
	switch {
	case ip == nil:
		h, _, _ := net.SplitHostPort(addr)
		return h
	case ip.IsLoopback():
		return "127.0.0.1"
	}
	return ip.String()
}
