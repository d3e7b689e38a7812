package vsync

import (
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Multicast is the event the application hands the layer to multicast
// Payload to every member of its current view (itself included). The layer
// keeps Payload (the event must not be mutated after it is handed over).
// The message is sent in the view that is current when the flow-control
// window lets it go: a multicast handed over during a flush is sent in the
// next view. If the queue is full or the payload too large the layer emits
// [Refused] instead.
type Multicast struct {
	Payload []byte
}

// Refused reports a [Multicast] the layer did not accept, with the reason
// ([ErrQueueFull] or [ErrTooLarge]).
type Refused struct {
	Payload []byte
	Err     error
}

// Delivered is a message delivered to the application: the Seq-th message
// that Sender multicast in the view numbered Epoch, which is always the
// application's current view (the last [ViewChanged]). Messages of one
// sender are delivered in Seq order, 1, 2, 3, …, each once; a node delivers
// its own messages when it sends them. Payload must not be modified.
type Delivered struct {
	Epoch   uint64
	Sender  core.NodeID
	Seq     uint64
	Payload []byte
}

// ViewChanged announces the application's next view: Epoch and Members as
// installed by the membership layer. Previous is the view the application
// leaves (0 for a node's first view). Count and Digest summarise what this
// node delivered in Previous: every node that moves from Previous to Epoch
// delivered the same messages there, so they report the same Count and
// Digest (the sum, modulo 2^64, of [MessageHash] over the messages).
// Flush is the time from the membership layer's installation of Epoch to
// this event (0 for a first view). Members must not be modified.
type ViewChanged struct {
	Epoch    uint64
	Members  []core.NodeID
	Previous uint64
	Count    uint64
	Digest   uint64
	Flush    time.Duration
}
