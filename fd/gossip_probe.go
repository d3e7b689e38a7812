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
}

// gossipProbeHops is how many times a probe request is passed on: once,
// so that a suspect that only members the requester cannot reach still
// reach (two hops away) is found alive.
const gossipProbeHops = 1

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
	asked := g.askHelpers(w.id, core.None, seq, gossipProbeHops, g.cfg.IndirectProbes, nil)
	if len(asked) == 0 {
		return // nobody to go round a cut through
	}
	// The suspect itself is asked too: if only the link from it is down
	// and every path out of this node leads through it, its answer
	// comes back round the cut (GossipProbeRelay).
	g.probes.Requests++
	g.env.Send(w.id, GossipProbeReq{Seq: seq, Subject: w.id, Hops: gossipProbeHops})
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
		g.askHelpers(w.id, core.None, seq, gossipProbeHops, gossipSecondWave*g.cfg.IndirectProbes, w.asked)
		w.asked = nil
		return
	}
}

// askHelpers sends request seq about subject to up to k members that this node does not doubt, other than the subject,
// except and the members in skip, and returns those it asked. The members it heard
// from most recently come first (a node cut off from most others must ask
// the few it still reaches, or neither the requests nor the answers get
// through), then random ones, then, if k is not reached, members it
// doubts.
func (g *Gossip) askHelpers(subject, except core.NodeID, seq uint32, hops uint8, k int, skip []core.NodeID) []core.NodeID {
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
		g.env.Send(g.members[i], GossipProbeReq{Seq: seq, Subject: subject, Hops: hops})
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
		g.probes.AcksSent++
		g.env.Send(from, GossipProbeAck{Seq: m.Seq, Subject: g.self, Beat: g.own, Pong: true})
		if m.Hops > 0 {
			// The requester suspects us: its link from us may be down.
			// The answer goes round it too.
			sent := 0
			for _, id := range g.recent {
				if id != from && sent < g.cfg.IndirectProbes {
					sent++
					g.env.Send(id, GossipProbeRelay{To: from, Seq: m.Seq, Beat: g.own})
				}
			}
		}
		return
	}
	if from == m.Subject {
		return
	}
	// The suspect need not be in this node's view (views differ while
	// they change, and a member cut off may hold an old one): any node
	// answers a ping. Only the table answer needs its entry.
	i := g.pos(m.Subject)
	if i >= 0 && g.statusAt(i) == StatusAlive && g.age(i) <= g.cleanupNow() {
		g.probes.AcksSent++
		g.env.Send(from, GossipProbeAck{Seq: m.Seq, Subject: m.Subject, Beat: g.beats[i]})
	}
	now := g.env.Now()
	g.helps = slices.DeleteFunc(g.helps, func(h gossipHelp) bool { return h.until < now })
	g.probes.Helped++
	help := gossipHelp{requester: from, subject: m.Subject, reqSeq: m.Seq, pingSeq: g.nextSeq(), until: now + g.cfg.probeTimeout()}
	g.env.Send(m.Subject, GossipPing{Seq: help.pingSeq})
	if m.Hops > 0 {
		help.subSeq = g.nextSeq()
		g.askHelpers(m.Subject, from, help.subSeq, m.Hops-1, g.cfg.IndirectProbes, nil)
	}
	g.helps = append(g.helps, help)
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
func (g *Gossip) relayAck(m GossipProbeAck) bool {
	for k, h := range g.helps {
		if h.subSeq == 0 || h.subSeq != m.Seq || h.subject != m.Subject {
			continue
		}
		if h.until >= g.env.Now() {
			g.probes.AcksSent++
			g.env.Send(h.requester, GossipProbeAck{Seq: h.reqSeq, Subject: m.Subject, Beat: m.Beat, Pong: m.Pong})
		}
		if m.Pong || h.until < g.env.Now() {
			g.helps = slices.Delete(g.helps, k, k+1)
		}
		return true
	}
	return false
}

// helpedPong answers the requester of the probe that pong seq from from
// completes, and reports whether there was one.
func (g *Gossip) helpedPong(from core.NodeID, seq uint32) bool {
	for k, h := range g.helps {
		if h.subject != from || h.pingSeq != seq {
			continue
		}
		g.helps = slices.Delete(g.helps, k, k+1)
		if h.until < g.env.Now() {
			return true // too late: the requester has decided
		}
		var beat uint32
		if i := g.pos(from); i >= 0 {
			beat = g.beats[i]
		}
		g.probes.AcksSent++
		g.env.Send(h.requester, GossipProbeAck{Seq: h.reqSeq, Subject: from, Beat: beat, Pong: true})
		return true
	}
	return false
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
			w.status = StatusFailed
			g.env.Emit(core.Failed{Node: w.id})
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
