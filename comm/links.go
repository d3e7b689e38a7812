package comm

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/transport"
)

// linkNotices tells the user, on the rank's standard error, when a link
// of this rank goes through a third rank and when it is direct again
// (the transport's transport.PairRelayed and transport.PairDirect), if
// the launcher asked (launch.EnvLinkNotices: cohort run does, and forwards
// the line with the rank's output). A job runs on through a relayed link
// as it did before; the line says why it may run slower.
//
// A link that goes down because its peer is gone is no news of a link:
// nothing is said of a peer that announced its leave (core.Departing) or
// was declared failed, and a link that goes down while the detector
// suspects its peer is told only if the suspicion is withdrawn while the
// link is still relayed (a peer that exited or crashed ends its
// connections, and the transport relays before the membership knows).
type linkNotices struct {
	w    io.Writer
	self core.NodeID // the process's node id (physical, with replicas)
	noun string      // "rank", or "process" with replicas
	// The maps are used on the host's loop only. relayed holds the peers
	// whose link is relayed now (a new relay for a relayed pair is no
	// news), with the relay; told those whose relay was told (their
	// direct link back is news); suspected the peers the detector
	// suspects; gone those that left or were declared failed.
	relayed   map[core.NodeID]core.NodeID
	told      map[core.NodeID]bool
	suspected map[core.NodeID]bool
	gone      map[core.NodeID]bool
	// quiet is set when the process leaves the job: its peers' links go
	// down as they end too, which is no news either.
	quiet atomic.Bool
}

// linkNoticesFromEnv reads launch.EnvLinkNotices through getenv: nil
// when unset or 0.
func linkNoticesFromEnv(getenv func(string) string, w io.Writer) (io.Writer, error) {
	switch v := getenv(launch.EnvLinkNotices); v {
	case "", "0":
		return nil, nil
	case "1":
		return w, nil
	default:
		return nil, fmt.Errorf("%w: %s=%q: want 1 or 0", ErrBadArg, launch.EnvLinkNotices, v)
	}
}

// event writes e's line, if e is a pair's change of path that this rank
// is to tell of, and follows what the detector and the membership say of
// the peers. It runs on the host's loop.
func (n *linkNotices) event(e core.Event) {
	if n.relayed == nil {
		n.relayed, n.told = map[core.NodeID]core.NodeID{}, map[core.NodeID]bool{}
		n.suspected, n.gone = map[core.NodeID]bool{}, map[core.NodeID]bool{}
	}
	switch e := e.(type) {
	case transport.PairRelayed:
		if _, ok := n.relayed[e.Peer]; ok {
			return
		}
		n.relayed[e.Peer] = e.Via
		if !n.suspected[e.Peer] {
			n.tell(e.Peer, e.Via, true)
		}
	case transport.PairDirect:
		if _, ok := n.relayed[e.Peer]; !ok {
			return
		}
		delete(n.relayed, e.Peer)
		if n.told[e.Peer] {
			n.tell(e.Peer, 0, false)
		}
	case core.Suspected:
		n.suspected[e.Node] = true
	case core.Unsuspected:
		delete(n.suspected, e.Node)
		if via, ok := n.relayed[e.Node]; ok && !n.told[e.Node] {
			n.tell(e.Node, via, true)
		}
	case core.Failed:
		n.gone[e.Node] = true
	case core.Recovered:
		delete(n.gone, e.Node)
	case core.Departing:
		n.gone[e.DepartingNode()] = true
	}
}

// tell writes the line of peer's link becoming relayed through via, or
// direct again, unless the peer is gone or the process is leaving.
func (n *linkNotices) tell(peer, via core.NodeID, relayed bool) {
	n.told[peer] = relayed
	if n.quiet.Load() || n.gone[peer] {
		n.told[peer] = false
		return
	}
	if line, ok := linkNotice(n.self, peer, via, relayed, n.noun); ok {
		io.WriteString(n.w, line+"\n")
	} else {
		n.told[peer] = false
	}
}

// linkNotice is the line that node self tells of its link to peer
// becoming relayed through via (relayed) or direct again, or false: the
// other node of the pair tells of it (the lower id speaks, so that each
// change is said once), or the event names no pair.
func linkNotice(self, peer, via core.NodeID, relayed bool, noun string) (string, bool) {
	if self >= peer || relayed && (via == self || via == peer) {
		return "", false
	}
	nouns := noun + "s"
	if noun == "process" {
		nouns = "processes"
	}
	if relayed {
		return fmt.Sprintf("cohort: %s %d and %d: link down, relayed through %s %d", nouns, self, peer, noun, via), true
	}
	return fmt.Sprintf("cohort: %s %d and %d: direct link back", nouns, self, peer), true
}
