package transport

import "github.com/cohort-mp/cohort/core"

// PairRelayed reports that the frames between this node and Peer now go
// through node Via, the direct link being down or impossible to dial
// (transport/tcp's relaying). A later PairRelayed names a new relay.
type PairRelayed struct {
	Peer, Via core.NodeID
}

// PairDirect reports that the frames to Peer, relayed until now, go over
// a direct connection again.
type PairDirect struct {
	Peer core.NodeID
}

// PathReporter is implemented by a [Handler] that wants to hear when the
// path to a peer changes: Path receives a PairRelayed or a PairDirect
// event, once per change (never per frame), on a transport goroutine. Like
// Hint, it must not block.
type PathReporter interface {
	Path(ev core.Event)
}
