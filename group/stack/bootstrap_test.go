package stack_test

import (
	"container/heap"
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

var bootstrapSeeds = flag.Int("bootstrap.seeds", 200, "seeds of TestSimultaneousStartFormsOneGroup")

// bootEvent is a step of the probe phase: a node starts listening (and
// probes), a probe arrives (or finds nobody listening), an answer arrives.
type bootEvent struct {
	at       time.Duration
	seq      int
	kind     uint8 // bootListen, bootArrive, bootAnswer
	from, to int
	state    uint8 // an answer's
}

const (
	bootListen = iota
	bootArrive
	bootAnswer
)

type bootQueue []bootEvent

func (q bootQueue) Len() int { return len(q) }
func (q bootQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q bootQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bootQueue) Push(x any)   { *q = append(*q, x.(bootEvent)) }
func (q *bootQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// bootNode is a starting node in the probe phase.
type bootNode struct {
	listening bool
	decided   bool
	state     uint8
	pending   int // probes not yet answered
	known     map[core.NodeID]uint8
	decidedAt time.Duration
	form      bool
	contacts  []core.NodeID
}

// probePhase plays package group's probe phase for n nodes that list
// each other as seeds: node i starts listening at a random time within
// spread, then probes every other node at once; a probe finds the peer
// listening or not when it arrives (a refused connection), and the peer
// answers with its state then, or, undecided, records the prober. A node
// decides by stack.Decide when every probe has its answer or its refusal.
func probePhase(rng *rand.Rand, n int, spread time.Duration) []*bootNode {
	nodes := make([]*bootNode, n)
	q := &bootQueue{}
	seq := 0
	push := func(e bootEvent) {
		seq++
		e.seq = seq
		heap.Push(q, e)
	}
	d := func() time.Duration {
		return 100*time.Microsecond + time.Duration(rng.Int64N(int64(2*time.Millisecond)))
	}
	for i := range nodes {
		nodes[i] = &bootNode{known: map[core.NodeID]uint8{}, pending: n - 1}
		push(bootEvent{at: time.Duration(rng.Int64N(int64(spread) + 1)), kind: bootListen, to: i})
	}
	decide := func(i int, at time.Duration) {
		b := nodes[i]
		if b.pending > 0 || b.decided {
			return
		}
		b.decided, b.decidedAt = true, at
		b.form, b.contacts = stack.Decide(core.NodeID(i), b.known)
		b.state = stack.StateJoining
		if b.form {
			b.state = stack.StateMember
		}
	}
	for q.Len() > 0 {
		e := heap.Pop(q).(bootEvent)
		switch e.kind {
		case bootListen:
			nodes[e.to].listening = true
			for j := range nodes {
				if j != e.to {
					push(bootEvent{at: e.at + d(), kind: bootArrive, from: e.to, to: j})
				}
			}
			decide(e.to, e.at) // n = 1
		case bootArrive:
			peer := nodes[e.to]
			if !peer.listening {
				// Refused: the prober learns it a round trip later.
				nodes[e.from].pending--
				decide(e.from, e.at+d())
				continue
			}
			if !peer.decided {
				if _, ok := peer.known[core.NodeID(e.from)]; !ok {
					peer.known[core.NodeID(e.from)] = stack.StateUndecided
				}
			}
			push(bootEvent{at: e.at + d(), kind: bootAnswer, from: e.to, to: e.from, state: peer.state})
		case bootAnswer:
			b := nodes[e.to]
			b.known[core.NodeID(e.from)] = max(b.known[core.NodeID(e.from)], e.state)
			b.pending--
			decide(e.to, e.at)
		}
	}
	return nodes
}

// TestSimultaneousStartFormsOneGroup: five nodes started within a few
// milliseconds of each other, each with the others as seeds, form one
// group: exactly one of them forms (the probe phase, played with random
// start times and delays), and the joiners, started as members' stacks in
// the simulator at the instants they decided, all install one view of
// the five. 200 seeds per run; -bootstrap.seeds=10000 for a campaign
// (docs/VALIDATION.md).
func TestSimultaneousStartFormsOneGroup(t *testing.T) {
	const n = 5
	count := *bootstrapSeeds
	if testing.Short() {
		count = 20
	}
	for _, seed := range simtest.Seeds(t, count) {
		rng := rand.New(rand.NewPCG(seed, 1))
		nodes := probePhase(rng, n, time.Duration(rng.IntN(4))*time.Millisecond)
		var formed []int
		for i, b := range nodes {
			if !b.decided {
				t.Fatalf("seed %d (replay: -seed %d): n%d never decided", seed, seed, i)
			}
			if b.form {
				formed = append(formed, i)
			}
		}
		if len(formed) != 1 {
			t.Fatalf("seed %d (replay: -seed %d): %v formed groups, want exactly one", seed, seed, formed)
		}

		w := sim.New(sim.Config{Seed: seed, Network: sim.Uniform(200*time.Microsecond, 2*time.Millisecond)})
		for i, b := range nodes {
			c := stack.DefaultLocalConfig()
			c.ID = core.NodeID(i)
			opts := stack.Options{Join: true, Contacts: b.contacts}
			var members []core.NodeID
			if b.form {
				opts, members = stack.Options{}, []core.NodeID{c.ID}
			}
			st, err := stack.New(c, members, opts)
			if err != nil {
				t.Fatal(err)
			}
			if id := w.AddAt(b.decidedAt, st.Machine); id != c.ID {
				t.Fatalf("the simulator numbered n%d %v", i, id)
			}
		}
		last := make([]member.ViewInstalled, n)
		w.OnEmit(func(_ time.Duration, node core.NodeID, e core.Event) {
			if v, ok := e.(member.ViewInstalled); ok {
				last[node] = v
			}
		})
		w.RunUntil(20 * time.Second)
		for i, v := range last {
			if len(v.Members) != n || v.Epoch != last[0].Epoch || !slices.Equal(v.Members, last[0].Members) {
				t.Fatalf("seed %d (replay: -seed %d): n%d holds %s %v, n0 %s %v; want one view of all %d",
					seed, seed, i, member.FormatEpoch(v.Epoch), v.Members, member.FormatEpoch(last[0].Epoch), last[0].Members, n)
			}
		}
	}
}
