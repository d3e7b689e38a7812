package replica

import (
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// Decisions (the package doc's "Decisions"): the master proposes the value
// of each decision of its rank to its fellows, which store it and
// acknowledge; once every live fellow did, the value is final, and a new
// master proposes again, under its own ballot, what is not known to be
// final everywhere.

func (l *Layer) onDecide(x Decide) {
	d := &l.dec
	if x.K != d.requested+1 {
		l.stats.BadRequests++
		return
	}
	d.requested, d.proposal = x.K, x.Value
	l.decProgress()
}

func (l *Layer) onDecision(from core.NodeID, m *Decision) {
	d := &l.dec
	if l.lay.Rank(from) != l.rank || from == l.self || m.Ballot != l.lay.Replica(from) {
		l.stats.BadMessages++
		return
	}
	if m.Ballot < d.ballot {
		return // an earlier master's, overtaken
	}
	d.ballot = m.Ballot
	if m.K > d.final {
		d.set(m.K, decVal{value: m.Value, ballot: m.Ballot})
	}
	// Upto: the decisions that are final here or hold this master's value.
	upto := d.final
	for upto < d.top() && d.get(upto+1).ballot == m.Ballot {
		upto++
	}
	l.env.Send(from, &DecisionAck{Ballot: m.Ballot, Upto: upto, Final: d.final})
}

func (l *Layer) onDecisionAck(from core.NodeID, a *DecisionAck) {
	d := &l.dec
	if l.lay.Rank(from) != l.rank || from == l.self {
		l.stats.BadMessages++
		return
	}
	if !l.IsMaster() || a.Ballot != l.index {
		return
	}
	if d.acks == nil {
		d.acks = map[core.NodeID]DecisionAck{}
	}
	old := d.acks[from]
	d.acks[from] = DecisionAck{Ballot: a.Ballot, Upto: max(old.Upto, a.Upto), Final: max(old.Final, a.Final)}
	l.decProgress()
}

func (l *Layer) onDecisionCommit(from core.NodeID, c *DecisionCommit) {
	d := &l.dec
	if l.lay.Rank(from) != l.rank || from == l.self {
		l.stats.BadMessages++
		return
	}
	if l.lay.Replica(from) < d.ballot {
		return // an earlier master's, overtaken
	}
	d.final = max(d.final, min(c.Upto, d.top()))
	d.allFinal = max(d.allFinal, min(c.AllFinal, d.final))
	l.decProgress()
}

// decProgress starts, commits and announces decisions: the master
// proposes the application's value for a new decision, and makes final
// what every live fellow replica holds; every replica announces the final
// decisions its application asked for, in order.
func (l *Layer) decProgress() {
	d := &l.dec
	if l.IsMaster() {
		fellows := l.fellows()
		if d.requested > d.consumed && d.requested == d.top()+1 {
			d.set(d.requested, decVal{value: d.proposal, ballot: l.index})
			l.stats.Decisions++
			for _, q := range fellows {
				l.env.Send(q, &Decision{Ballot: l.index, K: d.requested, Value: d.proposal})
			}
		}
		f := d.top()
		for _, q := range fellows {
			f = min(f, d.acks[q].Upto)
		}
		if f > d.final {
			d.final = f
			all := d.final
			for _, q := range fellows {
				all = min(all, d.acks[q].Final)
			}
			d.allFinal = max(d.allFinal, all)
			for _, q := range fellows {
				l.env.Send(q, &DecisionCommit{Upto: d.final, AllFinal: d.allFinal})
			}
		}
	}
	for d.consumed < d.requested && d.consumed < d.final {
		d.consumed++
		l.env.Emit(Decided{K: d.consumed, Value: d.get(d.consumed).value})
	}
	// Forget what every live replica holds as final and this one consumed.
	if lim := min(d.allFinal, d.consumed); lim > d.base {
		d.vals = slices.Clone(d.vals[lim-d.base:])
		d.base = lim
	}
}
