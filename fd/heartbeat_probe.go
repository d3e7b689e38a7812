package fd

// The heartbeat detector's indirect probes: reachability is not liveness.
// A suspicion of its own (a timeout here) asks IndirectProbes other
// members to reach the suspect; the verdict waits for their answers.

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// hbHelp is a probe this process makes on another's behalf: it told
// subject that requester suspects it and answers requester as soon as
// anything from subject arrives, until until.
type hbHelp struct {
	requester, subject core.NodeID
	inc                uint64
	until              time.Duration
}

// verdictDue is when suspected r is declared failed: T_broken as
// brokenDue says, and never before the indirect probe of a suspicion of
// our own has had its ProbeTimeout.
func (h *HeartbeatDetector) verdictDue(r *hbPeer) time.Duration {
	return max(h.brokenDue(r), r.probeUntil)
}

// probeIndirect asks up to IndirectProbes random members, neither r nor
// ones this process doubts, to reach r on its behalf. Why other members
// and not a second ping: the silence may be the link's, not r's (a
// partial partition, a one-way cut), and a member that still reaches r
// both proves r alive and makes r refute the suspicion everywhere.
// Members heard from within the last T_interval + T_timeout are drawn
// first: a process cut off from most others must ask the few it still
// reaches, or neither its requests nor their answers get through.
func (h *HeartbeatDetector) probeIndirect(r *hbPeer) {
	r.probeUntil = 0
	k := h.cfg.IndirectProbes
	if k == 0 {
		return
	}
	now := h.env.Now()
	var heard, other []core.NodeID
	for _, id := range h.members {
		if id == h.self || id == r.id || id == core.None {
			continue
		}
		p := h.find(id)
		switch {
		case p != nil && p.state != HeartbeatAlive:
		case p != nil && now-p.lastRecv <= h.cfg.Interval+h.cfg.Timeout:
			heard = append(heard, id)
		default:
			other = append(other, id)
		}
	}
	if len(heard)+len(other) == 0 {
		return
	}
	rng := h.env.Rand()
	for _, cand := range [][]core.NodeID{heard, other} {
		for i := 0; i < len(cand) && k > 0; i, k = i+1, k-1 {
			j := i + rng.IntN(len(cand)-i)
			cand[i], cand[j] = cand[j], cand[i]
			h.send(cand[i], HeartbeatProbeReq{Subject: r.id, Inc: r.gInc})
			h.stats.ProbeRequests++
		}
	}
	r.probeUntil = now + h.cfg.probeTimeout()
}

// helpProbe handles a request to reach subject: subject gets the
// suspicion, so that it refutes if alive (the requester's own notice
// may not have reached it: the link between them may be the one that
// is down), and the requester gets an answer when subject is heard.
func (h *HeartbeatDetector) helpProbe(from core.NodeID, m HeartbeatProbeReq) {
	now := h.env.Now()
	if m.Subject == h.self {
		h.stats.ProbeAcksSent++
		h.send(from, HeartbeatProbeAck(m))
		return
	}
	if h.indexOf(m.Subject) < 0 || from == m.Subject {
		return
	}
	h.stats.ProbesHelped++
	h.helps = slices.DeleteFunc(h.helps, func(p hbHelp) bool {
		return p.until < now || p.requester == from && p.subject == m.Subject
	})
	h.helps = append(h.helps, hbHelp{requester: from, subject: m.Subject, inc: m.Inc, until: now + h.cfg.probeTimeout()})
	h.stats.NoticesSent++
	h.send(m.Subject, HeartbeatNotice{Subject: m.Subject, Inc: m.Inc})
}

// heard answers the probes made on behalf of others about from, which
// just sent this process a message.
func (h *HeartbeatDetector) heard(from core.NodeID) {
	if len(h.helps) == 0 {
		return
	}
	now := h.env.Now()
	kept := h.helps[:0]
	for _, p := range h.helps {
		switch {
		case p.until < now:
		case p.subject == from:
			h.stats.ProbeAcksSent++
			h.send(p.requester, HeartbeatProbeAck{Subject: p.subject, Inc: p.inc})
		default:
			kept = append(kept, p)
		}
	}
	clear(h.helps[len(kept):])
	h.helps = kept
}

// probeAnswered handles a helper's answer: the suspect is alive and
// reachable from the helper. A suspicion of ours that is still waiting
// for its verdict ends (the suspect's refutation, which the helper
// prompted, will clear it everywhere else); r is unreachable from here.
func (h *HeartbeatDetector) probeAnswered(m HeartbeatProbeAck) {
	r := h.find(m.Subject)
	if r == nil || r.state != HeartbeatSuspected || r.probeUntil == 0 || m.Inc < r.gInc {
		return
	}
	now := h.env.Now()
	r.state = HeartbeatAlive
	r.probeUntil = 0
	r.flags &^= hbProbing | hbAccused | hbRefused
	r.lastRecv = max(r.lastRecv, now) // a fresh deadline, as a refutation gives
	r.viaAt = now
	h.stats.IndirectAlive++
	h.stats.Unsuspicions++
	h.env.Emit(core.Unsuspected{Node: r.id})
	h.schedule(r)
	h.chooseMonitors(false)
}

// Unreachable returns the members, in id order, whose last sign of life
// reached this process only through another member's indirect probe:
// alive, but the link from them is down. A message from one of them
// removes it. Routing may use this to send through another member.
func (h *HeartbeatDetector) Unreachable() []core.NodeID {
	var out []core.NodeID
	for _, r := range h.peers {
		if r.viaAt > 0 && r.state == HeartbeatAlive {
			out = append(out, r.id)
		}
	}
	return out
}
