package core

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// NodeID names a process of a job. IDs are dense small integers (ranks in a
// job, indices in a simulation); [None] is reserved.
type NodeID uint32

// None is the zero-like NodeID that names no node.
const None NodeID = ^NodeID(0)

func (id NodeID) String() string {
	if id == None {
		return "none"
	}
	return fmt.Sprintf("n%d", uint32(id))
}

// Proto identifies the protocol that owns a message kind. It is the high byte
// of a [Kind]. Append only: the numbers are on the wire.
type Proto uint8

// The protocols of cohort. Append only: the numbers are on the wire.
const (
	ProtoCore    Proto = 0
	ProtoFD      Proto = 1
	ProtoMember  Proto = 2
	ProtoStable  Proto = 3
	ProtoComm    Proto = 4
	ProtoReplica Proto = 5
	ProtoApp     Proto = 6
	ProtoVsync   Proto = 7   // view-synchronous reliable multicast (package vsync)
	ProtoGroup   Proto = 8   // addresses and graceful leaves of package group
	ProtoTest    Proto = 255 // reserved for tests and benchmarks
)

var protoNames = [...]string{"core", "fd", "member", "stable", "comm", "replica", "app", "vsync", "group"}

func (p Proto) String() string {
	if int(p) < len(protoNames) {
		return protoNames[p]
	}
	if p == ProtoTest {
		return "test"
	}
	return fmt.Sprintf("proto%d", uint8(p))
}

// Kind is a message type number: the protocol in the high byte, the
// protocol's own number in the low byte.
type Kind uint16

// MakeKind builds the Kind numbered n within protocol p.
func MakeKind(p Proto, n uint8) Kind { return Kind(p)<<8 | Kind(n) }

// Proto returns the protocol that owns k.
func (k Kind) Proto() Proto { return Proto(k >> 8) }

func (k Kind) String() string { return fmt.Sprintf("%v/%d", k.Proto(), uint8(k)) }

// Msg is a protocol message: a plain struct with an explicit kind. Messages
// handed to Env.Send must not be mutated afterwards (the simulator delivers
// the same value).
type Msg interface {
	Kind() Kind
}

// Sizer is implemented by messages that know their encoded size in bytes.
// Network models use it for bandwidth and load; messages that do not
// implement it count as [DefaultMsgSize].
type Sizer interface {
	WireSize() int
}

// DefaultMsgSize is the size assumed for a message that is not a Sizer.
const DefaultMsgSize = 64

// MsgSize returns the wire size of m.
func MsgSize(m Msg) int {
	if s, ok := m.(Sizer); ok {
		return s.WireSize()
	}
	return DefaultMsgSize
}

// Timer is the value a machine passes to SetTimer and gets back in Fire. It
// is typically a small struct or integer constant of the machine's own type.
type Timer any

// TimerID identifies a timer set through an Env, for cancellation. The zero
// TimerID names no timer.
type TimerID uint64

// Event is what a machine emits to the layers above, the layers beside it
// and observers (the host's event stream, the simulator's checkers). Events
// are plain values; they are never mutated after Emit.
type Event any

// Env is a machine's whole view of the world.
type Env interface {
	// Self is this node's id.
	Self() NodeID
	// Now is monotonic time since an arbitrary origin: virtual in the
	// simulator, real in the host.
	Now() time.Duration
	// Send queues m for node to. Delivery is FIFO per pair and reliable while
	// both ends live, unless the world injects loss.
	Send(to NodeID, m Msg)
	// SetTimer arranges for Fire(t) to be called after the duration.
	// Once it has called Fire(t), the Env holds no reference to t, so a
	// machine may reuse the memory behind a pointer timer then (a timer
	// that was cancelled instead may still be held).
	SetTimer(after time.Duration, t Timer) TimerID
	// CancelTimer stops a pending timer; cancelling a fired or unknown timer
	// is a no-op.
	CancelTimer(id TimerID)
	// Rand is this node's random source, seeded by the world.
	Rand() *rand.Rand
	// Emit passes e to the other layers of the node and to observers. It is
	// delivered after the current call into the machine returns.
	Emit(e Event)
}

// SendCopier is implemented by an Env whose Send is done with a message
// for another node when it returns (the real host encodes it there): the
// machine may then reuse that message, a scratch value it refills for
// every send, instead of building a new one. Every other Env (the
// simulator delivers the value itself), and any Env for a message a node
// sends to itself, keeps the rule of [Msg]: a sent message is never
// mutated. Ask with [SendCopies].
type SendCopier interface {
	// SendCopies reports whether Send is done with a message for another
	// node when it returns.
	SendCopies() bool
}

// SendCopies reports whether env is a [SendCopier] that copies.
func SendCopies(env Env) bool {
	c, ok := env.(SendCopier)
	return ok && c.SendCopies()
}

// Recycler is implemented by an Env that can reuse the memory of the
// messages it delivers (the real host decodes some kinds into messages
// handed back this way). A machine that is done with a message it
// received calls Recycle(m), once, when it keeps no reference to m or to
// anything m references: m may be overwritten afterwards. Not calling it
// costs only the reuse. Find it with [RecyclerOf].
type Recycler interface {
	Recycle(m Msg)
}

// Recycle hands m back to env's Recycler, if it has one: what an Env that
// wraps another does with the messages handed back to it.
func Recycle(env Env, m Msg) {
	if r := RecyclerOf(env); r != nil {
		r.Recycle(m)
	}
}

// RecyclerOf returns env's Recycler, or nil if it has none.
func RecyclerOf(env Env) Recycler {
	if r, ok := env.(Recycler); ok {
		return r
	}
	return nil
}

// Machine is a deterministic protocol state machine.
type Machine interface {
	// Start is called once, before any other method.
	Start(env Env)
	// Receive delivers a message from another node (or from this node).
	Receive(from NodeID, m Msg)
	// Fire delivers a timer set with Env.SetTimer.
	Fire(t Timer)
	// Handle delivers an event from another layer of the node or from the
	// host (for example a transport hint).
	Handle(e Event)
}

// TrafficObserver is implemented by machines that want to see every message
// their node sends or receives, whatever its layer (the Phoenix heartbeat
// detector counts application traffic as heartbeats). A [Stack] calls it.
type TrafficObserver interface {
	ObserveSend(to NodeID)
	ObserveReceive(from NodeID)
}

// ProtoOwner is implemented by machines placed in a [Stack]: the protocols
// whose messages the machine receives.
type ProtoOwner interface {
	Protos() []Proto
}
