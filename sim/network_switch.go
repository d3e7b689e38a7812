package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// SwitchConfig is the switch-contention model of Varma et al. §7.2 (the
// membership paper): nodes on one full-duplex Gigabit switch, point-to-point
// latency flat up to Knee communicating nodes, then rising linearly with each
// node added (the paper's Figure 7), plus the serialization the paper
// identifies as its cause: the switch's port to a destination passes one
// message at a time.
//
//	c       = number of nodes communicating through the switch (see below)
//	L(c)    = Base + PerNode · max(0, c − Knee)
//	tx      = size · 8 / PortBits
//	arrival = max(send + L(c), previous arrival at the same destination + tx)
//
// With StaticNodes = 0 the model is dynamic: c counts the distinct nodes that
// have a message in the switch (as sender or receiver) when the message is
// sent, this message's two ends included; a message is in the switch from
// its send time to its arrival. With StaticNodes = N, c is fixed at N: this
// is the paper's own use of the curve, which substitutes L(N) for the base
// latency L of its Equation (1) for a run of N nodes.
type SwitchConfig struct {
	// Base is the uncontended one-way latency (paper: L = 118 µs for TCP on
	// Gigabit Ethernet, half a ping-pong round trip).
	Base time.Duration
	// Knee is the number of communicating nodes the switch handles without
	// extra latency (paper: "up to twelve nodes" for pairs).
	Knee int
	// PerNode is the latency added by each communicating node beyond Knee.
	// The paper shows the slope only in its Figure 7, with no number in the
	// text; the default (5 µs) is an assumption to calibrate against
	// measurements, not a value from the paper.
	PerNode time.Duration
	// PortBits is the output-port rate in bits/s (Gigabit Ethernet: 1e9).
	// Messages to one destination leave its port one after another, which
	// is what makes a parent with 2 or 4 children contend more than pairs
	// of nodes with the same total count (paper, Figure 7 (b), (c)).
	PortBits float64
	// StaticNodes, when positive, fixes c at that count (the paper's model).
	StaticNodes int
}

// DefaultSwitchConfig returns the parameters of the membership paper's XTORC
// cluster (§5, §7.2): Base 118 µs, Knee 12, PortBits 1 Gbit/s, and an
// assumed PerNode of 5 µs.
func DefaultSwitchConfig() SwitchConfig {
	return SwitchConfig{Base: 118 * time.Microsecond, Knee: 12, PerNode: 5 * time.Microsecond, PortBits: 1e9}
}

// Validate reports whether c is usable.
func (c SwitchConfig) Validate() error {
	switch {
	case c.Base < 0 || c.PerNode < 0:
		return fmt.Errorf("%w: negative switch latency (base %v, per node %v)", ErrBadNetwork, c.Base, c.PerNode)
	case c.Knee < 0 || c.StaticNodes < 0:
		return fmt.Errorf("%w: negative node count (knee %d, static %d)", ErrBadNetwork, c.Knee, c.StaticNodes)
	case !(c.PortBits > 0):
		return fmt.Errorf("%w: port rate %v bit/s must be positive", ErrBadNetwork, c.PortBits)
	}
	return nil
}

// Latency is the contention curve L(c) for c communicating nodes.
func (c SwitchConfig) Latency(nodes int) time.Duration {
	return c.Base + c.PerNode*time.Duration(max(0, nodes-c.Knee))
}

// Switch is the switch-contention network. It keeps per-run state (messages
// in the switch, port queues): give each World its own. A message from a
// node to itself does not cross the switch and takes no time.
type Switch struct {
	cfg      SwitchConfig
	inflight flightHeap
	refs     []int32 // per node: messages in the switch it sends or receives
	active   int     // nodes with refs > 0
	portFree []time.Duration
	maxC     int
}

// NewSwitch returns a switch network with configuration cfg.
func NewSwitch(cfg SwitchConfig) (*Switch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Switch{cfg: cfg}, nil
}

type flight struct {
	end      time.Duration
	seq      uint64
	from, to core.NodeID
}

// flightHeap orders messages in the switch by arrival, then send order.
type flightHeap struct {
	f   []flight
	seq uint64
}

func (h *flightHeap) Len() int { return len(h.f) }
func (h *flightHeap) Less(i, j int) bool {
	if h.f[i].end != h.f[j].end {
		return h.f[i].end < h.f[j].end
	}
	return h.f[i].seq < h.f[j].seq
}
func (h *flightHeap) Swap(i, j int) { h.f[i], h.f[j] = h.f[j], h.f[i] }
func (h *flightHeap) Push(x any)    { h.f = append(h.f, x.(flight)) }
func (h *flightHeap) Pop() any {
	x := h.f[len(h.f)-1]
	h.f = h.f[:len(h.f)-1]
	return x
}

func (s *Switch) ref(id core.NodeID, d int32) {
	if int(id) >= len(s.refs) {
		s.refs = append(s.refs, make([]int32, int(id)+1-len(s.refs))...)
	}
	before := s.refs[id]
	s.refs[id] += d
	switch {
	case before == 0 && s.refs[id] > 0:
		s.active++
	case before > 0 && s.refs[id] == 0:
		s.active--
	}
}

// Transit implements Network. Messages leave the switch lazily: those whose
// arrival is at or before now stop counting when the next message is sent.
// (With a send overhead, departures of different nodes can be slightly out
// of order; a message then sees the switch as of its own departure time.)
func (s *Switch) Transit(from, to core.NodeID, size int, now time.Duration, _ *rand.Rand) (time.Duration, bool) {
	if from == to {
		return 0, true
	}
	c := s.cfg.StaticNodes
	if c == 0 {
		for s.inflight.Len() > 0 && s.inflight.f[0].end <= now {
			f := heap.Pop(&s.inflight).(flight)
			s.ref(f.from, -1)
			s.ref(f.to, -1)
		}
		s.ref(from, +1)
		s.ref(to, +1)
		c = s.active
	}
	s.maxC = max(s.maxC, c)
	if int(to) >= len(s.portFree) {
		s.portFree = append(s.portFree, make([]time.Duration, int(to)+1-len(s.portFree))...)
	}
	tx := time.Duration(float64(size) * 8 / s.cfg.PortBits * 1e9)
	arrival := max(now+s.cfg.Latency(c), s.portFree[to]+tx)
	s.portFree[to] = arrival
	if s.cfg.StaticNodes == 0 {
		s.inflight.seq++
		heap.Push(&s.inflight, flight{end: arrival, seq: s.inflight.seq, from: from, to: to})
	}
	return arrival - now, true
}

// A destination port delivers in send order, so pairs stay FIFO.
func (*Switch) inOrder() {}

// MaxContention is the largest number of communicating nodes a message saw.
func (s *Switch) MaxContention() int { return s.maxC }

func (s *Switch) String() string {
	return fmt.Sprintf("switch(base=%v,knee=%d,per-node=%v,port=%vbit/s,static=%d)",
		s.cfg.Base, s.cfg.Knee, s.cfg.PerNode, s.cfg.PortBits, s.cfg.StaticNodes)
}
