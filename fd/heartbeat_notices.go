package fd

// The heartbeat detector's notices: what it reports upward (suspected,
// unsuspected, failed, recovered), the suspicion notices it broadcasts and
// acknowledges, and the refutation of a suspicion of itself.

import (
	"math/bits"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// hbPending is a notice awaiting its acknowledgement.
type hbPending struct {
	to    core.NodeID
	tries uint8
	n     HeartbeatNotice
	due   time.Duration // next retransmission
	every time.Duration // a helper's retransmission period (0: back-off)
}

// hbRetryTimer is the timer of the notice retransmissions.
type hbRetryTimer struct{}

// touch records a message from r received at time at: it refreshes r's
// deadline and clears a suspicion or failure.
func (h *HeartbeatDetector) touch(r *hbPeer, at time.Duration) {
	if at > r.lastRecv {
		h.measure(r, at)
		r.lastRecv = at
	}
	r.flags &^= hbProbing
	// The link was down, or looked it, when we last announced on it (a
	// demotion, when we suspected a monitor): if the announcement was
	// lost, r keeps waiting for heartbeats we no longer send.
	lost := r.viaAt > 0 || r.state == HeartbeatSuspected && r.toldAt >= r.mark
	r.viaAt, r.probeUntil = 0, 0
	if lost && r.flags&(hbConn|hbMonitor) != 0 && r.sentNext > 0 && r.toldAt < at {
		h.beat(r)
		h.schedule(r)
	}
	switch r.state {
	case HeartbeatAlive:
		return
	case HeartbeatSuspected:
		h.refuted(r)
		r.state = HeartbeatAlive
		h.stats.Unsuspicions++
		h.env.Emit(core.Unsuspected{Node: r.id})
	case HeartbeatFailed:
		h.refuted(r)
		r.state = HeartbeatAlive
		h.stats.Recoveries++
		h.env.Emit(core.Recovered{Node: r.id})
	}
	if r.flags&hbGossipSuspect != 0 {
		r.flags |= hbTell
	}
	h.schedule(r)
	h.chooseMonitors(false)
}

// tell sends r the suspicion that others may still hold of it, if touch
// found one, so that it refutes (a restarted process learns here that it
// was declared failed). It is not sent if what r sent was its refutation.
func (h *HeartbeatDetector) tell(r *hbPeer) {
	if r.flags&hbTell == 0 {
		return
	}
	r.flags &^= hbTell
	if r.flags&hbGossipSuspect != 0 {
		h.sendNotice(r.id, HeartbeatNotice{Subject: r.id, Inc: r.gInc})
	}
}

// suspect starts suspecting r. A suspicion of our own (local) is
// broadcast, and sent to r itself so that it refutes if it is alive.
func (h *HeartbeatDetector) suspect(r *hbPeer, local bool) {
	if r.state != HeartbeatAlive {
		return
	}
	r.state = HeartbeatSuspected
	r.mark = h.env.Now()
	r.pingAt = r.mark
	r.flags &^= hbProbing | hbAccused | hbRefused
	r.probeUntil, r.gapHeld = 0, false
	if local {
		r.flags |= hbAccused
	}
	h.stats.Suspicions++
	h.env.Emit(core.Suspected{Node: r.id})
	if local {
		h.stats.Accusations++
		n := HeartbeatNotice{Subject: r.id, Inc: r.gInc}
		if r.flags&hbGossipSuspect == 0 {
			r.flags |= hbGossipSuspect
			h.forward(n, core.None)
		}
		h.sendNotice(r.id, n)
		h.probeIndirect(r)
	}
	if r.flags&hbMonitor != 0 {
		h.demote(r)
		h.chooseMonitors(false)
	}
	h.schedule(r)
}

// fail declares r failed: it stayed suspected for T_broken.
func (h *HeartbeatDetector) fail(r *hbPeer) {
	r.state = HeartbeatFailed
	if h.leavers.has(r.id) {
		return // it finished: the membership excludes it without a verdict
	}
	h.stats.Failures++
	h.env.Emit(core.Failed{Node: r.id})
}

// notice handles a broadcast notice: applied and forwarded once if it is
// newer than what we knew of its subject; a suspicion of ourselves is
// refuted.
func (h *HeartbeatDetector) notice(from core.NodeID, n HeartbeatNotice) {
	h.stats.NoticesReceived++
	h.stats.AcksSent++
	h.send(from, HeartbeatNoticeAck(n))
	if n.Subject == h.self {
		switch {
		case !n.Alive && n.Inc >= h.inc:
			h.inc = n.Inc + 1
			h.refute(from)
		case !n.Alive && (h.refutedAt < 0 || h.env.Now()-h.refutedAt >= h.cfg.Broken):
			// A suspicion of an older incarnation. Whoever sent it
			// never learnt the newer one, and neither may others: the
			// processes that saw this process leave the view and come
			// back forgot what they knew of it. Refute it with the
			// current incarnation, which every process that already
			// has it drops unforwarded. Copies within T_broken of a
			// refutation (the other monitors' notices of the same
			// silence) are covered by it.
			h.refute(from)
		case !n.Alive:
			// Covered by the last refutation, unless the teller is
			// the way out of a partial partition: it gets it.
			h.tellAlive(from)
		case n.Alive && n.Inc > h.inc:
			h.inc = n.Inc
		}
		if r := h.find(from); !n.Alive && r != nil && r.flags&(hbConn|hbMonitor) != 0 {
			// A suspicion of us comes from the process that timed out
			// (forwarders skip the subject): it may have missed the
			// heartbeat announcing what to expect from us. Repeat it.
			h.beat(r)
			h.schedule(r)
		} else if !n.Alive && (r == nil || r.sentNext == 0) {
			// We owe it nothing, and it may still wait for heartbeats:
			// the demotion, or the closing of the link, that told it
			// otherwise can be lost on a link that was down, and it
			// would accuse us after every message of ours for ever.
			// Tell it to expect nothing.
			h.stats.InsuranceSent++
			h.send(from, HeartbeatMsg{Next: 0})
		}
		return
	}
	if h.indexOf(n.Subject) < 0 {
		return
	}
	r := h.find(n.Subject)
	var inc uint64
	suspected := false
	if r != nil {
		inc, suspected = r.gInc, r.flags&hbGossipSuspect != 0
	}
	if n.Inc < inc || n.Inc == inc && (n.Alive || suspected) {
		return // not newer
	}
	if r == nil {
		r, _ = h.findOrCreate(n.Subject)
	}
	r.gInc = n.Inc
	teller := r.teller
	r.teller = core.None
	if n.Alive {
		r.flags &^= hbGossipSuspect
		// The subject spoke: as good as a message from it, except that
		// there is nothing left to tell it.
		r.lastRecv = max(r.lastRecv, h.env.Now())
		r.flags &^= hbProbing
		r.probeUntil = 0
		switch r.state {
		case HeartbeatSuspected:
			if r.flags&hbAccused != 0 && h.cfg.IndirectProbes > 0 {
				// Our own timeout, and the refutation came around
				// the link rather than over it: r is unreachable
				// from here, and its next silence is rechecked, not
				// suspected again (recheckIndirect).
				r.viaAt = h.env.Now()
			}
			h.refuted(r)
			r.state = HeartbeatAlive
			h.stats.Unsuspicions++
			h.env.Emit(core.Unsuspected{Node: r.id})
		case HeartbeatFailed:
			h.refuted(r)
			r.state = HeartbeatAlive
			h.stats.Recoveries++
			h.env.Emit(core.Recovered{Node: r.id})
		}
		h.chooseMonitors(false)
	} else {
		r.flags |= hbGossipSuspect
		r.teller = from
		h.suspect(r, false)
		if h.cfg.IndirectProbes > 0 && r.state == HeartbeatSuspected {
			// Every member that still reaches the suspect makes it
			// refute (its pong is a message from it: touch, then
			// tell): the accuser's own notice to the suspect
			// crossed the link that may be down.
			h.reping(r)
		}
	}
	h.forward(n, from)
	if n.Alive && h.cfg.IndirectProbes > 0 && teller != core.None && teller != from && teller != n.Subject && !h.forwardsTo(n, from, teller) {
		// The refutation goes back the way the suspicion came: the
		// teller reached us, and may reach nobody else who hears it.
		h.sendNotice(teller, n)
	}
	h.schedule(r)
}

// refute broadcasts that this process is alive at its incarnation. With
// indirect probes, the process that told it of the suspicion (teller)
// gets the refutation too, and forwards it: it reached this process,
// which may reach few others (a partial partition), and the notice must
// find a way out.
func (h *HeartbeatDetector) refute(teller core.NodeID) {
	h.stats.Refutations++
	h.refutedAt = h.env.Now()
	h.forward(HeartbeatNotice{Subject: h.self, Inc: h.inc, Alive: true}, core.None)
	h.tellAlive(teller)
}

// tellAlive sends teller, with indirect probes on, this process's current
// refutation, unless forward already sent it there.
func (h *HeartbeatDetector) tellAlive(teller core.NodeID) {
	if h.cfg.IndirectProbes == 0 || teller == core.None || teller == h.self || h.forwardTarget(teller) || h.indexOf(teller) < 0 {
		return
	}
	h.sendNotice(teller, HeartbeatNotice{Subject: h.self, Inc: h.inc, Alive: true})
}

// forwardTarget reports whether forward sends this process's notices to
// id.
func (h *HeartbeatDetector) forwardTarget(id core.NodeID) bool {
	return h.forwardsTo(HeartbeatNotice{Subject: h.self}, core.None, id)
}

// forwardsTo reports whether forward sends n, which came from from, to id.
func (h *HeartbeatDetector) forwardsTo(n HeartbeatNotice, from, id core.NodeID) bool {
	var buf [hbMaxFanout]core.NodeID
	return slices.Contains(h.forwardTargets(n.Subject, from, &buf), id)
}

// hbMaxFanout bounds NoticeFanout (and so a notice's forward targets).
const hbMaxFanout = 32

// forwardTargets returns, in buf, the members forward sends a notice
// about subject that came from from to: those at distances 1, 2, 4, …
// after this process in the member list, except the subject and from.
// With indirect probes a target that is the subject, or that this
// process holds failed, is replaced by the next member after it that is
// none of these and no other target, and one it suspects gets such a
// stand-in besides: otherwise a member whose targets are the subject and
// the dead reaches nobody, and a subject's refutation, on a partial
// partition, may never reach the member that accused it.
func (h *HeartbeatDetector) forwardTargets(subject, from core.NodeID, buf *[hbMaxFanout]core.NodeID) []core.NodeID {
	out := buf[:0]
	cnt := len(h.members)
	if cnt < 2 {
		return out
	}
	fan := h.cfg.NoticeFanout
	if fan == 0 {
		fan = bits.Len(uint(cnt - 1)) // ⌈log2 cnt⌉
	}
	base := h.pos
	if base < 0 {
		base = cnt - 1
	}
	planned := func(e int) bool { return e&(e-1) == 0 && bits.Len(uint(e)) <= fan }
	state := func(id core.NodeID) HeartbeatPeerState {
		if r := h.find(id); r != nil && h.cfg.IndirectProbes > 0 {
			return r.state
		}
		return HeartbeatAlive
	}
	usable := func(id core.NodeID) bool {
		return id != h.self && id != from && id != subject && !slices.Contains(out, id) && state(id) != HeartbeatFailed
	}
	for j, d := 0, 1; j < fan && d < cnt; j, d = j+1, d*2 {
		to := h.members[(base+d)%cnt]
		if usable(to) {
			out = append(out, to)
			if state(to) == HeartbeatAlive {
				continue
			}
		}
		if h.cfg.IndirectProbes == 0 || to == h.self || to == from && to != subject {
			continue
		}
		// The subject, or a member held failed or suspected (which
		// keeps its copy): the next member after it stands in.
		for e := d + 1; e < cnt; e++ {
			if c := h.members[(base+e)%cnt]; !planned(e) && usable(c) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// forward sends n, which came from from, to its forward targets.
func (h *HeartbeatDetector) forward(n HeartbeatNotice, from core.NodeID) {
	var buf [hbMaxFanout]core.NodeID
	for _, to := range h.forwardTargets(n.Subject, from, &buf) {
		h.sendNotice(to, n)
	}
}

// sendNotice sends n to to and keeps it until acknowledged.
func (h *HeartbeatDetector) sendNotice(to core.NodeID, n HeartbeatNotice) {
	h.sendNoticeEvery(to, n, 0)
}

// sendNoticeEvery sends n to to and keeps it until acknowledged,
// retransmitted every period (0: with back-off from T_timeout).
func (h *HeartbeatDetector) sendNoticeEvery(to core.NodeID, n HeartbeatNotice, every time.Duration) {
	h.send(to, n)
	h.stats.NoticesSent++
	if every > 0 && slices.ContainsFunc(h.pending, func(p hbPending) bool { return p.to == to && p.n == n }) {
		return
	}
	due := h.env.Now() + h.cfg.Timeout
	if every > 0 {
		due = h.env.Now() + every
	}
	h.pending = append(h.pending, hbPending{to: to, n: n, due: due, every: every})
	h.armRetry(due)
}

// acked forgets the pending notice n to from.
func (h *HeartbeatDetector) acked(from core.NodeID, n HeartbeatNotice) {
	h.pending = slices.DeleteFunc(h.pending, func(p hbPending) bool { return p.to == from && p.n == n })
}

// retry retransmits the notices whose acknowledgement is overdue, with
// exponential back-off from T_timeout up to T_insurance, as long as they
// are worth it: the recipient is a member not declared failed and the
// notice is still the newest about its subject.
func (h *HeartbeatDetector) retry() {
	now := h.env.Now()
	next := time.Duration(-1)
	kept := h.pending[:0]
	for _, p := range h.pending {
		if p.due <= now {
			if !h.stillPending(p) {
				continue
			}
			h.send(p.to, p.n)
			h.stats.NoticesResent++
			p.tries = min(p.tries+1, 30)
			p.due = now + min(h.cfg.Timeout<<p.tries, h.cfg.Insurance)
			if p.every > 0 {
				p.due = now + p.every
			}
		}
		kept = append(kept, p)
		if next < 0 || p.due < next {
			next = p.due
		}
	}
	clear(h.pending[len(kept):])
	h.pending = kept
	if d := h.passOn(now); d >= 0 && (next < 0 || d < next) {
		next = d
	}
	if next >= 0 {
		h.armRetry(next)
	}
}

func (h *HeartbeatDetector) stillPending(p hbPending) bool {
	if h.indexOf(p.to) < 0 {
		return false
	}
	if r := h.find(p.to); r != nil && r.state == HeartbeatFailed {
		return false
	}
	if p.n.Subject == h.self {
		return p.n.Alive && p.n.Inc == h.inc
	}
	if p.every > 0 {
		return h.helping(p.n.Subject)
	}
	r := h.find(p.n.Subject)
	return r != nil && r.gInc == p.n.Inc && (r.flags&hbGossipSuspect != 0) == !p.n.Alive
}

// armRetry makes the retransmission timer fire no later than due.
func (h *HeartbeatDetector) armRetry(due time.Duration) {
	if h.retryTimer != 0 {
		if h.retryAt <= due {
			return
		}
		h.env.CancelTimer(h.retryTimer)
	}
	now := h.env.Now()
	h.retryTimer = h.env.SetTimer(max(due-now, 0), hbRetryTimer{})
	h.retryAt, h.retryFires = due, max(due, now)
	h.armed(h.retryFires)
}

// probe pings id on a transport hint.
func (h *HeartbeatDetector) probe(id core.NodeID) {
	r := h.connect(id)
	if r == nil || r.flags&hbProbing != 0 {
		return
	}
	h.send(id, HeartbeatPing{})
	h.stats.PingsSent++
	if r.state == HeartbeatAlive {
		r.flags |= hbProbing
		r.mark = h.env.Now()
	}
	h.schedule(r)
}
