package fd

import "time"

// The heartbeat detector's input gaps: a process whose inputs all stop
// at once (nothing arrives from anyone) cannot tell from its silence
// alone whether the peers it watches died or whether what they sent
// waits unread: its inbox behind a state transfer it is catching up on,
// its reader starved on a loaded host while its timers fire on time, its
// host cut off. The local health measurement does not see it (the
// process is not late, its input is), and silence alone is no proof
// either: with k monitors a process hears from few peers, and when those
// die together (a host's ranks) it hears from nobody although its input
// works. So it asks: a suspicion of its own made while nothing has
// arrived from anyone for T_interval pings the members it asks to help
// (askHelpers), whose pongs come back within a round trip if its input
// works. With lateness awareness on, while nothing has arrived since
// the suspicion began, a ping is unanswered, and two or more of the
// peers it watches (the suspect among them) are overdue, the verdict is
// held, at most as long as settling holds one ((1 + LocalHealthMax)·
// T_broken + 2·stallCap after the suspicion); every probe asked again
// during the hold (reprobeDue) pings helpers drawn afresh. An answer
// within T_timeout of the ping ends the hold as if there had been none:
// the peers that went silent died, and the verdict falls when it would
// have. Input that resumes later ends an input gap: the suspect gets,
// from then, the time a live peer has to be heard at all (its interval +
// T_timeout) before the verdict, within the same limit, since its
// messages may be just behind the first ones; and a refutation of a
// suspicion made in the gap teaches the stall memory nothing (the
// suspect did not stall, this process's input did).
//
// A suspicion from a refused connection is not held (a stall does not
// close a port). A crash is declared as before by a process that hears
// from others, and by one whose pings are answered; only a process cut
// off from every member, or whose every pinged helper died with the
// suspects, declares later, within the limit.

// input records that a message arrived at now, and the input gap it
// ends (gapEnded).
func (h *HeartbeatDetector) input(now time.Duration) {
	if h.gapEnded(now) {
		h.gapFrom, h.gapTo = h.inputAt, now
		h.stats.InputGaps++
	}
	h.inputAt = now
}

// gapEnded reports whether a message arriving at now ends an input gap:
// nothing arrived for T_interval or longer, a ping to test the input
// went unanswered for more than T_timeout, and two or more watched
// peers were overdue (gapOverdue).
func (h *HeartbeatDetector) gapEnded(now time.Duration) bool {
	return h.health.on() && now-h.inputAt >= h.cfg.Interval && h.gapPingAt > h.inputAt &&
		now-h.gapPingAt > h.cfg.Timeout && h.gapOverdue(now)
}

// silent reports whether nothing has arrived from anyone for T_interval.
func (h *HeartbeatDetector) silent(now time.Duration) bool {
	return h.health.on() && now-h.inputAt >= h.cfg.Interval
}

// gapOverdue reports whether two or more peers that announced an
// interval (and are not held failed) have been silent at now for more
// than 1.25 times it: what a process receives stopped, not one sender.
func (h *HeartbeatDetector) gapOverdue(now time.Duration) bool {
	n := 0
	for _, p := range h.peers {
		if p.expect > 0 && p.state != HeartbeatFailed && now-p.lastRecv > p.expect+p.expect/4 {
			if n++; n >= 2 {
				return true
			}
		}
	}
	return false
}

// inGap reports whether the suspicion of r began during the last input
// gap, which has ended.
func (h *HeartbeatDetector) inGap(r *hbPeer) bool {
	return h.gapFrom <= r.mark && r.mark < h.gapTo
}

// gapHold is when the verdict on suspected r may fall at the earliest
// for this process's input gap (0: no hold): while a gap may be open
// (nothing arrived since the suspicion began, a ping sent since the
// last input is unanswered, and gapOverdue), the limit,
// (1 + LocalHealthMax)·T_broken + 2·stallCap after the suspicion; once
// a gap that began before the suspicion has ended, r's interval +
// T_timeout after its end, no later than the limit.
func (h *HeartbeatDetector) gapHold(r *hbPeer) time.Duration {
	if !h.health.on() || r.flags&hbRefused != 0 {
		return 0
	}
	limit := r.mark + h.cfg.Broken*time.Duration(1+h.cfg.LocalHealthMax) + 2*h.stallCap()
	switch {
	case h.inputAt <= r.mark:
		if h.gapPingAt > h.inputAt && h.gapOverdue(h.env.Now()) {
			return limit
		}
	case h.inGap(r):
		wait := h.cfg.Interval
		if r.expect > 0 {
			wait = r.expect
		}
		return min(h.gapTo+wait+h.timeout(r), limit)
	}
	return 0
}

// countGapHold counts, once per suspicion, a verdict on r that is due
// but for the input gap.
func (h *HeartbeatDetector) countGapHold(r *hbPeer, now time.Duration) {
	if !r.gapHeld && now >= max(h.brokenDue(r), r.probeUntil) && now < h.gapHold(r) {
		r.gapHeld = true
		h.stats.GapHeld++
	}
}
