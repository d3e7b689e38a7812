package vsync

import "github.com/cohort-mp/cohort/core"

// HideFailures wraps m (typically the stability detector) so that it never
// sees the failure detector's events: core.Suspected, core.Unsuspected,
// core.Failed, core.Recovered and core.PeerHint. Everything else passes
// through, and the wrapper owns m's protocols.
//
// Why: a stability detector may leave a member reported failed out of its
// rounds, and declare stable what that member lacks. Reliable multicast
// then frees the message. If the verdict is withdrawn (core.Recovered
// before the membership layer acts on it) the member stays in the view,
// can no longer get the message, and a later flush that needs it from
// somebody never ends. Behind HideFailures the detector waits for every
// member of the view: a crashed member stalls stability (and so the
// senders' flow-control windows) only until the membership layer installs
// the view without it.
func HideFailures(m core.Machine) core.Machine { return &hideFailures{m: m} }

type hideFailures struct{ m core.Machine }

func (h *hideFailures) Start(env core.Env)                   { h.m.Start(env) }
func (h *hideFailures) Receive(from core.NodeID, m core.Msg) { h.m.Receive(from, m) }
func (h *hideFailures) Fire(t core.Timer)                    { h.m.Fire(t) }

func (h *hideFailures) Handle(e core.Event) {
	switch e.(type) {
	case core.Suspected, core.Unsuspected, core.Failed, core.Recovered, core.PeerHint:
		return
	}
	h.m.Handle(e)
}

// Protos implements core.ProtoOwner with the wrapped machine's protocols.
func (h *hideFailures) Protos() []core.Proto {
	if po, ok := h.m.(core.ProtoOwner); ok {
		return po.Protos()
	}
	return nil
}

// Unwrap returns the wrapped machine.
func (h *hideFailures) Unwrap() core.Machine { return h.m }
