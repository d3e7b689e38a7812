package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/wire"
)

// Newcomers. A process may join a running job after its start, as a
// spare: a process started again on a host that came back, say. It is a
// new process with a new process number, never the one it replaces: a
// failed process stays failed (comm's rule that a failure is forever
// holds for every number), and the newcomer is admitted by the
// membership's join (NEW_NODE), like a node joining a group.
//
// Newcomer i of a job started with P processes ([Session.Started]) has
// process number P+i, i < [MaxNewcomers]. Every process learns of a
// newcomer from the view that admits it ([Session.Newcomers]); from then
// on, a view without it says it failed, as for every other process. The
// newcomer holds no rank and is in no communicator until the members of
// one add it with [Comm.Grow], which needs no agreement of its own: the
// caller decides on agreed data which newcomers to add (package resil
// ANDs a bit per newcomer into the agreement that ends an attempt, so the
// newcomers added are those every survivor has seen admitted). Grow sends
// the newcomers a welcome — the communicator's id, its members, the
// epoch of the sender's view and the members it knows failed — and the
// newcomer's [Session.Welcome] returns the same communicator.
//
// Why the newcomer's set of failed members is a prefix of the survivors'
// chain, as the agreement needs (agree.go): every member of the grown
// communicator was admitted in a view no newer than the sender's view V
// at the Grow. The newcomer takes the sender's failed members as failed,
// and counts a member failed when a view of epoch at least V (or, for a
// newcomer it saw admitted, newer than that admission) leaves it out: it
// learns of the same exclusions in the same order as the survivors, from
// V on. The welcome travels in the control lane, as the agreement's steps
// do, and each sender sends it before any other frame of the new
// communicator, so no step of the communicator's agreements reaches the
// newcomer before the communicator exists there.

// MaxNewcomers is how many processes may join a job after its start, over
// its whole life.
const MaxNewcomers = launch.MaxNewcomers

// kindWelcome's payload:
//
//	uvarint context id | uvarint epoch | uvarint n | n × uvarint member | uvarint f | f × uvarint failed member | payload
//
// It is the last of comm's kinds (wire.go, rendezvous.go): append only.
const kindWelcome = core.Kind(core.ProtoComm)<<8 | 12

// Errors of Welcome.
var (
	// ErrNotNewcomer: Welcome at a process that started with the job.
	ErrNotNewcomer = errors.New("comm: this process started with the job, it is not a newcomer")
	// ErrNoWelcome: the membership admitted the newcomer, and then every
	// other process failed or left before a Grow added it (the job ended
	// before it could take part).
	ErrNoWelcome = errors.New("comm: every other process of the job failed or left before adding this newcomer")
	// ErrNotNeeded: as ErrNoWelcome, but some of the others finalized
	// (they said so before leaving): the job ended without needing this
	// newcomer, which holds nothing and may end as quietly.
	ErrNotNeeded = errors.New("comm: the job's other processes finalized without adding this newcomer: it was not needed")
)

// newcomers is a session's knowledge of the processes that joined after
// the start; guarded by the session's mu.
type newcomers struct {
	// admitted[i] is, for newcomer i, the epoch of a view that included
	// it (the first seen, or a welcome's); 0 if it is not known to have
	// been admitted.
	admitted [MaxNewcomers]uint64
	// view and viewEpoch are the newest view installed here.
	view      map[core.NodeID]bool
	viewEpoch uint64
	// welcomed: a welcome was taken (newcomer); welcome is closed then,
	// with grown and payload set.
	welcomed atomic.Bool
	welcome  chan struct{}
	// alone is closed when a view holds this newcomer alone before its
	// welcome (ErrNoWelcome).
	alone   chan struct{}
	grown   *Comm
	payload []byte
	// addrs[i] is newcomer i's listen address, as the launcher announced
	// it (a job over TCP): HostOf reads it.
	addrs [MaxNewcomers]string
}

// Over TCP (a job of cohort run --respawn) a newcomer is a process the
// launcher started: its bootstrap says so (launch.Bootstrap.Newcomer),
// and Init registers it late with the launcher's rendezvous, which first
// tells every member its address (each transport knows it before the
// newcomer asks anything) and then hands it the addresses of the
// processes before it, without those gone. Init asks those, in order,
// to admit it: it learns the current view and its members from the
// membership's answer, not from the job's first list.

// Started returns the number of processes the job started with (ranks
// and spares); newcomers are numbered from it.
func (s *Session) Started() int { return s.size }

// IsNewcomer reports whether this process joined the job after its start.
func (s *Session) IsNewcomer() bool { return int(s.self) >= s.size }

// Process returns this process's number: its rank in [Session.Processes],
// or at a newcomer Started()+i.
func (s *Session) Process() int { return int(s.self) }

// tableLen is how many addresses the launcher's table holds for boot:
// every process of the start, or, at a newcomer, those up to it.
func tableLen(boot launch.Bootstrap) int {
	if boot.Newcomer {
		return boot.Rank + 1
	}
	return boot.Size
}

// contactsOf returns the processes a newcomer asks to admit it: those of
// its table with an address and not gone, in order; nil for a process of
// the start.
func contactsOf(boot launch.Bootstrap, reg *launch.Registration) []core.NodeID {
	if !boot.Newcomer {
		return nil
	}
	contacts := []core.NodeID{}
	for p, a := range reg.Addrs {
		if a != "" && p != boot.Rank && !slices.Contains(reg.Gone, p) {
			contacts = append(contacts, core.NodeID(p))
		}
	}
	return contacts
}

// joined takes the launcher's news of a newcomer p at addr: the
// transport may dial it from now on.
func (s *Session) joined(p int, addr string) {
	i := p - s.size
	if i < 0 || i >= MaxNewcomers || core.NodeID(p) == s.self {
		return
	}
	s.mu.Lock()
	s.nc.addrs[i] = addr
	s.mu.Unlock()
	s.tr.SetPeer(core.NodeID(p), addr)
}

// Newcomers returns the newcomers that a view installed here admitted and
// that no view since left out, in process order.
func (s *Session) Newcomers() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, e := range s.nc.admitted {
		p := s.size + i
		if e != 0 && !s.failed[p] && core.NodeID(p) != s.self {
			out = append(out, p)
		}
	}
	return out
}

// viewLocked records view e and returns the newcomers it leaves out after
// having admitted them (failed).
func (s *Session) viewLocked(epoch uint64, members []core.NodeID) []int {
	in := make(map[core.NodeID]bool, len(members))
	for _, id := range members {
		in[id] = true
		if i := int(id) - s.size; i >= 0 && i < MaxNewcomers {
			if a := s.nc.admitted[i]; a == 0 || a > epoch {
				s.nc.admitted[i] = epoch
			}
		}
	}
	s.nc.view, s.nc.viewEpoch = in, epoch
	if s.IsNewcomer() && len(members) == 1 && members[0] == s.self && !s.nc.welcomed.Load() {
		select {
		case <-s.nc.alone:
		default:
			close(s.nc.alone)
		}
	}
	return s.goneLocked()
}

// goneLocked returns the processes the newest view leaves out: every one
// of the job's start, and every newcomer admitted by that view or an
// older one.
func (s *Session) goneLocked() []int {
	if s.nc.view == nil {
		return nil
	}
	var gone []int
	for r := range s.limit() {
		if s.nc.view[core.NodeID(r)] {
			continue
		}
		if i := r - s.size; i >= 0 && (s.nc.admitted[i] == 0 || s.nc.admitted[i] > s.nc.viewEpoch) {
			continue
		}
		gone = append(gone, r)
	}
	return gone
}

// limit is one past the highest process number the session accepts.
func (s *Session) limit() int { return len(s.failed) }

// Grow returns a new communicator of c's ranks, in their order, followed
// by the newcomers listed (process numbers, see [Session.Newcomers]), and
// sends each newcomer a welcome carrying payload, which its
// [Session.Welcome] returns with the communicator. Every member of c must
// call Grow, in the same order as its other Create, Dup, Shrink and Grow
// calls on c, with the same list and payload: the caller decides them on
// agreed data. Every newcomer listed must have been admitted by a view
// installed here and must not be a member of c. A newcomer known to have
// failed is a failed rank of the new communicator.
func (c *Comm) Grow(newcomers []int, payload []byte) (*Comm, error) {
	s := c.s
	if err := s.commErr(c.st); err != nil {
		return nil, err
	}
	if s.rep != nil {
		return nil, fmt.Errorf("%w: Grow in a replicated job", ErrBadArg)
	}
	members := slices.Clone(c.st.members)
	s.mu.Lock()
	for _, p := range newcomers {
		i := p - s.size
		if i < 0 || i >= MaxNewcomers || s.nc.admitted[i] == 0 || slices.Contains(members, core.NodeID(p)) {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: Grow with process %d, not a newcomer admitted here, or listed twice, or a member already", ErrBadArg, p)
		}
		members = append(members, core.NodeID(p))
	}
	epoch := s.nc.viewEpoch
	var failed []core.NodeID
	for _, n := range members {
		if s.failed[n] {
			failed = append(failed, n)
		}
	}
	s.mu.Unlock()
	id := childID(c.st.id, c.st.created.Add(1))
	grown := s.newComm(id, members)
	msg := appendWelcome(nil, welcomeMsg{id: id, epoch: epoch, members: members, failed: failed, payload: payload})
	for _, p := range newcomers {
		if !slices.Contains(failed, core.NodeID(p)) {
			// A newcomer that cannot be reached fails like any other
			// member: the membership says so.
			s.sendFrame(p, wire.Frame{Kind: kindWelcome, Payload: msg}, nil, nil)
		}
	}
	return grown, nil
}

// Welcome waits until the members of a communicator add this newcomer to
// it ([Comm.Grow]) and returns that communicator and the payload of the
// welcome. It returns at once when the welcome has come already, and
// fails at a process that started with the job ([ErrNotNewcomer]), when
// a view holds this process alone ([ErrNoWelcome], or [ErrNotNeeded] if
// some of the others finalized), when ctx ends, or
// when the session ends. A newcomer that no process admits (every one
// ended before its join got an answer) waits until ctx ends.
func (s *Session) Welcome(ctx context.Context) (*Comm, []byte, error) {
	if !s.IsNewcomer() {
		return nil, nil, ErrNotNewcomer
	}
	select {
	case <-s.nc.welcome:
		return s.nc.grown, s.nc.payload, nil
	case <-s.nc.alone:
		s.mu.Lock()
		finalized := slices.Contains(s.left, true)
		s.mu.Unlock()
		if finalized {
			return nil, nil, ErrNotNeeded
		}
		return nil, nil, ErrNoWelcome
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-s.base.Done():
		return nil, nil, s.stateErr()
	}
}

// onWelcome takes the first well-formed welcome of a newcomer; the others
// (every member of the grown communicator sends one) are dropped.
func (s *Session) onWelcome(src int, p []byte) error {
	m, err := parseWelcome(p, s.limit())
	if err != nil {
		return err
	}
	if !slices.Contains(m.members, s.self) || !slices.Contains(m.members, core.NodeID(src)) {
		return fmt.Errorf("%w: a welcome to a communicator without this process or its sender", errMalformed)
	}
	if !s.IsNewcomer() || !s.nc.welcomed.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	for _, n := range m.members {
		if i := int(n) - s.size; i >= 0 {
			if a := s.nc.admitted[i]; a == 0 || a > m.epoch {
				s.nc.admitted[i] = m.epoch
			}
		}
	}
	var gone []int
	for _, n := range m.failed {
		gone = append(gone, int(n))
	}
	if s.nc.viewEpoch >= m.epoch {
		gone = append(gone, s.goneLocked()...)
	}
	s.mu.Unlock()
	s.fail(gone, s.epoch.Load())
	s.nc.grown = s.newComm(m.id, m.members)
	s.nc.payload = m.payload
	close(s.nc.welcome)
	return nil
}

// preWelcomeQueues bounds the contexts a newcomer takes frames for before
// its welcome: the grown communicator's three, and room for a few more.
const preWelcomeQueues = 12

// preWelcomeLocked reports whether a frame for a context of no
// communicator may wait here: at a newcomer that has none yet. The
// members send on the communicator that adds it right after the
// welcome, but the welcome travels in the control lane and the data in
// the data lane, and over TCP the data may come first; it waits in a
// queue for its context until the welcome creates the communicator
// (newComm takes the queues), instead of cutting its sender off.
func (s *Session) preWelcomeLocked() bool {
	return s.IsNewcomer() && len(s.comms) == 0 && len(s.queues) < preWelcomeQueues
}

// welcomeMsg is a welcome (kindWelcome).
type welcomeMsg struct {
	id, epoch uint64
	members   []core.NodeID
	failed    []core.NodeID
	payload   []byte
}

func appendWelcome(b []byte, m welcomeMsg) []byte {
	b = binary.AppendUvarint(b, m.id)
	b = binary.AppendUvarint(b, m.epoch)
	for _, list := range [][]core.NodeID{m.members, m.failed} {
		b = binary.AppendUvarint(b, uint64(len(list)))
		for _, n := range list {
			b = binary.AppendUvarint(b, uint64(n))
		}
	}
	return append(b, m.payload...)
}

// parseWelcome decodes a welcome of a session that accepts process
// numbers below limit: distinct members, failed ones among them, a
// communicator id without a context's sub bits.
func parseWelcome(p []byte, limit int) (welcomeMsg, error) {
	var m welcomeMsg
	next := func() (uint64, bool) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, false
		}
		p = p[k:]
		return v, true
	}
	bad := func(what string) (welcomeMsg, error) {
		return welcomeMsg{}, fmt.Errorf("%w: welcome: %s", errMalformed, what)
	}
	var ok bool
	if m.id, ok = next(); !ok || m.id&subMask != 0 {
		return bad("context id")
	}
	if m.epoch, ok = next(); !ok {
		return bad("epoch")
	}
	for li, list := range []*[]core.NodeID{&m.members, &m.failed} {
		n, ok := next()
		if !ok || n > uint64(limit) {
			return bad("list length")
		}
		for range n {
			v, ok := next()
			if !ok || v >= uint64(limit) || slices.Contains(*list, core.NodeID(v)) {
				return bad("process number")
			}
			if li == 1 && !slices.Contains(m.members, core.NodeID(v)) {
				return bad("a failed process that is not a member")
			}
			*list = append(*list, core.NodeID(v))
		}
	}
	if len(m.members) == 0 {
		return bad("no members")
	}
	m.payload = slices.Clone(p)
	return m, nil
}
