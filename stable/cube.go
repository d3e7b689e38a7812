package stable

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

// cubeState is CubeFullDist's state (Figure 5) at one member.
type cubeState struct {
	nbrs []int // neighbours in the incomplete hypercube of the view (§3.3)

	round   uint64 // r_i: the round the node is in
	waiting bool   // round entered (line 9) but Step 1 not yet run (wait(Δ), line 14)
	began   time.Duration
	g       []byte   // G_i, bit p = position p
	nG      int      // bits of G_i set for members not reported failed
	m       []uint64 // M_i
	iter    uint64   // iteration number (§3.5)
	heard   []int64  // per neighbour index: highest iteration heard this round, -1 none

	early     []Gossip // per neighbour index: newest message of round+1, Round 0 if none
	lastFinal *Gossip  // the final message of the previous round (line 8), for pulls
}

func newCubeState(n, me, senders int) *cubeState {
	cb, err := topo.NewCube(n)
	c := &cubeState{}
	if err == nil {
		c.nbrs = cb.Neighbors(me)
	}
	c.heard = make([]int64, len(c.nbrs))
	c.early = make([]Gossip, len(c.nbrs))
	return c
}

func bitmapLen(n int) int { return (n + 7) / 8 }

func setBit(g []byte, p int)      { g[p/8] |= 1 << (p % 8) }
func hasBit(g []byte, p int) bool { return g[p/8]&(1<<(p%8)) != 0 }

// enter is line 9–12 (and the initialization): the node enters round
// r+1 with M_i := R_i, G_i := {i}, and waits for Step 1.
func (d *Detector) cubeEnter(round uint64) {
	c := d.cube
	c.round = round
	c.waiting = true
	c.began = d.env.Now()
	c.m = d.vec()
	c.g = make([]byte, bitmapLen(len(d.members)))
	setBit(c.g, d.me)
	c.nG = 1
	c.iter = 0
	for i := range c.heard {
		c.heard[i] = -1
	}
}

// cubeStep1 is Step 1 (line 1): enter the first round if none was entered,
// then multicast (G_i, M_i, r_i) to the neighbours.
func (d *Detector) cubeStep1() {
	c := d.cube
	if c.round == 0 {
		d.cubeEnter(1)
		d.replayEarly()
		if c.round != 1 { // finished while replaying (a one-member view)
			return
		}
	}
	if !c.waiting {
		return
	}
	c.waiting = false
	c.began = d.env.Now()
	// Neighbours heard already (their messages of this round arrived during
	// the wait) let the iteration start further on: one message instead
	// of one per iteration skipped.
	for d.cubeAllHeard() {
		c.iter++
	}
	d.cubeMulticast(false)
	d.armResend(c.round)
	d.cubeCheck()
}

// cubeMulticast sends (G_i, M_i, r_i, iteration) to every live neighbour.
func (d *Detector) cubeMulticast(pull bool) {
	c := d.cube
	msg := d.cubeMsg(pull)
	for _, q := range c.nbrs {
		if d.live(q) {
			d.send(q, msg)
		}
	}
}

func (d *Detector) cubeMsg(pull bool) Gossip {
	c := d.cube
	return Gossip{Epoch: d.epoch, Round: c.round, Iter: c.iter, G: slices.Clone(c.g), M: slices.Clone(c.m), Pull: pull}
}

// cubeAllHeard reports whether every live neighbour has been heard at the
// current iteration (line 17: receive_from = rank), with at least one live
// neighbour.
func (d *Detector) cubeAllHeard() bool {
	c := d.cube
	any := false
	for i, q := range c.nbrs {
		if !d.live(q) {
			continue
		}
		any = true
		if c.heard[i] < int64(c.iter) {
			return false
		}
	}
	return any
}

// cubeComplete reports whether G_i holds every live member (line 7).
func (d *Detector) cubeComplete() bool { return d.cube.nG >= d.nLive }

// cubeCheck is lines 7–21 after a merge: end the round if G_i is full,
// otherwise start another iteration if every neighbour was heard.
func (d *Detector) cubeCheck() {
	c := d.cube
	if d.cubeComplete() {
		d.cubeFinish()
		return
	}
	if c.waiting {
		return
	}
	advanced := false
	for d.cubeAllHeard() {
		c.iter++
		advanced = true
	}
	if advanced {
		d.cubeMulticast(false)
	}
}

// cubeFinish is lines 8–15: the last message of the round to the
// neighbours, S_i := M_i, and the next round entered, its Step 1 after
// wait(Δ).
func (d *Detector) cubeFinish() {
	c := d.cube
	final := d.cubeMsg(false)
	for _, q := range c.nbrs {
		if d.live(q) {
			d.send(q, final)
		}
	}
	c.lastFinal = &final
	began, ended := c.began, c.round
	d.learn(ended, c.m, began)
	d.cubeEnter(ended + 1)
	d.scheduleNext(ended)
	d.roundStart = max(d.roundStart+d.cfg.Period, d.env.Now())
	d.replayEarly()
}

// replayEarly merges the messages of the round just entered that arrived
// while the node was still in the previous one.
func (d *Detector) replayEarly() {
	c := d.cube
	merged := false
	for i := range c.early {
		e := c.early[i]
		c.early[i] = Gossip{}
		if e.Round == c.round {
			d.cubeMerge(i, e)
			merged = true
		}
	}
	// Line 7 is evaluated on receipt only: a one-member view does not end
	// a round here, or it would end rounds forever without waiting.
	if merged {
		d.cubeCheck()
	}
}

// cubeMerge is lines 4–6 for a message of the current round from the
// neighbour of index i.
func (d *Detector) cubeMerge(i int, m Gossip) {
	c := d.cube
	n := len(d.members)
	for k := range c.g {
		nw := m.G[k] &^ c.g[k]
		if nw == 0 {
			continue
		}
		c.g[k] |= nw
		for b := range 8 {
			if p := 8*k + b; nw&(1<<b) != 0 && p < n && d.live(p) {
				c.nG++
			}
		}
	}
	arrayMin(c.m, m.M)
	c.heard[i] = max(c.heard[i], int64(m.Iter))
}

// cubeTimer is the end of wait(Δ) (line 14–15): Step 1 of the round
// entered when round `ended` finished.
func (d *Detector) cubeTimer(ended uint64) {
	c := d.cube
	if c.round != ended+1 || !c.waiting {
		return
	}
	d.cubeStep1()
}

func (d *Detector) cubeReceive(p int, msg any) {
	m, ok := msg.(Gossip)
	c := d.cube
	if !ok || !d.okVec(m.M) || len(m.G) != bitmapLen(len(d.members)) {
		return
	}
	i := slices.Index(c.nbrs, p)
	if i < 0 {
		return // only hypercube neighbours talk to each other
	}
	pull := m.Pull && d.cfg.Resend > 0
	switch {
	case m.Round < c.round || c.round == 0:
		// Stale (line 3, §3.5). A pull for the round we just finished is
		// answered with our last message of it, which completes it there.
		if pull && c.lastFinal != nil && m.Round == c.lastFinal.Round {
			d.send(p, *c.lastFinal)
		}
		if c.round == 0 && m.Round == 1 {
			c.early[i] = m // before our first Step 1 (not yet started)
		}
	case m.Round > c.round:
		if m.Round == c.round+1 && (c.early[i].Round != m.Round || m.Iter >= c.early[i].Iter) {
			c.early[i] = m
		}
	default:
		d.cubeMerge(i, m)
		if pull && !c.waiting {
			d.send(p, d.cubeMsg(false))
		}
		d.cubeCheck()
	}
}

// cubeResend is §3.5: while a round is running, the node sends its current
// message again, as a pull, to the live neighbours it has not heard from in
// the current iteration.
func (d *Detector) cubeResend(round uint64) {
	c := d.cube
	if c.round != round || c.waiting {
		return
	}
	msg := d.cubeMsg(true)
	for i, q := range c.nbrs {
		if d.live(q) && c.heard[i] < int64(c.iter) {
			d.send(q, msg)
		}
	}
	d.armResend(round)
}

// cubeFailed: the failed neighbour no longer counts in rank_i, and G_i no
// longer needs its bit.
func (d *Detector) cubeFailed(p int) {
	c := d.cube
	if c.g != nil && hasBit(c.g, p) {
		c.nG--
	}
	if c.round > 0 {
		d.cubeCheck()
	}
}
