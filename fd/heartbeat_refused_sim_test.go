package fd

import (
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// lateTimers runs a machine whose timers all fire late by lateness, as a
// real host's do: the detector then takes its verdicts' re-check
// (recheck), which the simulator's exact timers never reach.
type lateTimers struct {
	core.Machine
	lateness time.Duration
}

type lateEnv struct {
	core.Env
	lateness time.Duration
}

func (m lateTimers) Start(env core.Env) { m.Machine.Start(lateEnv{env, m.lateness}) }

func (e lateEnv) SetTimer(after time.Duration, t core.Timer) core.TimerID {
	return e.Env.SetTimer(after+e.lateness, t)
}

// TestHeartbeatSimRefusedInSettling: a 3-member group with the job's
// timing but for T_timeout (T_interval 100 ms, T_timeout 205 ms, T_broken
// 100 ms, SettleIntervals 10) on a host whose timers fire 10 ms late. n2
// stalls for 195 ms from 300 ms (a process starting on a loaded host: the
// survivors learn a wide slack, and their wait for its refutation grows
// to (1 + LocalHealthMax)·T_broken), then crashes at 500 ms, inside the
// settling window, and both survivors' transports at once report its
// connection refused. Both suspect it from the refusal, which gets no
// margin (no settling, no input-gap or answering hold, no second probe),
// and must declare it within (1 + LocalHealthMax)·T_broken of the crash
// and the timers' lateness. A probe asked again that did not fit in that
// wait when it fell due, T_interval + T_timeout after the suspicion,
// started once the verdict's re-check moved the hold by its timer's
// lateness: its timer, armed for a due time already past, fired at once
// and the local health took it for the loop running a ProbeTimeout late,
// which stretched T_broken, and the cycle began again: neither survivor
// ever declared n2 (4 seeds of 5).
func TestHeartbeatSimRefusedInSettling(t *testing.T) {
	const n = 3
	const lateness = 10 * time.Millisecond
	cfg := clusterHeartbeatConfig()
	cfg.Timeout = 205 * time.Millisecond
	crashAt := 500 * time.Millisecond
	h := time.Duration(1 + cfg.LocalHealthMax)
	bound := h*cfg.Broken + 4*lateness
	for _, seed := range simtest.Seeds(t, 5) {
		w := sim.New(sim.Config{Seed: seed, Network: hbNet})
		w.SetReplay("go test ./fd -run TestHeartbeatSimRefusedInSettling -seed=%d")
		for range n {
			w.Add(lateTimers{hbStack(t, cfg, ids(n)), lateness})
		}
		ev := recordHB(w)
		w.At(300*time.Millisecond, func() { w.Pause(2, 195*time.Millisecond) })
		w.At(crashAt, func() {
			w.Crash(2)
			for i := range core.NodeID(2) {
				w.Node(i).Handle(core.PeerHint{Node: 2, Reason: "connection refused", Refused: true})
			}
		})
		w.RunUntil(crashAt + 5*time.Second)
		for i := range core.NodeID(2) {
			f := ev.failed[[2]core.NodeID{i, 2}]
			if len(f) != 1 || f[0]-crashAt > bound {
				t.Errorf("seed %d: n2 crashed at %v, declared by n%d at %v (suspected at %v); want once within %v", seed, crashAt, i, f, ev.suspected[[2]core.NodeID{i, 2}], bound)
			}
		}
	}
}
