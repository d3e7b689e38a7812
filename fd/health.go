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
//     shows that this process is late. It raises the local health score
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
	FalseAlarm uint64        // own suspicions later disproved by the suspect (gossip: feeds the adaptive margin)
}

func newHealth(maxScore int, tolerance, period time.Duration) health {
	return health{max: maxScore, tolerance: tolerance, period: period, lateAt: -1, since: -1}
}

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
	if l.score > 0 && now-l.decayAt >= l.period {
		l.score--
		l.decayAt = now
	}
	l.stats.Score = l.score
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
	if now != l.lateAt {
		l.score = min(l.score+1, l.max)
	}
	l.since, l.lateAt, l.decayAt = now, now, now
	l.stats.Score = l.score
	l.stats.MaxScore = max(l.stats.MaxScore, l.score)
}

// scale is the factor 1 + score applied to accusation timeouts.
func (l *health) scale() time.Duration { return time.Duration(1 + l.score) }

// from is when a silence that began at t counts from: t, or the last
// moment this process found itself late if that is later.
func (l *health) from(t time.Duration) time.Duration { return max(t, l.since) }
