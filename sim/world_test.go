package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// ping is a tiny protocol: every node pings a random peer each period and
// answers pings; it emits an event on every pong. It exercises sends, timers,
// randomness and events.
type ping struct {
	env    core.Env
	n      int
	period time.Duration
	pongs  int
	timer  core.TimerID
}

type pingMsg struct{ Seq int }
type pongMsg struct{ Seq int }

func (pingMsg) Kind() core.Kind { return core.MakeKind(core.ProtoTest, 1) }
func (pongMsg) Kind() core.Kind { return core.MakeKind(core.ProtoTest, 2) }

type tick struct{}
type pongEvent struct{ From core.NodeID }

func (p *ping) Start(env core.Env) {
	p.env = env
	p.timer = env.SetTimer(time.Duration(env.Rand().Int64N(int64(p.period))), tick{})
}

func (p *ping) Receive(from core.NodeID, m core.Msg) {
	switch m := m.(type) {
	case pingMsg:
		p.env.Send(from, pongMsg{Seq: m.Seq})
	case pongMsg:
		p.pongs++
		p.env.Emit(pongEvent{From: from})
	}
}

func (p *ping) Fire(core.Timer) {
	to := core.NodeID(p.env.Rand().IntN(p.n))
	p.env.Send(to, pingMsg{Seq: p.pongs})
	p.timer = p.env.SetTimer(p.period, tick{})
}

func (p *ping) Handle(core.Event) {}

func runPing(seed uint64, n int, d time.Duration, net Network) (*World, int) {
	w := New(Config{Seed: seed, Network: net})
	for range n {
		w.Add(&ping{n: n, period: 10 * time.Millisecond})
	}
	events := 0
	w.OnEmit(func(time.Duration, core.NodeID, core.Event) { events++ })
	w.RunUntil(d)
	return w, events
}

func TestSameSeedSameTrace(t *testing.T) {
	for _, net := range []Network{Constant(time.Millisecond), Uniform(100*time.Microsecond, 3*time.Millisecond)} {
		t.Run(fmt.Sprint(net), func(t *testing.T) {
			a, ea := runPing(7, 50, time.Second, net)
			b, eb := runPing(7, 50, time.Second, net)
			c, _ := runPing(8, 50, time.Second, net)
			if a.TraceHash() != b.TraceHash() || ea != eb || a.Stats() != b.Stats() {
				t.Fatalf("seed 7 twice: hashes %x %x, events %d %d", a.TraceHash(), b.TraceHash(), ea, eb)
			}
			if a.TraceHash() == c.TraceHash() {
				t.Fatalf("seeds 7 and 8 gave the same trace hash %x", a.TraceHash())
			}
			if ea == 0 {
				t.Fatal("no pong was observed")
			}
		})
	}
}

func TestFIFOPerPairUnderUniformLatency(t *testing.T) {
	w := New(Config{Seed: 3, Network: Uniform(0, 10*time.Millisecond)})
	recv := &seqRecorder{}
	w.Add(&burst{to: 1, count: 500})
	w.Add(recv)
	w.RunUntil(time.Second)
	if len(recv.seqs) != 500 {
		t.Fatalf("got %d messages, want 500", len(recv.seqs))
	}
	for i, s := range recv.seqs {
		if s != i {
			t.Fatalf("message %d arrived in position %d: FIFO broken", s, i)
		}
	}
}

// Config.Lane: messages of one lane stay in send order, and the two lanes
// of a pair interleave (an odd message overtakes even ones sent before it,
// and the other way round), as a control lane beside a data queue does.
func TestFIFOPerLane(t *testing.T) {
	w := New(Config{Seed: 3, Network: Uniform(0, 10*time.Millisecond),
		Lane: func(m core.Msg) int { return m.(pingMsg).Seq % 2 }})
	recv := &seqRecorder{}
	w.Add(&burst{to: 1, count: 500})
	w.Add(recv)
	w.RunUntil(time.Second)
	if len(recv.seqs) != 500 {
		t.Fatalf("got %d messages, want 500", len(recv.seqs))
	}
	last := [2]int{-1, -1}
	overtaken := 0
	for i, s := range recv.seqs {
		if s <= last[s%2] {
			t.Fatalf("message %d arrived after message %d of its lane: FIFO broken", s, last[s%2])
		}
		last[s%2] = s
		if i > 0 && s < recv.seqs[i-1] {
			overtaken++
		}
	}
	if overtaken == 0 {
		t.Error("no message overtook one of the other lane: the lanes are one FIFO")
	}
}

type burst struct {
	to    core.NodeID
	count int
}

func (b *burst) Start(env core.Env) {
	for i := range b.count {
		env.Send(b.to, pingMsg{Seq: i})
	}
}
func (b *burst) Receive(core.NodeID, core.Msg) {}
func (b *burst) Fire(core.Timer)               {}
func (b *burst) Handle(core.Event)             {}

type seqRecorder struct {
	seqs []int
	at   []time.Duration
	env  core.Env
}

func (r *seqRecorder) Start(env core.Env) { r.env = env }
func (r *seqRecorder) Receive(_ core.NodeID, m core.Msg) {
	if p, ok := m.(pingMsg); ok {
		r.seqs = append(r.seqs, p.Seq)
		r.at = append(r.at, r.env.Now())
	}
}
func (r *seqRecorder) Fire(core.Timer)   {}
func (r *seqRecorder) Handle(core.Event) {}

func TestCrashDropsTimersAndMessages(t *testing.T) {
	w := New(Config{Seed: 1, Network: Constant(5 * time.Millisecond)})
	a := w.Add(&burst{to: 1, count: 3})
	recv := &seqRecorder{}
	b := w.Add(recv)
	w.CrashAt(time.Millisecond, b) // messages in flight are lost
	w.RunUntil(time.Second)
	if len(recv.seqs) != 0 {
		t.Fatalf("crashed node received %d messages", len(recv.seqs))
	}
	if s := w.Stats(); s.Dropped != 3 {
		t.Fatalf("dropped %d, want 3", s.Dropped)
	}
	r2 := &seqRecorder{}
	w.Recover(b, r2)
	w.Recover(a, &burst{to: 1, count: 2})
	w.RunFor(time.Second)
	if len(r2.seqs) != 2 {
		t.Fatalf("recovered node received %d messages, want 2", len(r2.seqs))
	}
}

type timerProbe struct {
	env   core.Env
	fired []int
}

func (p *timerProbe) Start(env core.Env) {
	p.env = env
	id := env.SetTimer(10*time.Millisecond, 1)
	env.SetTimer(20*time.Millisecond, 2)
	env.SetTimer(20*time.Millisecond, 3) // same time: set order
	env.CancelTimer(id)
	env.CancelTimer(id) // twice is a no-op
}
func (p *timerProbe) Receive(core.NodeID, core.Msg) {}
func (p *timerProbe) Fire(t core.Timer) {
	p.fired = append(p.fired, t.(int))
	if len(p.fired) == 1 {
		stale := p.env.SetTimer(time.Millisecond, 4)
		p.env.SetTimer(2*time.Millisecond, 5)
		p.env.CancelTimer(stale)
	}
}
func (p *timerProbe) Handle(core.Event) {}

func TestTimersCancelAndOrder(t *testing.T) {
	w := New(Config{Seed: 1})
	p := &timerProbe{}
	w.Add(p)
	w.RunUntil(time.Second)
	if fmt.Sprint(p.fired) != "[2 3 5]" {
		t.Fatalf("fired %v, want [2 3 5]", p.fired)
	}
	if len(w.timers) > 3 {
		t.Fatalf("timer slots not reused: %d slots for at most 3 pending timers", len(w.timers))
	}
}

func TestPartitionAndCut(t *testing.T) {
	w := New(Config{Seed: 1})
	w.Add(&burst{to: 1, count: 1})
	r := &seqRecorder{}
	w.Add(r)
	w.Partition([]core.NodeID{0})
	w.RunFor(time.Second)
	if len(r.seqs) != 0 {
		t.Fatal("message crossed a partition")
	}
	w.HealAll()
	w.Cut(0, 1)
	w.Recover(0, &burst{to: 1, count: 1})
	w.RunFor(time.Second)
	if len(r.seqs) != 0 {
		t.Fatal("message crossed a cut link")
	}
	w.Heal(0, 1)
	w.Recover(0, &burst{to: 1, count: 1})
	w.RunFor(time.Second)
	if len(r.seqs) != 1 {
		t.Fatalf("after heal got %d messages, want 1", len(r.seqs))
	}
}

func TestSerialProcessingQueuesAtLoadedNode(t *testing.T) {
	w := New(Config{Seed: 1, Network: Constant(time.Millisecond), RecvOverhead: time.Millisecond})
	r := &seqRecorder{}
	w.Add(r)
	for range 10 {
		w.Add(&burst{to: 0, count: 1})
	}
	w.RunUntil(time.Second)
	if len(r.at) != 10 {
		t.Fatalf("got %d, want 10", len(r.at))
	}
	// All arrive at 1 ms; the CPU takes them one by one, 1 ms each.
	for i, at := range r.at {
		if want := time.Duration(i+2) * time.Millisecond; at != want {
			t.Fatalf("message %d processed at %v, want %v", i, at, want)
		}
	}
}

// BenchmarkPing measures simulator throughput (events/s) on the ping
// protocol.
func BenchmarkPing(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var events uint64
			for b.Loop() {
				w := New(Config{Seed: 1, NoTrace: true})
				for range n {
					w.Add(&ping{n: n, period: 10 * time.Millisecond})
				}
				w.RunUntil(time.Second)
				events += w.Stats().Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// hintedBurst is a burst that records the hints it is handed.
type hintedBurst struct {
	burst
	env   core.Env
	hints []core.PeerHint
	at    []time.Duration
}

func (b *hintedBurst) Start(env core.Env) { b.env = env; b.burst.Start(env) }
func (b *hintedBurst) Handle(e core.Event) {
	if h, ok := e.(core.PeerHint); ok {
		b.hints = append(b.hints, h)
		b.at = append(b.at, b.env.Now())
	}
}

// TestRefuseDead: with Config.RefuseDead, a message that reaches a crashed
// node gives its live sender a refused-connection hint that long after;
// one lost to a partition, or addressed to a process that restarted since
// (the new one listens), gives none, and neither does a world without it.
func TestRefuseDead(t *testing.T) {
	run := func(refuse time.Duration, fault func(w *World)) *hintedBurst {
		w := New(Config{Seed: 1, Network: Constant(5 * time.Millisecond), RefuseDead: refuse})
		b := &hintedBurst{burst: burst{to: 1, count: 2}}
		w.Add(b)
		w.Add(&seqRecorder{})
		fault(w)
		w.RunUntil(time.Second)
		return b
	}
	crash := func(w *World) { w.CrashAt(time.Millisecond, 1) }
	b := run(3*time.Millisecond, crash)
	want := core.PeerHint{Node: 1, Reason: "connection refused", Refused: true}
	if len(b.hints) != 2 || b.hints[0] != want || b.hints[1] != want || b.at[0] != 8*time.Millisecond {
		t.Fatalf("hints %v at %v, want two refusals of n1 at 8ms", b.hints, b.at)
	}
	for name, fault := range map[string]func(w *World){
		"partition": func(w *World) { w.Partition([]core.NodeID{0}) },
		"restarted": func(w *World) {
			w.CrashAt(time.Millisecond, 1)
			w.At(2*time.Millisecond, func() { w.Recover(1, &seqRecorder{}) })
		},
	} {
		if b := run(3*time.Millisecond, fault); len(b.hints) != 0 {
			t.Errorf("%s: hints %v, want none", name, b.hints)
		}
	}
	if b := run(0, crash); len(b.hints) != 0 {
		t.Errorf("without RefuseDead: hints %v, want none", b.hints)
	}
}
