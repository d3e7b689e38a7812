package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// sized is a test message with a wire size.
type sized struct {
	Seq  int
	Size int
}

func (sized) Kind() core.Kind { return core.MakeKind(core.ProtoTest, 3) }
func (m sized) WireSize() int { return m.Size }

// send is one scripted send.
type send struct {
	at   time.Duration
	to   core.NodeID
	seq  int
	size int
}

// script sends scripted messages at their times and records what it
// receives.
type script struct {
	env   core.Env
	sends []send
	got   []arrival
}

type arrival struct {
	from core.NodeID
	seq  int
	at   time.Duration
}

func (s *script) Start(env core.Env) {
	s.env = env
	for i, x := range s.sends {
		env.SetTimer(x.at, i)
	}
}
func (s *script) Fire(t core.Timer) {
	x := s.sends[t.(int)]
	s.env.Send(x.to, sized{Seq: x.seq, Size: x.size})
}
func (s *script) Receive(from core.NodeID, m core.Msg) {
	if x, ok := m.(sized); ok {
		s.got = append(s.got, arrival{from: from, seq: x.Seq, at: s.env.Now()})
	}
}
func (s *script) Handle(core.Event) {}

// scripted returns a world of n script nodes on net.
func scripted(net Network, n int) (*World, []*script) {
	w := New(Config{Seed: 1, Network: net})
	nodes := make([]*script, n)
	for i := range nodes {
		nodes[i] = &script{}
		w.Add(nodes[i])
	}
	return w, nodes
}

// lineGraph builds the path 0 - 1 - 2 with 1000-byte messages taking 1 ms
// per link (8 Mbit/s) and 0.5 ms of propagation.
func lineGraph(t *testing.T) *Graph {
	t.Helper()
	g := &Graph{cfg: GraphConfig{Nodes: 3, BandwidthBits: 8e6}, vertices: 3}
	half := 500 * time.Microsecond
	g.build([]int32{0, 1}, []int32{1, 2}, []time.Duration{half, half})
	return g
}

// TestGraphStoreAndForward checks the per-hop model of the stability
// paper's §4.1 on a hand-made path: transmission size·8/bandwidth plus
// propagation per link, FIFO link queues, the hop count, the maximum queue
// size and the average network load.
func TestGraphStoreAndForward(t *testing.T) {
	g := lineGraph(t)
	w, nodes := scripted(g, 3)
	nodes[0].sends = []send{{to: 2, seq: 1, size: 1000}, {to: 2, seq: 2, size: 1000}}
	w.RunUntil(10 * time.Millisecond)
	got := nodes[2].got
	want := []arrival{{0, 1, 3 * time.Millisecond}, {0, 2, 4 * time.Millisecond}}
	if !slices.Equal(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	s := g.Stats()
	if s.Hops != 4 || s.Messages != 2 || s.Delivered != 2 || s.ByteHops != 4000 {
		t.Errorf("hops %d messages %d delivered %d byte-hops %d, want 4 2 2 4000", s.Hops, s.Messages, s.Delivered, s.ByteHops)
	}
	if s.MaxQueue != 1 || s.MaxQueueLink != "0->1" {
		t.Errorf("max queue %d on %q, want 1 on 0->1", s.MaxQueue, s.MaxQueueLink)
	}
	// On links: message 1 for 3 ms, message 2 for 4 ms (1 ms waiting).
	if d := math.Abs(s.LoadIntegral - 0.007); d > 1e-12 {
		t.Errorf("load integral %v s, want 0.007", s.LoadIntegral)
	}
	if s.At != 10*time.Millisecond || math.Abs(s.AvgLoad()-0.7) > 1e-9 {
		t.Errorf("average load %v at %v, want 0.7 at 10ms", s.AvgLoad(), s.At)
	}
	// Links were transmitting 4 ms out of 4 links × 10 ms.
	if math.Abs(s.Utilization()-0.1) > 1e-9 {
		t.Errorf("utilization %v, want 0.1", s.Utilization())
	}
	if d, ok := g.Transit(0, 2, 1000, 0, nil); !ok || d != 3*time.Millisecond {
		t.Errorf("unloaded transit %v %v, want 3ms", d, ok)
	}
}

// TestGraphLoadWindow checks per-window averages (the paper averages the
// load over each round).
func TestGraphLoadWindow(t *testing.T) {
	g := lineGraph(t)
	w, nodes := scripted(g, 3)
	nodes[0].sends = []send{{at: 0, to: 1, size: 1000}, {at: 5 * time.Millisecond, to: 1, size: 1000}}
	w.RunUntil(2 * time.Millisecond)
	a := g.Stats()
	w.RunUntil(4 * time.Millisecond)
	b := g.Stats()
	w.RunUntil(6 * time.Millisecond)
	c := g.Stats()
	if l := a.AvgLoad(); math.Abs(l-0.75) > 1e-9 {
		t.Errorf("load over [0,2ms] %v, want 0.75", l)
	}
	if l := b.LoadSince(a); l != 0 {
		t.Errorf("load over (2ms,4ms] %v, want 0", l)
	}
	// Second message on the link since 5 ms, still there at 6 ms.
	if l := c.LoadSince(b); math.Abs(l-0.5) > 1e-9 {
		t.Errorf("load over (4ms,6ms] %v, want 0.5", l)
	}
}

// TestGraphLostWhenReceiverRestarts: a message still in the network when its
// receiver crashes is lost even if the receiver is back before it arrives,
// as with every other network model.
func TestGraphLostWhenReceiverRestarts(t *testing.T) {
	g := lineGraph(t)
	w, nodes := scripted(g, 3)
	nodes[0].sends = []send{{to: 2, size: 1000}}
	w.CrashAt(time.Millisecond, 2)
	fresh := &script{}
	w.RecoverAt(2*time.Millisecond, 2, fresh)
	w.RunUntil(10 * time.Millisecond)
	if len(fresh.got) != 0 || len(nodes[2].got) != 0 {
		t.Fatalf("message delivered across a restart: %v %v", fresh.got, nodes[2].got)
	}
	if s := w.Stats(); s.Dropped != 1 {
		t.Fatalf("dropped %d, want 1", s.Dropped)
	}
}

// bfsDist is a naive reference: hop distances from src by BFS over the
// neighbour lists.
func bfsDist(g *Graph, src int) []int {
	d := make([]int, g.Vertices())
	for i := range d {
		d[i] = -1
	}
	d[src] = 0
	q := []int{src}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for _, v := range g.Neighbors(u) {
			if d[v] < 0 {
				d[v] = d[u] + 1
				q = append(q, int(v))
			}
		}
	}
	return d
}

// TestGraphShortestPaths checks the routes of a G(n, p) graph against a
// reference BFS: every route is a walk along edges of shortest length, the
// graph is connected, and the same seed gives the same graph and routes.
func TestGraphShortestPaths(t *testing.T) {
	for _, p := range []float64{0.01, 0.04} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			cfg := DefaultGraphConfig(150, 11)
			cfg.Routers = 10
			cfg.P = p
			g, err := NewGraph(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for a := 0; a < g.Vertices(); a += 7 {
				ref := bfsDist(g, a)
				for b := range g.Vertices() {
					if ref[b] < 0 {
						t.Fatalf("vertex %d unreachable from %d: graph not connected", b, a)
					}
					path := g.Path(a, b)
					if len(path)-1 != ref[b] {
						t.Fatalf("route %d->%d has %d hops, shortest is %d", a, b, len(path)-1, ref[b])
					}
					for i := 1; i < len(path); i++ {
						if _, ok := slices.BinarySearch(g.Neighbors(path[i-1]), int32(path[i])); !ok {
							t.Fatalf("route %v uses a non-edge %d-%d", path, path[i-1], path[i])
						}
					}
				}
			}
			h, _ := NewGraph(cfg)
			if !slices.Equal(g.adj, h.adj) || fmt.Sprint(g.Path(3, 140)) != fmt.Sprint(h.Path(3, 140)) {
				t.Fatal("same seed gave a different graph or route")
			}
			cfg.Seed++
			k, _ := NewGraph(cfg)
			if slices.Equal(g.adj, k.adj) {
				t.Fatal("different seeds gave the same graph")
			}
		})
	}
}

// TestGraphEdgeCount checks the edge sampler against G(n, p): the number of
// edges is Binomial(n(n-1)/2, p); we accept 5 standard deviations.
func TestGraphEdgeCount(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		cfg := DefaultGraphConfig(1000, seed)
		g, err := NewGraph(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pairs := 1000.0 * 999 / 2
		mean, sd := pairs*cfg.P, math.Sqrt(pairs*cfg.P*(1-cfg.P))
		drawn := float64(g.Edges() - g.AddedEdges())
		if math.Abs(drawn-mean) > 5*sd {
			t.Errorf("seed %d: %v edges drawn, want %v ± %v", seed, drawn, mean, 5*sd)
		}
	}
}

// TestGraphConnectsComponents: with P = 0 every edge is an added one and
// the result is a tree; the paper's small sizes at P = 0.01 need this.
func TestGraphConnectsComponents(t *testing.T) {
	cfg := DefaultGraphConfig(10, 5)
	cfg.P = 0
	g, err := NewGraph(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g.Edges() != 9 || g.AddedEdges() != 9 {
		t.Fatalf("%d edges (%d added), want a spanning tree of 9", g.Edges(), g.AddedEdges())
	}
	for _, d := range bfsDist(g, 0) {
		if d < 0 {
			t.Fatal("not connected")
		}
	}
	cfg.P = 1
	if g, _ = NewGraph(cfg); g.Edges() != 45 || g.AddedEdges() != 0 {
		t.Fatalf("P=1: %d edges, want 45", g.Edges())
	}
}

func TestNetworkConfigErrors(t *testing.T) {
	bad := []GraphConfig{
		{Nodes: 0, P: 0.1, BandwidthBits: 1},
		{Nodes: 5, P: 1.5, BandwidthBits: 1},
		{Nodes: 5, P: math.NaN(), BandwidthBits: 1},
		{Nodes: 5, P: 0.1, BandwidthBits: 0},
		{Nodes: 5, P: 0.1, BandwidthBits: 1, MinDelay: 2, MaxDelay: 1},
		{Nodes: 5, Routers: -1, P: 0.1, BandwidthBits: 1},
	}
	for _, c := range bad {
		if _, err := NewGraph(c); !errors.Is(err, ErrBadNetwork) {
			t.Errorf("NewGraph(%+v) = %v, want ErrBadNetwork", c, err)
		}
	}
	if _, err := NewSwitch(SwitchConfig{Base: -1, PortBits: 1}); !errors.Is(err, ErrBadNetwork) {
		t.Errorf("negative switch base: %v", err)
	}
	if _, err := NewSwitch(SwitchConfig{}); !errors.Is(err, ErrBadNetwork) {
		t.Errorf("zero port rate: %v", err)
	}
	if _, err := NewTorus(8, 0, 8, 0, time.Microsecond); !errors.Is(err, ErrBadNetwork) {
		t.Errorf("zero torus dimension: %v", err)
	}
}

// TestGraphMessageCounts runs ping over a paper-sized random graph and checks
// the indices are consistent: every delivered message crossed at least one
// link per its route length, and the world's and the graph's counts agree.
func TestGraphMessageCounts(t *testing.T) {
	g, err := NewGraph(DefaultGraphConfig(200, 9))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := runPing(9, 200, 200*time.Millisecond, g)
	s, ws := g.Stats(), w.Stats()
	if s.Messages != ws.Sent || s.Messages == 0 {
		t.Fatalf("graph saw %d messages, world sent %d", s.Messages, ws.Sent)
	}
	if ws.Messages != s.Delivered {
		t.Fatalf("world delivered %d, graph %d", ws.Messages, s.Delivered)
	}
	if s.Hops < s.Delivered || s.AvgLoad() <= 0 || s.MaxQueue < 0 {
		t.Fatalf("implausible stats %+v", s)
	}
	t.Logf("n=200 p=0.02: %d messages, %d hops (%.2f per message), avg load %.2f, max queue %d, utilization %.4f",
		s.Messages, s.Hops, float64(s.Hops)/float64(s.Messages), s.AvgLoad(), s.MaxQueue, s.Utilization())
}

// TestSwitchContentionCurve checks L(c) of the membership paper §7.2: flat
// up to twelve communicating nodes, then linear in each node added.
func TestSwitchContentionCurve(t *testing.T) {
	c := DefaultSwitchConfig()
	for _, tc := range []struct {
		nodes int
		want  time.Duration
	}{
		{2, 118 * time.Microsecond},
		{12, 118 * time.Microsecond},
		{13, 123 * time.Microsecond},
		{20, 158 * time.Microsecond},
		{47, 293 * time.Microsecond},
	} {
		if got := c.Latency(tc.nodes); got != tc.want {
			t.Errorf("L(%d) = %v, want %v", tc.nodes, got, tc.want)
		}
	}
}

// TestSwitchPairsContend sends one message on each of 10 disjoint pairs at
// once: the k-th message sees 2k communicating nodes.
func TestSwitchPairsContend(t *testing.T) {
	sw, err := NewSwitch(DefaultSwitchConfig())
	if err != nil {
		t.Fatal(err)
	}
	w, nodes := scripted(sw, 20)
	for k := range 10 {
		nodes[2*k].sends = []send{{to: core.NodeID(2*k + 1), seq: k, size: 64}}
	}
	w.RunUntil(time.Second)
	cfg := DefaultSwitchConfig()
	for k := range 10 {
		got := nodes[2*k+1].got
		want := cfg.Latency(2 * (k + 1))
		if len(got) != 1 || got[0].at != want {
			t.Fatalf("pair %d: arrivals %v, want one at %v", k, got, want)
		}
	}
	if sw.MaxContention() != 20 {
		t.Fatalf("max contention %d, want 20", sw.MaxContention())
	}
	// Once those are delivered, a lone pair is uncontended again.
	w.Recover(0, &script{sends: []send{{to: 1, seq: 99, size: 64}}})
	w.RunFor(time.Second)
	if got := nodes[1].got; len(got) != 2 || got[1].at-time.Second != cfg.Base {
		t.Fatalf("lone message after the burst: %v, want latency %v", got, cfg.Base)
	}
}

// TestSwitchFanInSerializes: four children sending to one parent at once
// leave the parent's port one message time apart (paper §7.2, Figure 7 (c)),
// while the same number of nodes in pairs would not.
func TestSwitchFanInSerializes(t *testing.T) {
	cfg := DefaultSwitchConfig()
	cfg.Knee = 100 // isolate the port effect
	sw, _ := NewSwitch(cfg)
	w, nodes := scripted(sw, 5)
	for c := 1; c <= 4; c++ {
		nodes[c].sends = []send{{to: 0, seq: c, size: 1250}} // 10 µs at 1 Gbit/s
	}
	w.RunUntil(time.Second)
	var at []time.Duration
	for _, a := range nodes[0].got {
		at = append(at, a.at)
	}
	us := time.Microsecond
	want := []time.Duration{118 * us, 128 * us, 138 * us, 148 * us}
	if !slices.Equal(at, want) {
		t.Fatalf("parent received at %v, want %v", at, want)
	}
}

// TestSwitchStatic: the paper's own model uses L(N) for a run of N nodes.
func TestSwitchStatic(t *testing.T) {
	cfg := DefaultSwitchConfig()
	cfg.StaticNodes = 47
	sw, _ := NewSwitch(cfg)
	if d, _ := sw.Transit(0, 1, 64, 0, nil); d != cfg.Latency(47) {
		t.Fatalf("static latency %v, want %v", d, cfg.Latency(47))
	}
}

// torusRef is a naive reference: BFS over the torus's links.
func torusRef(t Torus, a core.NodeID) map[core.NodeID]int {
	n := t.X * t.Y * t.Z
	id := func(x, y, z int) core.NodeID {
		return core.NodeID(((x + t.X) % t.X) + ((y+t.Y)%t.Y)*t.X + ((z+t.Z)%t.Z)*t.X*t.Y)
	}
	dist := map[core.NodeID]int{a: 0}
	q := []core.NodeID{a}
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		x, y, z := int(u)%t.X, int(u)/t.X%t.Y, int(u)/(t.X*t.Y)
		for _, d := range [][3]int{{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}} {
			nx, ny, nz := x+d[0], y+d[1], z+d[2]
			if t.Mesh && (nx < 0 || nx >= t.X || ny < 0 || ny >= t.Y || nz < 0 || nz >= t.Z) {
				continue
			}
			v := id(nx, ny, nz)
			if _, ok := dist[v]; !ok {
				dist[v] = dist[u] + 1
				q = append(q, v)
			}
		}
	}
	if len(dist) != n {
		panic("torus reference did not reach every node")
	}
	return dist
}

// TestTorusHops checks the BG/L distance model of the membership paper
// §7.1 against a BFS over the torus links, and the latency formula.
func TestTorusHops(t *testing.T) {
	for _, tor := range []Torus{{X: 4, Y: 3, Z: 5, PerHop: time.Microsecond}, {X: 4, Y: 3, Z: 5, Mesh: true}, BlueGeneL()} {
		for a := core.NodeID(0); int(a) < tor.X*tor.Y*tor.Z; a += 13 {
			ref := torusRef(tor, a)
			for b, d := range ref {
				if got := tor.Hops(a, b); got != d {
					t.Fatalf("%v: hops(%v,%v) = %d, want %d", tor, a, b, got, d)
				}
			}
		}
	}
	bg := BlueGeneL()
	for _, tc := range []struct {
		a, b core.NodeID
		hops int
	}{{0, 7, 1}, {0, 4, 4}, {0, 511, 3}, {0, 36, 8}, {0, 512, 0}, {1, 512 + 2, 1}} {
		if h := bg.Hops(tc.a, tc.b); h != tc.hops {
			t.Errorf("BG/L hops(%v,%v) = %d, want %d", tc.a, tc.b, h, tc.hops)
		}
	}
	if d, _ := bg.Transit(0, 36, 64, 0, nil); d != 8*4600*time.Nanosecond {
		t.Errorf("latency 0->36 %v, want 8 × 4.6µs", d)
	}
}

// TestSpikeWindow: messages sent inside the window are slowed, later ones
// wait for them (FIFO), the window can be limited to some nodes.
func TestSpikeWindow(t *testing.T) {
	ms := time.Millisecond
	net := WithSpikes(Constant(ms), Spike{Extra: 5 * ms, From: 10 * ms, Until: 20 * ms, A: []core.NodeID{0}, B: []core.NodeID{1}})
	w, nodes := scripted(net, 3)
	nodes[0].sends = []send{{at: 5 * ms, to: 1, seq: 1}, {at: 15 * ms, to: 1, seq: 2}, {at: 19 * ms, to: 1, seq: 3},
		{at: 20 * ms, to: 1, seq: 4}, {at: 25 * ms, to: 1, seq: 5}, {at: 15 * ms, to: 2, seq: 6}}
	w.RunUntil(time.Second)
	var got []string
	for _, a := range nodes[1].got {
		got = append(got, fmt.Sprintf("%d@%v", a.seq, a.at))
	}
	want := []string{"1@6ms", "2@21ms", "3@25ms", "4@25ms", "5@26ms"}
	if !slices.Equal(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
	if a := nodes[2].got; len(a) != 1 || a[0].at != 16*ms {
		t.Fatalf("message to a node outside the spike: %v, want at 16ms", a)
	}
}

// TestSpikeOnGraph: a spike on a hop-by-hop network delays the injection and
// keeps the pair FIFO.
func TestSpikeOnGraph(t *testing.T) {
	ms := time.Millisecond
	net := WithSpikes(lineGraph(t), Spike{Extra: 10 * ms, From: 0, Until: time.Microsecond})
	w, nodes := scripted(net, 3)
	nodes[0].sends = []send{{at: 0, to: 2, seq: 1, size: 1000}, {at: 2 * ms, to: 2, seq: 2, size: 1000}}
	w.RunUntil(time.Second)
	got := nodes[2].got
	want := []arrival{{0, 1, 13 * ms}, {0, 2, 14 * ms}}
	if !slices.Equal(got, want) {
		t.Fatalf("arrivals %v, want %v", got, want)
	}
}

// SlowNode: only the slow node's messages are delayed and lost, at about
// the given rate; the others take the inner network's time.
func TestSlowNode(t *testing.T) {
	n := SlowNode{Net: Constant(time.Millisecond), Node: 3, Loss: 0.1, Delay: 200 * time.Millisecond}
	rng := rand.New(rand.NewPCG(1, 2))
	lost := 0
	const k = 10000
	for range k {
		d, ok := n.Transit(3, 1, 10, 0, rng)
		if !ok {
			lost++
			continue
		}
		if d != 201*time.Millisecond {
			t.Fatalf("the slow node's message took %v, want 201ms", d)
		}
	}
	if lost < k*8/100 || lost > k*12/100 {
		t.Errorf("%d of %d of the slow node's messages lost, want about 10%%", lost, k)
	}
	for range 100 {
		if d, ok := n.Transit(1, 3, 10, 0, rng); !ok || d != time.Millisecond {
			t.Fatalf("another node's message: %v %v, want 1ms, delivered", d, ok)
		}
	}
}
