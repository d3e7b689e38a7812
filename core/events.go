package core

// Events shared between layers. A layer defines its own events in its own
// package when nobody else needs to name them; these are the ones that cross
// package boundaries.

// Suspected reports that the detector suspects Node has failed (it may
// still be cleared, see [Unsuspected]).
type Suspected struct{ Node NodeID }

// Unsuspected withdraws an earlier suspicion of Node.
type Unsuspected struct{ Node NodeID }

// Failed reports that the detector has declared Node failed. Detectors
// emit it once per failure of a node.
type Failed struct{ Node NodeID }

// Recovered reports that a node declared failed is heard from again (a
// restarted process, or a false detection healed by a partition ending).
type Recovered struct{ Node NodeID }

// PeerHint reports a transport-level problem with Node (a refused or reset
// connection), or, with Answering, a link that still answers. It is a
// hint, not a verdict: detectors may use it to probe sooner or to wait
// longer, never to declare a failure by itself.
type PeerHint struct {
	Node   NodeID
	Reason string
	// Refused: the peer's host answered that nothing listens at the
	// peer's address (a TCP connection refused), which a crashed process
	// leaves behind and a slow or partitioned one does not; or, for a
	// peer on this host, its connection ended and its process is gone (no
	// such process, a zombie, exiting, or its id reused), as certain. The
	// heartbeat detector suspects the peer at once instead of pinging it
	// first (the suspicion still has to stand for T_broken, and a live
	// peer refutes it).
	Refused bool
	// Answering: not a problem but the opposite evidence. Nothing came
	// from the peer lately, yet its host acknowledges what this process
	// sends it and its process still holds the connection open (on the
	// same host: its process exists, runnable or waiting, and holds its
	// socket open). A
	// process that crashed on a live host closes its connections (and
	// then refuses), one whose host crashed or was cut off leaves what
	// it is sent unacknowledged; a silent peer whose link answers is
	// alive and not running (starved on an overloaded host, or stopped).
	// The heartbeat detector holds the verdict on such a suspect, within
	// its stated bound, and never probes on it.
	Answering bool
}

// Departing is implemented by an event that says Node finished and
// leaves the group (member.Leaving). A failure detector gives no verdict
// on it from then on, until a view without it or with a new incarnation
// of it: the membership excludes a leaver without one, and a verdict
// would report a process that finished as failed.
type Departing interface {
	DepartingNode() NodeID
}

// MembersChanged tells lower layers (the detectors) which nodes to monitor:
// the members of the view numbered Epoch, in view order. Renewed lists the
// members that were in the previous view too, but as an earlier incarnation
// of their process (it restarted and joined again under its id): a detector
// drops what it holds about them, verdicts included, and watches them
// afresh, as it does a member that enters the view. The slices must not be
// mutated after the event is emitted.
type MembersChanged struct {
	Epoch   uint64
	Members []NodeID
	Renewed []NodeID `json:",omitempty"`
}
