package fd

import "time"

// Local health: a detector that notices that it is itself late does not
// accuse others.
//
// A process whose event loop stalls (a long garbage-collection pause, an
// overloaded host, a descheduled process) hears nothing while it is stalled
// and then finds every deadline it set long past: judged by its own clock,
// every peer has been silent for the length of the stall. memberlist's
// Lifeguard (Dadgar, Phillips, Currey, "Lifeguard: Local Health Awareness
// for More Accurate Failure Detection", 2018) showed that most false
// suspicions come from such slow members, and that a member that measures
// its own health and waits longer when unhealthy removes most of them.
// Both detectors of this package do the same, from one measurement they
// already have: the deadline of every timer they set.
//
//   - A timer that fires more than LateTolerance after its deadline, or a
//     message handled while a timer is overdue by more than LateTolerance,
//     shows that this process is late. A deadline already past when its
//     timer was set counts from that moment instead: the timer could not
//     fire before it. It raises the local health score
//     (capped at LocalHealthMax) and restarts the judgement clock: no peer
//     is suspected or declared failed on the strength of silence that
//     began before the process caught up, because what the peers sent
//     meanwhile may still be waiting to be read. Each peer's silence is
//     counted from the later of its last message and the moment this
//     process found itself late.
//   - Every timeout that leads to an accusation is multiplied by
//     1 + score, so a process that keeps running late waits longer.
//   - The score decays by one for every period (T_interval or T_gossip) in
//     which every timer fired on time, so a process that recovered
//     returns to the configured timeouts.
//   - The heartbeat detector also remembers the longest stall it saw
//     lately (a decayed maximum, [HealthStats.Lateness]): its own
//     lateness, within the tolerance too, and how long a peer was silent
//     before it itself refuted a suspicion or, declared failed, was heard
//     again (at most (1 + LocalHealthMax)·(T_timeout + T_broken)). It adds
//     twice that to the silence it accepts and to the wait for a
//     refutation, counted from the peer's last message or the suspicion's
//     start. On a host where every process stalls in turn (more runnable
//     processes than cores), a process that was itself away for 300 ms,
//     or saw a peer refute 300 ms into a suspicion, knows that its peers
//     are away as long: their silence of that length, and a refutation
//     delayed by it, say nothing of a crash. The score alone cannot say
//     so, since it caps the timeouts at (1 + LocalHealthMax) times the
//     configured ones whatever the stalls' length, and it only sees this
//     process's own stalls, while an overloaded host starves some
//     processes much longer than others. A crash is never refuted: a
//     group that runs on time keeps the configured timeouts.
//
// The score is local: it only ever delays this process's own accusations.
// Processes whose timers run on time keep the configured timeouts, so a
// crash is still detected within the documented bounds by every process
// that is on time; a process that is late adds its own lateness and waits
// at most (1 + LocalHealthMax) times the configured timeouts after it
// caught up.
type health struct {
	max       int           // ceiling of score; 0: lateness is ignored
	tolerance time.Duration // lateness that still counts as on time
	period    time.Duration // on time for this long: score decays by one
	score     int
	since     time.Duration // the judgement clock restarted here (last lateness)
	lateAt    time.Duration // when lateness was last noticed; -1: never
	lateness  time.Duration // decayed maximum of own lateness and of refuted suspicions' length
	decayAt   time.Duration // last decay or lateness
	stats     HealthStats
}

// HealthStats counts what the local health measurement saw.
type HealthStats struct {
	Late       uint64        // times this process found itself late
	MaxLate    time.Duration // the largest lateness seen
	Postponed  uint64        // accusations postponed because this process had been late
	Score      int           // the current local health score
	MaxScore   int           // the highest score reached
	Adaptions  uint64        // timeouts lengthened by a peer's measured irregularity
	Lateness   time.Duration // decayed maximum of own lateness and of suspicions' length before the suspect refuted (heartbeat: twice it is added to accusation timeouts)
	FalseAlarm uint64        // own suspicions later disproved by the suspect (gossip: feeds the adaptive margin)
}

func newHealth(maxScore int, tolerance, period time.Duration) health {
	return health{max: maxScore, tolerance: tolerance, period: period, lateAt: -1, since: -1}
}

// lateMemory is how slowly the stalls seen are forgotten: each period on
// time takes 1/lateMemory of the remembered lateness (and of the
// tolerance) off it, so that it halves in about 44 periods (4.4 s at
// T_interval = 100 ms). On an overloaded host the long stalls (one to two
// seconds on 2 cores running 128 processes) come seconds apart, with
// short ones between: forgotten within a second, as with 8, each found
// the group unprepared, and the peers that heard of the suspicion
// declared the stalled process failed a few milliseconds before its
// refutation came. A group on time remembers nothing and keeps the
// configured timeouts.
const lateMemory = 64

// on reports whether lateness awareness is enabled.
func (l *health) on() bool { return l.max > 0 }

// fired records that a timer due at due was handled at now.
func (l *health) fired(due, now time.Duration) {
	if !l.on() {
		return
	}
	if now-due > l.tolerance {
		l.late(now-due, now)
		return
	}
	// Lateness within the tolerance restarts no judgement and raises no
	// score, but it is remembered: on a loaded host timers run tens of
	// milliseconds late long before one runs a whole tolerance late, and
	// the processes starved longest are the ones not heard from. On an
	// idle host it is a millisecond or less.
	l.lateness = max(l.lateness, now-due)
	if (l.score > 0 || l.lateness > 0) && now-l.decayAt >= l.period {
		l.score = max(l.score-1, 0)
		l.lateness = max(0, l.lateness-l.lateness/lateMemory-l.tolerance/lateMemory)
		l.decayAt = now
	}
	l.stats.Score, l.stats.Lateness = l.score, l.lateness
}

// overdue records a message handled at now while the earliest pending
// deadline was due (due < 0: none).
func (l *health) overdue(due, now time.Duration) {
	if l.on() && due >= 0 && now-due > l.tolerance {
		l.late(now-due, now)
	}
}

// late records that this process found itself late by d at now.
func (l *health) late(d, now time.Duration) {
	l.stats.Late++
	l.stats.MaxLate = max(l.stats.MaxLate, d)
	l.lateness = max(l.lateness, d)
	l.stats.Lateness = l.lateness
	if now != l.lateAt {
		l.score = min(l.score+1, l.max)
	}
	l.since, l.lateAt, l.decayAt = now, now, now
	l.stats.Score = l.score
	l.stats.MaxScore = max(l.stats.MaxScore, l.score)
}

// observe records a peer's stall of length d: it raises the lateness
// remembered, not the score, and does not restart the judgement clock.
func (l *health) observe(d time.Duration) {
	if l.on() && d > l.lateness {
		l.lateness = d
		l.stats.Lateness = d
	}
}

// margin is what the heartbeat detector adds to its accusation timeouts
// for the stalls it saw lately: twice the decayed maximum of its own
// lateness and of its peers' refuted silences (0 when all ran on time for
// a while, or lateness awareness is off).
func (l *health) margin() time.Duration { return 2 * l.lateness }

// due is when a wait of d for news of a peer, begun at t, ends: d after
// t, or after this process last found itself late if that is later
// (from), and never before t + d + margin. The margin counts from t, not
// from the last lateness: a process that stalls again and again restarts
// its judgement clock each time, and a margin added to each restart would
// let no wait end between two stalls.
func (l *health) due(t, d time.Duration) time.Duration {
	return max(l.from(t)+d, t+d+l.margin())
}

// scale is the factor 1 + score applied to accusation timeouts.
func (l *health) scale() time.Duration { return time.Duration(1 + l.score) }

// from is when a silence that began at t counts from: t, or the last
// moment this process found itself late if that is later.
func (l *health) from(t time.Duration) time.Duration { return max(t, l.since) }
