package group

import "sync/atomic"

// Stats are a node's counters since it started.
type Stats struct {
	// Epoch and Members describe the view delivered last.
	Epoch   uint64
	Members int
	// ViewsInstalled counts the views the membership installed;
	// ViewsDelivered those delivered with their metadata (a view replaced
	// before its metadata arrived is installed, not delivered).
	ViewsInstalled, ViewsDelivered uint64
	// ViewsDropped and SuspicionsDropped count the events full queues
	// dropped (see Delegate).
	ViewsDropped, SuspicionsDropped uint64
	// MessagesSent and MessagesReceived count the protocol messages of the
	// node (detector, membership, directory, multicast).
	MessagesSent, MessagesReceived uint64
	// FramesSent and FramesReceived count the frames written to and read
	// from connections.
	FramesSent, FramesReceived uint64
	// Connections is the number of connections open now; Dials and
	// DialFailures count connection attempts.
	Connections         int
	Dials, DialFailures uint64
}

type counts struct {
	installed, delivered uint64 // under Group.mu
	// Counted by the queues, under their own locks.
	viewsDropped, suspicionsDropped atomic.Uint64
}

// Stats returns the node's counters.
func (g *Group) Stats() Stats {
	g.mu.Lock()
	s := Stats{Epoch: g.view.Epoch, Members: len(g.view.Members),
		ViewsInstalled: g.counts.installed, ViewsDelivered: g.counts.delivered,
		ViewsDropped: g.counts.viewsDropped.Load(), SuspicionsDropped: g.counts.suspicionsDropped.Load()}
	g.mu.Unlock()
	t := g.tr.Stats()
	s.Connections, s.Dials, s.DialFailures = t.Conns, t.Dials, t.DialFailures
	s.FramesSent, s.FramesReceived = t.FramesOut, t.FramesIn
	if g.h != nil {
		hs := g.h.Stats()
		s.MessagesSent, s.MessagesReceived = hs.Sent, hs.Received
	}
	return s
}
