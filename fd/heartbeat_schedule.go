package fd

// The heartbeat detector's schedule: when each heartbeat is owed (a
// monitor's interval, a connection's insurance, traffic standing in for
// either), on the shared clock's grid if there is one, and when a silent
// peer is due to be suspected.

import "time"

// gridFloor is the latest time at most t where the shared clock is a
// multiple of Interval (SharedClock).
func (h *HeartbeatDetector) gridFloor(t time.Duration) time.Duration {
	return t - posMod(t-h.gridOff, h.cfg.Interval)
}

// posMod is a mod m in [0, m).
func posMod(a, m time.Duration) time.Duration {
	if a %= m; a < 0 {
		a += m
	}
	return a
}

// beatAlong sends, with the heartbeat just sent to r, the heartbeats that
// the other monitors are owed within half an Interval, when nothing but
// heartbeats went to them: the process then wakes once per Interval for
// all its monitors rather than once for each (in a real process every
// wake-up of an idle loop costs system calls, which are most of an idle
// rank's processor time). It costs no message once their heartbeats fall
// due together, which they do from then on; the first time, each such
// monitor gets its heartbeat up to Interval/2 early (never late).
func (h *HeartbeatDetector) beatAlong(r *hbPeer, now time.Duration) {
	if r.flags&hbMonitor == 0 {
		return
	}
	for _, id := range h.monitors {
		m := h.find(id)
		if m == nil || m == r || m.state == HeartbeatFailed || m.lastSend != m.beatAt {
			continue
		}
		if d, ok := h.sendDue(m); ok && d > now && d <= now+h.cfg.Interval/2 {
			h.beat(m)
			h.schedule(m)
		}
	}
}

// suppressed counts the heartbeat slots of r that ended since its last
// heartbeat while other traffic went on the link: those heartbeats were
// not needed. (Counted as traffic goes, not when a timer fires: r's timer
// moves with the traffic and may never fire while it lasts.)
func (h *HeartbeatDetector) suppressed(r *hbPeer, now time.Duration) {
	every := h.sendEvery(r)
	if every <= 0 || now-r.beatAt < every {
		return
	}
	k := (now - r.beatAt) / every
	h.stats.Suppressed += uint64(k)
	r.beatAt += k * every
}

// sendEvery is the period of heartbeats owed to r (0: none). A failed
// connection gets them every Interval, each with a ping (see beat): if it
// was cut off rather than dead (a partition that healed), that is how it
// hears from us again, recovers us and learns that it must refute its own
// suspicion, and how we hear from it. A record is kept for members of the
// view only, and the membership drops a dead member within a view change,
// so these go to a member held failed that the view cannot drop (a side
// without a majority), to the few connections a node has: its ring
// neighbours, monitors, monitorees and the peers it talks to. At the
// insurance period, the two sides of a healed partition would take up to
// T_insurance to hear from each other again.
func (h *HeartbeatDetector) sendEvery(r *hbPeer) time.Duration {
	switch {
	case r.flags&hbMonitor != 0:
		return h.cfg.Interval
	case r.flags&hbConn != 0 && r.state == HeartbeatFailed:
		return h.cfg.Interval
	case r.flags&hbConn != 0:
		return h.cfg.Insurance
	}
	return 0
}

// sendDue is when the next message to r is owed: one period after the
// last message of any layer, and never later than what we announced.
//
// Other traffic stands in for a heartbeat only once r knows what to
// expect: r waits for nothing from us until a heartbeat announced the
// period, so until the current period is announced a heartbeat is due one
// period after the last one whatever else we sent (otherwise a layer that
// talks to r from the start would keep r from ever watching us, and our
// crash would go unnoticed by r). And a monitor gets a heartbeat at least
// every T_insurance even under traffic, so that an announcement lost on
// the way is repeated (k/T_insurance messages per process per second).
func (h *HeartbeatDetector) sendDue(r *hbPeer) (time.Duration, bool) {
	every := h.sendEvery(r)
	if every == 0 {
		return 0, false
	}
	announced := r.sentNext == every
	if r.sentNext > 0 && r.sentNext < every {
		every = r.sentNext
	}
	due := r.lastSend + every
	if !announced {
		due = min(due, r.beatAt+every)
	}
	if r.sentNext > 0 && r.flags&hbMonitor != 0 {
		due = min(due, r.toldAt+h.cfg.Insurance)
	}
	if h.aligned && r.lastSend == r.beatAt {
		due = h.gridFloor(due) // only heartbeats on this link: keep them on the grid
	}
	return due, true
}

// recvDue is when r becomes suspected if nothing arrives from it: the
// announced interval + T_timeout after its last message, or T_timeout after
// an unanswered ping.
func (h *HeartbeatDetector) recvDue(r *hbPeer) (time.Duration, bool) {
	if r.state != HeartbeatAlive {
		return 0, false
	}
	if h.rechecking(r) {
		return r.probeUntil, true
	}
	var due time.Duration
	ok := false
	if r.expect > 0 {
		due, ok = h.due(r.lastRecv, r.expect+h.timeout(r)), true
	}
	if r.flags&hbProbing != 0 {
		if p := h.due(r.mark, h.cfg.Timeout*h.health.scale()); !ok || p < due {
			due, ok = p, true
		}
	}
	return max(due, r.hold), ok
}

// schedule arms r's timer for its earliest deadline. A timer armed for an
// earlier time is moved too: left alone, it would fire for nothing once per
// heartbeat received (each one pushes the deadline on by an interval), and
// in a real process every firing is a wake-up of an otherwise idle loop.
func (h *HeartbeatDetector) schedule(r *hbPeer) {
	due, ok := h.sendDue(r)
	if d, has := h.recvDue(r); has && (!ok || d < due) {
		due, ok = d, true
	}
	if r.state == HeartbeatSuspected {
		if d := h.verdictDue(r); !ok || d < due {
			due, ok = d, true
		}
		if d, has := h.evidenceDue(r); has && (!ok || d < due) {
			due, ok = d, true
		}
		if d, has := h.repingDue(r); has && (!ok || d < due) {
			due, ok = d, true
		}
		if d, has := h.waveDue(r); has && (!ok || d < due) {
			due, ok = d, true
		}
		if d, has := h.reprobeDue(r); has && (!ok || d < due) {
			due, ok = d, true
		}
	}
	if !ok {
		if r.timer != 0 {
			h.env.CancelTimer(r.timer)
			r.timer = 0
		}
		return
	}
	if r.timer != 0 {
		if r.armedAt == due {
			return
		}
		h.env.CancelTimer(r.timer)
	}
	now := h.env.Now()
	r.timer = h.env.SetTimer(max(due-now, 0), hbTimer(r.id))
	r.armedAt, r.firesAt = due, max(due, now)
	h.armed(r.firesAt)
}

// beat sends r the heartbeat it is owed, announcing the period to the
// next one. The slots of that period skipped since the last heartbeat,
// because other traffic served, are counted as suppressed.
func (h *HeartbeatDetector) beat(r *hbPeer) {
	every := h.sendEvery(r)
	monitor := r.flags&hbMonitor != 0
	now := h.env.Now()
	if every > 0 && now-r.beatAt > every {
		h.stats.Suppressed += uint64((now - r.beatAt - 1) / every) // slots strictly before now
	}
	h.send(r.id, HeartbeatMsg{Next: every, Monitor: monitor})
	if r.state == HeartbeatFailed {
		// A peer that does not hold this process a member ignores its
		// heartbeats and sends it none (the other side of a healed
		// partition, which excluded us): a ping, which any process
		// answers, lets the verdict end if the peer is alive.
		h.send(r.id, HeartbeatPing{})
		h.stats.PingsSent++
	}
	r.sentNext = every
	r.beatAt, r.toldAt = now, now
	if monitor {
		h.stats.HeartbeatsSent++
	} else {
		h.stats.InsuranceSent++
	}
}
