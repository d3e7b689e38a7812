package stable_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
)

// S_Coord, Figure 3, n = 7, degree 2: the tree is 0 → {1, 2}, 1 → {3, 4},
// 2 → {5, 6}. The root multicasts start (line 1); leaves ack to their
// parents (lines 2–4); an inner node acks with the minimum of its subtree
// once both children acked (lines 5–10); the root multicasts info (lines
// 11–14); 3(n−1) messages.
func TestSCoordFigure3(t *testing.T) {
	const n = 7
	h := haves(5, n, n)
	nw := newNet(t, stable.Config{Protocol: stable.SCoord, Degree: 2, Period: time.Second}, h)
	if got := nw.take(isType[stable.Start]); len(got) != n-1 {
		t.Fatalf("line 1: %d starts", len(got))
	} else {
		// The ack of leaf 3 reaches node 1 before node 1's start: it is
		// kept until the start arrives.
		for _, p := range got {
			if p.to == 3 {
				nw.deliver(p)
			}
		}
		ack := nw.take(func(p pkt) bool { return true })
		if len(ack) != 1 || ack[0].to != 1 || !slices.Equal(ack[0].m.(stable.Ack).Vector, h[3]) {
			t.Fatalf("leaf 3 sent %v, want its ack to its parent 1", ack)
		}
		nw.deliver(ack[0])
		if len(nw.flight) != 0 {
			t.Fatal("node 1 acted before its start")
		}
		for _, p := range got {
			if p.to != 3 {
				nw.deliver(p)
			}
		}
	}
	// Leaves 4, 5 and 6 have acked; deliver in order, checking that each
	// ack goes to the parent with the minimum of the sender's subtree.
	parents := map[core.NodeID]core.NodeID{3: 1, 4: 1, 5: 2, 6: 2, 1: 0, 2: 0}
	for len(nw.flight) > 0 {
		p := nw.flight[0]
		nw.flight = nw.flight[1:]
		if a, ok := p.m.(stable.Ack); ok {
			if parents[p.from] != p.to {
				t.Fatalf("ack from %v to %v, want to its parent %v", p.from, p.to, parents[p.from])
			}
			var sub [][]uint64
			switch p.from {
			case 1:
				sub = [][]uint64{h[1], h[3], h[4]}
			case 2:
				sub = [][]uint64{h[2], h[5], h[6]}
			default:
				sub = [][]uint64{h[p.from]}
			}
			if !slices.Equal(a.Vector, arrayMin(sub)) {
				t.Fatalf("ack of %v carries %v, want the subtree minimum %v", p.from, a.Vector, arrayMin(sub))
			}
		}
		nw.deliver(p)
	}
	nw.wantAll(1, arrayMin(h))
	if nw.sent != 3*(n-1) {
		t.Fatalf("%d messages, want 3(n−1) = %d", nw.sent, 3*(n-1))
	}
}

// The default degree is ⌈log2 n⌉ (§4.1: log n children): for n = 12 it is
// 4, so node 0's children are 1–4 and node 1's 5–8.
func TestSCoordDefaultDegree(t *testing.T) {
	const n = 12
	h := haves(6, n, 4)
	nw := newNet(t, stable.Config{Protocol: stable.SCoord, Period: time.Second, Senders: 4}, h)
	for _, p := range nw.take(isType[stable.Start]) {
		nw.deliver(p)
	}
	var from []int
	for _, p := range nw.flight {
		if p.to == 1 {
			from = append(from, int(p.from))
		}
	}
	slices.Sort(from)
	if !slices.Equal(from, []int{5, 6, 7, 8}) {
		t.Fatalf("node 1's children acked: %v, want 5–8", from)
	}
	nw.run(nil)
	nw.wantAll(1, arrayMin(h))
}

// A failure inside the running round's tree loses the round (§3.4); the
// root starts the next round over a tree without the failed node, listed
// in start so every member builds the same tree.
func TestSCoordFailureRebuildsTree(t *testing.T) {
	const n = 7
	h := haves(7, n, n)
	nw := newNet(t, stable.Config{Protocol: stable.SCoord, Degree: 2, Period: time.Second, ExcludeFailed: true}, h)
	nw.run(func(p pkt) bool { return p.from == 1 || p.to == 1 }) // node 1 is dead
	if len(nw.stables(0)) != 0 {
		t.Fatal("round ended without node 1's subtree")
	}
	nw.dets[0].Handle(core.Failed{Node: 1})
	nw.collect()
	starts := nw.take(isType[stable.Start])
	if len(starts) != n-2 || starts[0].m.(stable.Start).Round != 2 || !slices.Equal(starts[0].m.(stable.Start).Failed, []core.NodeID{1}) {
		t.Fatalf("after the failure: %v", starts)
	}
	nw.flight = starts
	// The new tree over 0, 2, 3, 4, 5, 6: 0 → {2, 3}, 2 → {4, 5}, 3 → {6}.
	nw.run(func(p pkt) bool {
		if a, ok := p.m.(stable.Ack); ok && a.Round == 2 {
			want := map[core.NodeID]core.NodeID{2: 0, 3: 0, 4: 2, 5: 2, 6: 3}[p.from]
			if p.to != want {
				t.Fatalf("round 2: ack from %v to %v, want %v", p.from, p.to, want)
			}
		}
		return p.to == 1
	})
	want := arrayMin([][]uint64{h[0], h[2], h[3], h[4], h[5], h[6]})
	for _, i := range []int{0, 2, 3, 4, 5, 6} {
		st := nw.stables(i)
		if len(st) != 1 || st[0].Round != 2 || !slices.Equal(st[0].Vector, want) {
			t.Fatalf("node %d: %v, want round 2 with %v", i, st, want)
		}
	}
}

// S_Coord and Coord with §3.5 under random loss and reordering.
func TestCoordinatedLossReorder(t *testing.T) {
	for _, p := range []stable.Protocol{stable.Coord, stable.SCoord} {
		for seed := uint64(1); seed <= 20; seed++ {
			for _, n := range []int{2, 5, 12} {
				h := haves(seed, n, n)
				cfg := stable.Config{Protocol: p, Period: 100 * time.Millisecond, Resend: 5 * time.Millisecond}
				nw := newNet(t, cfg, h)
				chaos(t, nw, seed, 0.3, 3, arrayMin(h))
			}
		}
	}
}
