package tcp

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Reachability by exception. Each node keeps the set of peers it cannot
// reach directly now (down: a dial failed or a connection died, and none
// is in use since; or the peer accepts no connection and has none with
// us), and sends it (wire.Route) to every peer it has a connection to
// when it changes and to a peer whose stream starts afresh. Most nodes
// reach every other, so the sets are empty and no frame is sent. A route
// frame rides the pair's stream, which loses nothing, so the receiver has
// the latest set without a periodic refresh; a send that found the
// peer's control lane full is tried again every routeRetry.
//
// A node relays the frames for a peer D whose direct link is down through
// a peer R it has a connection to and whose latest set does not hold D
// (choose, below).

// routeRetry is how often routes that could not be queued are tried again.
const routeRetry = time.Second

// routeTable is a transport's reachability state.
type routeTable struct {
	mu sync.Mutex
	// version counts the changes of down, our set as last published.
	version uint64
	down    []core.NodeID
	// of holds the latest set of each peer, with the peer's stream id
	// for us when it sent it (a restarted peer's versions start again).
	of map[core.NodeID]peerRoute
	// blocked: the direct link to these peers is cut on purpose
	// (BlockPeer).
	blocked map[core.NodeID]bool
	// duty holds, for each pair (origin, final) this node forwarded
	// frames between, when it last did (t.mu; Flush waits on it).
	duty map[[2]core.NodeID]time.Time
	// forwardHook, if set, sees (and may alter) each relayed payload
	// this node forwards, before it is queued (tests).
	forwardHook func(payload []byte)

	// gen changes whenever a relay choice may change: a set received,
	// a connection put in use or lost, a dial failed.
	gen atomic.Uint64
	// linkStalls counts the connections checkLinks broke.
	linkStalls atomic.Uint64
	// stalled: links checkLinks takes for stalled (tests).
	stalled map[core.NodeID]bool
	// changed has a token when our set may have changed.
	changed chan struct{}
}

type peerRoute struct {
	stream  uint64
	version uint64
	down    []core.NodeID
}

// routeChanged tells the route publisher and the relaying writers that
// reachability may have changed. It never blocks; t.mu may be held.
func (t *Transport) routeChanged() {
	t.rt.gen.Add(1)
	select {
	case t.rt.changed <- struct{}{}:
	default:
	}
}

// routeDownLocked reports whether p is in our set: no connection in use,
// and its last dial failed or its last connection died, or it accepts no
// connection. t.mu is held.
func (p *peer) routeDownLocked() bool {
	return p.cur == nil && (p.unreachable || p.dialOutOnly)
}

// routeLoop publishes our set when it changes (see routeTable), and
// looks at the links in use (checkLinks).
func (t *Transport) routeLoop() {
	defer t.wg.Done()
	tick := time.NewTicker(routeRetry)
	defer tick.Stop()
	var links <-chan time.Time
	var suspected <-chan struct{}
	if t.linkLooksOn() {
		lt := time.NewTicker(linkCheckInterval)
		defer lt.Stop()
		links, suspected = lt.C, t.suspects.kick
	}
	for {
		select {
		case <-t.rt.changed:
		case <-tick.C:
		case <-links:
			t.checkLinks(false)
			continue
		case <-suspected:
			t.checkLinks(true)
			continue
		case <-t.closing:
			return
		}
		t.publishRoutes()
	}
}

// publishRoutes computes our set and queues it to each connected peer
// that lacks its latest version.
func (t *Transport) publishRoutes() {
	t.mu.Lock()
	var down []core.NodeID
	for id, p := range t.peers {
		if p.routeDownLocked() {
			down = append(down, id)
		}
	}
	slices.Sort(down)
	t.rt.mu.Lock()
	if !slices.Equal(down, t.rt.down) {
		t.rt.version++
		t.rt.down = down
	}
	r := wire.Route{Version: t.rt.version, Down: t.rt.down}
	t.rt.mu.Unlock()
	var to []*peer
	for _, p := range t.peers {
		if p.cur != nil && p.rl.routeSent != r.Version {
			to = append(to, p)
		}
	}
	t.mu.Unlock()
	if len(to) == 0 {
		return
	}
	var e wire.Encoder
	r.MarshalWire(&e)
	for _, p := range to {
		f := wire.Frame{Kind: wire.KindRoute, Payload: e.B}
		if t.enqueue(doneCtx, p.id, f, nil, true) == nil {
			t.mu.Lock()
			p.rl.routeSent = r.Version
			t.mu.Unlock()
		}
	}
}

// onRoute records a peer's set, read from c.
func (t *Transport) onRoute(c *conn, f wire.Frame) {
	r, err := wire.DecodeRoute(f.Payload)
	if err != nil {
		t.log.Warn("tcp: dropping a malformed route", "peer", uint32(c.peer), "err", err)
		return
	}
	t.rt.mu.Lock()
	old, ok := t.rt.of[c.peer]
	if !ok || old.stream != c.peerStream || r.Version > old.version {
		t.rt.of[c.peer] = peerRoute{stream: c.peerStream, version: r.Version, down: r.Down}
	}
	t.rt.mu.Unlock()
	t.rt.gen.Add(1)
}

// says reports whether node a's latest set holds b (t.rt.mu held).
func (t *Transport) saysDownLocked(a, b core.NodeID) bool {
	r, ok := t.rt.of[a]
	if !ok {
		return false
	}
	_, found := slices.BinarySearch(r.down, b)
	return found
}

// chooseRelay returns the peer through which to relay p's frames, or nil:
// a peer with a connection in use whose set does not hold p, preferring
// one that p's last known set does not hold, and then one on another
// host than ours (a same-host connection: Unix socket or shared memory),
// since a peer beside us most likely lost the same links as we did and
// has not noticed yet. It keeps cur while cur is valid, unless next is
// set (cur stalled): it then takes the next valid one in id order after
// cur. The choice is deterministic.
func (t *Transport) chooseRelay(p *peer, cur core.NodeID, next bool) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rt.mu.Lock()
	defer t.rt.mu.Unlock()
	var ranked [4][]*peer // good and away, good and beside, fair and away, fair and beside
	for id, r := range t.peers {
		if id == p.id || r.cur == nil || t.saysDownLocked(id, p.id) {
			continue
		}
		rank := 0
		if t.saysDownLocked(p.id, id) {
			rank = 2
		}
		if r.cur.unix || r.cur.shm != nil {
			rank++
		}
		ranked[rank] = append(ranked[rank], r)
	}
	byID := func(a, b *peer) int { return int(int64(a.id) - int64(b.id)) }
	var all []*peer
	for _, rs := range ranked {
		slices.SortFunc(rs, byID)
		all = append(all, rs...)
	}
	if len(all) == 0 {
		return nil
	}
	if cur != core.None {
		i := slices.IndexFunc(all, func(r *peer) bool { return r.id == cur })
		switch {
		case i >= 0 && !next:
			return all[i]
		case next:
			// The next in id order after cur, among all candidates.
			ids := slices.Clone(all)
			slices.SortFunc(ids, byID)
			for _, r := range ids {
				if r.id > cur {
					return r
				}
			}
			return ids[0]
		}
	}
	return all[0]
}

// errBlocked is the error of a dial to a peer BlockPeer cut off.
var errBlocked = errors.New("tcp: the direct link to the peer is cut (BlockPeer)")

// BlockPeer cuts (blocked true) or restores the direct link to node id,
// as a partial network partition would: while cut, dials to id fail at
// once, inbound connections from id are refused once its proof verifies,
// and the connections in use are broken now (BreakConns). Frames to id
// then go through a relay, if one reaches it. It is meant for fault
// injection (tests, benchmarks); a pair is cut both ways by blocking
// each side.
func (t *Transport) BlockPeer(id core.NodeID, blocked bool) {
	t.rt.mu.Lock()
	if blocked {
		t.rt.blocked[id] = true
	} else {
		delete(t.rt.blocked, id)
	}
	t.rt.mu.Unlock()
	if blocked {
		t.BreakConns(id)
	}
	t.mu.Lock()
	if p := t.peers[id]; p != nil {
		p.signal()
	}
	t.mu.Unlock()
}

// isBlocked reports whether BlockPeer cut the link to id.
func (t *Transport) isBlocked(id core.NodeID) bool {
	t.rt.mu.Lock()
	defer t.rt.mu.Unlock()
	return t.rt.blocked[id]
}
