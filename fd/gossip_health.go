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
// (1 + LocalHealthMax)·c.
func (g *Gossip) cleanupNow() uint32 {
	if !g.health.on() {
		return g.cleanup
	}
	c := g.cleanup*uint32(g.health.scale()) + g.margin
	return min(c, g.cleanup*uint32(1+g.cfg.LocalHealthMax))
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
