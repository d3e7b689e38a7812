package stack

import (
	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// gate stops the detector once the node leaves (member.LeaveRequest). The
// membership stops itself; the detector would go on watching the view the
// leaver last installed, which the others no longer heartbeat to, and
// accuse every one of them while the node lives on until it is closed.
type gate struct{ closed bool }

type gated struct {
	g *gate
	m core.Machine
}

func (g *gate) wrap(m core.Machine) core.Machine {
	if m == nil {
		return nil
	}
	return &gated{g: g, m: m}
}

func (x *gated) Start(env core.Env) { x.m.Start(env) }

func (x *gated) Receive(from core.NodeID, m core.Msg) {
	if !x.g.closed {
		x.m.Receive(from, m)
	}
}

func (x *gated) Fire(t core.Timer) {
	if !x.g.closed {
		x.m.Fire(t)
	}
}

func (x *gated) Handle(e core.Event) {
	if _, ok := e.(member.LeaveRequest); ok {
		x.g.closed = true
	}
	if !x.g.closed {
		x.m.Handle(e)
	}
}

// Protos passes the wrapped machine's protocols on.
func (x *gated) Protos() []core.Proto {
	if po, ok := x.m.(core.ProtoOwner); ok {
		return po.Protos()
	}
	return nil
}

// TrafficObserver is passed on too: the Phoenix detector counts traffic as
// heartbeats.
func (x *gated) ObserveSend(to core.NodeID) {
	if o, ok := x.m.(core.TrafficObserver); ok && !x.g.closed {
		o.ObserveSend(to)
	}
}

func (x *gated) ObserveReceive(from core.NodeID) {
	if o, ok := x.m.(core.TrafficObserver); ok && !x.g.closed {
		o.ObserveReceive(from)
	}
}
