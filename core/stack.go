package core

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Stack runs several machines as one node. It is itself a Machine, so the
// simulator and the host drive a stack exactly as they drive one protocol.
//
// Routing rules:
//   - a received message goes to the layer that owns its Kind's Proto (see
//     [ProtoOwner]); a message of an unknown protocol is dropped and counted;
//   - a timer set by a layer fires in that layer;
//   - an event emitted by a layer is delivered, in layer order, to every
//     other layer's Handle, then to the outer Env's Emit (observers);
//   - an event handed to the stack from outside goes to every layer;
//   - every send and receive of any layer is shown to the layers that
//     implement [TrafficObserver].
//
// Events are queued and delivered after the call that emitted them returns,
// so a layer is never re-entered while it runs.
type Stack struct {
	layers    []Machine
	envs      []*layerEnv
	byProto   [256]int8 // layer index+1; 0 means none
	observers []TrafficObserver
	env       Env
	queue     []queuedEvent
	draining  bool
	// spare holds wrappers of timers that fired, for SetTimer to reuse: a
	// wrapper handed to the outer Env is boxed in a core.Timer, and taking
	// it from here keeps a layer's periodic timer from allocating one per
	// period. A fired timer is no longer held by the Env (Env.SetTimer);
	// a cancelled one may be, so only fired ones come back.
	spare []*stackTimer
	// Unrouted counts messages dropped because no layer owns their protocol.
	Unrouted uint64
}

type queuedEvent struct {
	from int // emitting layer, -1 for outside
	e    Event
}

// stackTimer wraps a layer's timer so that it comes back to that layer.
// The outer Env gets a pointer, taken from Stack.spare when one is there.
type stackTimer struct {
	layer int
	t     Timer
}

// NewStack returns a stack of the given machines, lowest layer first. It
// panics if two layers claim the same protocol, which is a programming error.
func NewStack(layers ...Machine) *Stack {
	s := &Stack{layers: layers}
	for i, m := range layers {
		if po, ok := m.(ProtoOwner); ok {
			for _, p := range po.Protos() {
				if s.byProto[p] != 0 {
					panic(fmt.Sprintf("core: protocol %v claimed by layers %d and %d", p, s.byProto[p]-1, i))
				}
				s.byProto[p] = int8(i + 1)
			}
		}
		if o, ok := m.(TrafficObserver); ok {
			s.observers = append(s.observers, o)
		}
	}
	return s
}

// Layer returns the i-th machine of the stack.
func (s *Stack) Layer(i int) Machine { return s.layers[i] }

// Protos reports every protocol owned by a layer, so a stack can sit inside
// another stack.
func (s *Stack) Protos() []Proto {
	var ps []Proto
	for p, idx := range s.byProto {
		if idx != 0 {
			ps = append(ps, Proto(p))
		}
	}
	return ps
}

// Start starts every layer, lowest first.
func (s *Stack) Start(env Env) {
	s.env = env
	s.envs = make([]*layerEnv, len(s.layers))
	for i := range s.layers {
		s.envs[i] = &layerEnv{s: s, layer: i}
	}
	s.run(func() {
		for i, m := range s.layers {
			m.Start(s.envs[i])
		}
	})
}

// Receive routes m to the layer that owns its protocol.
func (s *Stack) Receive(from NodeID, m Msg) {
	for _, o := range s.observers {
		o.ObserveReceive(from)
	}
	idx := s.byProto[m.Kind().Proto()]
	if idx == 0 {
		s.Unrouted++
		return
	}
	s.run(func() { s.layers[idx-1].Receive(from, m) })
}

// Fire routes a timer back to the layer that set it.
func (s *Stack) Fire(t Timer) {
	sp, ok := t.(*stackTimer)
	if !ok {
		panic(fmt.Sprintf("core: stack fired a foreign timer %T", t))
	}
	st := *sp
	*sp = stackTimer{}
	s.spare = append(s.spare, sp)
	s.run(func() { s.layers[st.layer].Fire(st.t) })
}

// Handle delivers an outside event to every layer.
func (s *Stack) Handle(e Event) {
	s.queue = append(s.queue, queuedEvent{from: -1, e: e})
	s.run(func() {})
}

// run calls f, then drains the event queue unless an outer run is draining.
func (s *Stack) run(f func()) {
	if s.draining {
		f()
		return
	}
	s.draining = true
	defer func() { s.draining = false }()
	f()
	for len(s.queue) > 0 {
		q := s.queue[0]
		s.queue[0] = queuedEvent{}
		s.queue = s.queue[1:]
		for i, m := range s.layers {
			if i != q.from {
				m.Handle(q.e)
			}
		}
		if q.from >= 0 {
			s.env.Emit(q.e)
		}
	}
	s.queue = s.queue[:0]
}

// layerEnv is the Env a stack hands to one layer.
type layerEnv struct {
	s     *Stack
	layer int
}

func (e *layerEnv) Self() NodeID       { return e.s.env.Self() }
func (e *layerEnv) Now() time.Duration { return e.s.env.Now() }
func (e *layerEnv) Rand() *rand.Rand   { return e.s.env.Rand() }

func (e *layerEnv) Send(to NodeID, m Msg) {
	for _, o := range e.s.observers {
		o.ObserveSend(to)
	}
	e.s.env.Send(to, m)
}

func (e *layerEnv) SetTimer(after time.Duration, t Timer) TimerID {
	s := e.s
	var sp *stackTimer
	if n := len(s.spare); n > 0 {
		sp = s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
	} else {
		sp = new(stackTimer)
	}
	*sp = stackTimer{layer: e.layer, t: t}
	return s.env.SetTimer(after, sp)
}

func (e *layerEnv) CancelTimer(id TimerID) { e.s.env.CancelTimer(id) }

// SendCopies passes on the outer Env's answer (see [SendCopier]).
func (e *layerEnv) SendCopies() bool { return SendCopies(e.s.env) }

// Recycle passes m on to the outer Env's Recycler, if it has one: a
// message is routed to one layer only, so that layer's word is final.
func (e *layerEnv) Recycle(m Msg) { Recycle(e.s.env, m) }

func (e *layerEnv) Emit(ev Event) {
	e.s.queue = append(e.s.queue, queuedEvent{from: e.layer, e: ev})
}
