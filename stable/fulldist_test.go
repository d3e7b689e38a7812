package stable_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/stable"
)

// FullDist, Figure 2: node 0 multicasts its row (line 2); every other node,
// on node 0's row, multicasts its own (lines 3–6); once a node holds all n
// rows it labels the column minima stable (lines 8–14). n(n−1) messages.
func TestFullDistFigure2(t *testing.T) {
	const n = 6
	h := haves(4, n, 3)
	cfg := stable.Config{Protocol: stable.FullDist, Period: time.Second, Senders: 3}
	nw := newNet(t, cfg, h)
	if len(nw.flight) != n-1 || count(nw.flight, func(p pkt) bool { return p.from == 0 }) != n-1 {
		t.Fatalf("line 2: %v", nw.kinds())
	}
	// Node 3 hears node 1's row before node 0's: it records it but sends
	// nothing until node 0's row arrives (line 3).
	for _, p := range nw.take(func(p pkt) bool { return p.to == 1 }) {
		nw.deliver(p)
	}
	for _, p := range nw.take(func(p pkt) bool { return p.from == 1 && p.to == 3 }) {
		nw.deliver(p)
	}
	if count(nw.flight, func(p pkt) bool { return p.from == 3 }) != 0 {
		t.Fatal("node 3 joined the round on node 1's row")
	}
	for _, p := range nw.take(func(p pkt) bool { return p.from == 0 && p.to == 3 }) {
		nw.deliver(p)
	}
	rows := nw.take(func(p pkt) bool { return p.from == 3 })
	if len(rows) != n-1 || !slices.Equal(rows[0].m.(stable.Row).Vector, h[3]) {
		t.Fatalf("node 3's rows: %v", rows)
	}
	nw.flight = append(nw.flight, rows...)
	nw.run(nil)
	nw.wantAll(1, arrayMin(h))
	if nw.sent != n*(n-1) {
		t.Fatalf("%d messages, want n(n−1) = %d", nw.sent, n*(n-1))
	}
}

// FullDist with §3.5: random loss and reordering, rows resent as pulls
// until every node has every row; a row of round r+1 reaching a node still
// in round r counts for r.
func TestFullDistLossReorder(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		const n = 7
		h := haves(seed, n, n)
		cfg := stable.Config{Protocol: stable.FullDist, Period: 100 * time.Millisecond, Resend: 5 * time.Millisecond}
		nw := newNet(t, cfg, h)
		chaos(t, nw, seed, 0.3, 3, arrayMin(h))
	}
}

// chaos delivers in random order with loss probability loss until every
// node has learned the results of `rounds` rounds, each of which must be
// want (the vectors do not change).
func chaos(t *testing.T, nw *net, seed uint64, loss float64, rounds int, want []uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 77))
	learned := make([]map[uint64]bool, len(nw.dets))
	for i := range learned {
		learned[i] = map[uint64]bool{}
	}
	for step := 0; step < 200000; step++ {
		// Time moves on when nothing is in flight, or now and then (so
		// that retransmissions race with deliveries): on average after
		// 8n deliveries, a network whose capacity grows with n.
		if len(nw.flight) == 0 || r.IntN(8*len(nw.dets)) == 0 {
			nw.advance(time.Millisecond)
		}
		if len(nw.flight) > 0 {
			k := r.IntN(len(nw.flight))
			p := nw.flight[k]
			nw.flight = slices.Delete(nw.flight, k, k+1)
			if r.Float64() >= loss {
				nw.deliver(p)
			}
		}
		done := true
		for i := range nw.dets {
			for _, s := range nw.stables(i) {
				learned[i][s.Round] = true
				if !slices.Equal(s.Vector, want) {
					t.Fatalf("seed %d: node %d round %d learned %v, want %v", seed, i, s.Round, s.Vector, want)
				}
			}
			if len(learned[i]) < rounds {
				done = false
			}
		}
		if done {
			return
		}
	}
	t.Fatalf("seed %d: not every node learned %d rounds: %v", seed, rounds, learned)
}
