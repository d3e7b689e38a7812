package host

import "github.com/cohort-mp/cohort/core"

// suspect tells a transport that watches the detector's suspects
// (transport.SuspectWatcher) that id is, or is no longer, suspected: it
// looks closer at the suspects alone (transport/tcp reads the process of
// one on its own host), which costs a large job nothing while no peer is
// suspected.
func (h *Host) suspect(id core.NodeID, suspected bool) {
	if h.suspects != nil {
		h.suspects.Suspect(id, suspected)
	}
}
