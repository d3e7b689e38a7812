package fd

import "time"

// Local health of the gossip detector (see health.go and
// [GossipConfig.LocalHealthMax]). The round timer is the measurement: a
// round that starts more than LateTolerance after it was due, or a table
// handled while the round is that overdue, shows that this node was away.
// While it was away its own count fell behind and the tables that would
// have refreshed its entries waited in its inbox, so every entry's age
// restarts from the round in which it noticed (g.fresh).

// Health returns what the local health measurement saw so far.
func (g *Gossip) Health() HealthStats { return g.health.stats }

// roundLate measures the round that starts now against its deadline and
// returns how late it is.
func (g *Gossip) roundLate() time.Duration {
	now := g.env.Now()
	late := now - g.tickDue
	before := g.health.stats.Late
	g.health.fired(g.tickDue, now)
	if g.health.stats.Late != before {
		g.restart(1)
	} else {
		g.forgetStalls()
	}
	if g.margin > 0 && g.own-min(g.marginAt, g.own) >= max(g.cleanup, 1) {
		g.margin--
		g.marginAt = g.own
	}
	return late
}

// lateCheck runs the cleanup check of a round that started late by late
// (by any amount) only after as long again, so that the tables that
// waited behind the round timer are merged first. A round on time checks
// at once.
func (g *Gossip) lateCheck(late time.Duration) {
	if !g.health.on() || late <= 0 {
		g.checkCleanup()
		return
	}
	g.env.SetTimer(late, gossipCheck{})
}

// tableLate notices, when a table arrives, that the round is overdue.
func (g *Gossip) tableLate() {
	if !g.health.on() || !g.started {
		return
	}
	before := g.health.stats.Late
	g.health.overdue(g.tickDue, g.env.Now())
	if g.health.stats.Late != before {
		g.restart(0)
	}
}

// caughtUp is called when a table made this node's count jump ahead by
// jump ≥ 2 rounds: every entry it holds looks that much older than it is
// until fresher tables arrive. For the next T_cleanup rounds the entries
// are credited with the jump (ages count that many rounds less); then
// every entry has been refreshed in the new count or is really stale.
func (g *Gossip) caughtUp(jump uint32) {
	if !g.health.on() || !g.started {
		return
	}
	if g.own >= g.skewUntil {
		g.skew = 0
	}
	g.skew = min(g.skew+jump, g.cleanup*uint32(g.cfg.LocalHealthMax))
	g.skewUntil = g.own + g.cleanup
}

// restart makes every entry's age count from the current round (plus
// ahead rounds: a late round timer restarts from the round it starts).
func (g *Gossip) restart(ahead uint32) {
	g.fresh = max(g.fresh, g.own+ahead)
}

// cleanupNow is T_cleanup in rounds as this node applies it now: c times
// the local health factor, plus the adaptive margin, at most
// (1 + LocalHealthMax)·c; plus ⌈2M/T_gossip⌉ rounds for the stall M it
// remembers.
func (g *Gossip) cleanupNow() uint32 {
	if !g.health.on() {
		return g.cleanup
	}
	c := g.cleanup*uint32(g.health.scale()) + g.margin
	return min(c, g.cleanup*uint32(1+g.cfg.LocalHealthMax)) + g.stallRounds()
}

// pingTimeout is PingTimeout times the local health factor, plus one for
// every c rounds of adaptive margin (a false alarm showed that live nodes
// can be silent longer than expected), at most (1 + LocalHealthMax) times.
func (g *Gossip) pingTimeout() time.Duration {
	if !g.health.on() {
		return g.cfg.PingTimeout
	}
	f := uint32(g.health.scale())
	if g.cleanup > 0 {
		f += (g.margin + g.cleanup - 1) / g.cleanup
	}
	return g.cfg.PingTimeout * time.Duration(min(f, uint32(1+g.cfg.LocalHealthMax)))
}

// pingLate re-arms a ping timeout that fired late, once, as late again:
// the pong may be waiting behind it. It reports whether it did.
func (g *Gossip) pingLate(w *gossipWatch) bool {
	late := g.env.Now() - w.due
	if !g.health.on() || late <= 0 || w.rechecked {
		return false
	}
	g.health.fired(w.due, g.env.Now())
	w.rechecked = true
	w.timer = g.env.SetTimer(late, gossipPingTimeout{seq: w.seq})
	return true
}

// falseAlarm records that a suspicion of this node was disproved: the
// adaptive margin grows by ⌈c/4⌉ rounds.
func (g *Gossip) falseAlarm() {
	g.health.stats.FalseAlarm++
	if !g.health.on() {
		return
	}
	g.margin = min(g.margin+(g.cleanup+3)/4, g.cleanup*uint32(g.cfg.LocalHealthMax))
	g.marginAt = g.own
	g.health.stats.Adaptions++
}

// Stall memory (see "Under load" in the package documentation). On a host
// with more runnable processes than cores every process stalls in turn,
// and a peer silent for as long as this node was itself away says nothing
// of a crash. The detector keeps the stall M it saw lately: its own
// lateness (health.lateness, within LateTolerance too) or, if longer, how
// much longer than the others a suspect was silent before it proved alive
// (stalls.seen), both decayed by 1/lateMemory per round on time and
// capped at stallCap. It waits ⌈2M/T_gossip⌉ rounds more before it
// suspects, and 2M more after the consensus pings before it declares,
// pinging on meanwhile.

// gossipStalls is the gossip detector's memory of stalls.
type gossipStalls struct {
	seen     time.Duration // decayed maximum of refuted suspects' silence beyond the others'
	isolated uint32        // 1 + the newest heartbeat held when an input gap was last taken for isolation; 0: none
	stats    GossipStallStats
}

// GossipStallStats counts what the gossip detector's stall memory did.
type GossipStallStats struct {
	// Stall is the stall M remembered now: the larger of this node's own
	// lateness and of how much longer than the others a suspect was
	// silent before it proved alive, decayed, at most [GossipConfig.StallCap]. The
	// detector suspects ⌈2M/T_gossip⌉ rounds later and declares 2M later.
	Stall    time.Duration
	MaxStall time.Duration // the largest Stall so far
	// Isolated counts the input gaps taken for this node's own isolation:
	// it heard nothing younger than a third of T_cleanup from anyone
	// while it had been starved itself, and suspected nobody for it.
	Isolated uint64
	// Alone counts suspicions made while this node heard nothing fresh
	// from anyone (on time, or after its one isolation of the gap): their
	// verdicts wait as long again as the gap, and their refutations
	// teach nothing.
	Alone uint64
	// Held counts verdicts held back by the stall margin (the suspect
	// pinged on for 2M after the consensus pings), Rescued those of them
	// that the suspect answered in that time.
	Held    uint64
	Rescued uint64
}

// StallStats returns what the stall memory saw and did so far.
func (g *Gossip) StallStats() GossipStallStats {
	s := g.stalls.stats
	s.Stall = g.stall()
	return s
}

// stallCap is the longest stall remembered: (1 + H)·(T_cleanup +
// T_consensus), the longest silence the capped timeouts themselves allow.
func (g *Gossip) stallCap() time.Duration {
	h := time.Duration(1 + g.cfg.LocalHealthMax)
	return h * (time.Duration(g.cleanup)*g.cfg.GossipInterval + g.cfg.ConsensusTime())
}

// stall is the stall M this node remembers now (0 with lateness awareness
// off).
func (g *Gossip) stall() time.Duration {
	if !g.health.on() {
		return 0
	}
	return min(max(g.health.lateness, g.stalls.seen), g.stallCap())
}

// stallRounds is ⌈2M/T_gossip⌉, the rounds the stall memory adds to
// T_cleanup.
func (g *Gossip) stallRounds() uint32 {
	m := 2 * g.stall()
	if m <= 0 {
		return 0
	}
	t := g.cfg.GossipInterval
	return uint32((m + t - 1) / t)
}

// forgetStalls decays the refuted suspects' silence like health.lateness:
// by 1/lateMemory of itself and of the tolerance per round on time.
func (g *Gossip) forgetStalls() {
	s := &g.stalls
	if s.seen > 0 {
		s.seen = max(0, s.seen-s.seen/lateMemory-g.health.tolerance/lateMemory)
	}
	s.stats.MaxStall = max(s.stats.MaxStall, g.stall())
}

// refuted records that the suspect of watch w proved alive: how much
// longer than the freshest of the others it had been silent here is how
// long a live member may be silent on this host now. Counted against the
// freshest entry rather than this node's count, a suspicion that this
// node's own input gap made (every entry old, the suspect's no older than
// the others') teaches nothing: the suspect did not stall.
func (g *Gossip) refuted(w *gossipWatch) {
	if !g.health.on() {
		return
	}
	newest := uint32(0)
	for i, b := range g.beats {
		if i != g.me && i != int(w.pos) {
			newest = max(newest, b)
		}
	}
	base := max(w.beat, w.since) // a grace counts from its start
	if b := g.beats[w.pos]; newest <= base || b != w.beat && g.ageOf(b) > g.cleanup/2 {
		return // no longer silent than the others, or late news of the dead (proofOfLife)
	}
	d := time.Duration(newest-base) * g.cfg.GossipInterval
	g.stalls.seen = max(g.stalls.seen, min(d, g.stallCap()))
	g.stalls.stats.MaxStall = max(g.stalls.stats.MaxStall, g.stall())
}

// holdVerdict keeps a suspect whose consensus pings went unanswered from
// being declared failed for 2M more (M as remembered when the pings ran
// out), and for as long again as this node's input gap when it suspected
// (the suspect's entry aged that much for want of news, not for its
// silence), pinging it on meanwhile, once per watch. It reports whether
// it held the verdict.
//
// While it holds, it also asks helpers again, one indirect probe at a
// time, as long as a probe ends within the hold: the helpers of the
// suspicion's probe may all have been out of reach then (an input gap
// is often this node's own partition), and once that heals a member
// that reaches both may be the only way to the suspect, which the
// direct pings never take.
func (g *Gossip) holdVerdict(w *gossipWatch) bool {
	if w.refused {
		return false // a stall leaves its port listening
	}
	now := g.env.Now()
	if w.holdUntil == 0 {
		m := 2*g.stall() + w.alone
		if m <= 0 {
			return false
		}
		w.holdUntil = now + m
		g.stalls.stats.Held++
	}
	if now >= w.holdUntil {
		return false
	}
	g.pingFor(w, min(g.pingTimeout(), w.holdUntil-now))
	if w.probeSeq == 0 && now+g.cfg.probeTimeout() <= w.holdUntil {
		g.probeIndirect(w)
	}
	return true
}

// newest is the highest heartbeat this node holds of any other member:
// the freshest news that reached it.
func (g *Gossip) newest() uint32 {
	newest := uint32(0)
	for i, b := range g.beats {
		if i != g.me {
			newest = max(newest, b)
		}
	}
	return newest
}

// stale reports whether heartbeat b, the freshest news, is older than
// max(c/3, 2) rounds: while a member lives, some table brings a younger
// heartbeat of someone every round or two. With fewer than three members
// there is no news but the suspect's own, and its silence is no gap.
func (g *Gossip) stale(b uint32) bool {
	return len(g.members) >= 3 && g.ageOf(b) > max(g.cleanup/3, 2)
}

// inputGap returns how long nothing fresh has reached this node from
// anyone (the age of the newest heartbeat it holds), if that is stale,
// else 0.
func (g *Gossip) inputGap() time.Duration {
	b := g.newest()
	if !g.stale(b) {
		return 0
	}
	return time.Duration(g.ageOf(b)) * g.cfg.GossipInterval
}

// isolated reports whether the entries about to expire are this node's
// own isolation rather than the members' death, and if so restarts every
// entry's age from this round: nothing younger than max(c/3, 2) rounds
// reached it from anyone (its inputs all stopped, or brought only stale
// tables), and it was starved itself (its remembered lateness is at least
// half LateTolerance). A gap in all inputs looks the same when every
// member that sends to this node died; only this node's own lateness
// tells them apart, and an input gap is taken for isolation once: if no
// news came when the restarted ages expire, the suspicions are made. A
// node on time suspects as the paper's does.
func (g *Gossip) isolated() bool {
	if !g.health.on() || g.health.lateness < g.health.tolerance/2 {
		return false
	}
	newest := g.newest()
	if !g.stale(newest) || g.stalls.isolated == newest+1 {
		return false
	}
	g.stalls.isolated = newest + 1
	g.stalls.stats.Isolated++
	g.restart(0)
	return true
}
