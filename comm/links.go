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
type linkNotices struct {
	w    io.Writer
	self core.NodeID // the process's node id (physical, with replicas)
	noun string      // "rank", or "process" with replicas
	// relayed holds the peers whose link is relayed now: a new relay for
	// a relayed pair is no news to the user. Used on the host's loop only.
	relayed map[core.NodeID]bool
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
// is to tell of. It runs on the host's loop.
func (n *linkNotices) event(e core.Event) {
	var peer, via core.NodeID
	relayed := false
	switch e := e.(type) {
	case transport.PairRelayed:
		peer, via, relayed = e.Peer, e.Via, true
	case transport.PairDirect:
		peer = e.Peer
	default:
		return
	}
	if n.relayed[peer] == relayed {
		return
	}
	if n.relayed == nil {
		n.relayed = map[core.NodeID]bool{}
	}
	n.relayed[peer] = relayed
	if n.quiet.Load() {
		return
	}
	if line, ok := linkNotice(n.self, peer, via, relayed, n.noun); ok {
		io.WriteString(n.w, line+"\n")
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
