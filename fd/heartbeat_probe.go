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
	recheck            bool
	hops               uint8         // the request's Hops
	passAt             time.Duration // when to pass the request on if subject stays unheard (0: never, or done)
}

// hbProbeHops is the Hops of the requests a suspicion or a recheck sends:
// passed on once, so that a suspect two hops from the requester's
// helpers is reached.
const hbProbeHops = 1

// verdictDue is when suspected r is declared failed: T_broken as
// brokenDue says, and never before the indirect probe of a suspicion of
// our own has had its ProbeTimeout.
func (h *HeartbeatDetector) verdictDue(r *hbPeer) time.Duration {
	return max(h.holdDue(r), r.probeUntil)
}

// holdDue is when suspected r's wait for a refutation ends (brokenDue,
// or later for this process's own input gap, gapHold, or while r's link
// answers, answerHold), the indirect probes aside.
func (h *HeartbeatDetector) holdDue(r *hbPeer) time.Duration {
	return max(h.brokenDue(r), h.gapHold(r), h.answerHold(r))
}

// probeIndirect asks up to IndirectProbes random members to reach r on
// its behalf (askHelpers says which first). Why other members
// and not a second ping: the silence may be the link's, not r's (a
// partial partition, a one-way cut), and a member that still reaches r
// both proves r alive and makes r refute the suspicion everywhere.
// Members heard from within the last T_interval + T_timeout are drawn
// first: a process cut off from most others must ask the few it still
// reaches, or neither its requests nor their answers get through. Half
// way through ProbeTimeout, with no answer yet, a second wave asks more
// (secondWave).
func (h *HeartbeatDetector) probeIndirect(r *hbPeer) {
	r.probeUntil, r.waved = 0, false
	if h.cfg.IndirectProbes == 0 || h.askHelpers(probeReq(r, false), core.None, h.cfg.IndirectProbes, true) == 0 {
		return
	}
	r.probeUntil = h.env.Now() + h.cfg.probeTimeout()
}

// confirm makes the suspicion of r that this process only heard of its
// own: r's deadline here passed as well (evidenceDue). Like a suspicion
// that began here, it asks helpers to reach r and waits for them before
// the verdict (probeIndirect, verdictDue). The silence may be the
// link's, not r's, and r's refutation need not come here: it follows
// the notices' fan and the way back to each teller, neither of which
// has to pass through a member cut off from r. Without the probe such a
// member would declare r failed a monitor's T_broken after the
// suspicion, however well r's helpers reach it.
func (h *HeartbeatDetector) confirm(r *hbPeer) {
	r.flags |= hbAccused
	if r.probeUntil == 0 {
		h.probeIndirect(r)
	}
}

// hbSecondWave is how many more helpers, in IndirectProbes, the second
// wave of an indirect probe asks.
const hbSecondWave = 4

// waveDue is when an unanswered indirect probe of r asks more helpers:
// half way through its ProbeTimeout.
func (h *HeartbeatDetector) waveDue(r *hbPeer) (time.Duration, bool) {
	if r.state != HeartbeatSuspected || r.probeUntil == 0 || r.waved {
		return 0, false
	}
	return r.probeUntil - h.cfg.probeTimeout()/2, true
}

// secondWave asks up to hbSecondWave·IndirectProbes members (those heard
// from lately first, as always), since none of the first helpers has
// answered: they may all be cut off from the suspect, or from us.
func (h *HeartbeatDetector) secondWave(r *hbPeer) {
	r.waved = true
	h.askHelpers(probeReq(r, false), core.None, hbSecondWave*h.cfg.IndirectProbes, true)
}

// askHelpers sends up to k members other than req's subject and skip the
// request req, those heard from within the last T_interval + T_timeout
// first, those this process suspects or holds failed last (the link from
// them may be down while the link to them works), and returns how many it
// asked. For a suspicion of our own (own) made while nothing has arrived
// from anyone for T_interval, each helper gets a ping too: its pong, or
// its silence, tells whether this process's input works (heartbeat_gap.go).
func (h *HeartbeatDetector) askHelpers(req HeartbeatProbeReq, skip core.NodeID, k int, own bool) int {
	now := h.env.Now()
	var heard, other, doubted []core.NodeID
	for _, id := range h.members {
		if id == h.self || id == req.Subject || id == skip || id == core.None {
			continue
		}
		p := h.find(id)
		switch {
		case p != nil && p.state != HeartbeatAlive:
			doubted = append(doubted, id)
		case p != nil && now-p.lastRecv <= h.cfg.Interval+h.cfg.Timeout:
			heard = append(heard, id)
		default:
			other = append(other, id)
		}
	}
	rng := h.env.Rand()
	asked := 0
	ping := own && h.silent(now)
	for _, cand := range [][]core.NodeID{heard, other, doubted} {
		for i := 0; i < len(cand) && asked < k; i++ {
			j := i + rng.IntN(len(cand)-i)
			cand[i], cand[j] = cand[j], cand[i]
			h.send(cand[i], req)
			h.stats.ProbeRequests++
			asked++
			if ping {
				h.send(cand[i], HeartbeatPing{})
				h.stats.PingsSent++
				if h.gapPingAt <= h.inputAt {
					h.gapPingAt = now // the first since the last input
				}
			}
		}
	}
	return asked
}

// probeReq is the request this process sends helpers about r (a recheck
// asks them to ping r rather than to tell it of a suspicion).
func probeReq(r *hbPeer, recheck bool) HeartbeatProbeReq {
	return HeartbeatProbeReq{Subject: r.id, Inc: r.gInc, Recheck: recheck, Hops: hbProbeHops}
}

// helpProbe handles a request to reach subject: subject gets the
// suspicion, so that it refutes if alive (the requester's own notice
// may not have reached it: the link between them may be the one that
// is down), and the requester gets an answer when subject is heard. A
// recheck is not a suspicion: subject only gets a ping, which any
// process answers.
func (h *HeartbeatDetector) helpProbe(from core.NodeID, m HeartbeatProbeReq) {
	now := h.env.Now()
	if m.Subject == h.self {
		h.stats.ProbeAcksSent++
		h.send(from, HeartbeatProbeAck{Subject: m.Subject, Inc: m.Inc})
		return
	}
	if from == m.Subject {
		return // (the suspect need not be in our view: views differ while they change)
	}
	h.stats.ProbesHelped++
	h.helps = slices.DeleteFunc(h.helps, func(p hbHelp) bool {
		return p.until < now || p.requester == from && p.subject == m.Subject
	})
	// The requester's verdict may wait longer than ProbeTimeout (its
	// T_broken grows with its local health): an answer a little late
	// can still save the suspect, and costs nothing if it is too late.
	help := hbHelp{requester: from, subject: m.Subject, inc: m.Inc, until: now + 2*h.cfg.probeTimeout(), recheck: m.Recheck, hops: min(m.Hops, hbMaxProbeHops)}
	if help.hops > 0 {
		help.passAt = now + max(h.cfg.probeTimeout()/4, 1)
		h.armRetry(help.passAt)
	}
	h.helps = append(h.helps, help)
	if m.Recheck {
		// A lost ping or pong costs the subject a suspicion of the
		// requester's, which the full probe then settles.
		h.stats.PingsSent++
		h.send(m.Subject, HeartbeatPing{})
		return
	}
	// Repeated four times per ProbeTimeout until the suspect acknowledges:
	// one copy lost on a flaky link must not cost the suspect its place.
	h.sendNoticeEvery(m.Subject, HeartbeatNotice{Subject: m.Subject, Inc: m.Inc}, max(h.cfg.probeTimeout()/4, 1))
}

// helping reports whether a probe on another's behalf about subject is
// still running.
func (h *HeartbeatDetector) helping(subject core.NodeID) bool {
	now := h.env.Now()
	return slices.ContainsFunc(h.helps, func(p hbHelp) bool { return p.subject == subject && p.until >= now })
}

// heard answers the probes made on behalf of others about from, which
// just sent this process a message.
func (h *HeartbeatDetector) heard(from core.NodeID) { h.answerHelps(from, core.None) }

// answerHelps answers the probes made on behalf of others about subject,
// which was heard from, directly or by a helper of ours (via, which needs
// no answer of its own).
func (h *HeartbeatDetector) answerHelps(subject, via core.NodeID) {
	if len(h.helps) == 0 {
		return
	}
	now := h.env.Now()
	kept := h.helps[:0]
	for _, p := range h.helps {
		switch {
		case p.until < now:
		case p.subject == subject && p.requester == via:
		case p.subject == subject:
			h.stats.ProbeAcksSent++
			h.send(p.requester, HeartbeatProbeAck{Subject: p.subject, Inc: p.inc})
		default:
			kept = append(kept, p)
		}
	}
	clear(h.helps[len(kept):])
	h.helps = kept
}

// passOn passes on the requests made of this process whose subject it
// has not heard from since, a quarter of ProbeTimeout after they came,
// and returns when the next one falls due (-1: none). The subject may be
// cut off from this helper as from the requester and still reach others.
func (h *HeartbeatDetector) passOn(now time.Duration) time.Duration {
	next := time.Duration(-1)
	for i := range h.helps {
		p := &h.helps[i]
		if p.passAt == 0 || p.until < now {
			continue
		}
		if p.passAt > now {
			if next < 0 || p.passAt < next {
				next = p.passAt
			}
			continue
		}
		p.passAt = 0
		req := HeartbeatProbeReq{Subject: p.subject, Inc: p.inc, Recheck: p.recheck, Hops: p.hops - 1}
		h.stats.ProbesPassed += uint64(h.askHelpers(req, p.requester, h.cfg.IndirectProbes, false))
	}
	return next
}

// probeAnswered handles a helper's answer: the suspect is alive and
// reachable from the helper. A suspicion this process holds that is
// still waiting for its verdict ends (the suspect's refutation, which the
// helper prompted, will clear it everywhere else), and so does a recheck;
// r is unreachable from here. That holds for a suspicion only heard of,
// too, whose answer came to a request this process passed on for the
// accuser: the refutation may never reach this process (the accuser's
// way back, which it follows, need not lead here), and the answer is as
// good a sign of life. A helper answers only after hearing from the
// suspect since the request, so a crashed one is never answered for.
func (h *HeartbeatDetector) probeAnswered(m HeartbeatProbeAck) {
	r := h.find(m.Subject)
	if r == nil || m.Inc < r.gInc || r.probeUntil == 0 && r.state != HeartbeatSuspected {
		return
	}
	now := h.env.Now()
	r.probeUntil = 0
	r.lastRecv = max(r.lastRecv, now) // a fresh deadline, as a refutation gives
	r.viaAt = now
	switch r.state {
	case HeartbeatAlive:
		h.stats.Rechecked++
	case HeartbeatSuspected:
		// Whether r stalled or the link from it is down, nobody here
		// heard from it for the suspicion's length: a stall that long
		// is to be expected again (refuted).
		h.refuted(r)
		r.state = HeartbeatAlive
		r.flags &^= hbProbing | hbAccused | hbRefused
		h.stats.IndirectAlive++
		h.stats.Unsuspicions++
		h.env.Emit(core.Unsuspected{Node: r.id})
		h.chooseMonitors(false)
	}
	h.schedule(r)
}

// recheckIndirect handles the silence of r, already proved alive by a
// helper while the link from it stays down (Unreachable): rather than
// suspect it again, and have every member hear of it and r refute it,
// once per T_interval + T_timeout for as long as the cut lasts, this
// process asks IndirectProbes helpers to ping r, and pings r itself in
// case the link came back. An answer renews r's deadline quietly; no
// answer within ProbeTimeout, or T_interval + T_timeout (as this process
// would wait for r itself) if longer, makes r suspected as any silent
// peer is (recvDue). The answer crosses four links and a busy helper,
// which on a loaded host can take longer than ProbeTimeout, and a recheck
// that gave up too soon would suspect r openly again. So a crash behind a
// cut link is declared by this process at most that much later than by
// the members that watch r directly.
func (h *HeartbeatDetector) recheckIndirect(r *hbPeer) {
	if h.askHelpers(probeReq(r, true), core.None, h.cfg.IndirectProbes, false) == 0 {
		h.suspect(r, true)
		return
	}
	r.probeUntil = h.env.Now() + max(h.cfg.probeTimeout(), h.cfg.Interval+h.timeout(r))
	h.stats.PingsSent++
	h.send(r.id, HeartbeatPing{})
}

// rechecking reports whether a recheck of r (recheckIndirect) is running.
func (h *HeartbeatDetector) rechecking(r *hbPeer) bool {
	return r.state == HeartbeatAlive && r.probeUntil > 0
}

// reprobeDue is when the suspicion of r, held past its indirect probe
// (its verdict waits for a refutation longer than ProbeTimeout: local
// health, the stalls remembered, settling, an input gap), asks helpers
// again: a new probe, of IndirectProbes helpers drawn afresh, starts
// T_interval + T_timeout after the last one started (or when it ended,
// if later), as long as it can end before the verdict would fall without
// it. The helpers of the first probe may all have been out of reach,
// behind a partition that heals during the hold, and a member that then
// reaches both sides may be the only way to the suspect if the direct
// link stays cut: the pings of reping take only that link, and the
// suspect's refutation reaches this process only after this process's
// notice, retransmitted with back-off, reaches it. The hold never
// moves the verdict: a probe that would end after it is not started,
// and whether it would is judged at the time it would start, never
// earlier than now. The hold itself moves while the suspicion lasts
// (the verdict's re-check adds its timer's lateness, input resumes, the
// local health changes): a probe that could not end in time when it fell
// due must not start once the hold has moved a little, from a due time
// already past, as a timer that fires at once for a deadline long gone,
// which the local health counts as the loop being that late, stretching
// T_broken and the hold again. A suspicion from a refused connection is
// not probed again either: it is held by nothing but T_broken, and no
// helper reaches a process that nothing listens for.
func (h *HeartbeatDetector) reprobeDue(r *hbPeer) (time.Duration, bool) {
	if h.cfg.IndirectProbes == 0 || r.state != HeartbeatSuspected || r.flags&hbAccused == 0 || r.flags&hbRefused != 0 || r.probeUntil == 0 {
		return 0, false
	}
	pt := h.cfg.probeTimeout()
	due := max(r.probeUntil, r.probeUntil-pt+h.cfg.Interval+h.cfg.Timeout, h.env.Now())
	if due+pt > h.holdDue(r) {
		return 0, false
	}
	return due, true
}

// reprobe asks IndirectProbes helpers again about held suspect r
// (reprobeDue), without a second wave: the next probe asks others.
func (h *HeartbeatDetector) reprobe(r *hbPeer) {
	h.stats.Reprobes++
	if h.askHelpers(probeReq(r, false), core.None, h.cfg.IndirectProbes, true) == 0 {
		return
	}
	r.probeUntil, r.waved = h.env.Now()+h.cfg.probeTimeout(), true
}

// repingDue is when suspected r is pinged again: every quarter of
// ProbeTimeout while the suspicion lasts, with indirect probes on. A link
// that was down when the suspicion began may come back before the
// verdict; the suspect's pong then makes this process tell it, and it
// refutes.
func (h *HeartbeatDetector) repingDue(r *hbPeer) (time.Duration, bool) {
	if h.cfg.IndirectProbes == 0 || r.state != HeartbeatSuspected {
		return 0, false
	}
	return r.pingAt + max(h.cfg.probeTimeout()/4, 1), true
}

// reping pings suspected r again (repingDue).
func (h *HeartbeatDetector) reping(r *hbPeer) {
	r.pingAt = h.env.Now()
	h.stats.PingsSent++
	h.send(r.id, HeartbeatPing{})
}

// Unreachable returns the members, in id order, whose last sign of life
// reached this process only through another member's indirect probe, or
// as a refutation that came round the link: alive, but the link from
// them is down. A message from one of them
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
