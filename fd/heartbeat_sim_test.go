package fd

import (
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// Simulations of the heartbeat detector (Phoenix §4, §6.2) on package sim:
// every node runs a core.Stack whose lowest layer is the detector, as a
// real node does, so that the detector sees all traffic.

// hbNet is the latency model of the simulations: 0.2 to 2 ms.
var hbNet = sim.Uniform(200*time.Microsecond, 2*time.Millisecond)

const hbMaxLatency = 2 * time.Millisecond

// hbStack builds a node: the detector, then the extra layers.
func hbStack(t testing.TB, cfg HeartbeatConfig, members []core.NodeID, extra ...core.Machine) *core.Stack {
	h, err := NewHeartbeat(cfg, members)
	if err != nil {
		t.Fatal(err)
	}
	return core.NewStack(append([]core.Machine{h}, extra...)...)
}

func hbOf(w *sim.World, id core.NodeID) *HeartbeatDetector {
	return w.Node(id).(*core.Stack).Layer(0).(*HeartbeatDetector)
}

// hbWorld is a world of n nodes that all share one member list.
func hbWorld(t testing.TB, seed uint64, n int, cfg HeartbeatConfig, extra func(id core.NodeID) []core.Machine) *sim.World {
	w := sim.New(sim.Config{Seed: seed, Network: hbNet})
	members := ids(n)
	for i := range n {
		var ex []core.Machine
		if extra != nil {
			ex = extra(core.NodeID(i))
		}
		w.Add(hbStack(t, cfg, members, ex...))
	}
	return w
}

// hbEvents records, per observer and subject, when each detector event was
// emitted.
type hbEvents struct {
	suspected, failed, recovered map[[2]core.NodeID][]time.Duration
}

func recordHB(w *sim.World) *hbEvents {
	ev := &hbEvents{
		suspected: map[[2]core.NodeID][]time.Duration{},
		failed:    map[[2]core.NodeID][]time.Duration{},
		recovered: map[[2]core.NodeID][]time.Duration{},
	}
	w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
		switch e := e.(type) {
		case core.Suspected:
			ev.suspected[[2]core.NodeID{node, e.Node}] = append(ev.suspected[[2]core.NodeID{node, e.Node}], at)
		case core.Failed:
			ev.failed[[2]core.NodeID{node, e.Node}] = append(ev.failed[[2]core.NodeID{node, e.Node}], at)
		case core.Recovered:
			ev.recovered[[2]core.NodeID{node, e.Node}] = append(ev.recovered[[2]core.NodeID{node, e.Node}], at)
		}
	})
	return ev
}

// floodBound is how long a notice may take to reach every member after it
// is sent: ⌈log2 n⌉ hops of at most hbMaxLatency each, doubled for the
// detours around crashed nodes, plus one hop for the direct send.
func floodBound(n int) time.Duration {
	return time.Duration(2*bits.Len(uint(n-1))+2) * hbMaxLatency
}

// §4.2.1, §4.2.3, §6.2 (Fig. 2): 1,024 processes for 10 simulated minutes
// without faults. No process is ever suspected at the default settings,
// and each process receives about k = 2 heartbeats per T_interval.
func TestHeartbeatSimNoFaults(t *testing.T) {
	const n = 1024
	cfg := DefaultHeartbeatConfig()
	for _, seed := range simtest.Seeds(t, 1) {
		w := hbWorld(t, seed, n, cfg, nil)
		ev := recordHB(w)
		const warm = time.Minute
		horizon := 10 * time.Minute
		windows := int((horizon - warm) / cfg.Interval)
		perWindow := make([]int, windows)
		insurance := 0
		w.OnDeliver(func(at time.Duration, from, to core.NodeID, m core.Msg) {
			hb, ok := m.(HeartbeatMsg)
			if !ok || at < warm || at >= horizon {
				return
			}
			perWindow[(at-warm)/cfg.Interval]++
			if !hb.Monitor {
				insurance++
			}
		})
		w.RunUntil(horizon)
		if len(ev.suspected) != 0 || len(ev.failed) != 0 {
			t.Fatalf("seed %d: %d suspicions and %d failures without any fault, want none", seed, len(ev.suspected), len(ev.failed))
		}
		total, lo, hi := 0, perWindow[0], perWindow[0]
		for _, c := range perWindow {
			total += c
			lo, hi = min(lo, c), max(hi, c)
		}
		mean := float64(total) / float64(n*windows)
		t.Logf("seed %d: heartbeats received per process per T_interval: mean %.3f, windows %.3f..%.3f; insurance %.2f%% of them; %d events",
			seed, mean, float64(lo)/n, float64(hi)/n, 100*float64(insurance)/float64(total), w.Stats().Events)
		if mean < 1.5 || mean > 2.5 || float64(lo)/n < 1.5 || float64(hi)/n > 2.5 {
			t.Errorf("seed %d: heartbeats received per process per T_interval: mean %.3f, windows %.3f..%.3f; want all within [1.5, 2.5] for k = 2",
				seed, mean, float64(lo)/n, float64(hi)/n)
		}
		// Memory stays O(k + connections): monitors, the processes that
		// chose this one, ring neighbours.
		maxTracked, sumTracked := 0, 0
		for i := range n {
			tr := hbOf(w, core.NodeID(i)).Tracked()
			maxTracked = max(maxTracked, tr)
			sumTracked += tr
		}
		t.Logf("peer records per process: mean %.2f, max %d", float64(sumTracked)/n, maxTracked)
		if maxTracked > 16 {
			t.Errorf("a process keeps %d peer records, want O(k + connections) (≤ 16)", maxTracked)
		}
	}
}

// §4.2.1 and the broadcast (§4.2: one process noticing suffices): every
// crash is suspected by the crashed process's monitors within
// T_interval + T_timeout + latency, by every live process within one flood
// more, and declared failed by every live process once: T_broken after its
// suspicion by a process that timed out itself (a monitor), at most
// (1 + LocalHealthMax)·T_broken after it by one that only heard the
// notice; no live process is ever suspected.
func TestHeartbeatSimCrashes(t *testing.T) {
	const n, crashes = 1024, 6
	cfg := DefaultHeartbeatConfig()
	monitorBound := cfg.Interval + cfg.Timeout + hbMaxLatency
	allBound := monitorBound + floodBound(n)
	heardBroken := time.Duration(1+cfg.LocalHealthMax) * cfg.Broken
	for _, seed := range simtest.Seeds(t, 1) {
		w := hbWorld(t, seed, n, cfg, nil)
		w.SetReplay("go test ./fd -run TestHeartbeatSimCrashes -seed=%d")
		ev := recordHB(w)
		w.AddChecker(sim.NewCrashDetected(allBound + heardBroken))
		w.AddChecker(sim.NewNoFalseFailure(0, 0, 0))
		crashAt := map[core.NodeID]time.Duration{}
		monitorsAt := map[core.NodeID][]core.NodeID{}
		var victims []core.NodeID
		for len(victims) < crashes {
			v := core.NodeID(w.Rand().IntN(n))
			if _, dup := crashAt[v]; dup {
				continue
			}
			at := 20*time.Second + time.Duration(w.Rand().Int64N(int64(40*time.Second)))
			crashAt[v] = at
			victims = append(victims, v)
			w.At(at, func() {
				monitorsAt[v] = hbOf(w, v).Monitors()
				w.Crash(v)
			})
		}
		end := 60*time.Second + allBound + heardBroken + time.Second
		if err := w.RunChecked(end); err != nil {
			t.Fatal(err)
		}
		for _, v := range victims {
			c := crashAt[v]
			for _, m := range monitorsAt[v] {
				if !w.Alive(m) {
					continue
				}
				s := ev.suspected[[2]core.NodeID{m, v}]
				if len(s) == 0 || s[0] <= c || s[0] > c+monitorBound {
					t.Errorf("seed %d: %v crashed at %v; its monitor %v suspected it at %v, want within T_interval+T_timeout+latency = %v", seed, v, c, m, s, monitorBound)
				}
			}
			for i := range n {
				y := core.NodeID(i)
				if !w.Alive(y) {
					continue
				}
				s := ev.suspected[[2]core.NodeID{y, v}]
				f := ev.failed[[2]core.NodeID{y, v}]
				if len(s) != 1 || s[0] > c+allBound {
					t.Errorf("seed %d: %v crashed at %v; %v suspected it at %v, want once by %v", seed, v, c, y, s, c+allBound)
				}
				if len(f) != 1 || f[0] > c+allBound+heardBroken || len(s) == 1 && (f[0] < s[0]+cfg.Broken || f[0] > s[0]+heardBroken) {
					t.Errorf("seed %d: %v crashed at %v; %v declared it failed at %v, want once, T_broken to %v after the suspicion (%v)", seed, v, c, y, f, heardBroken, s)
				}
				// A monitor waits T_broken and a quarter interval (or
				// twice the link's jitter, at most the spread of the
				// latencies, if longer).
				if extra := max(cfg.Interval/4, 2*hbMaxLatency); slices.Contains(monitorsAt[v], y) && len(s) == 1 && len(f) == 1 && (f[0] < s[0]+cfg.Broken || f[0] > s[0]+cfg.Broken+extra) {
					t.Errorf("seed %d: monitor %v of %v suspected it at %v and declared it failed at %v, want T_broken later and at most %v more", seed, y, v, s[0], f[0], extra)
				}
			}
		}
		for k := range ev.suspected {
			if w.Alive(k[1]) {
				t.Errorf("seed %d: %v suspected live %v at %v", seed, k[0], k[1], ev.suspected[k])
			}
		}
		t.Logf("seed %d: %d crashes detected everywhere; %d events, %d messages", seed, crashes, w.Stats().Events, w.Stats().Sent)
	}
}

// §4.2.2: a process whose k monitors crash together with it is still
// detected, within T_insurance + T_timeout, by its other connections (here
// beyond FullMeshMax: the processes that chose it as a monitor and its ring
// neighbours), and then by everyone.
func TestHeartbeatSimInsurance(t *testing.T) {
	const n = 256
	cfg := SimHeartbeatConfig() // T_insurance 100 s, as in §6.2
	for _, seed := range simtest.Seeds(t, 2) {
		w := hbWorld(t, seed, n, cfg, nil)
		ev := recordHB(w)
		const x = core.NodeID(100)
		c := cfg.Insurance + 20*time.Second // x has announced insurance to its connections
		var group []core.NodeID
		w.At(c, func() {
			group = append([]core.NodeID{x}, hbOf(w, x).Monitors()...)
			for _, v := range group {
				w.Crash(v)
			}
		})
		bound := cfg.Insurance + cfg.Timeout + hbMaxLatency
		w.RunUntil(c + bound + floodBound(n) + cfg.Broken + time.Second)
		var first time.Duration = -1
		var firstBy core.NodeID
		for i := range n {
			y := core.NodeID(i)
			if s := ev.suspected[[2]core.NodeID{y, x}]; len(s) > 0 && (first < 0 || s[0] < first) {
				first, firstBy = s[0], y
			}
		}
		if first < 0 || first > c+bound {
			t.Fatalf("seed %d: %v crashed with its monitors %v at %v; first suspected at %v, want by %v", seed, x, group[1:], c, first, c+bound)
		}
		// The detector waited for an insurance heartbeat (its deadline may
		// fall anywhere in the T_insurance after the crash, depending on
		// when the last one arrived).
		if r := hbOf(w, firstBy).find(x); first <= c || r == nil || r.expect != cfg.Insurance {
			t.Errorf("seed %d: first suspected at %v by %v (record %+v): want after the crash, by a process expecting insurance", seed, first, firstBy, r)
		}
		for i := range n {
			y := core.NodeID(i)
			if w.Alive(y) && len(ev.failed[[2]core.NodeID{y, x}]) != 1 {
				t.Errorf("seed %d: live %v did not declare %v failed once: %v", seed, y, x, ev.failed[[2]core.NodeID{y, x}])
			}
		}
		t.Logf("seed %d: %v (monitors %v crashed with it) first suspected %v after the crash, by %v", seed, x, group[1:], first-c, firstBy)
	}
}

// appChatter is an application layer that sends a message to every other
// node every period while it is on.
type appChatter struct {
	env    core.Env
	n      int
	period time.Duration
	until  time.Duration
}

type appMsg struct{}

func (appMsg) Kind() core.Kind { return core.MakeKind(core.ProtoApp, 1) }

func (a *appChatter) Protos() []core.Proto { return []core.Proto{core.ProtoApp} }
func (a *appChatter) Start(env core.Env) {
	a.env = env
	env.SetTimer(time.Duration(env.Rand().Int64N(int64(a.period))), 0)
}
func (a *appChatter) Receive(core.NodeID, core.Msg) {}
func (a *appChatter) Handle(core.Event)             {}
func (a *appChatter) Fire(core.Timer) {
	if a.env.Now() >= a.until {
		return
	}
	for i := range a.n {
		if id := core.NodeID(i); id != a.env.Self() {
			a.env.Send(id, appMsg{})
		}
	}
	a.env.SetTimer(a.period, 0)
}

// §4.2.3: application messages in the same Stack count as heartbeats: while
// the application talks to every peer more often than T_interval, the
// detector sends only the heartbeats that tell each peer what to expect,
// nobody is suspected, and when the application goes quiet the heartbeats
// resume.
func TestHeartbeatSimApplicationTraffic(t *testing.T) {
	const n = 16
	cfg := DefaultHeartbeatConfig() // full mesh: every peer is a connection
	quiet := 6 * time.Minute
	run := func(seed uint64, withApp bool) (sent, suppressed uint64, after uint64, susp int) {
		w := hbWorld(t, seed, n, cfg, func(core.NodeID) []core.Machine {
			if !withApp {
				return nil
			}
			return []core.Machine{&appChatter{n: n, period: 2 * time.Second, until: quiet}}
		})
		ev := recordHB(w)
		w.RunUntil(quiet)
		for i := range n {
			st := hbOf(w, core.NodeID(i)).Stats()
			sent += st.HeartbeatsSent + st.InsuranceSent
			suppressed += st.Suppressed
		}
		w.RunUntil(quiet + time.Minute)
		for i := range n {
			st := hbOf(w, core.NodeID(i)).Stats()
			after += st.HeartbeatsSent + st.InsuranceSent
		}
		return sent, suppressed, after - sent, len(ev.suspected)
	}
	for _, seed := range simtest.Seeds(t, 2) {
		base, _, _, s0 := run(seed, false)
		withApp, suppressed, afterQuiet, s1 := run(seed, true)
		t.Logf("seed %d: heartbeats sent in %v: %d alone, %d with application traffic (%d suppressed); %d in the minute after it stopped",
			seed, quiet, base, withApp, suppressed, afterQuiet)
		if s0 != 0 || s1 != 0 {
			t.Errorf("seed %d: suspicions %d / %d, want none", seed, s0, s1)
		}
		// Only the heartbeats that announce each link's period (one per
		// link: the peer must learn what to expect before traffic can
		// stand in for heartbeats) and one per monitor every T_insurance
		// are sent.
		if most := uint64(n*(n-1) + n*cfg.Monitors*int(quiet/cfg.Insurance+1)); withApp > most {
			t.Errorf("seed %d: %d heartbeats with application traffic vs %d without; want the traffic to replace them (at most %d: one announcement per link, one per monitor and T_insurance)", seed, withApp, base, most)
		}
		if suppressed < base/2 {
			t.Errorf("seed %d: %d suppressed, want most of the %d heartbeats counted as suppressed", seed, suppressed, base)
		}
		if want := uint64(n * cfg.Monitors * 10); afterQuiet < want {
			t.Errorf("seed %d: %d heartbeats in the minute after the traffic stopped, want ≥ %d", seed, afterQuiet, want)
		}
	}
}

// A crashed process restarted under the same id is heard again by its new
// monitors, learns from them that it was declared failed, refutes with a
// higher incarnation, and every process reports it Recovered.
func TestHeartbeatSimRestart(t *testing.T) {
	const n = 128
	cfg := DefaultHeartbeatConfig()
	members := ids(n)
	for _, seed := range simtest.Seeds(t, 2) {
		w := hbWorld(t, seed, n, cfg, nil)
		ev := recordHB(w)
		const x = core.NodeID(17)
		down, up := 30*time.Second, 60*time.Second
		w.CrashAt(down, x)
		w.RecoverAt(up, x, hbStack(t, cfg, members))
		w.RunUntil(up + cfg.Interval + floodBound(n) + time.Second)
		for i := range n {
			y := core.NodeID(i)
			if y == x {
				continue
			}
			f, r := ev.failed[[2]core.NodeID{y, x}], ev.recovered[[2]core.NodeID{y, x}]
			if len(f) != 1 || len(r) != 1 || r[0] < up {
				t.Errorf("seed %d: %v: failed %v, recovered %v; want one failure and one recovery after %v", seed, y, f, r, up)
			}
		}
		if inc := hbOf(w, x).Incarnation(); inc != 1 {
			t.Errorf("seed %d: restarted process at incarnation %d, want 1", seed, inc)
		}
	}
}

// A swarm of faults (crashes, partitions, cuts, loss windows, delay
// spikes), then a liveness phase: every crashed process is declared failed
// by every live one within T_insurance + T_timeout + T_broken after the
// network heals (notices lost in a loss window are retransmitted), and no
// live, connected process is declared failed once the network is healed
// and the last suspicions had time to be refuted.
func TestHeartbeatSimSwarm(t *testing.T) {
	const n = 48
	cfg := SimHeartbeatConfig()
	horizon := 4 * time.Minute
	opts := sim.DefaultSwarmOptions()
	opts.Start = cfg.Insurance + 10*time.Second // connections have announced insurance
	opts.MaxCrashFraction = 0.15
	bound := cfg.Insurance + cfg.Timeout + cfg.Broken + floodBound(n) + time.Second
	for _, seed := range simtest.Seeds(t, 4) {
		w := hbWorld(t, seed, n, cfg, nil)
		plan := sim.Swarm(seed, n, horizon, opts)
		if err := plan.Apply(w, nil); err != nil {
			t.Fatal(err)
		}
		w.SetReplay("go test ./fd -run TestHeartbeatSimSwarm -seed=%d")
		cd := sim.NewCrashDetected(bound)
		cd.After = plan.HealedAt()
		w.AddChecker(cd)
		w.AddChecker(sim.NewNoFalseFailure(horizon+cfg.Interval+cfg.Timeout+cfg.Broken+time.Second, 0, 0))
		if err := w.RunChecked(horizon + bound + time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// The same seed gives the same run, event for event.
func TestHeartbeatSimDeterministic(t *testing.T) {
	const n = 128
	cfg := DefaultHeartbeatConfig()
	trace := func(seed uint64) uint64 {
		w := hbWorld(t, seed, n, cfg, nil)
		w.CrashAt(30*time.Second, 7)
		w.RecoverAt(50*time.Second, 7, hbStack(t, cfg, ids(n)))
		w.At(40*time.Second, func() { hbOf(w, 3).Handle(core.PeerHint{Node: 9}) })
		w.RunUntil(70 * time.Second)
		return w.TraceHash()
	}
	for _, seed := range simtest.Seeds(t, 1) {
		a, b, c := trace(seed), trace(seed), trace(seed+1)
		if a != b {
			t.Errorf("seed %d: trace hashes %x and %x differ", seed, a, b)
		}
		if a == c {
			t.Errorf("seeds %d and %d give the same trace hash %x", seed, seed+1, a)
		}
	}
}

// BenchmarkHeartbeatSim runs the detector alone (k = 2, default settings)
// on n nodes for one simulated minute and reports simulator events per
// second of wall time, heap bytes per node after the run (the detector,
// its Stack, and the simulator's own per-node state: pending timers, FIFO
// bookkeeping), the detector's peer records per node, and network bytes
// sent per node. n = 100,000 runs only with -bench.
func BenchmarkHeartbeatSim(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			cfg := DefaultHeartbeatConfig()
			var events, netBytes uint64
			var heapPerNode, records float64
			elapsed := time.Duration(0)
			for i := 0; i < b.N; i++ {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				w := hbWorld(b, uint64(i+1), n, cfg, nil)
				w.RunUntil(time.Minute)
				elapsed += time.Since(start)
				events += w.Stats().Events
				netBytes += w.Stats().Bytes
				runtime.GC()
				runtime.ReadMemStats(&after)
				heapPerNode += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
				for id := range n {
					records += float64(hbOf(w, core.NodeID(id)).Tracked()) / float64(n)
				}
			}
			b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
			b.ReportMetric(heapPerNode/float64(b.N), "heapB/node")
			b.ReportMetric(records/float64(b.N), "records/node")
			b.ReportMetric(float64(netBytes)/float64(b.N)/float64(n), "netB/node")
		})
	}
}

// A live member whose messages are lost 5% of the time and all arrive 200
// ms late (twice T_interval, twice T_broken) may be suspected, but is
// rarely declared failed: a suspicion from its insurance alone, or heard
// by notice, waits for its refutation ((1 + H)·T_broken), and a link on
// which it stopped its insurance (an idle one, the closing heartbeat lost)
// raises no suspicion. Only a monitor's own suspicion after three lost
// heartbeats in a row (1 in 8,000) fails it, about once in 10 minutes.
// Without these two rules it would be declared failed about once a minute.
func TestHeartbeatSimSlowLossyMember(t *testing.T) {
	cfg := AggressiveHeartbeatConfig()
	cfg.Timeout = 2 * cfg.Interval
	cfg.FullMeshMax = 0
	const n, slow = 16, core.NodeID(5)
	const minutes = 8
	seeds := simtest.Seeds(t, minutes)
	failures := 0
	for _, seed := range seeds {
		w := sim.New(sim.Config{Seed: seed, Network: sim.SlowNode{Net: hbNet, Node: slow, Loss: 0.05, Delay: 200 * time.Millisecond}})
		for range n {
			w.Add(hbStack(t, cfg, ids(n)))
		}
		ev := recordHB(w)
		w.RunUntil(time.Minute)
		for k, at := range ev.failed {
			if k[1] != slow {
				t.Errorf("seed %d: %v declared %v failed at %v; only %v is slow", seed, k[0], k[1], at, slow)
			}
			failures += len(at)
		}
	}
	t.Logf("%d declarations of the slow member in %d minutes", failures, len(seeds))
	if failures > len(seeds)/2 {
		t.Errorf("the slow, lossy member was declared failed %d times in %d minutes, want at most %d", failures, len(seeds), len(seeds)/2)
	}
}
