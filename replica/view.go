package replica

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// Views: a process that leaves the view is gone for good; the masters
// follow the view, and a new master takes over what its predecessor left.

func (l *Layer) onView(epoch uint64, members []core.NodeID) {
	if epoch <= l.epoch || !slices.Contains(members, l.self) {
		return
	}
	l.epoch = epoch
	in := make([]bool, len(l.alive))
	for _, p := range members {
		if l.lay.Contains(p) {
			in[p] = true
		}
	}
	var died []core.NodeID
	for p := range l.alive {
		// A process that left never comes back: it lost its state.
		if l.alive[p] && !in[p] {
			l.alive[p] = false
			died = append(died, core.NodeID(p))
		}
	}
	if len(died) == 0 {
		return
	}
	defer l.finProgress()
	old := slices.Clone(l.masters)
	for r := range l.masters {
		l.masters[r] = core.None
		if live := l.live(r); len(live) > 0 {
			l.masters[r] = live[0]
		}
	}
	for _, p := range died {
		if r := l.lay.Rank(p); l.masters[r] != core.None {
			l.env.Emit(ReplicaLost{Phys: p, Rank: r})
		}
	}
	for r, m := range l.masters {
		if m == core.None && !l.failed[r] {
			l.failed[r] = true
			l.env.Emit(RankFailed{Rank: r})
			l.rankFailed(r)
		}
	}
	if old[l.rank] != l.self && l.IsMaster() {
		l.takeover()
	}
	// Acknowledge again to every new master: it needs the receivers'
	// levels to commit, and the acks sent to its predecessor are lost.
	for _, ic := range l.inOrder {
		if s := ic.key.Src; l.masters[s] != old[s] && l.masters[s] != core.None && ic.delivered > 0 {
			l.ackNow(ic)
		}
	}
	if l.IsMaster() {
		for _, oc := range l.outOrder {
			l.tryCommit(oc)
		}
	}
	l.decProgress()
}

// rankFailed forgets the sends to a rank that failed: nobody is left to
// receive them.
func (l *Layer) rankFailed(r int) {
	for _, oc := range l.outOrder {
		if oc.key.Dst == r {
			l.backup(-len(oc.backup), -payloadBytes(oc.backup))
			oc.backup = nil
		}
	}
}

// takeover makes this process the master of its rank: it repeats its
// commit levels to its fellows, sends again every send of its backup
// table, per channel in seq order, to every live destination replica
// (receivers drop what they already have), and proposes again every
// decision not known to be final everywhere.
func (l *Layer) takeover() {
	l.stats.Takeovers++
	fellows := l.fellows()
	for _, oc := range l.outOrder {
		if l.failed[oc.key.Dst] {
			continue
		}
		// The old master's last commits may have died with it: a fellow
		// would keep those sends in its backup table for ever.
		if oc.committed > 0 {
			for _, q := range fellows {
				l.env.Send(q, &Commit{Comm: oc.key.Comm, Src: oc.key.Src, Dst: oc.key.Dst, Upto: oc.committed})
				l.stats.Commits++
			}
		}
		for _, e := range slices.Clone(oc.backup) {
			n := l.transmit(oc, e)
			l.stats.Resent += uint64(n)
		}
	}
	l.armResend()
	d := &l.dec
	d.ballot = l.index
	d.acks = map[core.NodeID]DecisionAck{}
	for k := max(d.allFinal, d.base) + 1; k <= d.top(); k++ {
		v := d.get(k)
		v.ballot = l.index
		for _, q := range fellows {
			l.env.Send(q, &Decision{Ballot: l.index, K: k, Value: v.value})
		}
	}
	if d.final > 0 {
		for _, q := range fellows {
			l.env.Send(q, &DecisionCommit{Upto: d.final, AllFinal: d.allFinal})
		}
	}
}
