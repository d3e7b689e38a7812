package comm

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/cohort-mp/cohort/core"
)

// VNode is a Phoenix virtual node number (Horita, Taura, Chikayama, "A Fault
// Detection Library in Phoenix", §2): an identifier from a space much larger
// than the number of processes, each mapped to one process. A program sends
// to virtual nodes, not ranks, so that processes can leave and join by
// changing the mapping only.
type VNode uint64

// AnyVNode, as the destination of [Virtual.Recv], matches a message
// addressed to any virtual node.
const AnyVNode = ^VNode(0)

// Virtual is the Phoenix virtual-node layer over a communicator (§2 and §5
// of the Phoenix paper): the space [0, Space()) of virtual nodes is mapped
// onto the communicator's ranks, initially in contiguous blocks (virtual
// node v on rank ⌊v·Size/Space⌋, the paper's Figure 1), then as [Virtual.Remap]
// says. Messages are addressed to virtual nodes; a message to a virtual node
// that no live process holds is kept by the sender and sent when the node is
// mapped again, so remapping loses nothing (§2). The queries of §5.1,
// [Virtual.AnyBroken] (ph_exist_broken_vps) and [Virtual.Broken]
// (ph_get_broken_vps), report the virtual nodes whose process failed and
// that have not been remapped since.
//
// Mapping changes are flooded to every live member and ordered by a
// (Lamport counter, origin rank) version per virtual node: concurrent remaps
// of one node converge everywhere to the one with the highest version.
// A Virtual is safe for concurrent use.
type Virtual struct {
	c  *Comm
	st *virtState
}

// virtState is the mapping of one communicator's virtual layer. Fields are
// guarded by the session's mu, except that sendMu orders sends and flushes.
type virtState struct {
	space   uint64
	over    map[VNode]vmapEntry // differences from the block mapping
	counter uint64              // Lamport clock of mapping versions
	held    map[VNode][][]byte  // messages waiting for their node to be mapped: tag-prefixed
	heldTag map[VNode][]int
	sendMu  sync.Mutex // orders Send against the flush of held messages
}

type vmapEntry struct {
	rank    int // -1: unmapped
	counter uint64
	origin  int
}

func (e vmapEntry) newer(counter uint64, origin int) bool {
	return counter > e.counter || (counter == e.counter && origin > e.origin)
}

// Virtual returns the virtual-node layer of the communicator over a space of
// `space` virtual nodes (space ≥ Size). Every member must create it with the
// same space; calling it again returns the same layer. Messages and mapping
// updates that arrive before it is created here are kept.
func (c *Comm) Virtual(space uint64) (*Virtual, error) {
	if space < uint64(c.Size()) {
		return nil, fmt.Errorf("%w: a virtual space of %d nodes for %d ranks", ErrBadArg, space, c.Size())
	}
	s := c.s
	s.mu.Lock()
	if v := c.st.virt; v != nil {
		s.mu.Unlock()
		if v.space != space {
			return nil, fmt.Errorf("%w: the communicator's virtual space has %d nodes, not %d", ErrBadArg, v.space, space)
		}
		return &Virtual{c: c, st: v}, nil
	}
	v := &virtState{space: space, over: map[VNode]vmapEntry{}, held: map[VNode][][]byte{}, heldTag: map[VNode][]int{}}
	c.st.virt = v
	buffered := s.vmapBuf[c.st.id]
	delete(s.vmapBuf, c.st.id)
	var out []outgoing
	for _, m := range buffered {
		out = append(out, s.applyVMapLocked(c.st, core.None, m)...)
	}
	s.mu.Unlock()
	s.sendAll(out)
	return &Virtual{c: c, st: v}, nil
}

// Space returns the number of virtual nodes.
func (v *Virtual) Space() uint64 { return v.st.space }

// Comm returns the communicator the layer maps onto.
func (v *Virtual) Comm() *Comm { return v.c }

// blockOwner is the initial owner of n: ⌊n·size/space⌋.
func blockOwner(n VNode, size int, space uint64) int {
	hi, lo := bits.Mul64(uint64(n), uint64(size))
	q, _ := bits.Div64(hi, lo, space)
	return int(q)
}

// blockStart is the first virtual node of rank r's initial block.
func blockStart(r, size int, space uint64) VNode {
	// The smallest n with n·size ≥ r·space: ⌈r·space/size⌉.
	hi, lo := bits.Mul64(uint64(r), space)
	q, rem := bits.Div64(hi, lo, uint64(size))
	if rem != 0 {
		q++
	}
	return VNode(q)
}

// ownerLocked returns the rank n is mapped to, -1 if none.
func (v *virtState) ownerLocked(n VNode, size int) int {
	if e, ok := v.over[n]; ok {
		return e.rank
	}
	return blockOwner(n, size, v.space)
}

func (v *Virtual) check(nodes ...VNode) error {
	for _, n := range nodes {
		if uint64(n) >= v.st.space {
			return fmt.Errorf("%w: virtual node %d outside [0, %d)", ErrRank, n, v.st.space)
		}
	}
	return nil
}

// Owner returns the rank that virtual node n is mapped to, and false if it
// is mapped to none (or n is outside the space).
func (v *Virtual) Owner(n VNode) (int, bool) {
	if v.check(n) != nil {
		return -1, false
	}
	v.c.s.mu.Lock()
	defer v.c.s.mu.Unlock()
	r := v.st.ownerLocked(n, v.c.Size())
	return r, r >= 0
}

// Send sends buf to virtual node to with tag (≥ 0). If to is mapped to a
// live process the message goes to it as [Comm.Send] would; otherwise (the
// node is unmapped, or its process failed and it was not remapped) a copy of
// the message is kept here and sent, in order, once the node is mapped to a
// live process. Either way Send does not wait for the receiver.
func (v *Virtual) Send(ctx context.Context, buf []byte, to VNode, tag int) error {
	if err := v.check(to); err != nil {
		return err
	}
	if tag < 0 {
		return fmt.Errorf("%w: tag %d", ErrTag, tag)
	}
	s := v.c.s
	v.st.sendMu.Lock()
	s.mu.Lock()
	if err := s.state; err != nil {
		s.mu.Unlock()
		v.st.sendMu.Unlock()
		return err
	}
	if v.c.st.revoked {
		s.mu.Unlock()
		v.st.sendMu.Unlock()
		return ErrRevoked
	}
	r := v.st.ownerLocked(to, v.c.Size())
	if r < 0 || v.c.st.failed[r] || len(v.st.held[to]) > 0 {
		v.st.held[to] = append(v.st.held[to], slices.Clone(buf))
		v.st.heldTag[to] = append(v.st.heldTag[to], tag)
		s.mu.Unlock()
		v.st.sendMu.Unlock()
		return nil
	}
	s.mu.Unlock()
	req := s.isend(v.c.st, subVirt, r, tag, to, buf)
	v.st.sendMu.Unlock()
	_, err := req.Wait(ctx)
	return err
}

// Held returns how many messages wait here for virtual node n to be mapped.
func (v *Virtual) Held(n VNode) int {
	v.c.s.mu.Lock()
	defer v.c.s.mu.Unlock()
	return len(v.st.held[n])
}

// Recv receives a message addressed to virtual node `to` (or AnyVNode) with
// tag (or AnyTag) into buf; Status.VNode says which virtual node it was sent
// to and Status.Source which rank sent it. Like Phoenix's ph_recv (§5.1) and
// an AnySource receive, it fails with a [*ProcFailedError] while a failure
// of the communicator is unacknowledged: handle the broken virtual nodes
// ([Virtual.Broken]), then [Comm.AckFailed], then receive again.
func (v *Virtual) Recv(ctx context.Context, buf []byte, to VNode, tag int) (Status, error) {
	if to != AnyVNode {
		if err := v.check(to); err != nil {
			return Status{}, err
		}
	}
	if tag < 0 && tag != AnyTag {
		return Status{}, fmt.Errorf("%w: tag %d", ErrTag, tag)
	}
	return waitRecv(ctx, v.c.s.irecv(v.c.st, subVirt, buf, false, AnySource, tag, to, to == AnyVNode))
}

// Remap maps the listed virtual nodes to rank (-1: to no process, so that
// messages to them are held until a later Remap) at every live member, and
// sends the messages held here for them. rank must be a live rank of the
// communicator (or -1).
func (v *Virtual) Remap(nodes []VNode, rank int) error {
	if err := v.check(nodes...); err != nil {
		return err
	}
	if rank < -1 || rank >= v.c.Size() {
		return fmt.Errorf("%w: remap to rank %d of %d", ErrRank, rank, v.c.Size())
	}
	s := v.c.s
	s.mu.Lock()
	if err := s.state; err != nil {
		s.mu.Unlock()
		return err
	}
	if rank >= 0 && v.c.st.failed[rank] {
		err := v.c.st.goneErrLocked(rank)
		s.mu.Unlock()
		return err
	}
	v.st.counter++
	m := vmapMsg{Comm: v.c.st.id, Counter: v.st.counter, Origin: v.c.Rank(), Rank: rank, VNodes: make([]uint64, len(nodes))}
	for i, n := range nodes {
		m.VNodes[i] = uint64(n)
	}
	out := s.applyVMapLocked(v.c.st, core.None, m)
	s.mu.Unlock()
	s.sendAll(out)
	s.flushHeld(v.c.st)
	return nil
}

// AnyBroken reports whether any of the virtual nodes is broken: mapped to a
// process that failed, and not remapped since (ph_exist_broken_vps, §5.1).
// Nodes outside the space are not broken.
func (v *Virtual) AnyBroken(nodes ...VNode) bool {
	s := v.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.c.st.nfailed == 0 {
		return false
	}
	for _, n := range nodes {
		if uint64(n) < v.st.space {
			if r := v.st.ownerLocked(n, v.c.Size()); r >= 0 && v.c.st.failed[r] {
				return true
			}
		}
	}
	return false
}

// Broken returns the broken virtual nodes among nodes, in the given order
// (ph_get_broken_vps, §5.1); nil if none is.
func (v *Virtual) Broken(nodes []VNode) []VNode {
	s := v.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []VNode
	for _, n := range nodes {
		if uint64(n) < v.st.space {
			if r := v.st.ownerLocked(n, v.c.Size()); r >= 0 && v.c.st.failed[r] {
				out = append(out, n)
			}
		}
	}
	return out
}

// BrokenIn returns the broken virtual nodes in [lo, hi), in increasing
// order, without scanning the range: it visits the initial blocks of the
// failed ranks and the remapped nodes only, so it suits a space of billions
// of nodes.
func (v *Virtual) BrokenIn(lo, hi VNode) []VNode {
	s := v.c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	hi = min(hi, VNode(v.st.space))
	size := v.c.Size()
	var out []VNode
	for r, f := range v.c.st.failed {
		if !f {
			continue
		}
		a, b := max(lo, blockStart(r, size, v.st.space)), min(hi, blockStart(r+1, size, v.st.space))
		for n := a; n < b; n++ {
			if _, moved := v.st.over[n]; !moved {
				out = append(out, n)
			}
		}
	}
	for n, e := range v.st.over {
		if n >= lo && n < hi && e.rank >= 0 && v.c.st.failed[e.rank] {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}

// applyVMapLocked applies a mapping update from world node from (core.None:
// local) and returns the frames that flood it on, if it changed anything.
func (s *Session) applyVMapLocked(c *commState, from core.NodeID, m vmapMsg) []outgoing {
	v := c.virt
	v.counter = max(v.counter, m.Counter)
	changed := false
	for _, u := range m.VNodes {
		n := VNode(u)
		if u >= v.space {
			continue
		}
		e, ok := v.over[n]
		if !ok {
			e = vmapEntry{rank: blockOwner(n, len(c.members), v.space), origin: -1}
		}
		if !e.newer(m.Counter, m.Origin) {
			continue
		}
		changed = true
		v.over[n] = vmapEntry{rank: m.Rank, counter: m.Counter, origin: m.Origin}
	}
	if !changed {
		return nil
	}
	payload := m.marshal()
	var out []outgoing
	for r, node := range c.members {
		if r != c.self && node != from && !c.failed[r] {
			out = append(out, outgoing{to: int(node), kind: kindVMap, payload: payload})
		}
	}
	return out
}

// onVMap handles a mapping update from world rank src.
func (s *Session) onVMap(src int, m vmapMsg) {
	if m.Comm&subMask != 0 {
		s.stats.malformed.Add(1)
		return
	}
	s.mu.Lock()
	if s.state != nil || s.failed[src] {
		s.mu.Unlock()
		return
	}
	c := s.comms[m.Comm]
	if c == nil && !s.expectedCommLocked(m.Comm) {
		s.mu.Unlock()
		s.cutOff(src, &ContextError{Rank: src, Context: m.Comm})
		return
	}
	if c == nil || c.virt == nil {
		if len(s.vmapBuf[m.Comm]) < maxBufferedSteps {
			s.vmapBuf[m.Comm] = append(s.vmapBuf[m.Comm], m)
		}
		s.mu.Unlock()
		return
	}
	if _, ok := c.rankOf(core.NodeID(src)); !ok {
		s.mu.Unlock()
		s.stats.malformed.Add(1)
		return
	}
	out := s.applyVMapLocked(c, core.NodeID(src), m)
	s.mu.Unlock()
	s.sendAll(out)
	if out != nil {
		// Not on this reader goroutine: a data send may block on a socket.
		// Sends to the remapped nodes meanwhile join the held queue, so
		// order is kept.
		go s.flushHeld(c)
	}
}

// flushHeld sends the held messages whose virtual node is now mapped to a
// live rank, in the order they were held.
func (s *Session) flushHeld(c *commState) {
	s.mu.Lock()
	v := c.virt
	s.mu.Unlock()
	if v == nil {
		return
	}
	v.sendMu.Lock()
	defer v.sendMu.Unlock()
	type batch struct {
		n    VNode
		rank int
		msgs [][]byte
		tags []int
	}
	var todo []batch
	s.mu.Lock()
	for n, msgs := range v.held {
		r := v.ownerLocked(n, len(c.members))
		if r < 0 || c.failed[r] {
			continue
		}
		todo = append(todo, batch{n: n, rank: r, msgs: msgs, tags: v.heldTag[n]})
		delete(v.held, n)
		delete(v.heldTag, n)
	}
	s.mu.Unlock()
	for _, b := range todo {
		for i, msg := range b.msgs {
			s.isend(c, subVirt, b.rank, b.tags[i], b.n, msg)
		}
	}
}
