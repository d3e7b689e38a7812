package stable

import (
	"slices"
	"time"
)

// fullState is FullDist's state (Figure 2) at every member: the round the
// node is in (cur) and, when rows of the following round arrive before cur
// has ended, that round too (next). Instead of the paper's n×n matrix M_k a
// slot keeps which rows arrived this round and their element-wise minimum:
// at the end of a round every row has been replaced in that round, so the
// column minima of line 12 are exactly that minimum.
type fullState struct {
	cur, next fullSlot
}

type fullSlot struct {
	round  uint64 // 0: unused
	joined bool   // own row multicast (line 2 or line 6)
	began  time.Duration
	row    []uint64 // own row of the round
	got    []bool   // row of position p received (receive_from counts them)
	nGot   int      // rows received from members not reported failed
	min    []uint64 // element-wise minimum of the rows received
	done   bool
}

func (d *Detector) newSlot(round uint64) fullSlot {
	return fullSlot{round: round, got: make([]bool, len(d.members))}
}

// record stores p's row in slot s (lines 4, 9 and 10).
func record(s *fullSlot, p int, v []uint64) {
	if s.got[p] {
		return
	}
	s.got[p] = true
	s.nGot++ // p is live: rows from failed members are dropped on receipt
	if s.min == nil {
		s.min = slices.Clone(v)
	} else {
		arrayMin(s.min, v)
	}
}

// fullJoin multicasts the own row for slot s (line 2 at node 0, line 6 at
// the others); the own row counts as received.
func (d *Detector) fullJoin(s *fullSlot) {
	s.joined = true
	s.began = d.env.Now()
	s.row = d.vec()
	record(s, d.me, s.row)
	for p := range d.members {
		if p != d.me && d.live(p) {
			d.send(p, Row{Epoch: d.epoch, Round: s.round, Vector: s.row})
		}
	}
	d.armResend(s.round)
}

// fullStart is Step 1 at node 0 (lines 1–2).
func (d *Detector) fullStart() {
	f := d.full
	f.cur = d.newSlot(f.cur.round + 1)
	f.next = fullSlot{}
	d.fullJoin(&f.cur)
	d.fullCheck()
}

// fullCheck is lines 11–14: a joined round whose rows have all arrived
// (from every member not reported failed) ends.
func (d *Detector) fullCheck() {
	f := d.full
	for {
		s := &f.cur
		if !s.joined || s.done || s.nGot < d.nLive {
			return
		}
		s.done = true
		d.learn(s.round, s.min, s.began)
		if d.me == 0 {
			d.scheduleNext(s.round)
			return
		}
		if f.next.round != s.round+1 {
			return
		}
		f.cur, f.next = f.next, fullSlot{}
	}
}

func (d *Detector) fullReceive(p int, m any) {
	row, ok := m.(Row)
	if !ok || !d.okVec(row.Vector) {
		return
	}
	f := d.full
	q, r := row.Round, f.cur.round
	pull := row.Pull && d.cfg.Resend > 0
	switch {
	case q < r: // stale (§3.5): ignored, but a lagging member's pull is answered
		if pull && f.cur.joined {
			d.send(p, Row{Epoch: d.epoch, Round: r, Vector: f.cur.row})
		}
		return
	case q == r:
		record(&f.cur, p, row.Vector)
		if pull && f.cur.joined {
			d.send(p, Row{Epoch: d.epoch, Round: r, Vector: f.cur.row})
		}
	case d.me == 0:
		return // only node 0 starts rounds
	case q == r+1 && r > 0 && !f.cur.done:
		// §3.5: a row of round r+1 reaching a member in round r counts for
		// round r; it is kept for round r+1 too.
		record(&f.cur, p, row.Vector)
		if f.next.round != q {
			f.next = d.newSlot(q)
		}
		record(&f.next, p, row.Vector)
		if p == 0 && !f.next.joined { // node 0 started round r+1 (line 3)
			d.fullJoin(&f.next)
		}
	default: // a later round: move to it
		if f.next.round == q {
			f.cur = f.next
		} else {
			f.cur = d.newSlot(q)
		}
		f.next = fullSlot{}
		record(&f.cur, p, row.Vector)
	}
	if p == 0 && f.cur.round == q && !f.cur.joined {
		d.fullJoin(&f.cur) // lines 3–6
	}
	d.fullCheck()
}

// fullResend is §3.5: a member that has not heard every row of a round it
// joined multicasts its row again, marked as a pull, to the members it has
// not heard from.
func (d *Detector) fullResend(round uint64) {
	f := d.full
	var s *fullSlot
	switch round {
	case f.cur.round:
		s = &f.cur
	case f.next.round:
		s = &f.next
	default:
		return
	}
	if !s.joined || s.done {
		return
	}
	for p, ok := range s.got {
		if !ok && d.live(p) {
			d.send(p, Row{Epoch: d.epoch, Round: s.round, Vector: s.row, Pull: true})
		}
	}
	d.armResend(round)
}

// fullFailed: nobody waits for a failed member's row.
func (d *Detector) fullFailed(p int) {
	f := d.full
	for _, s := range []*fullSlot{&f.cur, &f.next} {
		if s.round > 0 && s.got[p] {
			s.nGot--
		}
	}
	d.fullCheck()
}
