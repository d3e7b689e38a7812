package stable_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/stable"
)

// pkt is a message in flight in a scripted network.
type pkt struct {
	from, to core.NodeID
	m        core.Msg
}

// net is a scripted network of detectors over coretest.Envs: messages
// stay in flight until a test delivers (or drops) them, clocks move only
// when the test advances them.
type net struct {
	t      *testing.T
	envs   []*coretest.Env
	dets   []*stable.Detector
	flight []pkt
	sent   int
}

// newNet starts n detectors (ids 0..n-1, view 0 in id order) with the
// given received vectors.
func newNet(t *testing.T, cfg stable.Config, haves [][]uint64) *net {
	t.Helper()
	nw := &net{t: t}
	n := len(haves)
	for i := range n {
		d := stable.New(cfg, ids(n))
		if err := d.Err(); err != nil {
			t.Fatal(err)
		}
		d.Handle(stable.Progress{Epoch: 0, Have: haves[i]})
		nw.envs = append(nw.envs, coretest.NewEnv(core.NodeID(i), 1))
		nw.dets = append(nw.dets, d)
	}
	for i, d := range nw.dets {
		d.Start(nw.envs[i])
	}
	nw.collect()
	return nw
}

// collect moves every sent message into the flight list.
func (nw *net) collect() {
	for i, e := range nw.envs {
		for _, s := range e.TakeSent() {
			nw.flight = append(nw.flight, pkt{core.NodeID(i), s.To, s.Msg})
			nw.sent++
		}
	}
}

// take removes and returns the messages in flight that match f.
func (nw *net) take(f func(pkt) bool) []pkt {
	var out, keep []pkt
	for _, p := range nw.flight {
		if f(p) {
			out = append(out, p)
		} else {
			keep = append(keep, p)
		}
	}
	nw.flight = keep
	return out
}

func (nw *net) deliver(p pkt) {
	nw.dets[p.to].Receive(p.from, p.m)
	nw.collect()
}

// run delivers messages in send order until none is in flight, dropping
// those drop selects (drop may be nil).
func (nw *net) run(drop func(pkt) bool) {
	for len(nw.flight) > 0 {
		p := nw.flight[0]
		nw.flight = nw.flight[1:]
		if drop == nil || !drop(p) {
			nw.deliver(p)
		}
	}
}

// advance moves every clock forward by d, firing due timers.
func (nw *net) advance(d time.Duration) {
	for i, e := range nw.envs {
		e.Advance(d, nw.dets[i])
	}
	nw.collect()
}

// stables returns the Stable events node i emitted (and forgets all its
// events).
func (nw *net) stables(i int) []stable.Stable {
	var out []stable.Stable
	for _, e := range nw.envs[i].TakeEmitted() {
		if s, ok := e.(stable.Stable); ok {
			out = append(out, s)
		}
	}
	return out
}

// kinds summarizes the messages in flight as "from->to:Type" strings,
// sorted.
func (nw *net) kinds() []string {
	var out []string
	for _, p := range nw.flight {
		out = append(out, fmt.Sprintf("%d->%d:%T", p.from, p.to, p.m))
	}
	slices.Sort(out)
	return out
}

func count(ps []pkt, f func(pkt) bool) int {
	c := 0
	for _, p := range ps {
		if f(p) {
			c++
		}
	}
	return c
}

func isType[T core.Msg](p pkt) bool { _, ok := p.m.(T); return ok }

// arrayMin is the paper's ArrayMin over the vectors.
func arrayMin(vs [][]uint64) []uint64 {
	out := slices.Clone(vs[0])
	for _, v := range vs[1:] {
		for i := range out {
			out[i] = min(out[i], v[i])
		}
	}
	return out
}

// haves returns n random vectors of length l.
func haves(seed uint64, n, l int) [][]uint64 {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([][]uint64, n)
	for i := range out {
		out[i] = make([]uint64, l)
		for j := range out[i] {
			out[i][j] = 10 + r.Uint64N(90)
		}
	}
	return out
}

// wantAll checks that every node emitted exactly one Stable for round
// with vector want.
func (nw *net) wantAll(round uint64, want []uint64) {
	nw.t.Helper()
	for i := range nw.dets {
		st := nw.stables(i)
		if len(st) != 1 || st[0].Round != round || !slices.Equal(st[0].Vector, want) {
			nw.t.Fatalf("node %d emitted %v, want one Stable of round %d with %v", i, st, round, want)
		}
	}
}
