// The rendezvous's late registrations: a process that joins the job after
// its table went out (a newcomer, Bootstrap.Newcomer), both sides.

package launch

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// A newcomer registers as the job's processes did, presenting its own
// number (from the job's size on) in its Hello and proving the job
// secret; the launcher accepts it only if it started that process
// ([Rendezvous.Expect]). Before the newcomer learns anything, the
// launcher tells every member still connected the newcomer's number and
// address (kindJoined) and waits until each acknowledged it
// (kindJoinedAck) or its connection ended, or for HandshakeTimeout: a
// member acknowledges once its handler ([Registration.SetOnJoin]) took
// the address, so that when the newcomer asks to be admitted every
// member can reach it. Only then does the newcomer get its table
// (kindNewcomerTable): the addresses of the processes up to its own (""
// for a number never registered), and the processes whose connection to
// the launcher ended (failed or finished: not contacts to ask, though
// their addresses still name their hosts, as they do at the members).
var (
	kindJoined        = core.MakeKind(core.ProtoCore, 0x43) // launcher → member: a newcomer's number and address
	kindJoinedAck     = core.MakeKind(core.ProtoCore, 0x44) // member → launcher: that newcomer's address is known here
	kindNewcomerTable = core.MakeKind(core.ProtoCore, 0x45) // launcher → newcomer: addresses, and who is gone
)

// newcomerTableMsg is a newcomer's table: Addrs as tableMsg, then the
// processes gone, in order.
type newcomerTableMsg struct {
	Addrs []string
	Gone  []int
}

func (newcomerTableMsg) Kind() core.Kind { return kindNewcomerTable }
func (m newcomerTableMsg) MarshalWire(e *wire.Encoder) {
	tableMsg{Addrs: m.Addrs}.MarshalWire(e)
	e.Uvarint(uint64(len(m.Gone)))
	for _, p := range m.Gone {
		e.Uvarint(uint64(p))
	}
}

// decodeNewcomerTable decodes the table of newcomer self: self+1
// addresses, and gone processes below self, ascending.
func decodeNewcomerTable(p []byte, self int) (newcomerTableMsg, error) {
	d := wire.NewDecoder(p)
	n := d.Uvarint()
	if d.Err() == nil && n != uint64(self+1) {
		return newcomerTableMsg{}, fmt.Errorf("the table lists %d processes, want %d", n, self+1)
	}
	m := newcomerTableMsg{Addrs: make([]string, 0, self+1)}
	for i := 0; i <= self && d.Err() == nil; i++ {
		m.Addrs = append(m.Addrs, d.StringMax(maxAddrLen))
	}
	gone := d.Uvarint()
	if d.Err() == nil && gone > uint64(self) {
		return newcomerTableMsg{}, fmt.Errorf("%d processes gone among %d", gone, self)
	}
	for i := uint64(0); i < gone && d.Err() == nil; i++ {
		g := int(min(d.Uvarint(), uint64(self)))
		if g >= self || (len(m.Gone) > 0 && g <= m.Gone[len(m.Gone)-1]) {
			return newcomerTableMsg{}, fmt.Errorf("gone process %d out of order or range", g)
		}
		m.Gone = append(m.Gone, g)
	}
	return m, d.Finish()
}

type joinedMsg struct {
	Process int
	Addr    string
}

func (joinedMsg) Kind() core.Kind { return kindJoined }
func (m joinedMsg) MarshalWire(e *wire.Encoder) {
	e.Uvarint(uint64(m.Process))
	e.String(m.Addr)
}

type joinedAckMsg struct{ Process int }

func (joinedAckMsg) Kind() core.Kind               { return kindJoinedAck }
func (m joinedAckMsg) MarshalWire(e *wire.Encoder) { e.Uvarint(uint64(m.Process)) }

func decodeJoined(p []byte) (joinedMsg, error) {
	d := wire.NewDecoder(p)
	m := joinedMsg{Process: int(min(d.Uvarint(), MaxSize+MaxNewcomers)), Addr: d.StringMax(maxAddrLen)}
	if err := d.Finish(); err != nil {
		return joinedMsg{}, err
	}
	if err := checkAddr(m.Addr); err != nil {
		return joinedMsg{}, fmt.Errorf("joined process %d at %q: %w", m.Process, m.Addr, err)
	}
	return m, nil
}

func decodeJoinedAck(p []byte) (int, error) {
	d := wire.NewDecoder(p)
	v := int(min(d.Uvarint(), MaxSize+MaxNewcomers))
	return v, d.Finish()
}

// SetOnJoin sets the function that learns of each process that joins
// the job after its start (a newcomer): its number and listen address.
// Joins that came before are handed to f at once, in order; f runs on
// the connection's reader, one call at a time, and the launcher waits
// for its return before the newcomer goes on, so it must not block. A
// Registration from an [Exchanger] (SLURM) never calls it.
func (r *Registration) SetOnJoin(f func(process int, addr string)) {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	r.onJoin = f
	early := r.early
	r.early = nil
	for _, m := range early {
		f(m.Process, m.Addr)
		r.ackJoin(m.Process)
	}
}

// joined hands m to the handler (or keeps it for SetOnJoin) and
// acknowledges it.
func (r *Registration) joined(m joinedMsg) {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	if r.onJoin == nil {
		r.early = append(r.early, m)
		return
	}
	r.onJoin(m.Process, m.Addr)
	r.ackJoin(m.Process)
}

func (r *Registration) ackJoin(p int) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	if r.fw != nil {
		send(r.fw, r.self, LauncherNode, joinedAckMsg{Process: p})
	}
}

// lateJoins is the launcher's side: the newcomers it expects and those
// whose members' acknowledgements it waits for. Guarded by the
// Rendezvous's mu.
type lateJoins struct {
	// one holds a late registration from its start to its table, so
	// that newcomers register one at a time: a newcomer still waiting
	// for its table reads nothing but the table, so it must not be told
	// of another newcomer then; it is told once it is a member. Not
	// guarded by mu: held while mu is taken and released.
	one      sync.Mutex
	expected map[int]bool
	gone     map[int]bool          // processes whose connection ended after the table
	waits    map[int]map[int]bool  // newcomer → members yet to acknowledge it
	wake     map[int]chan struct{} // newcomer → closed when waits empties
}

// Expect lets process, a newcomer the launcher starts now, register once
// the job has started: its number is Size or more, below
// Size+MaxNewcomers, and not expected before.
func (r *Rendezvous) Expect(process int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := &r.late
	if process < r.cfg.Size || process >= r.cfg.Size+MaxNewcomers || l.expected[process] || r.ranks[process] != nil {
		return fmt.Errorf("%w: process %d cannot join a job of %d processes (want a new number from %d to %d)",
			ErrRendezvous, process, r.cfg.Size, r.cfg.Size, r.cfg.Size+MaxNewcomers-1)
	}
	if l.expected == nil {
		l.expected = map[int]bool{}
	}
	l.expected[process] = true
	return nil
}

// forget undoes Expect for a newcomer that could not be started.
func (r *Rendezvous) forget(process int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.late.expected, process)
}

func (r *Rendezvous) expected(process int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late.expected[process]
}

// goneLocked notes that process's connection ended after the table: a
// newcomer waiting for its acknowledgement waits no more.
func (r *Rendezvous) goneLocked(process int) {
	l := &r.late
	if l.gone == nil {
		l.gone = map[int]bool{}
	}
	l.gone[process] = true
	r.signal()
	for nc := range l.waits {
		r.ackedLocked(nc, process)
	}
}

// acked notes member's acknowledgement of a newcomer (payload of
// kindJoinedAck).
func (r *Rendezvous) acked(member int, payload []byte) {
	nc, err := decodeJoinedAck(payload)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ackedLocked(nc, member)
}

func (r *Rendezvous) ackedLocked(newcomer, member int) {
	w := r.late.waits[newcomer]
	if w == nil || !w[member] {
		return
	}
	delete(w, member)
	if len(w) == 0 {
		delete(r.late.waits, newcomer)
		close(r.late.wake[newcomer])
		delete(r.late.wake, newcomer)
	}
}

// registerLate admits newcomer c at addr: every member learns its address
// first, then c gets its table.
func (r *Rendezvous) registerLate(c *rankConn, addr string) {
	defer r.wg.Done()
	r.late.one.Lock()
	defer r.late.one.Unlock()
	r.mu.Lock()
	l := &r.late
	switch {
	case r.err != nil || r.closed:
		r.mu.Unlock()
		c.send(abortMsg{Reason: "the job is stopping"}, r.cfg.HandshakeTimeout)
		c.nc.Close()
		return
	case !r.complete || !l.expected[c.rank]:
		r.mu.Unlock()
		c.send(abortMsg{Reason: fmt.Sprintf("process %d registered as a newcomer before the job started or twice", c.rank)}, r.cfg.HandshakeTimeout)
		c.nc.Close()
		return
	}
	delete(l.expected, c.rank)
	members := r.rankConnsLocked()
	r.ranks[c.rank] = c
	if len(r.addrs) <= c.rank {
		r.addrs = append(r.addrs, make([]string, c.rank+1-len(r.addrs))...)
	}
	r.addrs[c.rank] = addr
	r.signal()
	wait := map[int]bool{}
	var tell []*rankConn // the members to tell (wait empties as they answer)
	for _, m := range members {
		if !l.gone[m.rank] {
			wait[m.rank] = true
			tell = append(tell, m)
		}
	}
	wake := make(chan struct{})
	if len(wait) == 0 {
		close(wake)
	} else {
		if l.waits == nil {
			l.waits, l.wake = map[int]map[int]bool{}, map[int]chan struct{}{}
		}
		l.waits[c.rank], l.wake[c.rank] = wait, wake
	}
	r.mu.Unlock()
	news := joinedMsg{Process: c.rank, Addr: addr}
	for _, m := range tell {
		if m.send(news, r.cfg.HandshakeTimeout) != nil {
			m.nc.Close() // its serve loop ends: gone
		}
	}
	t := time.NewTimer(r.cfg.HandshakeTimeout)
	select {
	case <-wake:
	case <-t.C:
		// A member that neither answers nor leaves: the newcomer goes on
		// (that member learns its address from its connection).
	}
	t.Stop()
	r.mu.Lock()
	table := newcomerTableMsg{Addrs: make([]string, c.rank+1)}
	copy(table.Addrs, r.addrs)
	for p := range l.gone {
		if p < c.rank {
			table.Gone = append(table.Gone, p)
		}
	}
	slices.Sort(table.Gone)
	if w := l.waits[c.rank]; w != nil {
		delete(l.waits, c.rank)
		delete(l.wake, c.rank)
	}
	r.mu.Unlock()
	if c.send(table, r.cfg.HandshakeTimeout) != nil {
		c.nc.Close()
	}
}

// Joined lists the newcomers that registered (Expect, then their
// Register), in order.
func (r *Rendezvous) Joined() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for p := range r.ranks {
		if p >= r.cfg.Size {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
