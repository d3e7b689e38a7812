package stable_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
)

// Coord, Figure 1, on reliable channels (Resend 0): start to every member
// (line 1), one ack each with R_i (line 9), info with ArrayMin to every
// member (lines 3–4), everyone labels S (lines 5, 11–12); 3(n−1) messages;
// the next round Period after the start (lines 6–7).
func TestCoordFigure1(t *testing.T) {
	const n = 5
	h := haves(1, n, n)
	nw := newNet(t, stable.Config{Protocol: stable.Coord, Period: time.Second}, h)
	if got := nw.kinds(); !slices.Equal(got, []string{"0->1:stable.Start", "0->2:stable.Start", "0->3:stable.Start", "0->4:stable.Start"}) {
		t.Fatalf("step 1 sent %v", got)
	}
	// Deliver the starts only: every member acks once with its R_i.
	for _, p := range nw.take(isType[stable.Start]) {
		nw.deliver(p)
	}
	acks := nw.take(isType[stable.Ack])
	if len(acks) != n-1 || len(nw.flight) != 0 {
		t.Fatalf("acks %v, other %v", acks, nw.kinds())
	}
	for _, a := range acks {
		if a.to != 0 || !slices.Equal(a.m.(stable.Ack).Vector, h[a.from]) {
			t.Fatalf("ack %v from %v, want R_%d = %v to the coordinator", a.m, a.from, a.from, h[a.from])
		}
	}
	// Until the last ack the coordinator waits (line 2).
	for _, a := range acks[:n-2] {
		nw.deliver(a)
	}
	if len(nw.flight) != 0 || len(nw.stables(0)) != 0 {
		t.Fatalf("coordinator did not wait for every ack: %v", nw.kinds())
	}
	nw.deliver(acks[n-2])
	want := arrayMin(h)
	infos := nw.take(isType[stable.Info])
	if len(infos) != n-1 || len(nw.flight) != 0 {
		t.Fatalf("after the acks: infos %d, other %v", len(infos), nw.kinds())
	}
	for _, p := range infos {
		nw.deliver(p)
	}
	if len(nw.flight) != 0 {
		t.Fatalf("ack-info sent with Resend 0: %v", nw.kinds())
	}
	nw.wantAll(1, want)
	if nw.sent != 3*(n-1) {
		t.Fatalf("%d messages, want 3(n−1) = %d", nw.sent, 3*(n-1))
	}
	// Round 2 starts Period after round 1 started.
	nw.advance(time.Second - time.Nanosecond)
	if len(nw.flight) != 0 {
		t.Fatal("round 2 started early")
	}
	nw.advance(time.Nanosecond)
	if len(nw.take(isType[stable.Start])) != n-1 {
		t.Fatal("round 2 did not start after Period")
	}
}

// Coord with the §3.5 changes: a lost ack is pulled by a repeated start, a
// lost info is sent again until ack-info, and a stale start is ignored.
func TestCoordLoss(t *testing.T) {
	const n = 4
	h := haves(2, n, n)
	cfg := stable.Config{Protocol: stable.Coord, Period: time.Second, Resend: 10 * time.Millisecond}
	nw := newNet(t, cfg, h)
	nw.run(func(p pkt) bool { return isType[stable.Ack](p) && p.from == 3 })
	if len(nw.stables(0)) != 0 {
		t.Fatal("coordinator ended the round without node 3's ack")
	}
	nw.advance(10 * time.Millisecond)
	if got := nw.kinds(); !slices.Equal(got, []string{"0->3:stable.Start"}) {
		t.Fatalf("resend after a lost ack: %v, want a start to node 3 only", got)
	}
	// The info to node 2 is lost; everyone else confirms it.
	nw.run(func(p pkt) bool { return isType[stable.Info](p) && p.to == 2 })
	if len(nw.stables(2)) != 0 {
		t.Fatal("node 2 learned a lost info")
	}
	nw.advance(10 * time.Millisecond)
	if got := nw.kinds(); !slices.Equal(got, []string{"0->2:stable.Info"}) {
		t.Fatalf("resend after a lost info: %v, want an info to node 2 only", got)
	}
	nw.run(nil)
	want := arrayMin(h)
	nw.wantAll(1, want)
	nw.advance(50 * time.Millisecond)
	if len(nw.flight) != 0 {
		t.Fatalf("resends after every ack-info: %v", nw.kinds())
	}
	// A start of round 1 arriving after round 2 began is stale.
	nw.advance(time.Second)
	nw.run(nil)
	nw.dets[1].Receive(0, stable.Start{Epoch: 0, Round: 1})
	if len(nw.envs[1].TakeSent()) != 0 {
		t.Fatal("stale start answered")
	}
	if nw.dets[1].Round() != 2 {
		t.Fatalf("node 1 in round %d, want 2", nw.dets[1].Round())
	}
}

// A member reported failed is no longer waited for (§4.2.5's model of
// failures; Coord itself is not fault tolerant, Figure 7).
func TestCoordFailedMember(t *testing.T) {
	const n = 4
	h := haves(3, n, n)
	nw := newNet(t, stable.Config{Protocol: stable.Coord, Period: time.Second, ExcludeFailed: true}, h)
	nw.run(func(p pkt) bool { return p.from == 2 || p.to == 2 })
	if len(nw.stables(0)) != 0 {
		t.Fatal("ended without node 2")
	}
	nw.dets[0].Handle(core.Failed{Node: 2})
	nw.collect()
	nw.run(nil)
	want := arrayMin([][]uint64{h[0], h[1], h[3]})
	for _, i := range []int{0, 1, 3} {
		st := nw.stables(i)
		if len(st) != 1 || !slices.Equal(st[0].Vector, want) {
			t.Fatalf("node %d: %v, want %v", i, st, want)
		}
	}
}

// Without Config.ExcludeFailed a failure verdict changes nothing: the
// coordinator keeps waiting for the member until a view without it.
func TestFailedIgnoredByDefault(t *testing.T) {
	for _, p := range stable.Protocols() {
		const n = 4
		h := haves(3, n, n)
		nw := newNet(t, stable.Config{Protocol: p, Period: time.Second}, h)
		nw.run(func(p pkt) bool { return p.from == 2 || p.to == 2 })
		for i := range n {
			nw.dets[i].Handle(core.Failed{Node: 2})
		}
		nw.collect()
		nw.run(func(p pkt) bool { return p.from == 2 || p.to == 2 })
		for _, i := range []int{0, 1, 3} {
			if st := nw.stables(i); len(st) != 0 {
				t.Fatalf("%v: node %d learned %v while member 2 was silent", p, i, st)
			}
		}
	}
}
