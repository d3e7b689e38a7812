package vsynctest

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
)

// fakeStable is a minimal stability detector for these tests (FullDist in
// spirit: every member sends its newest Progress to every other member
// every period; the column minima over all members' rows are stable). It
// lets the multicast be tested on its own; package stable
// holds the real protocols.
type fakeStable struct {
	env    core.Env
	period time.Duration
	epoch  uint64
	view   []core.NodeID
	rows   map[core.NodeID][]uint64
	last   []uint64
	round  uint64
}

type fakeRow struct {
	Epoch uint64
	Have  []uint64
}

func (*fakeRow) Kind() core.Kind { return core.MakeKind(core.ProtoTest, 1) }

func newFakeStable(period time.Duration) *fakeStable {
	return &fakeStable{period: period, rows: map[core.NodeID][]uint64{}}
}

func (f *fakeStable) Protos() []core.Proto { return []core.Proto{core.ProtoTest} }

func (f *fakeStable) Start(env core.Env) {
	f.env = env
	env.SetTimer(f.period, 0)
}

func (f *fakeStable) Handle(e core.Event) {
	switch x := e.(type) {
	case core.MembersChanged:
		if x.Epoch > f.epoch {
			f.epoch, f.view, f.rows, f.last = x.Epoch, x.Members, map[core.NodeID][]uint64{}, nil
		}
	case stable.Progress:
		if x.Epoch == f.epoch {
			f.rows[f.env.Self()] = x.Have
			f.compute()
		}
	}
}

func (f *fakeStable) Fire(core.Timer) {
	f.env.SetTimer(f.period, 0)
	if row, ok := f.rows[f.env.Self()]; ok {
		for _, q := range f.view {
			if q != f.env.Self() {
				f.env.Send(q, &fakeRow{Epoch: f.epoch, Have: row})
			}
		}
	}
}

func (f *fakeStable) Receive(from core.NodeID, m core.Msg) {
	if r, ok := m.(*fakeRow); ok && r.Epoch == f.epoch {
		f.rows[from] = r.Have
		f.compute()
	}
}

func (f *fakeStable) compute() {
	min := make([]uint64, len(f.view))
	for i := range min {
		min[i] = ^uint64(0)
	}
	for _, q := range f.view {
		row, ok := f.rows[q]
		if !ok {
			return
		}
		for i := range min {
			min[i] = minU(min[i], at(row, i))
		}
	}
	if f.last != nil && slices.Equal(min, f.last) {
		return
	}
	for i := range min {
		min[i] = max(min[i], at(f.last, i))
	}
	f.last = min
	f.round++
	f.env.Emit(stable.Stable{Epoch: f.epoch, Round: f.round, Vector: min})
}

func minU(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}
