package stabletest

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
)

// Feeder plays the layers around the detector in simulations: the
// multicast above it (it emits Progress, with a vector that grows at random
// every Tick) and the membership beside it (told through Handle, it emits
// core.MembersChanged and core.Failed, which the stack hands the detector
// and the observers).
type Feeder struct {
	env     core.Env
	tick    time.Duration
	senders int
	epoch   uint64
	members []core.NodeID
	have    []uint64
}

// Install and Fail are the events a test hands a node's stack through
// World.Node(id).Handle to play the membership layer: the Feeder emits
// them as core.MembersChanged and core.Failed.
type (
	Install core.MembersChanged
	Fail    core.Failed
)

type feedTick struct{}

// NewFeeder returns a Feeder for a detector configured by cfg over the
// initial members, whose vector grows every tick (never if tick is 0).
func NewFeeder(cfg stable.Config, members []core.NodeID, tick time.Duration) *Feeder {
	f := &Feeder{tick: tick, members: slices.Clone(members)}
	f.senders = cfg.SendersFor(len(members))
	f.have = make([]uint64, f.senders)
	return f
}

func (f *Feeder) Start(env core.Env) {
	f.env = env
	f.report()
	if f.tick > 0 {
		env.SetTimer(f.tick, feedTick{})
	}
}

func (f *Feeder) report() {
	f.env.Emit(stable.Progress{Epoch: f.epoch, Have: slices.Clone(f.have)})
}

func (f *Feeder) Receive(core.NodeID, core.Msg) {}

func (f *Feeder) Fire(core.Timer) {
	r := f.env.Rand()
	for i := range f.have {
		f.have[i] += uint64(r.IntN(3))
	}
	f.report()
	f.env.SetTimer(f.tick, feedTick{})
}

func (f *Feeder) Handle(e core.Event) {
	switch e := e.(type) {
	case Install:
		if e.Epoch <= f.epoch {
			return
		}
		f.epoch, f.members = e.Epoch, slices.Clone(e.Members)
		f.env.Emit(core.MembersChanged(e))
		f.have = make([]uint64, min(len(f.have), len(e.Members)))
		f.report()
	case Fail:
		f.env.Emit(core.Failed(e))
	}
}
