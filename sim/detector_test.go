package sim

import (
	"time"

	"github.com/cohort-mp/cohort/core"
)

// heartbeat is a small all-to-all heartbeat failure detector used to
// exercise the checkers: every Period it sends a heartbeat to every other
// node and declares Failed the nodes it has not heard from for Timeout; a
// node heard from again is Recovered. lazy never declares anything (a
// detector with a completeness bug).
type heartbeat struct {
	env     core.Env
	n       int
	period  time.Duration
	timeout time.Duration
	lazy    bool
	last    []time.Duration
	failed  []bool
}

type hbMsg struct{}

func (hbMsg) Kind() core.Kind { return core.MakeKind(core.ProtoTest, 10) }

func newHeartbeat(n int, period, timeout time.Duration) *heartbeat {
	return &heartbeat{n: n, period: period, timeout: timeout}
}

func (h *heartbeat) Start(env core.Env) {
	h.env = env
	h.last = make([]time.Duration, h.n)
	h.failed = make([]bool, h.n)
	for i := range h.last {
		h.last[i] = env.Now()
	}
	env.SetTimer(time.Duration(env.Rand().Int64N(int64(h.period))), 0)
}

func (h *heartbeat) Receive(from core.NodeID, _ core.Msg) {
	h.last[from] = h.env.Now()
	if h.failed[from] {
		h.failed[from] = false
		h.env.Emit(core.Recovered{Node: from})
	}
}

func (h *heartbeat) Fire(core.Timer) {
	self := h.env.Self()
	for i := range h.n {
		id := core.NodeID(i)
		if id == self {
			continue
		}
		h.env.Send(id, hbMsg{})
		if !h.lazy && !h.failed[i] && h.env.Now()-h.last[i] > h.timeout {
			h.failed[i] = true
			h.env.Emit(core.Failed{Node: id})
		}
	}
	h.env.SetTimer(h.period, 0)
}

func (h *heartbeat) Handle(core.Event) {}
