package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// ErrBadNetwork is returned (wrapped) by the constructors of network models
// given an invalid configuration.
var ErrBadNetwork = errors.New("sim: bad network configuration")

// GraphConfig describes a random-graph network after §4.1 of Friedman, Manor
// and Guo (the stability paper): an Erdős–Rényi graph G(V, P) whose vertices
// are the simulated nodes (vertex i is node i) plus Routers extra vertices
// that only forward, duplex links of Bandwidth bits/s in each direction, and
// a propagation delay per link drawn uniformly from [MinDelay, MaxDelay].
type GraphConfig struct {
	// Nodes is the number of simulated nodes, vertices 0..Nodes-1. A message
	// to a node id ≥ Nodes is dropped.
	Nodes int
	// Routers is the number of extra vertices Nodes..Nodes+Routers-1 that run
	// no machine and only forward. The paper uses none (0).
	Routers int
	// P is the probability of each edge (paper: 0.01 to 0.04).
	P float64
	// BandwidthBits is each link's capacity in bits per second, per
	// direction (paper: 100 Mbit/s).
	BandwidthBits float64
	// MinDelay and MaxDelay bound the per-link propagation delay, drawn
	// uniformly (paper: 0 to 1 ms).
	MinDelay, MaxDelay time.Duration
	// Seed draws the topology and the delays. Use the world's seed to make
	// the topology part of the run's seed.
	Seed uint64
}

// DefaultGraphConfig returns the paper's setup for n nodes: P = 0.02, 100
// Mbit/s duplex links, propagation uniform in [0, 1 ms].
func DefaultGraphConfig(n int, seed uint64) GraphConfig {
	return GraphConfig{Nodes: n, P: 0.02, BandwidthBits: 100e6, MaxDelay: time.Millisecond, Seed: seed}
}

// Validate reports whether c describes a graph that can be built.
func (c GraphConfig) Validate() error {
	switch {
	case c.Nodes < 1:
		return fmt.Errorf("%w: graph needs at least one node, got %d", ErrBadNetwork, c.Nodes)
	case c.Routers < 0:
		return fmt.Errorf("%w: negative router count %d", ErrBadNetwork, c.Routers)
	case c.Nodes+c.Routers > math.MaxInt32:
		return fmt.Errorf("%w: %d vertices exceed the int32 vertex ids", ErrBadNetwork, c.Nodes+c.Routers)
	case !(c.P >= 0 && c.P <= 1):
		return fmt.Errorf("%w: edge probability %v outside [0,1]", ErrBadNetwork, c.P)
	case !(c.BandwidthBits > 0) || math.IsInf(c.BandwidthBits, 0):
		return fmt.Errorf("%w: link bandwidth %v bit/s must be positive and finite", ErrBadNetwork, c.BandwidthBits)
	case c.MinDelay < 0 || c.MaxDelay < c.MinDelay:
		return fmt.Errorf("%w: propagation delay range [%v, %v]", ErrBadNetwork, c.MinDelay, c.MaxDelay)
	}
	return nil
}

// Graph is a store-and-forward network over a random graph: each message is
// routed along a shortest path (by hop count) and, at every vertex, waits in
// the FIFO queue of the outgoing link, is transmitted in size·8/BandwidthBits
// and propagates for the link's delay. Every hop is one event of the world.
//
// A node's vertex keeps forwarding while the node is crashed: what fails is
// the process, not the router. The world's faults (cuts, partitions, loss)
// act end to end, when a message is sent.
//
// A Graph holds the state of one run (link queues, statistics): give each
// World its own. Build it with [NewGraph].
type Graph struct {
	cfg      GraphConfig
	vertices int
	added    int // edges added to connect components

	// Adjacency in CSR form, neighbours in increasing id order; link[k] is
	// the directed link from vertex v to adj[k] for k in [start[v], start[v+1]).
	start []int32
	adj   []int32
	link  []int32
	links []glink
	edges int

	// next[d] is the next-hop table towards vertex d (nil until first used):
	// next[d][v] is the neighbour of v on the chosen shortest path to d.
	next [][]int32
	bfsQ []int32

	w     *World
	free  []*packet
	stats GraphStats
	// the load integral: Σ over time of the number of messages on links.
	onLinks  int64
	lastLoad time.Duration
	loadNs   float64
}

// glink is one direction of a duplex link.
type glink struct {
	to      int32
	prop    time.Duration
	busy    time.Duration   // when the transmitter is next free
	waiting []time.Duration // start times of messages queued, not yet transmitting (ascending)
	head    int
}

// packet is a message in the graph.
type packet struct {
	g        *Graph
	from, to core.NodeID
	inc      uint32
	size     int
	at       int32 // vertex the packet has reached
	m        core.Msg
	step     func() // advance, allocated once per packet
	inject   func() // forward, for a departure delayed by the send overhead
}

// GraphStats are the indices of §4.1 of the stability paper, over a run.
type GraphStats struct {
	// At is the virtual time of the snapshot.
	At time.Duration
	// Messages counts messages that entered the network (sent to a node of
	// the graph, after the world's loss and partition checks).
	Messages uint64
	// Delivered counts messages that reached their destination vertex.
	Delivered uint64
	// Hops is the paper's hop count: every message counted once at each
	// link it crosses.
	Hops uint64
	// ByteHops is Σ size·hops in bytes.
	ByteHops uint64
	// MaxQueue is the paper's maximum queue size: the largest number of
	// messages seen waiting to be sent on any one link (the message being
	// transmitted is not waiting, as in ns queues). MaxQueueLink names the
	// link as "u->v".
	MaxQueue     int
	MaxQueueLink string
	// LoadIntegral is ∫ (number of messages on all links) dt up to At, in
	// message·seconds. A message is on a link from the moment it joins the
	// link's queue until it reaches the far end (waiting, transmitting,
	// propagating).
	LoadIntegral float64
	// BusyIntegral is Σ transmission time over all links, in seconds.
	BusyIntegral float64
	// Links is the number of directed links (twice the edges).
	Links int
}

// AvgLoad is the paper's average network load: the time-average number of
// messages on all links, over [0, At]. The paper samples it every 1 ms; this
// is the exact integral that sampling approximates.
func (s GraphStats) AvgLoad() float64 {
	if s.At <= 0 {
		return 0
	}
	return s.LoadIntegral / s.At.Seconds()
}

// LoadSince is the average network load over (earlier.At, s.At], for
// per-round averages as in the paper's Figure 9.
func (s GraphStats) LoadSince(earlier GraphStats) float64 {
	d := (s.At - earlier.At).Seconds()
	if d <= 0 {
		return 0
	}
	return (s.LoadIntegral - earlier.LoadIntegral) / d
}

// Utilization is the average fraction of time a link spends transmitting,
// over all directed links and [0, At].
func (s GraphStats) Utilization() float64 {
	if s.At <= 0 || s.Links == 0 {
		return 0
	}
	return s.BusyIntegral / (s.At.Seconds() * float64(s.Links))
}

// NewGraph draws the random graph of cfg.
//
// Edges are drawn by the geometric-skip method of Batagelj and Brandes, which
// gives exactly G(V, P) in O(V + E) draws. The paper's sizes (10 to 1900
// nodes with P = 0.01) are often disconnected, and regenerating until
// connected would almost never terminate at small sizes, so components are
// connected deterministically instead: components are ordered by their
// smallest vertex, and each component after the first gets one edge from its
// smallest vertex to a vertex drawn uniformly among the earlier components.
// [Graph.AddedEdges] reports how many edges that added.
func NewGraph(cfg GraphConfig) (*Graph, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x67726170682d746f))
	nv := cfg.Nodes + cfg.Routers
	var eu, ev []int32
	switch {
	case cfg.P >= 1:
		for v := 1; v < nv; v++ {
			for u := range v {
				eu, ev = append(eu, int32(u)), append(ev, int32(v))
			}
		}
	case cfg.P > 0:
		lp := math.Log(1 - cfg.P)
		v, u := 1, -1
		for v < nv {
			r := rng.Float64()
			u += 1 + int(math.Floor(math.Log(1-r)/lp))
			for u >= v && v < nv {
				u -= v
				v++
			}
			if v < nv {
				eu, ev = append(eu, int32(u)), append(ev, int32(v))
			}
		}
	}
	// Connect components (union-find, then by smallest vertex).
	parent := make([]int32, nv)
	for i := range parent {
		parent[i] = int32(i)
	}
	find := func(x int32) int32 {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for i := range eu {
		a, b := find(eu[i]), find(ev[i])
		if a != b {
			parent[max(a, b)] = min(a, b)
		}
	}
	// With the smaller root always kept, a component's root is its smallest
	// vertex; visiting vertices in order meets each root first.
	var earlier []int32 // vertices of components seen so far
	g := &Graph{cfg: cfg, vertices: nv}
	members := make(map[int32][]int32)
	var roots []int32
	for v := int32(0); v < int32(nv); v++ {
		r := find(v)
		if r == v {
			roots = append(roots, v)
		}
		members[r] = append(members[r], v)
	}
	for i, r := range roots {
		if i > 0 {
			t := earlier[rng.IntN(len(earlier))]
			eu, ev = append(eu, min(r, t)), append(ev, max(r, t))
			g.added++
		}
		earlier = append(earlier, members[r]...)
	}
	// Delays, in edge order.
	prop := make([]time.Duration, len(eu))
	for i := range prop {
		prop[i] = cfg.MinDelay
		if cfg.MaxDelay > cfg.MinDelay {
			prop[i] += time.Duration(rng.Int64N(int64(cfg.MaxDelay-cfg.MinDelay) + 1))
		}
	}
	g.build(eu, ev, prop)
	return g, nil
}

// build lays out the undirected edges (eu[i], ev[i]) with propagation
// delays prop[i] in CSR form.
func (g *Graph) build(eu, ev []int32, prop []time.Duration) {
	nv := g.vertices
	g.edges = len(eu)
	// CSR with sorted neighbours: count, then place by increasing neighbour.
	deg := make([]int32, nv+1)
	for i := range eu {
		deg[eu[i]+1]++
		deg[ev[i]+1]++
	}
	for v := 1; v <= nv; v++ {
		deg[v] += deg[v-1]
	}
	g.start = deg
	g.adj = make([]int32, 2*len(eu))
	g.link = make([]int32, 2*len(eu))
	g.links = make([]glink, 2*len(eu))
	fill := make([]int32, nv)
	copy(fill, deg[:nv])
	for i := range eu {
		u, v := eu[i], ev[i]
		lu, lv := int32(2*i), int32(2*i+1)
		g.links[lu] = glink{to: v, prop: prop[i]}
		g.links[lv] = glink{to: u, prop: prop[i]}
		g.adj[fill[u]], g.link[fill[u]] = v, lu
		fill[u]++
		g.adj[fill[v]], g.link[fill[v]] = u, lv
		fill[v]++
	}
	for v := range nv {
		sortAdj(g.adj[deg[v]:deg[v+1]], g.link[deg[v]:deg[v+1]])
	}
	g.next = make([][]int32, nv)
	g.stats.Links = len(g.links)
}

// sortAdj sorts neighbours ascending, carrying their link ids (insertion
// sort: degrees are small).
func sortAdj(adj, link []int32) {
	for i := 1; i < len(adj); i++ {
		for j := i; j > 0 && adj[j] < adj[j-1]; j-- {
			adj[j], adj[j-1] = adj[j-1], adj[j]
			link[j], link[j-1] = link[j-1], link[j]
		}
	}
}

// Vertices is the number of vertices (nodes and routers).
func (g *Graph) Vertices() int { return g.vertices }

// Edges is the number of undirected edges, including the added ones.
func (g *Graph) Edges() int { return g.edges }

// AddedEdges is the number of edges added to connect the components.
func (g *Graph) AddedEdges() int { return g.added }

// Neighbors returns the neighbours of vertex v in increasing order. The
// slice belongs to the graph: do not modify it.
func (g *Graph) Neighbors(v int) []int32 { return g.adj[g.start[v]:g.start[v+1]] }

// nextHops returns the next-hop table towards d, computing it on first use
// by a breadth-first search from d. Neighbours are visited in increasing id
// order and a vertex keeps the first neighbour that discovered it, so among
// equal-length paths the route is fixed by the ids alone. Each table is V
// int32s: all of them take 4·V² bytes (16 MB at V = 2000), which is why they
// are built only for destinations that receive messages.
func (g *Graph) nextHops(d int32) []int32 {
	if t := g.next[d]; t != nil {
		return t
	}
	t := make([]int32, g.vertices)
	for i := range t {
		t[i] = -1
	}
	t[d] = d
	q := append(g.bfsQ[:0], d)
	for len(q) > 0 {
		u := q[0]
		q = q[1:]
		for _, v := range g.adj[g.start[u]:g.start[u+1]] {
			if t[v] < 0 {
				t[v] = u
				q = append(q, v)
			}
		}
	}
	g.bfsQ = q[:0]
	g.next[d] = t
	return t
}

// Path returns the vertices a message from a to b visits, a and b included.
func (g *Graph) Path(a, b int) []int {
	if a < 0 || b < 0 || a >= g.vertices || b >= g.vertices {
		return nil
	}
	t := g.nextHops(int32(b))
	p := []int{a}
	for v := int32(a); v != int32(b); {
		v = t[v]
		p = append(p, int(v))
	}
	return p
}

// Hops is the shortest-path distance in links between vertices a and b.
func (g *Graph) Hops(a, b int) int { return len(g.Path(a, b)) - 1 }

func (g *Graph) txTime(size int) time.Duration {
	return time.Duration(float64(size) * 8 / g.cfg.BandwidthBits * 1e9)
}

// Transit implements Network with the unloaded latency of the route (sum of
// transmission and propagation times, no queueing). A World does not call
// it: it routes messages hop by hop through the link queues.
func (g *Graph) Transit(from, to core.NodeID, size int, _ time.Duration, _ *rand.Rand) (time.Duration, bool) {
	if int(from) >= g.cfg.Nodes || int(to) >= g.cfg.Nodes {
		return 0, false
	}
	var d time.Duration
	t := g.nextHops(int32(to))
	for v := int32(from); v != int32(to); {
		l := g.linkTo(v, t[v])
		d += g.txTime(size) + g.links[l].prop
		v = t[v]
	}
	return d, true
}

func (*Graph) inOrder() {}

// linkTo finds the link from u to its neighbour v (binary search).
func (g *Graph) linkTo(u, v int32) int32 {
	lo, hi := g.start[u], g.start[u+1]
	for lo < hi {
		mid := (lo + hi) / 2
		if g.adj[mid] < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return g.link[lo]
}

func (g *Graph) route(w *World, from, to core.NodeID, m core.Msg, size int, depart time.Duration) {
	g.w = w
	if int(from) >= g.cfg.Nodes || int(to) >= g.cfg.Nodes {
		w.stats.Dropped++
		return
	}
	g.stats.Messages++
	var p *packet
	if n := len(g.free); n > 0 {
		p = g.free[n-1]
		g.free = g.free[:n-1]
	} else {
		p = &packet{g: g}
		p.step, p.inject = p.advance, p.forward
	}
	p.from, p.to, p.m, p.size, p.at = from, to, m, size, int32(from)
	p.inc = w.nodes[to].inc
	if depart > w.now {
		w.At(depart, p.inject)
	} else {
		p.forward()
	}
}

// advance is the event of a packet reaching vertex p.at over a link.
func (p *packet) advance() {
	p.g.changeLoad(-1)
	p.forward()
}

// forward puts the packet on the next link of its route, or delivers it.
func (p *packet) forward() {
	g, w := p.g, p.g.w
	now := w.now
	if p.at == int32(p.to) {
		g.stats.Delivered++
		w.deliverInc(now, p.from, p.to, p.inc, p.m)
		p.m = nil
		g.free = append(g.free, p)
		return
	}
	nextV := g.nextHops(int32(p.to))[p.at]
	l := &g.links[g.linkTo(p.at, nextV)]
	tx := g.txTime(p.size)
	begin := max(now, l.busy)
	l.busy = begin + tx
	for l.head < len(l.waiting) && l.waiting[l.head] <= now {
		l.head++
	}
	if l.head == len(l.waiting) {
		l.waiting, l.head = l.waiting[:0], 0
	}
	if begin > now {
		l.waiting = append(l.waiting, begin)
		if q := len(l.waiting) - l.head; q > g.stats.MaxQueue {
			g.stats.MaxQueue = q
			g.stats.MaxQueueLink = fmt.Sprintf("%d->%d", p.at, nextV)
		}
	}
	g.stats.Hops++
	g.stats.ByteHops += uint64(p.size)
	g.stats.BusyIntegral += tx.Seconds()
	g.changeLoad(+1)
	p.at = nextV
	w.At(begin+tx+l.prop, p.step)
}

// changeLoad moves the number of messages on links by d, integrating the
// previous value over the time since the last change.
func (g *Graph) changeLoad(d int64) {
	now := g.w.now
	g.loadNs += float64(g.onLinks) * float64(now-g.lastLoad)
	g.lastLoad = now
	g.onLinks += d
}

// Stats returns the indices so far, at the current time of the world that
// uses the graph (zero time before the first message).
func (g *Graph) Stats() GraphStats {
	s := g.stats
	if g.w != nil {
		s.At = g.w.now
		s.LoadIntegral = (g.loadNs + float64(g.onLinks)*float64(g.w.now-g.lastLoad)) / 1e9
	}
	return s
}

func (g *Graph) String() string {
	return fmt.Sprintf("graph(n=%d,routers=%d,p=%v,%vbit/s,delay=[%v,%v],seed=%d)",
		g.cfg.Nodes, g.cfg.Routers, g.cfg.P, g.cfg.BandwidthBits, g.cfg.MinDelay, g.cfg.MaxDelay, g.cfg.Seed)
}
