package comm

import (
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/launch"
)

// The transport reports a pair whose direct link is down and whose frames
// go through a third member, and the pair back on its own link, as events
// of these types in the node's event stream (fields Peer and Via: node
// ids).
const (
	pairRelayedEvent = "transport.PairRelayed"
	pairDirectEvent  = "transport.PairDirect"
)

// linkNotices tells the user, on the rank's standard error, when a link
// of this rank goes through a third rank and when it is direct again, if
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
// is to tell of. It runs on the host's loop, for every event: the rare
// pair events alone are encoded.
func (n *linkNotices) event(e core.Event) {
	typ := host.EventType(e)
	if typ != pairRelayedEvent && typ != pairDirectEvent {
		return
	}
	fields, err := json.Marshal(e)
	if err != nil {
		return
	}
	var f struct{ Peer *core.NodeID }
	if json.Unmarshal(fields, &f) != nil || f.Peer == nil {
		return
	}
	relayed := typ == pairRelayedEvent
	if n.relayed[*f.Peer] == relayed {
		return
	}
	if n.relayed == nil {
		n.relayed = map[core.NodeID]bool{}
	}
	n.relayed[*f.Peer] = relayed
	if n.quiet.Load() {
		return
	}
	if line, ok := linkNotice(n.self, typ, fields, n.noun); ok {
		io.WriteString(n.w, line+"\n")
	}
}

// linkNotice is the line that node self tells of a pair event of type typ
// with fields (JSON, as in the event stream), or false: the event is not
// a pair's change of path, or is malformed, or the other node of the pair
// tells of it (the lower id speaks, so that each change is said once).
func linkNotice(self core.NodeID, typ string, fields []byte, noun string) (string, bool) {
	var f struct{ Peer, Via *core.NodeID }
	if json.Unmarshal(fields, &f) != nil || f.Peer == nil || *f.Peer == self || self > *f.Peer {
		return "", false
	}
	nouns := noun + "s"
	if noun == "process" {
		nouns = "processes"
	}
	switch {
	case typ == pairRelayedEvent && f.Via != nil && *f.Via != self && *f.Via != *f.Peer:
		return fmt.Sprintf("cohort: %s %d and %d: link down, relayed through %s %d", nouns, self, *f.Peer, noun, *f.Via), true
	case typ == pairDirectEvent:
		return fmt.Sprintf("cohort: %s %d and %d: direct link back", nouns, self, *f.Peer), true
	}
	return "", false
}
