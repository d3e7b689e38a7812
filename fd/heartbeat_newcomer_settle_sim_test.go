package fd

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// TestHeartbeatSimNewcomerSettles: a process that joined a running group
// (the job's timing: T_interval 100 ms, T_timeout 200 ms, T_broken
// 100 ms, SettleIntervals 10) and is paused for 1.5 s from 1.2 s after
// its join, past the members' own settling, is declared failed by
// nobody: the members' suspicions of it settle for 2·SettleIntervals
// T_interval after it joined (without that, its monitors declared it
// about 0.6 s into the pause). A newcomer that crashes at the same
// moment is declared by every member within the bound plus the settling
// margin, 2·(1 + H)·(T_timeout + T_broken): as for a crash in the
// group's first second.
func TestHeartbeatSimNewcomerSettles(t *testing.T) {
	const n = 8
	cfg := clusterHeartbeatConfig()
	newcomer := core.NodeID(n)
	join := 3 * time.Second
	at := join + 1200*time.Millisecond
	h := time.Duration(1 + cfg.LocalHealthMax)
	stallCap := h * (cfg.Timeout + cfg.Broken)
	bound := cfg.Interval + h*(cfg.Timeout+cfg.Broken) + floodBound(n+1) + hbMaxLatency
	for _, seed := range simtest.Seeds(t, 5) {
		w := newcomerWorld(t, seed, n, cfg, hbNet, join)
		w.SetReplay("go test ./fd -run TestHeartbeatSimNewcomerSettles -seed=%d")
		f := countFailures(w, core.None)
		w.At(at, func() { w.Pause(newcomer, 1500*time.Millisecond) })
		w.RunUntil(at + 10*time.Second)
		if f.n != 0 {
			t.Errorf("seed %d: newcomer paused 1.5 s at %v: %d failures declared, the first at %v; want none", seed, at, f.n, f.first)
		}

		w = newcomerWorld(t, seed, n, cfg, hbNet, join)
		ev := recordHB(w)
		w.CrashAt(at, newcomer)
		w.RunUntil(at + 10*time.Second)
		for i := range core.NodeID(n) {
			if v := ev.failed[[2]core.NodeID{i, newcomer}]; len(v) != 1 || v[0]-at > bound+2*stallCap {
				t.Errorf("seed %d: newcomer crashed at %v, declared by n%d at %v; want once within %v", seed, at, i, v, bound+2*stallCap)
			}
		}
	}
}

// TestHeartbeatSimReassignedNotNewcomer: a view change that drops a
// crashed member m (and adds a newcomer) makes the members that m
// monitored choose another monitor, which begins to watch them. One of
// them, v, crashing 50 ms after that view, is declared by every old
// member within the bound and at the very times it is with settling off:
// a member watched anew is not a newcomer, and no settling delays its
// verdict.
func TestHeartbeatSimReassignedNotNewcomer(t *testing.T) {
	const n = 8
	newcomer := core.NodeID(n)
	change := 3 * time.Second
	run := func(seed uint64, cfg HeartbeatConfig) (map[core.NodeID]time.Duration, core.NodeID, time.Duration) {
		w := sim.New(sim.Config{Seed: seed, Network: hbNet})
		for range n {
			w.Add(hbStack(t, cfg, ids(n)))
		}
		w.AddAt(change, hbStack(t, cfg, nil))
		ev := recordHB(w)
		victim, crashAt := core.None, change+50*time.Millisecond
		w.At(change, func() {
			for m := range core.NodeID(n) {
				for v := range core.NodeID(n) {
					if v != m && victim == core.None && slices.Contains(hbOf(w, v).Monitors(), m) {
						victim = v
						w.Crash(m)
						view := slices.DeleteFunc(ids(n+1), func(id core.NodeID) bool { return id == m })
						for _, id := range view {
							w.Node(id).Handle(core.MembersChanged{Epoch: 2, Members: view})
						}
					}
				}
			}
			w.CrashAt(crashAt, victim)
		})
		w.RunUntil(change + 10*time.Second)
		got := map[core.NodeID]time.Duration{}
		for k, v := range ev.failed {
			if k[1] == victim && len(v) > 0 {
				got[k[0]] = v[0]
			}
		}
		return got, victim, crashAt
	}
	cfg := clusterHeartbeatConfig()
	h := time.Duration(1 + cfg.LocalHealthMax)
	bound := cfg.Interval + h*(cfg.Timeout+cfg.Broken) + floodBound(n+1) + hbMaxLatency
	off := cfg
	off.SettleIntervals = 0
	for _, seed := range simtest.Seeds(t, 5) {
		got, victim, crashAt := run(seed, cfg)
		want, _, _ := run(seed, off)
		if victim == core.None {
			t.Fatalf("seed %d: no member monitored another", seed)
		}
		old := 0
		for id, at := range got {
			if id == newcomer {
				continue // its own first members settle (SettleIntervals)
			}
			old++
			if at != want[id] || at-crashAt > bound {
				t.Errorf("seed %d: n%d crashed at %v after the view change, declared by n%d at %v, with settling off at %v; want the same, within %v", seed, victim, crashAt, id, at, want[id], bound)
			}
		}
		if old != n-2 {
			t.Errorf("seed %d: n%d declared by %d old members; want %d", seed, victim, old, n-2)
		}
		t.Logf("seed %d: n%d crashed at %v, declared by %d old members, the verdicts %v", seed, victim, crashAt, old, got)
	}
}
