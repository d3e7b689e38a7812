package stable

import "time"

// Progress is the event the layer above (the reliable multicast) hands the
// detector: the local node's received vector for the view numbered Epoch.
// Have[i] is how many messages of sender i (position i of the view, see
// Config.Senders) this node holds contiguously (messages 1..Have[i]).
// Within a view Have only grows; the detector keeps the latest Progress and
// reads it whenever a protocol step needs the node's vector R_i (a missing
// entry counts as 0, extra entries are ignored). The detector copies Have,
// so the sender may reuse its slice.
type Progress struct {
	Epoch uint64
	Have  []uint64
}

// Stable is the event the detector emits when a round ends at this node:
// every member of view Epoch that was not reported failed held at least
// Vector[i] messages of sender i. Vector has one entry per sender of the
// view. Within a view the emitted vectors only grow, element-wise (the
// detector emits the element-wise maximum of every result it has learned).
// Vector must not be modified by receivers.
type Stable struct {
	Epoch, Round uint64
	Vector       []uint64
}

// RoundDone is emitted with every [Stable], for measurements: the node took
// part in round Round of view Epoch from Began (when the round started at
// this node: the coordinator's or root's own start, the first message of the
// round at the others, the start of Step 1 under CubeFullDist) until At
// (when it learned the result), both on its own clock ([core.Env.Now]).
// The paper's RTT of a node (§4.1) is At minus the time the round started at
// its initiator; in a simulator, where clocks agree, that is At minus the
// initiator's Began.
type RoundDone struct {
	Epoch, Round uint64
	Began, At    time.Duration
}
