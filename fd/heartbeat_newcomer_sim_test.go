package fd

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// backlog is a network whose messages to node to sent in [from, until)
// arrive no earlier than until (plus their latency): to's loop and
// timers run on time, but what reaches it waits unread, as in a process
// catching up (a state transfer, a checkpoint load) whose inbox is read
// late on a loaded host.
type backlog struct {
	net         sim.Network
	to          core.NodeID
	from, until time.Duration
}

func (b *backlog) Transit(from, to core.NodeID, size int, now time.Duration, rng *rand.Rand) (time.Duration, bool) {
	d, ok := b.net.Transit(from, to, size, now, rng)
	if ok && to == b.to && now >= b.from && now < b.until {
		d += b.until - now
	}
	return d, ok
}

// newcomerWorld is n members running from 0 and a newcomer, node n,
// that joins at join (it starts with no members and learns the view
// when the others do, as a respawned process does), on network net.
func newcomerWorld(t *testing.T, seed uint64, n int, cfg HeartbeatConfig, net sim.Network, join time.Duration) *sim.World {
	w := sim.New(sim.Config{Seed: seed, Network: net})
	for range n {
		w.Add(hbStack(t, cfg, ids(n)))
	}
	w.AddAt(join, hbStack(t, cfg, nil))
	w.At(join, func() {
		for i := range n + 1 {
			w.Node(core.NodeID(i)).Handle(core.MembersChanged{Epoch: 2, Members: ids(n + 1)})
		}
	})
	return w
}

// TestHeartbeatSimStarvedNewcomer: a process that joined a running group
// (a respawned rank, the job's timing: T_interval 100 ms, T_timeout
// 200 ms, T_broken 100 ms) reads nothing for 0.5 to 2 s from 1.2 s after
// its join, past its settling, while its timers run on time and the
// members keep running: everything sent to it waits unread. Every member
// it watches goes silent at once; it suspects them, but it is its own
// input that stopped, and it declares none of them failed (without the
// input-gap hold it declared all six, 125 ms after suspecting them).
// What it can still detect: a member that crashes while the others are
// heard is declared within the bound, its verdict held for no gap; and
// when the newcomer is cut off for good (every link cut), its verdicts
// come at most (1 + H)·T_broken + 2·stallCap after its
// suspicions, while the members, which hear nothing from it either,
// declare it within the bound plus the newcomer's settling margin,
// 2·stallCap (heartbeat_newcomers.go).
func TestHeartbeatSimStarvedNewcomer(t *testing.T) {
	const n = 6
	cfg := clusterHeartbeatConfig()
	cfg.Monitors = n // every member watched by the newcomer at T_interval
	newcomer := core.NodeID(n)
	join := 3 * time.Second
	at := join + 1200*time.Millisecond
	h := time.Duration(1 + cfg.LocalHealthMax)
	stallCap := h * (cfg.Timeout + cfg.Broken)
	bound := cfg.Interval + h*(cfg.Timeout+cfg.Broken) + floodBound(n+1) + hbMaxLatency
	for _, seed := range simtest.Seeds(t, 5) {
		for _, starve := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second} {
			w := newcomerWorld(t, seed, n, cfg, &backlog{net: hbNet, to: newcomer, from: at, until: at + starve}, join)
			w.SetReplay("go test ./fd -run TestHeartbeatSimStarvedNewcomer -seed=%d")
			f := countFailures(w, core.None)
			w.RunUntil(at + starve + 10*time.Second)
			st := hbOf(w, newcomer).Stats()
			if f.n != 0 {
				t.Errorf("seed %d, starved %v: %d failures declared, the first at %v; want none", seed, starve, f.n, f.first)
			}
			if starve > 1200*time.Millisecond && (st.InputGaps == 0 || st.GapHeld == 0) {
				t.Errorf("seed %d, starved %v: the newcomer saw %d input gaps and held %d verdicts for them; want both > 0", seed, starve, st.InputGaps, st.GapHeld)
			}
			t.Logf("seed %d, starved %v: newcomer %d accusations, %d input gaps, %d verdicts held, %d probed again, stall memory %v",
				seed, starve, st.Accusations, st.InputGaps, st.GapHeld, st.Reprobes, hbOf(w, newcomer).Health().Lateness)
		}

		// A member crashes; the newcomer hears the others.
		w := newcomerWorld(t, seed, n, cfg, hbNet, join)
		w.At(at, func() { w.Crash(2) })
		ev := recordHB(w)
		w.RunUntil(at + 10*time.Second)
		st := hbOf(w, newcomer).Stats()
		if v := ev.failed[[2]core.NodeID{newcomer, 2}]; len(v) != 1 || v[0]-at > bound || st.GapHeld != 0 {
			t.Errorf("seed %d: n2 crashed at %v, declared by the newcomer at %v with %d verdicts held for a gap; want once within %v, none held", seed, at, v, st.GapHeld, bound)
		}

		// The newcomer is cut off for good, both ways.
		w = newcomerWorld(t, seed, n, cfg, hbNet, join)
		w.At(at, func() {
			for i := range core.NodeID(n) {
				w.Cut(i, newcomer)
			}
		})
		ev = recordHB(w)
		w.RunUntil(at + 10*time.Second)
		for i := range core.NodeID(n) {
			key := [2]core.NodeID{newcomer, i}
			s, v := ev.suspected[key], ev.failed[key]
			if len(s) == 0 || len(v) != 1 || v[0]-s[0] > h*cfg.Broken+2*stallCap+cfg.Interval {
				t.Errorf("seed %d, newcomer cut off at %v: n%d suspected at %v, declared at %v; want once, within %v of the suspicion", seed, at, i, s, v, h*cfg.Broken+2*stallCap+cfg.Interval)
			}
			if v := ev.failed[[2]core.NodeID{i, newcomer}]; len(v) != 1 || v[0]-at > bound+2*stallCap {
				t.Errorf("seed %d, newcomer cut off at %v: n%d declared it at %v; want once within %v", seed, at, i, v, bound+2*stallCap)
			}
		}
	}
}
