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

// gossipHelp is a ping this node sent on another's behalf.
type gossipHelp struct {
	requester, subject core.NodeID
	reqSeq, pingSeq    uint32
	until              time.Duration
}

// gossipProbeDeadline is the timer of an indirect probe's ProbeTimeout.
type gossipProbeDeadline struct{ seq uint32 }

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
	k := g.cfg.IndirectProbes
	if k == 0 {
		return
	}
	var cand []int
	for i := range g.members {
		if i == g.me || i == int(w.pos) || doubted(g.statusAt(i)) {
			continue
		}
		cand = append(cand, i)
	}
	if len(cand) == 0 {
		return
	}
	seq := g.nextSeq()
	rng := g.env.Rand()
	for i := range min(k, len(cand)) {
		j := i + rng.IntN(len(cand)-i)
		cand[i], cand[j] = cand[j], cand[i]
		g.probes.Requests++
		g.env.Send(g.members[cand[i]], GossipProbeReq{Seq: seq, Subject: w.id})
	}
	after := g.cfg.probeTimeout()
	w.probeSeq, w.probeUntil = seq, g.env.Now()+after
	g.env.SetTimer(after, gossipProbeDeadline{seq: seq})
}

// helpProbe pings the suspect of a request on the requester's behalf.
func (g *Gossip) helpProbe(from core.NodeID, m GossipProbeReq) {
	if m.Subject == g.self {
		g.probes.AcksSent++
		g.env.Send(from, GossipProbeAck{Seq: m.Seq, Subject: g.self, Beat: g.own})
		return
	}
	if g.pos(m.Subject) < 0 || from == m.Subject {
		return
	}
	now := g.env.Now()
	g.helps = slices.DeleteFunc(g.helps, func(h gossipHelp) bool { return h.until < now })
	g.probes.Helped++
	seq := g.nextSeq()
	g.helps = append(g.helps, gossipHelp{requester: from, subject: m.Subject, reqSeq: m.Seq, pingSeq: seq, until: now + g.cfg.probeTimeout()})
	g.env.Send(m.Subject, GossipPing{Seq: seq})
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
		g.env.Send(h.requester, GossipProbeAck{Seq: h.reqSeq, Subject: from, Beat: beat})
		return true
	}
	return false
}

// probeAnswered ends the consensus phase that asked for m: the suspect
// answered a helper, so it is alive, and unreachable from here. As a pong
// does, the answer gives it a fresh T_cleanup.
func (g *Gossip) probeAnswered(m GossipProbeAck) {
	for k := range g.watches {
		w := &g.watches[k]
		if w.probeSeq != m.Seq || w.id != m.Subject || w.status != StatusConsensus {
			continue
		}
		i := int(w.pos)
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

// heardFrom notes a message from id: it is reachable again.
func (g *Gossip) heardFrom(id core.NodeID) {
	if len(g.unreachable) > 0 {
		g.unreachable = slices.DeleteFunc(g.unreachable, func(x core.NodeID) bool { return x == id })
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
