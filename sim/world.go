package sim

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Config describes one simulated world.
type Config struct {
	// Seed derives every random choice of the run: each node's source and
	// the network's. The same seed gives the same run, event for event.
	Seed uint64
	// Network is the latency model; nil means Constant(1 ms).
	Network Network
	// SendOverhead is the CPU time a node spends putting one message on the
	// network (LogP's o_s). Messages leave a node one after another.
	SendOverhead time.Duration
	// RecvOverhead is the CPU time a node spends taking one message off the
	// network (LogP's o_r). A node processes arriving messages one at a
	// time, so a node that receives many messages queues them.
	RecvOverhead time.Duration
	// Reorder lets a network that varies latency deliver messages between a
	// pair out of send order. By default the world keeps each pair FIFO.
	Reorder bool
	// Lane, when set, splits each pair's FIFO order into lanes, as a
	// transport with a control lane beside its data queue does: messages
	// of one lane (Lane's result) stay in send order, and a message may
	// overtake one of another lane sent before it when the network gives
	// it less latency. Nil: one lane.
	Lane func(m core.Msg) int
	// Trace, when set, keeps the trace hash (on by default through New).
	NoTrace bool
	// RefuseDead, when positive, is how long after a message reaches a
	// crashed node its sender, if alive, is handed core.PeerHint{Refused:
	// true}: the refusal a host gives a connection to a port where nothing
	// listens any more. Messages lost to cuts, partitions, loss or a
	// restart (the new process listens) give no hint.
	RefuseDead time.Duration
}

// Stats counts what a run did.
type Stats struct {
	Events   uint64 // events processed (deliveries, timers, starts, faults)
	Messages uint64 // messages delivered to a live machine
	Sent     uint64 // messages sent
	Dropped  uint64 // messages lost to crashes, cuts, partitions or loss
	Bytes    uint64 // bytes sent (core.MsgSize)
	Timers   uint64 // timers fired
}

// World is a deterministic discrete-event simulation of a set of nodes, each
// running one core.Machine (often a core.Stack). It is single-threaded: all
// methods must be called from one goroutine. Run several worlds in parallel
// for parallelism.
type World struct {
	cfg     Config
	now     time.Duration
	seq     uint64
	q       queue
	nodes   []*node
	netRand *rand.Rand
	stats   Stats

	timers    []timerSlot // timer slots; a TimerID is slot<<32 | generation
	freeSlots []uint32
	lastArr   map[fifoKey]time.Duration // FIFO enforcement per pair and lane
	fifo      bool

	loss      float64
	cuts      map[uint64]bool // directed pair -> cut
	group     []int32         // partition group per node; nil when none
	onEmit    []func(at time.Duration, node core.NodeID, e core.Event)
	onDeliver []func(at time.Duration, from, to core.NodeID, m core.Msg)
	onSend    []func(at time.Duration, from, to core.NodeID, m core.Msg)
	onLife    []func(at time.Duration, id core.NodeID, alive bool) // crash/recover hooks (check.go)

	rt     router      // non-nil when the network carries messages hop by hop (network_graph.go)
	faults *faultState // windows of loss, partitions, cuts and spikes applied by a Plan (fault.go)
	checks *checkState // registered checkers (check.go)
	halted bool        // a checker found a violation: Run and Step stop

	trace   hash.Hash64
	scratch [32]byte
}

type node struct {
	env      nodeEnv
	m        core.Machine
	rng      *rand.Rand // created on first use (nodeRand), to keep idle nodes small
	alive    bool
	started  bool
	inc      uint32
	cpuFree  time.Duration // serial processing: when this node's CPU is next free
	sendFree time.Duration
	paused   bool          // a Pause holds its events (pause.go)
	pauseEnd time.Duration // when the current pause ends
	held     []event       // the events held while paused, in queue order
}

// New returns an empty world at time zero.
func New(cfg Config) *World {
	if cfg.Network == nil {
		cfg.Network = Constant(time.Millisecond)
	}
	w := &World{
		cfg:     cfg,
		netRand: rand.New(rand.NewPCG(cfg.Seed, 0x6e6574776f726b)),
		lastArr: map[fifoKey]time.Duration{},
		cuts:    map[uint64]bool{},
	}
	w.useNetwork(cfg.Network)
	if !cfg.NoTrace {
		w.trace = fnv.New64a()
	}
	return w
}

// Config returns the world's configuration.
func (w *World) Config() Config { return w.cfg }

// Now is the virtual time.
func (w *World) Now() time.Duration { return w.now }

// Len is the number of nodes ever added.
func (w *World) Len() int { return len(w.nodes) }

// Stats returns the counters so far.
func (w *World) Stats() Stats { return w.stats }

// Node returns the machine currently running as id (nil if none was added).
func (w *World) Node(id core.NodeID) core.Machine {
	if int(id) >= len(w.nodes) {
		return nil
	}
	return w.nodes[id].m
}

// Alive reports whether id is running.
func (w *World) Alive(id core.NodeID) bool {
	return int(id) < len(w.nodes) && w.nodes[id].alive
}

// Rand returns the world's own random source (the one the network and the
// fault injector use). Tests may draw from it to pick victims reproducibly.
func (w *World) Rand() *rand.Rand { return w.netRand }

// Add adds a node running m, started at the current time (before any other
// event of that time that is scheduled later). Ids are 0, 1, 2… in order.
func (w *World) Add(m core.Machine) core.NodeID { return w.AddAt(w.now, m) }

// AddAt adds a node running m that starts at time at.
func (w *World) AddAt(at time.Duration, m core.Machine) core.NodeID {
	id := core.NodeID(len(w.nodes))
	n := &node{m: m, alive: true}
	n.env = nodeEnv{w: w, id: id}
	w.nodes = append(w.nodes, n)
	w.push(event{at: at, kind: evStart, node: id, inc: 0})
	return id
}

// nodeRand derives node id's source for incarnation inc from the seed.
func nodeRand(seed uint64, id core.NodeID, inc uint32) *rand.Rand {
	return rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, uint64(id)<<32|uint64(inc)))
}

// OnEmit registers f to observe every event a node emits.
func (w *World) OnEmit(f func(at time.Duration, node core.NodeID, e core.Event)) {
	w.onEmit = append(w.onEmit, f)
}

// OnDeliver registers f to observe every message delivered to a live node.
func (w *World) OnDeliver(f func(at time.Duration, from, to core.NodeID, m core.Msg)) {
	w.onDeliver = append(w.onDeliver, f)
}

// OnSend registers f to observe every message sent by a live node.
func (w *World) OnSend(f func(at time.Duration, from, to core.NodeID, m core.Msg)) {
	w.onSend = append(w.onSend, f)
}

// At runs f at virtual time t (faults, checks, workload steps). Functions at
// the same time run in the order they were scheduled.
func (w *World) At(t time.Duration, f func()) {
	if t < w.now {
		t = w.now
	}
	w.push(event{at: t, kind: evFunc, payload: f})
}

func (w *World) push(e event) {
	w.seq++
	e.seq = w.seq
	w.q.push(e)
}

// Crash stops node id now: its machine is never called again, its timers
// and the messages in flight to it are lost.
func (w *World) Crash(id core.NodeID) {
	n := w.nodes[id]
	if !n.alive {
		return
	}
	n.alive = false
	n.inc++
	n.paused, n.held = false, nil
	w.hash(0xC0, uint64(id), 0)
	for _, f := range w.onLife {
		f(w.now, id, false)
	}
}

// CrashAt crashes id at time t.
func (w *World) CrashAt(t time.Duration, id core.NodeID) { w.At(t, func() { w.Crash(id) }) }

// Recover starts a fresh machine m as id (a restarted process keeps its id).
// Recovering a live node crashes it first.
func (w *World) Recover(id core.NodeID, m core.Machine) {
	n := w.nodes[id]
	if n.alive {
		w.Crash(id)
	}
	n.alive = true
	n.started = false
	n.paused, n.held = false, nil
	n.m = m
	n.rng = nil // the new incarnation's source is derived on first use
	n.cpuFree, n.sendFree = w.now, w.now
	w.hash(0xC1, uint64(id), 0)
	w.push(event{at: w.now, kind: evStart, node: id, inc: n.inc})
	for _, f := range w.onLife {
		f(w.now, id, true)
	}
}

// RecoverAt recovers id with machine m at time t.
func (w *World) RecoverAt(t time.Duration, id core.NodeID, m core.Machine) {
	w.At(t, func() { w.Recover(id, m) })
}

// SetLoss makes every message be lost with probability p (0 ≤ p ≤ 1).
func (w *World) SetLoss(p float64) {
	if p < 0 || p > 1 {
		panic(fmt.Sprintf("sim: loss probability %v outside [0,1]", p))
	}
	w.loss = p
}

func pairKey(a, b core.NodeID) uint64 { return uint64(a)<<32 | uint64(b) }

// fifoKey names one lane of a directed pair (Config.Lane).
type fifoKey struct {
	pair uint64
	lane int
}

// Cut drops every message between a and b, both ways, until Heal.
func (w *World) Cut(a, b core.NodeID) {
	w.cuts[pairKey(a, b)] = true
	w.cuts[pairKey(b, a)] = true
}

// Heal undoes Cut(a, b), and any one-way cut between a and b.
func (w *World) Heal(a, b core.NodeID) {
	delete(w.cuts, pairKey(a, b))
	delete(w.cuts, pairKey(b, a))
}

// CutOneWay drops every message from from to to, until HealOneWay or Heal;
// messages the other way are delivered.
func (w *World) CutOneWay(from, to core.NodeID) { w.cuts[pairKey(from, to)] = true }

// HealOneWay undoes CutOneWay(from, to); a cut the other way stays.
func (w *World) HealOneWay(from, to core.NodeID) { delete(w.cuts, pairKey(from, to)) }

// Partition splits the nodes into groups that cannot exchange messages.
// Nodes not named in any group form one more group together.
func (w *World) Partition(groups ...[]core.NodeID) {
	w.group = make([]int32, len(w.nodes))
	for gi, g := range groups {
		for _, id := range g {
			w.group[id] = int32(gi + 1)
		}
	}
}

// HealAll removes every partition and cut.
func (w *World) HealAll() {
	w.group = nil
	clear(w.cuts)
}

// Run processes events until none is left or the world's time would pass
// until; then the clock is set to until.
func (w *World) RunUntil(until time.Duration) {
	for w.q.len() > 0 && w.q.peek().at <= until && !w.halted {
		w.step()
	}
	if until > w.now && !w.halted {
		w.now = until
	}
}

// RunFor runs for d of virtual time.
func (w *World) RunFor(d time.Duration) { w.RunUntil(w.now + d) }

// Step processes one event; it reports false when the queue is empty.
func (w *World) Step() bool {
	if w.q.len() == 0 || w.halted {
		return false
	}
	w.step()
	return true
}

// Pending is the number of queued events.
func (w *World) Pending() int { return w.q.len() }

func (w *World) step() {
	e := w.q.pop()
	w.now = e.at
	w.stats.Events++
	if e.kind == evFunc {
		w.hash(0xF0, 0, 0)
		e.payload.(func())()
		return
	}
	w.dispatch(e)
}

// dispatch hands a node's event to its machine, or holds it while the node
// is paused.
func (w *World) dispatch(e event) {
	n := w.nodes[e.node]
	if n.paused && n.alive && n.inc == e.inc {
		n.held = append(n.held, e)
		return
	}
	if !n.alive || n.inc != e.inc {
		switch e.kind {
		case evDeliver, evArrive:
			w.stats.Dropped++
			if !n.alive && w.cfg.RefuseDead > 0 {
				w.refuse(e.from, e.node)
			}
		case evTimer:
			w.releaseTimer(e.tid)
		}
		return
	}
	switch e.kind {
	case evStart:
		if n.started {
			return
		}
		n.started = true
		w.hash(0x5A, uint64(e.node), 0)
		n.m.Start(&n.env)
	case evArrive:
		// The message reached the node; it waits for the CPU.
		start := max(w.now, n.cpuFree)
		n.cpuFree = start + w.cfg.RecvOverhead
		e.kind = evDeliver
		e.at = n.cpuFree
		w.push(e)
	case evDeliver:
		m := e.payload.(core.Msg)
		w.stats.Messages++
		w.hash(uint64(m.Kind())<<8|0xDE, uint64(e.node), uint64(e.from))
		for _, f := range w.onDeliver {
			f(w.now, e.from, e.node, m)
		}
		n.m.Receive(e.from, m)
	case evTimer:
		if !w.releaseTimer(e.tid) {
			return
		}
		w.stats.Timers++
		w.hash(0x71, uint64(e.node), uint64(e.tid))
		n.m.Fire(e.payload)
	}
}

// refuse hands from, RefuseDead from now and if it is alive then, the
// hint that a connection to the crashed node to was refused.
func (w *World) refuse(from, to core.NodeID) {
	inc := w.nodes[from].inc
	w.At(w.now+w.cfg.RefuseDead, func() {
		s := w.nodes[from]
		if !s.alive || !s.started || s.inc != inc || s.paused {
			return
		}
		w.hash(0x4E, uint64(from), uint64(to))
		s.m.Handle(core.PeerHint{Node: to, Reason: "connection refused", Refused: true})
	})
}

// send routes a message from a live node.
func (w *World) send(from, to core.NodeID, m core.Msg) {
	size := core.MsgSize(m)
	w.stats.Sent++
	w.stats.Bytes += uint64(size)
	for _, f := range w.onSend {
		f(w.now, from, to, m)
	}
	if int(to) >= len(w.nodes) {
		w.stats.Dropped++
		return
	}
	depart := w.now
	if o := w.cfg.SendOverhead; o > 0 {
		s := w.nodes[from]
		depart = max(w.now, s.sendFree) + o
		s.sendFree = depart
	}
	if !w.reachable(from, to) {
		w.stats.Dropped++
		return
	}
	if w.rt != nil {
		w.rt.route(w, from, to, m, size, depart)
		return
	}
	delay, ok := w.cfg.Network.Transit(from, to, size, depart, w.netRand)
	if !ok {
		w.stats.Dropped++
		return
	}
	at := depart + delay
	if w.fifo {
		k := fifoKey{pair: pairKey(from, to)}
		if w.cfg.Lane != nil {
			k.lane = w.cfg.Lane(m)
		}
		if last := w.lastArr[k]; at < last {
			at = last
		}
		w.lastArr[k] = at
	}
	w.deliverAt(at, from, to, m)
}

// deliverAt schedules m to reach to at time at (network models that route
// hop by hop call it when the last hop completes).
func (w *World) deliverAt(at time.Duration, from, to core.NodeID, m core.Msg) {
	w.deliverInc(at, from, to, w.nodes[to].inc, m)
}

// deliverInc is deliverAt for a message addressed to incarnation inc of to
// (hop-by-hop networks capture it at send time, so a message still in the
// network when its receiver restarts is lost, as with Transit networks).
func (w *World) deliverInc(at time.Duration, from, to core.NodeID, inc uint32, m core.Msg) {
	kind := evDeliver
	if w.cfg.RecvOverhead > 0 {
		kind = evArrive
	}
	w.push(event{at: at, kind: kind, node: to, from: from, inc: inc, payload: m})
}

func (w *World) reachable(from, to core.NodeID) bool {
	if w.loss > 0 && w.netRand.Float64() < w.loss {
		return false
	}
	if len(w.cuts) > 0 && w.cuts[pairKey(from, to)] {
		return false
	}
	if w.group != nil && int(from) < len(w.group) && int(to) < len(w.group) && w.group[from] != w.group[to] {
		return false
	}
	return true
}

// TraceHash is a hash of everything that happened so far: every start,
// delivery (kind, endpoints, time), timer, crash and emitted event. Two runs
// with the same seed and inputs have the same hash.
func (w *World) TraceHash() uint64 {
	if w.trace == nil {
		return 0
	}
	return w.trace.Sum64()
}

func (w *World) hash(tag, a, b uint64) {
	if w.trace == nil {
		return
	}
	binary.LittleEndian.PutUint64(w.scratch[0:], uint64(w.now))
	binary.LittleEndian.PutUint64(w.scratch[8:], tag)
	binary.LittleEndian.PutUint64(w.scratch[16:], a)
	binary.LittleEndian.PutUint64(w.scratch[24:], b)
	w.trace.Write(w.scratch[:])
}

func (w *World) emit(id core.NodeID, e core.Event) {
	if w.trace != nil {
		w.hash(0xE0, uint64(id), 0)
		fmt.Fprintf(w.trace, "%s%+v", reflect.TypeOf(e), e)
	}
	for _, f := range w.onEmit {
		f(w.now, id, e)
	}
}

// nodeEnv is the core.Env of one simulated node.
type nodeEnv struct {
	w  *World
	id core.NodeID
}

func (e *nodeEnv) Self() core.NodeID  { return e.id }
func (e *nodeEnv) Now() time.Duration { return e.w.now }
func (e *nodeEnv) Rand() *rand.Rand {
	n := e.w.nodes[e.id]
	if n.rng == nil {
		n.rng = nodeRand(e.w.cfg.Seed, e.id, n.inc)
	}
	return n.rng
}
func (e *nodeEnv) Emit(ev core.Event) { e.w.emit(e.id, ev) }

func (e *nodeEnv) Send(to core.NodeID, m core.Msg) { e.w.send(e.id, to, m) }

func (e *nodeEnv) SetTimer(after time.Duration, t core.Timer) core.TimerID {
	w := e.w
	if after < 0 {
		after = 0
	}
	tid := w.newTimer()
	w.push(event{at: w.now + after, kind: evTimer, node: e.id, inc: w.nodes[e.id].inc, tid: tid, payload: t})
	return tid
}

func (e *nodeEnv) CancelTimer(id core.TimerID) { e.w.cancelTimer(id) }

// timerSlot tracks one pending timer. Slots are reused; the generation tells
// a live TimerID from a stale one, so cancelling a fired timer is a no-op and
// nothing accumulates.
type timerSlot struct {
	gen       uint32
	pending   bool
	cancelled bool
}

func (w *World) newTimer() core.TimerID {
	var s uint32
	if n := len(w.freeSlots); n > 0 {
		s = w.freeSlots[n-1]
		w.freeSlots = w.freeSlots[:n-1]
	} else {
		s = uint32(len(w.timers))
		w.timers = append(w.timers, timerSlot{})
	}
	t := &w.timers[s]
	t.gen++
	t.pending, t.cancelled = true, false
	return core.TimerID(uint64(s)<<32 | uint64(t.gen))
}

func (w *World) cancelTimer(id core.TimerID) {
	s, gen := uint32(id>>32), uint32(id)
	if int(s) < len(w.timers) && w.timers[s].gen == gen && w.timers[s].pending {
		w.timers[s].cancelled = true
	}
}

// releaseTimer frees the slot of a timer leaving the queue and reports
// whether it should fire.
func (w *World) releaseTimer(id core.TimerID) bool {
	s := uint32(id >> 32)
	t := &w.timers[s]
	fire := !t.cancelled
	t.pending, t.cancelled = false, false
	w.freeSlots = append(w.freeSlots, s)
	return fire
}
