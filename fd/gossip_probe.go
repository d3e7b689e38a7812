package fd

// The gossip detector's indirect probes: reachability is not liveness. The
// consensus phase asks IndirectProbes other members to ping the suspect
// too; a pong relayed by any of them refutes the suspicion.

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// GossipProbeStats counts a [Gossip] detector's indirect probes.
type GossipProbeStats struct {
	Requests      uint64 // probe requests sent (IndirectProbes per consensus phase)
	Helped        uint64 // requests received from others and carried out (a ping to the suspect)
	AcksSent      uint64 // answers to those requests: the suspect answered our ping
	IndirectAlive uint64 // consensus phases ended by a helper's answer: alive, unreachable from here
}

// gossipHelp is a ping this node sent on another's behalf, and the
// request it passed on to helpers of its own (subSeq, 0 if none).
type gossipHelp struct {
	requester, subject      core.NodeID
	reqSeq, pingSeq, subSeq uint32
	until                   time.Duration
	pingAt                  time.Duration // when the ping pingSeq went
	subHops                 uint8         // the Hops of the requests subSeq went with
	tableSent               bool          // a table answer from helpers of our own was passed on
	tableBeat               uint32        // the heartbeat of the last one
	asked                   []core.NodeID // the pass-on's first helpers, until its second wave
	origin                  core.NodeID   // the suspecting member the pass-on serves
	originSeq               uint32        // and its request
}

// probeHops is how many times a probe request may be passed on: as many
// as a path through the view can need (a simple path from a helper to
// the suspect passes at most n − 2 helpers), so that a suspect that any
// chain of members still reaches is found alive. Requests about one
// suspect share each helper's work (helpProbe), so the hops cost at
// most one pass-on, and its second wave, per node and suspect.
func (g *Gossip) probeHops() uint8 {
	return uint8(min(max(len(g.members)-2, 1), 255))
}

// gossipHelpWave is the timer of a pass-on's second wave, half way
// through the help's ProbeTimeout.
type gossipHelpWave struct{ subSeq uint32 }

// gossipProbeDeadline is the timer of an indirect probe's ProbeTimeout.
type gossipProbeDeadline struct{ seq uint32 }

// gossipProbeWave is the timer of an indirect probe's second wave, half
// way through its ProbeTimeout.
type gossipProbeWave struct{ seq uint32 }

// gossipSecondWave is how many more helpers, in IndirectProbes, the
// second wave asks.
const gossipSecondWave = 4

// nextSeq returns a fresh sequence number for a ping or a probe request.
func (g *Gossip) nextSeq() uint32 {
	g.lastSeq++
	if g.lastSeq == 0 {
		g.lastSeq = 1
	}
	return g.lastSeq
}

// probeIndirect asks up to IndirectProbes random members, neither w's node
// nor ones this node doubts, to ping w's node on its behalf, as the
// consensus phase starts.
func (g *Gossip) probeIndirect(w *gossipWatch) {
	w.probeSeq = 0
	if g.cfg.IndirectProbes == 0 {
		return
	}
	seq := g.nextSeq()
	asked := g.askHelpers(w.id, core.None, seq, g.probeHops(), g.cfg.IndirectProbes, nil, 0, 0)
	if len(asked) == 0 {
		return // nobody to go round a cut through
	}
	// The suspect itself is asked too: if only the link from it is down
	// and every path out of this node leads through it, its answer
	// comes back round the cut (GossipProbeRelay).
	g.probes.Requests++
	g.env.Send(w.id, GossipProbeReq{Seq: seq, Subject: w.id, Hops: g.probeHops()})
	after := g.cfg.probeTimeout()
	w.probeSeq, w.probeUntil, w.asked = seq, g.env.Now()+after, asked
	g.env.SetTimer(after, gossipProbeDeadline{seq: seq})
	g.env.SetTimer(after/2, gossipProbeWave{seq: seq})
}

// probeJoined asks the members at positions joined, new to the view,
// to help with w's running probe, and gives the probe a fresh
// ProbeTimeout if it asked any: a probe whose helpers came from the old
// view may have had nobody to go round a cut through.
func (g *Gossip) probeJoined(w *gossipWatch, joined []int) {
	var skip []core.NodeID
	for i := range g.members {
		if !slices.Contains(joined, i) {
			skip = append(skip, g.members[i])
		}
	}
	seq := g.nextSeq()
	asked := g.askHelpers(w.id, core.None, seq, g.probeHops(), g.cfg.IndirectProbes, skip, 0, 0)
	if len(asked) == 0 {
		return
	}
	after := g.cfg.probeTimeout()
	w.probeSeq, w.probeUntil, w.asked = seq, g.env.Now()+after, asked
	g.env.SetTimer(after, gossipProbeDeadline{seq: seq})
	g.env.SetTimer(after/2, gossipProbeWave{seq: seq})
}

// secondWave asks up to gossipSecondWave·IndirectProbes more members, if
// no helper has answered half way through the probe: the first ones may
// all be cut off from the suspect, or from this node.
func (g *Gossip) secondWave(seq uint32) {
	for k := range g.watches {
		w := &g.watches[k]
		if w.probeSeq != seq || w.status != StatusConsensus {
			continue
		}
		g.askHelpers(w.id, core.None, seq, g.probeHops(), gossipSecondWave*g.cfg.IndirectProbes, w.asked, 0, 0)
		w.asked = nil
		return
	}
}

// askHelpers sends request seq about subject (on behalf of origin's
// request originSeq, when not 0) to up to k members that this node does
// not doubt, other than the subject, except and the members in skip, and
// returns those it asked. The members it heard
// from most recently come first (a node cut off from most others must ask
// the few it still reaches, or neither the requests nor the answers get
// through), then random ones, then, if k is not reached, members it
// doubts.
func (g *Gossip) askHelpers(subject, except core.NodeID, seq uint32, hops uint8, k int, skip []core.NodeID, origin core.NodeID, originSeq uint32) []core.NodeID {
	ok := func(i int) bool {
		return i >= 0 && i != g.me && g.members[i] != subject && g.members[i] != except && !doubted(g.statusAt(i)) && !slices.Contains(skip, g.members[i])
	}
	// Members this node doubts come last: the link from them may be down
	// while the link to them works.
	last := func(i int) bool {
		return i != g.me && g.members[i] != subject && g.members[i] != except && doubted(g.statusAt(i)) && !slices.Contains(skip, g.members[i])
	}
	var asked []core.NodeID
	ask := func(i int) {
		g.probes.Requests++
		asked = append(asked, g.members[i])
		g.env.Send(g.members[i], GossipProbeReq{Seq: seq, Subject: subject, Hops: hops, Origin: origin, OriginSeq: originSeq})
	}
	for _, id := range g.recent {
		if i := g.pos(id); ok(i) && len(asked) < k && !slices.Contains(asked, id) {
			ask(i)
		}
	}
	var cand []int
	for i := range g.members {
		if ok(i) && !slices.Contains(asked, g.members[i]) {
			cand = append(cand, i)
		}
	}
	var doubtedCand []int
	for i := range g.members {
		if last(i) {
			doubtedCand = append(doubtedCand, i)
		}
	}
	rng := g.env.Rand()
	for _, cs := range [][]int{cand, doubtedCand} {
		for i := 0; i < len(cs) && len(asked) < k; i++ {
			j := i + rng.IntN(len(cs)-i)
			cs[i], cs[j] = cs[j], cs[i]
			ask(cs[i])
		}
	}
	return asked
}

// gossipRecent is how many recent senders a node remembers.
const gossipRecent = 8

// heardFrom notes a message from id: it is reachable again, and the most
// recent sender.
func (g *Gossip) heardFrom(id core.NodeID) {
	if len(g.unreachable) > 0 {
		g.unreachable = slices.DeleteFunc(g.unreachable, func(x core.NodeID) bool { return x == id })
	}
	if id == g.self {
		return
	}
	if k := slices.Index(g.recent, id); k >= 0 {
		copy(g.recent[1:k+1], g.recent[:k])
	} else {
		if len(g.recent) < gossipRecent {
			g.recent = append(g.recent, 0)
		}
		copy(g.recent[1:], g.recent[:len(g.recent)-1])
	}
	g.recent[0] = id
}

// helpProbe pings the suspect of a request on the requester's behalf,
// and answers at once with the suspect's heartbeat if this node does not
// doubt it: the requester may hold an older one (the tables that carry
// it may all cross cut links on their way to it), and a newer one proves
// the suspect alive, by whatever path it came.
func (g *Gossip) helpProbe(from core.NodeID, m GossipProbeReq) {
	if m.Subject == g.self {
		to, seq := from, m.Seq
		if m.OriginSeq != 0 {
			// A helper tells us who suspects us, some hops back: the
			// way back through the helpers may be cut one way, a link
			// from us to the suspecting member not. Many helpers tell
			// of one request; it is answered once.
			if !g.firstOf(m.Origin, m.OriginSeq) {
				return
			}
			to, seq = m.Origin, m.OriginSeq
		}
		g.probes.AcksSent++
		g.env.Send(to, GossipProbeAck{Seq: seq, Subject: g.self, Beat: g.own, Pong: true})
		if m.Hops > 0 || m.OriginSeq != 0 {
			// The requester suspects us: its link from us may be down.
			// The answer goes round it too.
			sent := 0
			for _, id := range g.recent {
				if id != to && sent < g.cfg.IndirectProbes {
					sent++
					g.env.Send(id, GossipProbeRelay{To: to, Seq: seq, Beat: g.own})
				}
			}
		}
		return
	}
	if from == m.Subject {
		return
	}
	origin, originSeq := from, m.Seq
	if m.OriginSeq != 0 {
		origin, originSeq = m.Origin, m.OriginSeq
	}
	if origin != m.Subject && g.firstOf(origin, originSeq) {
		// The suspect hears who suspects it, to answer that member
		// itself (once per suspecting member's request and helper).
		g.env.Send(m.Subject, GossipProbeReq{Seq: m.Seq, Subject: m.Subject, Origin: origin, OriginSeq: originSeq})
	}
	// The suspect need not be in this node's view (views differ while
	// they change, and a member cut off may hold an old one): any node
	// answers a ping. Only the table answer needs its entry.
	now := g.env.Now()
	g.helps = slices.DeleteFunc(g.helps, func(h gossipHelp) bool { return h.until < now })
	g.probes.Helped++
	help := gossipHelp{requester: from, subject: m.Subject, reqSeq: m.Seq, until: now + g.cfg.probeTimeout()}
	i := g.pos(m.Subject)
	if i >= 0 && g.statusAt(i) == StatusAlive && g.age(i) <= g.cleanupNow() {
		g.probes.AcksSent++
		g.env.Send(from, GossipProbeAck{Seq: m.Seq, Subject: m.Subject, Beat: g.beats[i]})
		help.tableSent, help.tableBeat = true, g.beats[i]
	}
	// Requests about one suspect share this node's ping and its
	// requests to helpers of its own, and all get the answer: each node
	// then sends a probe on at most once per suspect and ProbeTimeout,
	// however many hops a request may travel and however many members
	// ask (every member of a group runs a probe when a node crashes).
	// (A ping is shared while its answer may still come; a pass-on
	// only by requests that may go no farther than it did.)
	for _, h := range g.helps {
		if h.subject != m.Subject {
			continue
		}
		if now-h.pingAt < g.pingTimeout() {
			help.pingSeq, help.pingAt = h.pingSeq, h.pingAt
		}
		if h.subSeq != 0 && m.Hops > 0 && h.subHops >= m.Hops-1 {
			help.subSeq, help.subHops = h.subSeq, h.subHops
			help.origin, help.originSeq = h.origin, h.originSeq
		}
	}
	if help.subSeq != 0 {
		// The shared pass-on asked nobody of the requesters it served
		// (each was the one to go round): those other than this
		// requester are helpers for this one. They are asked to ping
		// and answer, not to pass on: each runs a pass-on of its own
		// already, and one sent on with hops left came back round
		// through the helpers that shared it, for as long as the
		// suspect stayed silent.
		told := g.toldOf(help.subSeq, now)
		for _, h := range g.helps {
			if h.subSeq == help.subSeq && h.requester != from && !slices.Contains(told, h.requester) {
				told = append(told, h.requester)
				g.told = append(g.told, gossipTold{subSeq: help.subSeq, id: h.requester, until: h.until})
				g.probes.Requests++
				g.env.Send(h.requester, GossipProbeReq{Seq: help.subSeq, Subject: m.Subject, Origin: help.origin, OriginSeq: help.originSeq})
			}
		}
	}
	if help.pingSeq == 0 {
		help.pingSeq, help.pingAt = g.nextSeq(), now
		g.env.Send(m.Subject, GossipPing{Seq: help.pingSeq})
	}
	if m.Hops > 0 && help.subSeq == 0 {
		help.subSeq, help.subHops = g.nextSeq(), m.Hops-1
		help.origin, help.originSeq = origin, originSeq
		help.asked = g.askHelpers(m.Subject, from, help.subSeq, m.Hops-1, g.cfg.IndirectProbes, nil, origin, originSeq)
		if len(help.asked) > 0 {
			g.env.SetTimer(g.cfg.probeTimeout()/2, gossipHelpWave{subSeq: help.subSeq})
		}
	}
	g.helps = append(g.helps, help)
}

// gossipTold is a requester of a shared pass-on that was asked to help
// with it (see helpProbe), until the pass-on's help ends: each is asked
// once, or requests would go round between helpers for as long as the
// probe lasts.
type gossipTold struct {
	subSeq uint32
	id     core.NodeID
	until  time.Duration
}

// gossipOrigin is a suspecting member's request that this node told the
// suspect of as a helper, or answered as the suspect, until its
// ProbeTimeout ends (firstOf).
type gossipOrigin struct {
	origin core.NodeID
	seq    uint32
	until  time.Duration
}

// firstOf reports whether origin's request seq is new to this node, and
// remembers it for a ProbeTimeout: a helper tells the suspect of it once,
// and the suspect answers it once, however many helpers pass it on.
func (g *Gossip) firstOf(origin core.NodeID, seq uint32) bool {
	now := g.env.Now()
	g.origins = slices.DeleteFunc(g.origins, func(o gossipOrigin) bool { return o.until < now })
	if slices.ContainsFunc(g.origins, func(o gossipOrigin) bool { return o.origin == origin && o.seq == seq }) {
		return false
	}
	g.origins = append(g.origins, gossipOrigin{origin: origin, seq: seq, until: now + g.cfg.probeTimeout()})
	return true
}

// toldOf returns the members asked to help with pass-on subSeq, and
// forgets what has ended. It is called once per request: called per
// requester of a shared pass-on, its scans made each request cost the
// product of the two lists, which a storm of requests about starved
// members grows to thousands of entries each.
func (g *Gossip) toldOf(subSeq uint32, now time.Duration) []core.NodeID {
	g.told = slices.DeleteFunc(g.told, func(t gossipTold) bool { return t.until < now })
	var ids []core.NodeID
	for _, t := range g.told {
		if t.subSeq == subSeq {
			ids = append(ids, t.id)
		}
	}
	return ids
}

// helpWave is a pass-on's second wave: half way through, while no
// helper of this node's has reached the suspect for the requests that
// share it, it asks up to gossipSecondWave·IndirectProbes more members
// (the first were drawn while many members doubted each other, as a
// partition makes every member on one side suspect those on the other
// at once, and may all have been cut off from the suspect).
func (g *Gossip) helpWave(subSeq uint32) {
	now := g.env.Now()
	for k := range g.helps {
		h := &g.helps[k]
		if h.subSeq != subSeq || h.until < now {
			continue
		}
		g.askHelpers(h.subject, h.requester, subSeq, h.subHops, gossipSecondWave*g.cfg.IndirectProbes, h.asked, h.origin, h.originSeq)
		for j := range g.helps {
			if g.helps[j].subSeq == subSeq {
				g.helps[j].asked = nil
			}
		}
		return
	}
}

// helpsFromTable tells the requests this node is helping with of the
// young heartbeats its table now holds of their suspects.
func (g *Gossip) helpsFromTable() {
	for k := 0; k < len(g.helps); k++ {
		h := g.helps[k]
		i := g.pos(h.subject)
		if i < 0 || (h.tableSent && g.beats[i] <= h.tableBeat) || 2*g.age(i) > g.cleanup {
			continue
		}
		g.tellHelps(h.subject, g.beats[i], false)
	}
}

// tellHelps answers the requests about subject this node is still
// helping with when it learns by other means that subject is alive: its
// own ping or probe got an answer (pong), or a fresher heartbeat of it
// arrived (a table answer, which the requester weighs as any other).
// A helper whose own suspicion of the subject was cleared meanwhile
// thus passes the news on rather than leave its requesters to their
// verdict.
func (g *Gossip) tellHelps(subject core.NodeID, beat uint32, pong bool) {
	now := g.env.Now()
	kept := g.helps[:0]
	for _, h := range g.helps {
		if h.subject != subject || h.until < now {
			if h.until >= now {
				kept = append(kept, h)
			}
			continue
		}
		if pong || !h.tableSent || beat > h.tableBeat {
			if !pong {
				h.tableSent, h.tableBeat = true, beat
			}
			g.probes.AcksSent++
			g.env.Send(h.requester, GossipProbeAck{Seq: h.reqSeq, Subject: subject, Beat: beat, Pong: pong})
		}
		if !pong {
			kept = append(kept, h)
		}
	}
	clear(g.helps[len(kept):])
	g.helps = kept
}

// relayAnswer passes a suspect's own answer on to its requester.
func (g *Gossip) relayAnswer(from core.NodeID, m GossipProbeRelay) {
	if m.To == g.self || m.To == from {
		return
	}
	g.probes.AcksSent++
	g.env.Send(m.To, GossipProbeAck{Seq: m.Seq, Subject: from, Beat: m.Beat, Pong: true})
}

// relayAck passes an answer to a request this node passed on back to the
// request's sender, and reports whether m was one. An answer from a pong
// completes the help; a table answer may be followed by one.
func (g *Gossip) relayAck(from core.NodeID, m GossipProbeAck) bool {
	now := g.env.Now()
	found := false
	kept := g.helps[:0]
	for _, h := range g.helps {
		if h.subSeq == 0 || h.subSeq != m.Seq || h.subject != m.Subject {
			kept = append(kept, h)
			continue
		}
		found = true
		// Helpers that asked each other (requests about one suspect
		// share a node's pass-on) would pass a table answer back and
		// forth for ever: it goes on only if newer than the last one
		// passed on for this request, and never back to where it came
		// from.
		if h.until >= now && h.requester != from && (m.Pong || !h.tableSent || m.Beat > h.tableBeat) {
			if !m.Pong {
				h.tableSent, h.tableBeat = true, m.Beat
			}
			g.probes.AcksSent++
			g.env.Send(h.requester, GossipProbeAck{Seq: h.reqSeq, Subject: m.Subject, Beat: m.Beat, Pong: m.Pong})
		}
		if !m.Pong && h.until >= now {
			kept = append(kept, h)
		}
	}
	clear(g.helps[len(kept):])
	g.helps = kept
	return found
}

// helpedPong answers the requester of the probe that pong seq from from
// completes, and reports whether there was one.
func (g *Gossip) helpedPong(from core.NodeID, seq uint32) bool {
	now := g.env.Now()
	found := false
	g.helps = slices.DeleteFunc(g.helps, func(h gossipHelp) bool {
		if h.subject != from || h.pingSeq != seq {
			return false
		}
		found = true
		if h.until < now {
			return true // too late: the requester has decided
		}
		var beat uint32
		if i := g.pos(from); i >= 0 {
			beat = g.beats[i]
		}
		g.probes.AcksSent++
		g.env.Send(h.requester, GossipProbeAck{Seq: h.reqSeq, Subject: from, Beat: beat, Pong: true})
		return true
	})
	return found
}

// probeAnswered ends the consensus phase that asked for m if m proves the
// suspect alive: it answered a helper's ping, or the helper holds a newer
// heartbeat of it than the one the suspicion began with. The suspect is
// then unreachable from here; as a pong does, the answer gives it a fresh
// T_cleanup.
func (g *Gossip) probeAnswered(m GossipProbeAck) {
	for k := range g.watches {
		w := &g.watches[k]
		if w.probeSeq != m.Seq || w.id != m.Subject || w.status != StatusConsensus {
			continue
		}
		i := int(w.pos)
		if !m.Pong {
			// Only a young heartbeat is news of the living: after a
			// crash, a node that heard from nobody for a while holds the
			// dead node's heartbeat a few rounds older than others do.
			if m.Beat <= w.beat || 2*g.ageOf(m.Beat) > g.cleanup {
				return
			}
			g.beats[i] = max(g.beats[i], m.Beat)
		}
		g.clearWatch(k)
		g.grace(i)
		g.tellHelps(m.Subject, g.beats[i], m.Pong)
		g.probes.IndirectAlive++
		if !slices.Contains(g.unreachable, m.Subject) {
			g.unreachable = append(g.unreachable, m.Subject)
		}
		return
	}
}

// probeExpired is the end of an indirect probe's time: a consensus phase
// whose pings are all unanswered now declares its suspect failed.
func (g *Gossip) probeExpired(seq uint32) {
	for k := range g.watches {
		w := &g.watches[k]
		if w.probeSeq != seq {
			continue
		}
		w.probeSeq = 0
		if w.status == StatusConsensus && w.seq == 0 && int(w.attempts) >= g.cfg.PingAttempts {
			g.verdict(w)
		}
		return
	}
}

// Unreachable returns the members, in id order, whose last proof of life
// came through another member's indirect probe: alive, but no message from
// them has reached this node since. Routing may use this to send through
// another member.
func (g *Gossip) Unreachable() []core.NodeID {
	out := slices.DeleteFunc(slices.Clone(g.unreachable), func(id core.NodeID) bool { return g.pos(id) < 0 })
	slices.Sort(out)
	return out
}

// ProbeStats returns the counters of the indirect probes so far.
func (g *Gossip) ProbeStats() GossipProbeStats { return g.probes }
