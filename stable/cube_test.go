package stable_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
	"github.com/cohort-mp/cohort/topo"
)

// CubeFullDist, Figure 5, on I_3^7 (§3.3: node 7 is missing, so 5 and 6 get
// a compensating edge and 3 keeps two neighbours): Step 1 sends (G_i, M_i,
// r_i) with G_i = {i}, M_i = R_i, iteration 0, to the hypercube neighbours
// only; every message of the round stays on hypercube edges; every node
// ends the round with ArrayMin of all vectors.
func TestCubeFigure5(t *testing.T) {
	const n = 7
	h := haves(8, n, n)
	nw := newNet(t, stable.Config{Protocol: stable.CubeFullDist, Period: time.Second}, h)
	cube, _ := topo.NewCube(n)
	for i := range n {
		var to []int
		for _, p := range nw.flight {
			if int(p.from) != i {
				continue
			}
			to = append(to, int(p.to))
			g := p.m.(stable.Gossip)
			bit := []byte{1 << i}
			if g.Round != 1 || g.Iter != 0 || !slices.Equal(g.G, bit) || !slices.Equal(g.M, h[i]) {
				t.Fatalf("step 1 of node %d: %v", i, g)
			}
		}
		slices.Sort(to)
		if !slices.Equal(to, cube.Neighbors(i)) {
			t.Fatalf("node %d sent to %v, want its neighbours %v", i, to, cube.Neighbors(i))
		}
	}
	if !slices.Equal(cube.Neighbors(5), []int{1, 4, 6}) || !slices.Equal(cube.Neighbors(3), []int{1, 2}) {
		t.Fatalf("I_3^7 neighbours: 5 → %v, 3 → %v", cube.Neighbors(5), cube.Neighbors(3))
	}
	nw.run(func(p pkt) bool {
		if !slices.Contains(cube.Neighbors(int(p.from)), int(p.to)) {
			t.Fatalf("%v sent to non-neighbour %v", p.from, p.to)
		}
		return false
	})
	nw.wantAll(1, arrayMin(h))
}

// §3.5's iteration numbers: receive_from counts a neighbour once per
// iteration, duplicates do not count, and the iteration advances (one
// multicast) once every neighbour was heard.
func TestCubeIterations(t *testing.T) {
	const n = 8 // node 0's neighbours: 1, 2, 4
	h := haves(9, n, n)
	nw := newNet(t, stable.Config{Protocol: stable.CubeFullDist, Period: time.Second}, h)
	to0 := nw.take(func(p pkt) bool { return p.to == 0 })
	nw.flight = nil
	nw.envs[0].TakeSent()
	from := func(id core.NodeID) pkt {
		for _, p := range to0 {
			if p.from == id {
				return p
			}
		}
		t.Fatalf("no message from %v", id)
		return pkt{}
	}
	nw.deliver(from(1))
	nw.deliver(from(1)) // a duplicate of iteration 0
	nw.deliver(from(2))
	if len(nw.flight) != 0 {
		t.Fatalf("node 0 advanced before hearing node 4: %v", nw.kinds())
	}
	nw.deliver(from(4))
	if len(nw.flight) != 3 {
		t.Fatalf("after every neighbour: %v, want one message to each of 1, 2, 4", nw.kinds())
	}
	for _, p := range nw.flight {
		g := p.m.(stable.Gossip)
		if g.Iter != 1 || g.G[0] != 1|2|4|16 || !slices.Equal(g.M, arrayMin([][]uint64{h[0], h[1], h[2], h[4]})) {
			t.Fatalf("iteration 1 message %v", g)
		}
	}
	// A message of an older round is ignored.
	nw.flight = nil
	nw.dets[0].Receive(1, stable.Gossip{Epoch: 0, Round: 1, Iter: 5, G: []byte{0xff}, M: h[1]})
	st := nw.stables(0)
	if len(st) != 1 {
		t.Fatalf("full bitmap did not end the round: %v", st)
	}
	nw.collect()
	nw.flight = nil
	nw.dets[0].Receive(2, stable.Gossip{Epoch: 0, Round: 1, Iter: 6, G: []byte{0xff}, M: make([]uint64, n)})
	nw.collect()
	if len(nw.flight) != 0 || len(nw.stables(0)) != 0 || !slices.Equal(nw.dets[0].Stable(), st[0].Vector) {
		t.Fatal("a stale round-1 message was used")
	}
}

// fifoChaos delivers in random order across pairs but FIFO within each
// pair (the paper's channels), dropping nothing, until every node learned
// `rounds` rounds, each with want.
func fifoChaos(t *testing.T, nw *net, seed uint64, rounds int, want []uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 78))
	learned := make([]int, len(nw.dets))
	for step := 0; step < 200000; step++ {
		if len(nw.flight) == 0 {
			nw.advance(time.Millisecond)
			continue
		}
		k := r.IntN(len(nw.flight))
		for j := range k { // the oldest message of the same pair goes first
			if nw.flight[j].from == nw.flight[k].from && nw.flight[j].to == nw.flight[k].to {
				k = j
				break
			}
		}
		p := nw.flight[k]
		nw.flight = slices.Delete(nw.flight, k, k+1)
		nw.deliver(p)
		done := true
		for i := range nw.dets {
			for _, s := range nw.stables(i) {
				learned[i]++
				if !slices.Equal(s.Vector, want) {
					t.Fatalf("seed %d: node %d round %d: %v, want %v", seed, i, s.Round, s.Vector, want)
				}
			}
			done = done && learned[i] >= rounds
		}
		if done {
			return
		}
	}
	t.Fatalf("seed %d: rounds learned %v, want %d each", seed, learned, rounds)
}

// Figure 5 as written (Resend 0) on incomplete hypercubes, with the
// interleaving between channels random: every node ends every round with
// the right vector.
func TestCubeIncompleteReliable(t *testing.T) {
	for _, n := range []int{2, 3, 5, 6, 7, 12, 100} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("n=%d/seed=%d", n, seed), func(t *testing.T) {
				h := haves(seed, n, min(n, 8))
				cfg := stable.Config{Protocol: stable.CubeFullDist, Period: 20 * time.Millisecond, Senders: 8}
				fifoChaos(t, newNet(t, cfg, h), seed, 3, arrayMin(h))
			})
		}
	}
}

// Every protocol on reliable FIFO channels (Resend 0), random interleaving.
func TestReliableInterleavings(t *testing.T) {
	for _, p := range stable.Protocols() {
		for _, n := range []int{5, 6, 7, 12} {
			for seed := uint64(1); seed <= 3; seed++ {
				h := haves(seed, n, n)
				cfg := stable.Config{Protocol: p, Period: 20 * time.Millisecond}
				fifoChaos(t, newNet(t, cfg, h), seed, 3, arrayMin(h))
			}
		}
	}
}

// CubeFullDist with §3.5 (iteration numbers, pulls, the last message of
// a finished round answered to a lagging neighbour) under loss and
// reordering.
func TestCubeLossReorder(t *testing.T) {
	for _, n := range []int{2, 5, 6, 7, 12, 100} {
		for seed := uint64(1); seed <= 4; seed++ {
			if n == 100 && seed > 1 {
				break // a big one once: it costs as much as the rest
			}
			t.Run(fmt.Sprintf("n=%d/seed=%d", n, seed), func(t *testing.T) {
				h := haves(seed, n, min(n, 8))
				cfg := stable.Config{Protocol: stable.CubeFullDist, Period: 20 * time.Millisecond, Resend: 3 * time.Millisecond, Senders: 8}
				chaos(t, newNet(t, cfg, h), seed, 0.25, 3, arrayMin(h))
			})
		}
	}
}

// A view change in the middle of a round ends it without a result; round
// 1 of the new view runs over the new member list (and, for CubeFullDist,
// the hypercube of its size), with the vectors of the new view. Members
// install the view at different times: messages of the new view reaching a
// member still in the old one are kept for it; messages of the old view
// are ignored.
func TestViewChangeMidRound(t *testing.T) {
	for _, p := range stable.Protocols() {
		t.Run(p.String(), func(t *testing.T) {
			const n = 7
			h := haves(11, n, n)
			nw := newNet(t, stable.Config{Protocol: p, Period: time.Second, Resend: 5 * time.Millisecond}, h)
			// Half a round.
			for range len(nw.flight) / 2 {
				nw.deliver(nw.flight[0])
				nw.flight = nw.flight[1:]
			}
			for i := range n {
				if len(nw.stables(i)) != 0 && p != stable.CubeFullDist {
					t.Fatalf("node %d ended the round early", i)
				}
			}
			// View 1 drops node 3; members install it in a random order,
			// with old messages still in flight.
			members := []core.NodeID{0, 1, 2, 4, 5, 6}
			h1 := haves(12, n, len(members))
			order := []int{5, 1, 6, 0, 2, 4}
			for k, i := range order {
				// The multicast layer's vector of view 1 may come first (it
				// is kept for the install) or after.
				nw.dets[i].Handle(stable.Progress{Epoch: 1, Have: h1[i]})
				nw.dets[i].Handle(core.MembersChanged{Epoch: 1, Members: members})
				nw.collect()
				if k%2 == 1 { // deliver some traffic between installs
					for range min(3, len(nw.flight)) {
						nw.deliver(nw.flight[0])
						nw.flight = nw.flight[1:]
					}
				}
			}
			var hs [][]uint64
			for _, id := range members {
				hs = append(hs, h1[id])
			}
			want := arrayMin(hs)
			got := map[int]bool{}
			for step := 0; step < 5000 && len(got) < len(members); step++ {
				if len(nw.flight) == 0 {
					nw.advance(time.Millisecond)
					continue
				}
				pk := nw.flight[0]
				nw.flight = nw.flight[1:]
				if pk.from == 3 || pk.to == 3 {
					continue // node 3 is gone
				}
				nw.deliver(pk)
				for _, i := range order {
					for _, s := range nw.stables(i) {
						if s.Epoch == 1 {
							if !slices.Equal(s.Vector, want) {
								t.Fatalf("node %d: view 1 round %d: %v, want %v", i, s.Round, s.Vector, want)
							}
							got[i] = true
						}
					}
				}
			}
			if len(got) != len(members) {
				t.Fatalf("nodes that ended a round of view 1: %v", got)
			}
		})
	}
}
