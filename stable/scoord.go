package stable

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// treeState is S_Coord's state (Figure 3) at every member. The tree of a
// round is the Degree-ary heap laid over the members of the view that the
// root's start does not list as failed, in view order: the member at index
// q of that list has parent (q-1)/Degree and children Degree·q+1 …
// Degree·q+Degree. The root is position 0.
type treeState struct {
	round    uint64
	began    time.Duration
	failed   []core.NodeID // the round's excluded members (from start)
	parent   int           // position of the parent, -1 at the root or outside the tree
	children []int         // positions of the children
	heard    []bool        // ack received from children[i]
	nHeard   int
	min      []uint64 // M_i
	sentUp   bool     // ack sent to the parent (Step 2 or line 10)
	done     bool     // root: info sent
	learned  bool     // member: info received
	inTree   bool

	infoAcked []bool // root: ack-info received (§3.5), by position
	infoVec   []uint64

	early []heldAck // acks of a later round that arrived before its start
}

type heldAck struct {
	from int
	m    Ack
}

// buildTree computes this node's parent and children for a round that
// excludes the failed members.
func (d *Detector) buildTree(failed []core.NodeID) {
	t := d.tree
	t.failed = failed
	t.parent, t.children, t.heard, t.nHeard = -1, nil, nil, 0
	t.inTree = false
	var list []int
	for p, id := range d.members {
		if p == 0 || !slices.Contains(failed, id) {
			list = append(list, p)
		}
	}
	q := slices.Index(list, d.me)
	if q < 0 {
		return
	}
	t.inTree = true
	deg := d.cfg.DegreeFor(len(d.members))
	if q > 0 {
		t.parent = list[(q-1)/deg]
	}
	for c := deg*q + 1; c <= deg*q+deg && c < len(list); c++ {
		t.children = append(t.children, list[c])
	}
	t.heard = make([]bool, len(t.children))
}

// treeStart is Step 1 at the root (line 1): a new round, start to every
// member of the round's tree.
func (d *Detector) treeStart() {
	t := d.tree
	t.round++
	t.began = d.env.Now()
	t.done, t.sentUp, t.learned = false, false, false
	t.infoAcked, t.infoVec = nil, nil
	var failed []core.NodeID
	for p, f := range d.failed {
		if f {
			failed = append(failed, d.members[p])
		}
	}
	d.buildTree(failed)
	t.min = d.vec()
	for p := 1; p < len(d.members); p++ {
		if d.live(p) {
			d.send(p, Start{Epoch: d.epoch, Round: t.round, Failed: failed})
		}
	}
	d.armResend(t.round)
	d.treeCheck()
}

// treeCheck is lines 8–19: once every child has acked, an inner node sends
// M_i up, the root ends the round.
func (d *Detector) treeCheck() {
	t := d.tree
	if !t.inTree || t.nHeard < len(t.children) {
		return
	}
	if d.me != 0 {
		if !t.sentUp {
			t.sentUp = true
			d.send(t.parent, Ack{Epoch: d.epoch, Round: t.round, Vector: slices.Clone(t.min)})
		}
		return
	}
	if t.done {
		return
	}
	t.done = true
	t.infoVec = slices.Clone(t.min)
	t.infoAcked = make([]bool, len(d.members))
	t.infoAcked[0] = true
	for p := 1; p < len(d.members); p++ {
		if d.live(p) {
			d.send(p, Info{Epoch: d.epoch, Round: t.round, Vector: t.infoVec})
		}
	}
	d.learn(t.round, t.infoVec, t.began)
	d.scheduleNext(t.round)
}

func (d *Detector) treeReceive(p int, m any) {
	t := d.tree
	switch m := m.(type) {
	case Start: // line 2, and the start of every other member's round
		// From the root, or passed down by the parent (a §3.5 pull): it is
		// the root's start either way.
		if d.me == 0 || m.Round < t.round {
			return
		}
		if m.Round > t.round {
			t.round, t.began = m.Round, d.env.Now()
			t.sentUp, t.learned, t.done = false, false, false
			d.buildTree(slices.Clone(m.Failed))
			// M_i := R_i at the start of every round (see the package
			// documentation: Figure 3 only initializes it once).
			t.min = d.vec()
			early := t.early
			t.early = nil
			for _, h := range early {
				if h.m.Round == t.round {
					d.treeAck(h.from, h.m)
				}
			}
			d.treeCheck() // a leaf acks at once (line 3)
			return
		}
		// A repeated start (§3.5): answer again if our part is done,
		// otherwise pass the pull on to the children still missing.
		if !t.inTree {
			return
		}
		if t.nHeard == len(t.children) {
			d.send(t.parent, Ack{Epoch: d.epoch, Round: t.round, Vector: slices.Clone(t.min)})
			return
		}
		for i, c := range t.children {
			if !t.heard[i] && d.live(c) {
				d.send(c, Start{Epoch: d.epoch, Round: t.round, Failed: t.failed})
			}
		}
	case Ack:
		if !d.okVec(m.Vector) {
			return
		}
		if m.Round > t.round && d.me != 0 {
			// A child heard the round's start before us: keep its ack
			// until our start arrives (only the newest round's).
			if len(t.early) > 0 && t.early[0].m.Round != m.Round {
				t.early = t.early[:0]
			}
			if len(t.early) < len(d.members) {
				t.early = append(t.early, heldAck{p, m})
			}
			return
		}
		if m.Round == t.round {
			d.treeAck(p, m)
		}
	case Info: // lines 21–25
		if d.me == 0 || p != 0 || m.Round < t.round || !d.okVec(m.Vector) {
			return
		}
		if m.Round > t.round {
			t.round, t.began, t.sentUp = m.Round, d.env.Now(), false
			t.learned, t.inTree, t.children, t.parent = false, false, nil, -1
		}
		if !t.learned {
			t.learned = true
			d.learn(t.round, m.Vector, t.began)
		}
		if d.cfg.Resend > 0 {
			d.send(0, AckInfo{Epoch: d.epoch, Round: t.round})
		}
	case AckInfo:
		if d.me == 0 && m.Round == t.round && t.infoAcked != nil {
			t.infoAcked[p] = true
		}
	}
}

// treeAck is lines 5–7.
func (d *Detector) treeAck(p int, m Ack) {
	t := d.tree
	i := slices.Index(t.children, p)
	if !t.inTree || i < 0 || t.heard[i] || (d.me == 0 && t.done) {
		return
	}
	t.heard[i] = true
	t.nHeard++
	arrayMin(t.min, m.Vector)
	d.treeCheck()
}

// treeResend is §3.5 at the root: start again to the children whose ack is
// missing (each passes it on down its missing branch), then info again to
// the members whose ack-info is missing, until the next round starts.
func (d *Detector) treeResend(round uint64) {
	t := d.tree
	if d.me != 0 || round != t.round {
		return
	}
	pending := false
	if !t.done {
		for i, c := range t.children {
			if !t.heard[i] && d.live(c) {
				d.send(c, Start{Epoch: d.epoch, Round: t.round, Failed: t.failed})
				pending = true
			}
		}
	} else {
		for p := 1; p < len(d.members); p++ {
			if d.live(p) && !t.infoAcked[p] {
				d.send(p, Info{Epoch: d.epoch, Round: t.round, Vector: t.infoVec})
				pending = true
			}
		}
	}
	if pending {
		d.armResend(round)
	}
}

// treeFailed: a failure inside the running round's tree loses the round
// (§3.4: "the tree needs to be rebuilt immediately, and the current round of
// the protocol is lost"); the root starts the next round at once over a
// tree without the failed member.
func (d *Detector) treeFailed(p int) {
	t := d.tree
	if d.me != 0 || t.done || t.round == 0 || slices.Contains(t.failed, d.members[p]) {
		return
	}
	d.startRound()
}
