package stable_test

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
)

// feeder plays the layers around the detector in simulations: the
// multicast above it (it emits Progress, with a vector that grows at random
// every Tick) and the membership beside it (told through Handle, it emits
// core.MembersChanged and core.Failed, which the stack hands the detector
// and the observers).
type feeder struct {
	env     core.Env
	tick    time.Duration
	senders int
	epoch   uint64
	members []core.NodeID
	have    []uint64
}

// install and fail are the events a test hands a node's stack through
// World.Node(id).Handle to play the membership layer.
type install core.MembersChanged
type fail core.Failed

type feedTick struct{}

func newFeeder(cfg stable.Config, members []core.NodeID, tick time.Duration) *feeder {
	f := &feeder{tick: tick, members: slices.Clone(members)}
	f.senders = cfg.SendersFor(len(members))
	f.have = make([]uint64, f.senders)
	return f
}

func (f *feeder) Start(env core.Env) {
	f.env = env
	f.report()
	if f.tick > 0 {
		env.SetTimer(f.tick, feedTick{})
	}
}

func (f *feeder) report() {
	f.env.Emit(stable.Progress{Epoch: f.epoch, Have: slices.Clone(f.have)})
}

func (f *feeder) Receive(core.NodeID, core.Msg) {}

func (f *feeder) Fire(core.Timer) {
	r := f.env.Rand()
	for i := range f.have {
		f.have[i] += uint64(r.IntN(3))
	}
	f.report()
	f.env.SetTimer(f.tick, feedTick{})
}

func (f *feeder) Handle(e core.Event) {
	switch e := e.(type) {
	case install:
		if e.Epoch <= f.epoch {
			return
		}
		f.epoch, f.members = e.Epoch, slices.Clone(e.Members)
		f.env.Emit(core.MembersChanged(e))
		f.have = make([]uint64, min(len(f.have), len(e.Members)))
		f.report()
	case fail:
		f.env.Emit(core.Failed(e))
	}
}

// ids returns the node ids 0..n-1.
func ids(n int) []core.NodeID {
	out := make([]core.NodeID, n)
	for i := range out {
		out[i] = core.NodeID(i)
	}
	return out
}
