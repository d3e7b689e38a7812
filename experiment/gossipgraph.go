package experiment

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/cohort-mp/cohort/topo"
)

// gossipGraph is the directed graph of who sends to whom over one cycle of a
// deterministic gossip schedule (P2P-MPI §5.2): an edge s→d for every round
// r with d = Target(s, r, n). Heartbeat information about a node reaches a
// live node only along paths of live nodes, so the failure detector fails
// (some live node eventually suspects a live node) exactly when the live
// nodes do not form a strongly connected subgraph.
//
// Sets of nodes are bitsets: node i is bit i%64 of word i/64. When the
// schedule is circulant (d−s mod n depends only on r) and n ≤ 64 or n is a
// multiple of 64, the neighbours of a whole set are found by rotating its
// bitset by each offset, a few word operations per offset; otherwise the
// graph falls back to adjacency lists.
type gossipGraph struct {
	n, words int
	lastMask uint64 // valid bits of the last word
	// offsets are the distinct values of Target(s,r,n)-s mod n, in (0, n),
	// when the graph is circulant and rotatable; nil otherwise.
	offsets []int
	// symmetric reports that every edge s→d has its reverse d→s, so that
	// reachability from one node decides strong connectivity.
	symmetric bool
	// out and in are the adjacency lists (always built; used by the
	// fallback and by tests).
	out, in [][]int32
}

// newGossipGraph builds the cycle graph of schedule s over n ≥ 2 nodes.
func newGossipGraph(s topo.Schedule, n int) (*gossipGraph, error) {
	if !s.Deterministic() {
		return nil, fmt.Errorf("experiment: gossip graph of %v: the schedule has no fixed targets", s)
	}
	if n < 2 {
		return nil, fmt.Errorf("experiment: gossip graph of %v needs n ≥ 2, got %d", s, n)
	}
	g := &gossipGraph{n: n, words: (n + 63) / 64, out: make([][]int32, n), in: make([][]int32, n)}
	g.lastMask = ^uint64(0)
	if r := n % 64; r != 0 {
		g.lastMask = 1<<r - 1
	}
	cycle := s.CycleLength(n)
	circulant := true
	var offsets []int
	for src := 0; src < n; src++ {
		for r := 1; r <= cycle; r++ {
			d, err := s.Target(src, r, n)
			if err != nil {
				return nil, fmt.Errorf("experiment: gossip graph of %v over %d nodes: %w", s, n, err)
			}
			if !slices.Contains(g.out[src], int32(d)) {
				g.out[src] = append(g.out[src], int32(d))
				g.in[d] = append(g.in[d], int32(src))
			}
			off := ((d-src)%n + n) % n
			if src == 0 {
				if !slices.Contains(offsets, off) {
					offsets = append(offsets, off)
				}
			} else if !slices.Contains(offsets, off) {
				circulant = false
			}
		}
	}
	for _, l := range g.out {
		slices.Sort(l)
	}
	for _, l := range g.in {
		slices.Sort(l)
	}
	g.symmetric = true
	for src, l := range g.out {
		for _, d := range l {
			if _, found := slices.BinarySearch(g.out[d], int32(src)); !found {
				g.symmetric = false
			}
		}
	}
	if circulant && (n <= 64 || n%64 == 0) {
		slices.Sort(offsets)
		g.offsets = offsets
	}
	return g, nil
}

// rotWord returns word j of src rotated by k positions (bit i of src goes
// to bit (i+k) mod n), for 0 < k < n. Only for rotatable graphs.
func (g *gossipGraph) rotWord(src []uint64, j, k int) uint64 {
	if g.words == 1 {
		x := src[0]
		return (x<<uint(k) | x>>uint(g.n-k)) & g.lastMask
	}
	w := g.words
	i := j - k/64
	if i < 0 {
		i += w
	}
	b := uint(k % 64)
	x := src[i] << b
	if b != 0 {
		if i--; i < 0 {
			i += w
		}
		x |= src[i] >> (64 - b)
	}
	return x
}

// scratch is the per-worker memory of the trial loop: nothing is allocated
// per trial.
type scratch struct {
	live, dead, reach []uint64
	queue             []int32
}

func (g *gossipGraph) newScratch() *scratch {
	mk := func() []uint64 { return make([]uint64, g.words) }
	return &scratch{live: mk(), dead: mk(), reach: mk(), queue: make([]int32, 0, g.n)}
}

// closure computes in sc.reach the live nodes reachable from start (a live
// node) following edges forward (backward=false) or backward, and reports
// whether that is every live node.
//
// On rotatable graphs each sweep ORs into reach, for every offset in turn,
// reach rotated by the offset and masked by live, updating reach in place:
// every bit it adds is a live node one edge away from a node already
// reached, so updating in place is sound, and it lets one sweep follow a
// path that uses the offsets in increasing order (any distance, in binary,
// for BRR), so that two or three sweeps usually suffice.
func (g *gossipGraph) closure(sc *scratch, start int, backward bool) bool {
	clear(sc.reach)
	sc.reach[start/64] = 1 << uint(start%64)
	if g.offsets == nil {
		g.closureLists(sc, start, backward)
		return slices.Equal(sc.reach, sc.live)
	}
	reach, live := sc.reach, sc.live
	for {
		changed := false
		for _, off := range g.offsets {
			k := off
			if backward {
				k = g.n - off
			}
			if g.rotateInto(reach, live, k) {
				changed = true
			}
		}
		if slices.Equal(reach, live) {
			return true
		}
		if !changed {
			return false
		}
	}
}

// rotateInto sets reach |= rot(reach, k) & live in place and reports
// whether reach changed. It is rotWord unrolled over the words, the inner
// loop of the whole experiment.
func (g *gossipGraph) rotateInto(reach, live []uint64, k int) bool {
	if g.words == 1 {
		x := reach[0]
		v := x | (x<<uint(k)|x>>uint(g.n-k))&live[0]
		reach[0] = v
		return v != x
	}
	w := g.words
	q, b := k/64, uint(k%64)
	changed := false
	for j := range w {
		r := reach[j]
		if r == live[j] {
			continue // every live node of this word is reached
		}
		i := j - q
		if i < 0 {
			i += w
		}
		x := reach[i] << b
		if b != 0 {
			i2 := i - 1
			if i2 < 0 {
				i2 += w
			}
			x |= reach[i2] >> (64 - b)
		}
		if v := r | x&live[j]; v != r {
			reach[j] = v
			changed = true
		}
	}
	return changed
}

// closureLists is closure over adjacency lists (breadth-first).
func (g *gossipGraph) closureLists(sc *scratch, start int, backward bool) {
	adj := g.out
	if backward {
		adj = g.in
	}
	q := append(sc.queue[:0], int32(start))
	for len(q) > 0 {
		v := q[len(q)-1]
		q = q[:len(q)-1]
		for _, u := range adj[v] {
			w, bit := u/64, uint64(1)<<uint(u%64)
			if sc.live[w]&bit != 0 && sc.reach[w]&bit == 0 {
				sc.reach[w] |= bit
				q = append(q, u)
			}
		}
	}
	sc.queue = q
}

// verdict is what one failure pattern does to the detector.
type verdict struct {
	// disconnected: the live nodes do not form a strongly connected
	// subgraph, so some live node stops hearing about another live one
	// and will wrongly declare it failed.
	disconnected bool
	// isolated: some live node has no live in-neighbour at all (all its
	// sources of information are dead: the case the paper names).
	isolated bool
}

// judge decides the verdict for the live set in sc.live (the bits beyond n
// must be zero).
func (g *gossipGraph) judge(sc *scratch) verdict {
	var v verdict
	first, count := -1, 0
	for i, x := range sc.live {
		if x != 0 && first < 0 {
			first = i*64 + bits.TrailingZeros64(x)
		}
		count += bits.OnesCount64(x)
	}
	if count <= 1 {
		return v // nobody, or one node alone: nobody can be wrongly suspected
	}
	v.isolated = g.someLiveWithoutLiveSource(sc)
	if v.isolated {
		v.disconnected = true
		return v
	}
	if !g.closure(sc, first, false) {
		v.disconnected = true
		return v
	}
	if !g.symmetric {
		v.disconnected = !g.closure(sc, first, true)
	}
	return v
}

// someLiveWithoutLiveSource reports whether a live node has all its
// in-neighbours dead.
func (g *gossipGraph) someLiveWithoutLiveSource(sc *scratch) bool {
	if g.offsets == nil {
		for v := 0; v < g.n; v++ {
			if sc.live[v/64]&(1<<uint(v%64)) == 0 {
				continue
			}
			alone := true
			for _, u := range g.in[v] {
				if sc.live[u/64]&(1<<uint(u%64)) != 0 {
					alone = false
					break
				}
			}
			if alone {
				return true
			}
		}
		return false
	}
	// acc = live ∧ ⋀_off rot(dead, off): live nodes whose every source
	// (v−off) is dead.
	for i := range sc.dead {
		sc.dead[i] = ^sc.live[i]
	}
	sc.dead[g.words-1] &= g.lastMask
	for j, x := range sc.live {
		for _, off := range g.offsets {
			if x == 0 {
				break
			}
			x &= g.rotWord(sc.dead, j, off)
		}
		if x != 0 {
			return true
		}
	}
	return false
}

// bernoulliMask draws the live set: every node independently dead with
// probability p. Each word of 64 nodes costs len(digits) random words: the
// digits of p in binary, from the least significant, turn 64 fair bits at a
// time into 64 Bernoulli(p) bits (ones with probability 0.d1d2…dK).
type bernoulliMask struct {
	digits []bool // binary digits of p, most significant first
	one    bool   // p = 1: every node dead
}

// maskDigits is the precision of bernoulliMask: p is rounded to a multiple
// of 2^-24 (an error below 3·10⁻⁸; prob reports the value actually drawn).
const maskDigits = 24

// newBernoulliMask rounds p (in [0, 1]) to maskDigits binary digits.
func newBernoulliMask(p float64) bernoulliMask {
	q := uint64(math.Round(p * (1 << maskDigits)))
	var m bernoulliMask
	if q >= 1<<maskDigits {
		m.one = true // p rounds to 1: every node dead, no digits needed
		return m
	}
	for i := maskDigits - 1; i >= 0; i-- {
		m.digits = append(m.digits, q&(1<<uint(i)) != 0)
	}
	// Trailing zeros would only halve a probability that is already exact.
	for len(m.digits) > 0 && !m.digits[len(m.digits)-1] {
		m.digits = m.digits[:len(m.digits)-1]
	}
	return m
}

// prob is the probability actually drawn.
func (m bernoulliMask) prob() float64 {
	if m.one {
		return 1
	}
	p, w := 0.0, 0.5
	for _, d := range m.digits {
		if d {
			p += w
		}
		w /= 2
	}
	return p
}

// word returns 64 independent bits, each one with probability prob().
func (m bernoulliMask) word(src *wyrand) uint64 {
	if m.one {
		return ^uint64(0)
	}
	var x uint64
	for i := len(m.digits) - 1; i >= 0; i-- {
		if m.digits[i] {
			x |= src.next()
		} else {
			x &= src.next()
		}
	}
	return x
}

// wyrand is the wyrand generator (Wang Yi): a 64-bit state advanced by a
// constant and mixed by one 128-bit multiplication. It passes BigCrush and
// PractRand and costs about a third of math/rand/v2's PCG here, where the
// trial loop draws tens of words per trial. Only fd-reliability's failure
// patterns use it; it is seeded from the task's seed.
type wyrand struct{ s uint64 }

func (r *wyrand) next() uint64 {
	r.s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(r.s, r.s^0xe7037ed1a0b428db)
	return hi ^ lo
}

// drawLive fills sc.live with the survivors of one trial.
func (g *gossipGraph) drawLive(sc *scratch, dead bernoulliMask, src *wyrand) {
	for i := range sc.live {
		sc.live[i] = ^dead.word(src)
	}
	sc.live[g.words-1] &= g.lastMask
}
