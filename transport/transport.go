// Package transport moves frames between the processes of a job. It defines
// the [Transport] interface that the host drives, and its two
// implementations live below it: transport/tcp (real connections between
// processes) and transport/mem (an in-process hub for tests, with injected
// delay and loss).
//
// A transport carries [wire.Frame] values: a kind, a source, a destination,
// a view epoch and an encoded payload. It neither encodes nor decodes
// messages; the host does that with its [wire.Codec]. A caller uses a
// transport like this:
//
//  1. Build it (tcp.Listen, mem.Hub.Join) and fill its address book with
//     SetPeer(id, address) for every node it may send to. A peer that
//     connects to us authenticates itself and needs no entry to be answered.
//  2. Install the inbound path once with SetHandler. Frames that arrive
//     before a handler is installed wait for it (nothing is lost).
//  3. Send frames with Send(ctx, to, frame). Send blocks while the queue to
//     that peer is full (back-pressure), until there is room or ctx is done.
//  4. Close it when done: Close stops every goroutine of the transport and
//     returns when they have all ended.
//
// # Delivery and ordering
//
// Frames from one sender to one receiver are delivered in the order Send
// accepted them (FIFO per pair), never duplicated. A transport is reliable
// while both processes live: when a connection between them breaks (the
// network failed, a socket was reset) it reports a [core.PeerHint],
// reconnects and resends what the broken connection lost (transport/tcp;
// transport/mem never breaks). When a process crashes or restarts, the
// frames it had not yet sent or handled, and those in flight to it, are
// lost. Loss is therefore possible, reordering is not. Protocols above
// tolerate loss (they retry or treat the silence as a failure).
//
// # The inbound path
//
// Frames are delivered to a [Handler] on the transport's reader goroutines:
// one goroutine per connection, so Deliver is called concurrently for
// different senders but sequentially, in order, for one sender. The handler
// is where the data path branches: the host decodes control frames and
// posts them to its event loop, while the application's data frames can be
// handed straight to a matching engine on the reader goroutine, with no
// goroutine hop (docs/DESIGN.md, "Real host and transport"). A handler that
// blocks holds back its sender (TCP flow control then pushes the
// back-pressure to the sending process); it must return promptly once its
// owner shuts down.
package transport

import (
	"context"
	"errors"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Errors returned by transports. Implementations wrap them with %w and
// details; test with errors.Is.
var (
	// ErrClosed: the transport has been closed.
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownPeer: the address book has no entry for the destination
	// and no connection from it exists.
	ErrUnknownPeer = errors.New("transport: unknown peer")
	// ErrSelf: a frame addressed to this node itself. The host loops such
	// messages back without the transport.
	ErrSelf = errors.New("transport: send to self")
	// ErrQueueFull: the send queue to the peer stayed full until the
	// context was done. The error also wraps the context's error.
	ErrQueueFull = errors.New("transport: send queue full")
	// ErrFrameTooLarge: the frame exceeds the transport's frame size limit.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrAddrInUse: another endpoint already holds the address or node id.
	ErrAddrInUse = errors.New("transport: address in use")
	// ErrBadConfig: a configuration value is invalid.
	ErrBadConfig = errors.New("transport: invalid configuration")
)

// Handler receives what a transport has to say to its owner. Both methods
// are called on the transport's goroutines, never on the caller's.
type Handler interface {
	// Deliver hands over one inbound frame. f.Src is the authenticated
	// sender and f.Dst is this node: frames that fail either check are
	// dropped by the transport. f.Payload is valid only until Deliver
	// returns (the reader reuses its buffer); a handler that keeps it, or a
	// message decoded from it that aliases it, must copy it. Deliver is
	// called sequentially for one sender, concurrently for different ones.
	Deliver(f wire.Frame)
	// Hint reports a connection problem with a peer (a refused dial, a
	// connection lost, a frame dropped for lack of room). It is a hint for
	// the failure detector, not a verdict. Hint must not block.
	Hint(h core.PeerHint)
}

// Placer is implemented by a [Handler] that can take the payload of a
// large frame straight into its own memory (a posted receive's buffer), so
// that the bytes are copied once, from the kernel, instead of into the
// reader's buffer and then out of it. A transport that reads streams
// (transport/tcp) offers it every frame of at least wire.PlaceMin bytes;
// others never call it.
type Placer interface {
	// Place is called on the reader goroutine before the rest of a large
	// frame is read. f is authenticated as Deliver's would be, and its
	// Payload holds the payload's first bytes (at least min(n, 64)); n is
	// the payload's length. Place returns how many first bytes it wants in
	// Payload (skip) and where the other n−skip go (dst, of exactly that
	// length), or a nil dst to have the frame delivered by Deliver as
	// usual. After a non-nil dst the transport calls Placed for that frame
	// before any other call for that sender.
	Place(f wire.Frame, n int) (skip int, dst []byte)
	// Placed ends a Place that returned a destination: ok when dst holds
	// the rest of the payload (f.Payload is the first skip bytes, valid
	// until Placed returns), false when the connection failed first (dst
	// holds part of it; a transport that resends what a broken connection
	// lost offers the frame again, transport/tcp among them).
	Placed(f wire.Frame, ok bool)
}

// Taker is implemented by a [Handler] that can take a frame on the
// sender's goroutine without ever waiting. An in-process transport
// (transport/mem) then hands a frame straight to its receiver instead of
// through a goroutine of its own: one goroutine hop per message (the
// receiver's) instead of two.
type Taker interface {
	// TryDeliver is Deliver when it can be done at once: it reports false,
	// having kept nothing, when taking the frame would mean waiting (the
	// receiver's queue is full) or the handler wants the frame on a
	// goroutine of the transport (a data path), and the transport then
	// delivers it with Deliver, from a goroutine of its own. It never
	// blocks. f.Payload is valid only until it returns. A transport calls
	// it for one sender sequentially, and never while an earlier frame of
	// that sender still waits for Deliver, so the order per sender holds.
	TryDeliver(f wire.Frame) bool
}

// Limited is implemented by a Transport that refuses frames above a size
// (transport/tcp, transport/mem): a caller that writes a frame long after
// it decided to (comm's rendezvous) can check the size first.
type Limited interface {
	// MaxFrameSize is the limit, in bytes, on a frame's body (header and
	// payload); a larger frame is refused with ErrFrameTooLarge.
	MaxFrameSize() int
}

// Copier is implemented by a Transport that can take a frame whose
// payload the caller reuses (an encoding buffer): SendCopy is Send, except
// that the caller may modify f.Payload as soon as it returns, because the
// transport has copied it (into memory of its own, which it may reuse).
type Copier interface {
	SendCopy(ctx context.Context, to core.NodeID, f wire.Frame) error
}

// SuspectWatcher is implemented by a Transport that looks closer at the
// peers the failure detector suspects: transport/tcp reads the process of
// a suspect on its own host, and hints [core.PeerHint] with Answering
// while it lives and holds its socket open. Looking at every silent peer
// instead would cost a large job on one host more than the verdicts it
// holds. The host calls Suspect on its loop goroutine as the machine
// emits core.Suspected (suspected true) and core.Unsuspected,
// core.Failed or core.Recovered (false); it must not block.
type SuspectWatcher interface {
	Suspect(id core.NodeID, suspected bool)
}

// Transport moves frames to and from the other nodes of a job. All methods
// are safe for concurrent use.
type Transport interface {
	// Self is this node's id.
	Self() core.NodeID
	// Addr is the address other nodes put in their address books to reach
	// this one ("127.0.0.1:4242" for TCP, "mem:3" in memory).
	Addr() string
	// SetPeer records (or changes) the address of node id. Sending to a
	// node that is neither in the address book nor connected to us fails
	// with ErrUnknownPeer.
	SetPeer(id core.NodeID, addr string)
	// RemovePeer forgets node id: it closes the connection to it and drops
	// the frames queued for it. Later sends to it fail with ErrUnknownPeer
	// until it is added again or connects again.
	RemovePeer(id core.NodeID)
	// SetHandler installs the inbound path. Call it once, before frames are
	// expected; frames that arrive earlier wait for it. Calling it again
	// replaces the handler for the frames delivered afterwards.
	SetHandler(h Handler)
	// Send queues f for node to. The transport sets f.Src to Self() and
	// f.Dst to to. The caller must not modify f.Payload after Send returns
	// nil: the frame is written later by the transport's own goroutine.
	//
	// Send never waits when there is room in the queue to that peer, even
	// if ctx is already done (so a done context turns Send into a try).
	// When the queue is full it waits until there is room, ctx is done
	// (ErrQueueFull wrapping ctx.Err()) or the transport is closed
	// (ErrClosed). A nil error means the frame was queued, not that it was
	// delivered.
	Send(ctx context.Context, to core.NodeID, f wire.Frame) error
	// Close closes every connection, stops every goroutine of the transport
	// and returns when they have ended. Frames still queued are dropped.
	// Close is idempotent.
	Close() error
}

// HandlerFuncs adapts two functions to a [Handler]; either may be nil, in
// which case the corresponding calls are ignored.
type HandlerFuncs struct {
	OnDeliver func(f wire.Frame)
	OnHint    func(h core.PeerHint)
}

// Deliver calls OnDeliver if it is set.
func (h HandlerFuncs) Deliver(f wire.Frame) {
	if h.OnDeliver != nil {
		h.OnDeliver(f)
	}
}

// Hint calls OnHint if it is set.
func (h HandlerFuncs) Hint(p core.PeerHint) {
	if h.OnHint != nil {
		h.OnHint(p)
	}
}
