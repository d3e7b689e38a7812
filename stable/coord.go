package stable

import "time"

// coordState is Coord's state (Figure 1) at every member. The coordinator
// is position 0.
type coordState struct {
	round uint64
	began time.Duration
	// Coordinator.
	acked     []bool   // ack of this round received (Step 2), own slot set
	min       []uint64 // ArrayMin of the acks received so far
	done      bool     // Step 3 reached: info sent
	infoAcked []bool   // ack-info received (§3.5)
	// Other members.
	learned bool // info of this round received
}

// coordStart is Step 1 at the coordinator (line 1): a new round, start to
// every member.
func (d *Detector) coordStart() {
	c := d.coord
	c.round++
	c.began = d.env.Now()
	c.done = false
	n := len(d.members)
	c.acked = make([]bool, n)
	c.acked[0] = true // the coordinator's own R
	c.min = d.vec()
	c.infoAcked = nil
	for p := 1; p < n; p++ {
		if d.live(p) {
			d.send(p, Start{Epoch: d.epoch, Round: c.round})
		}
	}
	d.armResend(c.round)
	d.coordCheck()
}

// coordCheck ends Step 2 at the coordinator once every live member acked
// (lines 2–7).
func (d *Detector) coordCheck() {
	c := d.coord
	if d.me != 0 || c.done || c.round == 0 {
		return
	}
	for p, ok := range c.acked {
		if !ok && d.live(p) {
			return
		}
	}
	c.done = true
	s := c.min
	c.infoAcked = make([]bool, len(d.members))
	c.infoAcked[0] = true
	for p := 1; p < len(d.members); p++ {
		if d.live(p) {
			d.send(p, Info{Epoch: d.epoch, Round: c.round, Vector: s})
		}
	}
	d.learn(c.round, s, c.began)
	d.scheduleNext(c.round)
}

func (d *Detector) coordReceive(p int, m any) {
	c := d.coord
	switch m := m.(type) {
	case Start: // line 8: at a member
		if d.me == 0 || p != 0 || m.Round < c.round {
			return // stale round (§3.5)
		}
		if m.Round > c.round {
			c.round, c.began, c.learned = m.Round, d.env.Now(), false
		}
		// Line 9. A repeated start (§3.5: the coordinator lacks our ack)
		// is answered again, with the current R.
		d.send(0, Ack{Epoch: d.epoch, Round: c.round, Vector: d.vec()})
	case Ack: // lines 2–3: at the coordinator
		if d.me != 0 || m.Round != c.round || c.done || c.acked[p] || !d.okVec(m.Vector) {
			return
		}
		c.acked[p] = true
		arrayMin(c.min, m.Vector)
		d.coordCheck()
	case Info: // lines 10–12: at a member
		if d.me == 0 || p != 0 || m.Round < c.round || !d.okVec(m.Vector) {
			return
		}
		if m.Round > c.round { // the start was lost (§3.5)
			c.round, c.began, c.learned = m.Round, d.env.Now(), false
		}
		if !c.learned {
			c.learned = true
			d.learn(c.round, m.Vector, c.began)
		}
		if d.cfg.Resend > 0 {
			d.send(0, AckInfo{Epoch: d.epoch, Round: c.round})
		}
	case AckInfo:
		if d.me == 0 && m.Round == c.round && c.infoAcked != nil {
			c.infoAcked[p] = true
		}
	}
}

// coordResend is §3.5 at the coordinator: start again to the members whose
// ack is missing, then info again to those whose ack-info is missing, until
// the next round starts.
func (d *Detector) coordResend(round uint64) {
	c := d.coord
	if d.me != 0 || round != c.round {
		return
	}
	pending := false
	for p := 1; p < len(d.members); p++ {
		if !d.live(p) {
			continue
		}
		switch {
		case !c.done && !c.acked[p]:
			d.send(p, Start{Epoch: d.epoch, Round: c.round})
			pending = true
		case c.done && !c.infoAcked[p]:
			d.send(p, Info{Epoch: d.epoch, Round: c.round, Vector: c.min})
			pending = true
		}
	}
	if pending {
		d.armResend(round)
	}
}

// coordFailed: the coordinator no longer waits for a failed member's ack.
func (d *Detector) coordFailed(int) { d.coordCheck() }
