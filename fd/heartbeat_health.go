package fd

import (
	"math"
	"time"
)

// The heartbeat detector's local health and adaptive timeouts (see
// health.go and [HeartbeatConfig.LocalHealthMax]).

// timeout is the grace r gets after the interval it announced: T_timeout
// times this process's local health factor, or twice r's measured slack
// when r has been that irregular, at most (1 + LocalHealthMax)·T_timeout
// (due adds the margin of recent stalls).
func (h *HeartbeatDetector) timeout(r *hbPeer) time.Duration {
	t := h.cfg.Timeout * h.health.scale()
	if 2*r.slack > t {
		t = min(2*r.slack, h.cfg.Timeout*time.Duration(1+h.cfg.LocalHealthMax))
	}
	return t
}

// brokenDue is when suspected r is declared failed: T_broken after the
// suspicion, or after this process last found itself late, times the
// local health factor for a suspicion of our own as r's monitor, and times
// the largest factor, 1 + LocalHealthMax, for one we only heard of or made
// from r's insurance alone. (As in Lifeguard, a suspicion this process has
// little evidence of waits longest: the suspect's refutation goes through
// the suspect's own links, which may be the slow ones, while the notice
// went around them; and one lost insurance heartbeat is a silence of
// T_insurance. A monitor's own suspicion waits as long when the link lost
// a message lately (lossy). The monitors that timed out declare a real
// crash first, and one declaration is enough for the membership above.)
// A suspicion from a refused connection is first-hand evidence too
// (nothing listens at the peer's address) and waits as a monitor's does.
// Every wait but the refused connection's gets the margin of recent
// stalls, this process's or refuted suspects' (due): on an overloaded
// host the suspect stalls as long, and its refutation waits for it.
//
// With the default timings (T_timeout and T_broken whole intervals) a
// monitor's own deadline falls when r's next heartbeat but three is due,
// so after three lost heartbeats in a row the fourth would race the
// declaration and lose, by less than a millisecond, about half the time;
// a link that never lost a message before is not lossy yet. A monitor's
// own suspicion therefore waits a quarter of r's announced interval more,
// or twice r's measured slack (the link's jitter) if that is longer,
// within the same bound (testdata/heartbeat/jitter.txt): the deadline
// falls between two of r's heartbeats, not on one. Twice the slack alone
// would not do: on a link a few heartbeats old the measured slack can be
// a tenth of the jitter.
func (h *HeartbeatDetector) brokenDue(r *hbPeer) time.Duration {
	f := h.health.scale()
	own := r.flags&hbAccused != 0 && (r.flags&hbMonitoree != 0 && !h.lossy(r) || r.flags&hbRefused != 0)
	wait, longest := h.cfg.Broken*f, h.cfg.Broken*time.Duration(1+h.cfg.LocalHealthMax)
	if !own && h.health.on() {
		wait = longest
	} else if h.health.on() {
		wait = min(wait+max(2*r.slack, r.expect/4), longest)
	}
	if r.flags&hbRefused != 0 {
		return max(h.health.from(r.mark)+wait, r.hold)
	}
	due := h.due(r.mark, wait)
	if h.settling(r) {
		due = max(due, r.mark+wait+2*h.stallCap())
	}
	return max(due, r.hold)
}

// settling reports whether the suspicion of r began less than
// SettleIntervals T_interval after this process began to watch its group
// (its first members), or less than twice that after r joined the view
// (heartbeat_newcomers.go): its verdict then waits as if the stall
// memory held the longest stall it can (2·stallCap more than T_broken).
// When a job starts, every process starts at once: on 2 cores running
// 128 of them, a process was starved for a second just as the first view
// made the detectors watch each other, before any stall had been refuted,
// and the monitors and members that heard their suspicion declared it
// failed with the configured timeouts, a few milliseconds before its
// refutation came. A detector that has just begun, like a member that
// has just joined, has seen nothing yet of how long it stalls on this
// host; an idle group keeps the configured timeouts once that short time
// has passed, and a refused connection (a crashed process on a live host)
// is declared as fast as ever.
func (h *HeartbeatDetector) settling(r *hbPeer) bool {
	settle := time.Duration(h.cfg.SettleIntervals) * h.cfg.Interval
	return h.health.on() && (h.watchAt >= 0 && r.mark-h.watchAt < settle ||
		r.joinAt >= 0 && r.mark-r.joinAt < 2*settle)
}

// refuted records that suspected r proved alive by itself, or that r,
// declared failed, was heard from again: its silence, at most stallCap,
// is how long a live peer may stay unheard on this host now
// (health.margin, and stalls for longer). A false verdict teaches the
// most: its suspicion outlasted every wait, and the next stall of that
// length must not.
// The silence is the suspicion's length plus the T_interval + T_timeout
// that went before it, once the suspicion lasted T_interval: counting
// the suspicion alone, a process starved for a second taught its peers
// a few hundred milliseconds, and the next such stall found them waiting
// for that. A suspicion refuted sooner is most likely a lost heartbeat,
// or a refutation that crossed the notice, and counts for its length.
func (h *HeartbeatDetector) refuted(r *hbPeer) {
	if r.state == HeartbeatSuspected && h.inGap(r) {
		return // this process's input stopped, not r (heartbeat_gap.go)
	}
	d := h.env.Now() - r.mark
	if d >= h.cfg.Interval {
		d += h.cfg.Interval + h.cfg.Timeout
	}
	d = min(d, h.stallCap())
	h.health.observe(d)
	h.stalls.observe(d, h.env.Now(), h.stallHalfLife())
}

// stallCap is the longest suspicion refuted() counts:
// (1 + LocalHealthMax)·(T_timeout + T_broken), the longest silence that
// the capped timeouts themselves allow after the interval a peer
// announced. On 2 cores running 128 processes live processes were
// starved for up to 2.35 s (docs/PERFORMANCE.md), well past the
// (1 + H)·T_broken = 400 ms this cap was before; the margin, twice what
// is remembered, stays at most 2·stallCap beyond the capped timeouts for
// peers' stalls (own lateness counts in full).
func (h *HeartbeatDetector) stallCap() time.Duration {
	return (h.cfg.Timeout + h.cfg.Broken) * time.Duration(1+h.cfg.LocalHealthMax)
}

// lossMemory is how many of a peer's announced intervals a gap that
// looked like a lost message counts against its link (lossy).
const lossMemory = 64

// lossy reports whether r's link lost a message (a gap of at least 1.75
// announced intervals) within the last lossMemory intervals. A monitor's
// own suspicion of a peer on such a link waits for its refutation as long
// as one heard of does: silence there is as likely a run of losses as a
// crash (three in a row, at 5% loss, about once a minute at 10 heartbeats
// a second), and the refutation crosses the same link.
func (h *HeartbeatDetector) lossy(r *hbPeer) bool {
	return r.lossAt >= 0 && r.expect > 0 && h.env.Now()-r.lossAt < lossMemory*r.expect
}

// recheck postpones an accusation that a timer late by late would make:
// messages that arrived while the timer was overdue may not have been
// read yet (a loop that wakes up fires its due timers before it reads its
// inbox), so the accusation waits as long again and is made only if the
// silence still holds then. It reports whether it postponed.
func (h *HeartbeatDetector) recheck(r *hbPeer, late time.Duration) bool {
	if !h.health.on() || late <= 0 || r.armedAt == r.hold {
		return false // on time, or this is the re-check: a real timer is always a little late
	}
	r.hold = h.env.Now() + late
	return true
}

// evidenceDue is when a suspicion of r that we only heard of becomes our
// own too: when r's deadline here passes as well.
func (h *HeartbeatDetector) evidenceDue(r *hbPeer) (time.Duration, bool) {
	if r.flags&hbAccused != 0 || r.expect == 0 || !h.health.on() {
		return 0, false
	}
	return h.due(r.lastRecv, r.expect+h.timeout(r)), true
}

// checkLate notices, when a message is handled, that a deadline is overdue
// by more than the tolerance: the loop is lagging (see health.go).
func (h *HeartbeatDetector) checkLate(now time.Duration) {
	if !h.health.on() || h.nextDue < 0 || now-h.nextDue <= h.health.tolerance {
		return
	}
	h.refreshDue()
	h.health.overdue(h.nextDue, now)
}

// refreshDue recomputes the earliest moment a pending timer could fire.
func (h *HeartbeatDetector) refreshDue() {
	h.nextDue = -1
	if h.retryTimer != 0 {
		h.nextDue = h.retryFires
	}
	for _, r := range h.peers {
		if r.timer != 0 && (h.nextDue < 0 || r.firesAt < h.nextDue) {
			h.nextDue = r.firesAt
		}
	}
}

// armed records when a timer just set could fire first (its deadline, or
// now if that had passed) for the lateness check.
func (h *HeartbeatDetector) armed(due time.Duration) {
	if h.nextDue < 0 || due < h.nextDue {
		h.nextDue = due
	}
}

// measure updates r's slack with the gap that ends at at: the excess of
// the gap over the interval r announced, kept as a decayed maximum (it
// halves in about 22 messages); and notes when a gap looked like a lost
// message (lossy), even one that made r suspected. A gap during which
// this process itself was late says nothing about r and is skipped.
func (h *HeartbeatDetector) measure(r *hbPeer, at time.Duration) {
	if !h.health.on() || r.expect == 0 || h.health.lateAt >= r.lastRecv {
		return
	}
	excess := at - r.lastRecv - r.expect
	if 4*excess >= 3*r.expect {
		r.lossAt = at // three quarters of an interval late: most likely a lost message
	}
	if r.state != HeartbeatAlive {
		return // the gap made a suspicion: not a measure of the link's jitter
	}
	if excess > r.slack {
		if 2*excess > h.cfg.Timeout && 2*r.slack <= h.cfg.Timeout {
			h.health.stats.Adaptions++
		}
		r.slack = excess
		return
	}
	r.slack -= r.slack / 32
}

// peerStallHalfLife is, in T_interval, how long the memory of peers'
// stalls (stallMemory) takes to halve: 512 intervals, 51 s at the 100 ms
// of a job's processes. On three network-namespace hosts sharing one
// 2-core machine loaded to 16, a live rank was starved for 1.2 s twelve
// seconds after the group's last suspicions (refuted within 0.16 s):
// the short memory (health.go, halving in about 44 intervals) had all
// but forgotten them, and every monitor still on time declared the
// starved rank failed a quarter of a second before its refutation.
// Forgetting over a minute instead keeps the group prepared while the
// host's load lasts; a group that never saw a peer stall keeps the
// configured timeouts.
const peerStallHalfLife = 512

// stallHalfLife is peerStallHalfLife as a duration.
func (h *HeartbeatDetector) stallHalfLife() time.Duration {
	return peerStallHalfLife * h.cfg.Interval
}

// stallMemory is a maximum of the peers' stalls (refuted suspicions,
// false verdicts: refuted) that halves every half-life, continuously,
// whether this process runs on time or not: unlike its own lateness, a
// peer's stall is not something this process's timers measure again.
type stallMemory struct {
	length time.Duration // as remembered at since
	since  time.Duration
}

// at is the stall remembered at now.
func (m stallMemory) at(now, halfLife time.Duration) time.Duration {
	if m.length <= 0 || halfLife <= 0 || now <= m.since {
		return max(m.length, 0)
	}
	return time.Duration(float64(m.length) * math.Exp2(-float64(now-m.since)/float64(halfLife)))
}

// observe records a peer's stall of length d at now.
func (m *stallMemory) observe(d, now, halfLife time.Duration) {
	if d > m.at(now, halfLife) {
		m.length, m.since = d, now
	}
}

// due is health.due with the margin of the peers' stalls remembered
// (twice stallMemory) as well: a wait of d for news of a peer, begun at
// t, ends no earlier than t + d + twice the larger memory.
func (h *HeartbeatDetector) due(t, d time.Duration) time.Duration {
	due := h.health.due(t, d)
	if !h.health.on() {
		return due
	}
	return max(due, t+d+2*h.stalls.at(h.env.Now(), h.stallHalfLife()))
}
