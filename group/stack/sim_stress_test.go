package stack_test

// Simulations of whole stacks under stress: a slow, lossy member, and a
// group growing by joins.

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// The whole stack of 128 nodes (heartbeat detector at 105 ms, membership
// with DefaultLocalConfig's 200 ms per tree level) with one slow, lossy
// member, high in the tree or low: two real crashes make two view
// changes, and only the crashed nodes leave the view. The slow member's
// ACK can come after its parent's timeout, its own children's ACKs (to
// proposals it forwarded late) after its timeout, and a proposal can be
// lost; the membership sends the proposal again at a first timeout and
// reports a child only at the second, so that none of these excludes the
// slow member with its subtree.
func TestSlowLossyMemberNotExcluded(t *testing.T) {
	const n = 128
	members := make([]core.NodeID, n)
	for i := range members {
		members[i] = core.NodeID(i)
	}
	seeds := simtest.Seeds(t, 8)
	for i, seed := range seeds {
		// The slow member: the root, its children, nodes below; a replay
		// of one seed tries it in each of these places.
		slows := []core.NodeID{core.NodeID(i)}
		if i >= 4 {
			slows[0] = core.NodeID(8 + seed%(n-16))
		}
		if len(seeds) == 1 {
			slows = []core.NodeID{0, 1, 2, 3, core.NodeID(8 + seed%(n-16))}
		}
		for _, slow := range slows {
			slowLossyRun(t, n, members, seed, slow)
		}
	}
}

// slowLossyRun runs TestSlowLossyMemberNotExcluded's stacks with member
// slow slow and lossy under seed.
func slowLossyRun(t *testing.T, n core.NodeID, members []core.NodeID, seed uint64, slow core.NodeID) {
	t.Helper()
	w := sim.New(sim.Config{Seed: seed, Network: sim.SlowNode{
		Net: sim.Uniform(200*time.Microsecond, 2*time.Millisecond), Node: slow, Loss: 0.05, Delay: 200 * time.Millisecond}})
	for _, id := range members {
		c := stack.DefaultLocalConfig()
		c.ID = id
		c.Detector = stack.DetectorHeartbeat
		hb := 105 * time.Millisecond
		c.HeartbeatInterval, c.SuspectTimeout, c.FailTimeout = hb, 2*hb, hb
		st, err := stack.New(c, members, stack.Options{})
		if err != nil {
			t.Fatal(err)
		}
		w.Add(st.Machine)
	}
	crashed := []core.NodeID{n - 1, n - 2}
	var departed []core.NodeID
	w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
		if v, ok := e.(member.ViewInstalled); ok {
			for _, d := range v.Departed {
				if !slices.Contains(departed, d) {
					departed = append(departed, d)
				}
			}
		}
	})
	w.CrashAt(10*time.Second, crashed[0])
	w.CrashAt(20*time.Second, crashed[1])
	w.RunUntil(30 * time.Second)
	slices.Sort(departed)
	if !slices.Equal(departed, []core.NodeID{n - 2, n - 1}) {
		t.Errorf("seed %d (replay: go test ./group/stack -run TestSlowLossyMemberNotExcluded -seed %d, which puts the slow member in each place), slow member %v: nodes that left some view %v, want only the crashed %v",
			seed, seed, slow, departed, crashed)
	}
}

// A BRR group grows from one node to 256 by joins, 8 every 120 ms, with
// 50 ms gossip rounds (the memberlist benchmark's 20 messages per second):
// nobody is suspected, and every node ends in one view of all 256. Joins
// can make false suspicions by the thousand, and cascades of evictions, in
// three ways the detector must avoid: a newcomer's first heartbeats,
// counted from 0 before the others' tables align it, ending the grace of
// its entry and aged as heartbeats of long ago; a newcomer that jumps to
// the others' count aging every entry its view gave it; and newcomers
// catching up from each other carrying the group's count ahead of its
// rounds.
//
// Under -race the group grows to 128 (the race detector slows the table
// merges tenfold).
func TestBRRJoinsNoSuspicion(t *testing.T) {
	n, batch := 256, 8
	if raceBuild {
		n = 128
	}
	for _, seed := range simtest.Seeds(t, 1) {
		w := sim.New(sim.Config{Seed: seed, Network: sim.Uniform(200*time.Microsecond, 2*time.Millisecond)})
		cfg := func(id core.NodeID) stack.Config {
			c := stack.DefaultLocalConfig()
			c.ID = id
			c.Detector = stack.DetectorBRR
			c.GossipInterval = 50 * time.Millisecond
			c.PingTimeout = 125 * time.Millisecond
			return c
		}
		for i := range n {
			id := core.NodeID(i)
			opts := stack.Options{Join: true, Contacts: []core.NodeID{0}}
			var members []core.NodeID
			if i == 0 {
				opts, members = stack.Options{}, []core.NodeID{0}
			}
			st, err := stack.New(cfg(id), members, opts)
			if err != nil {
				t.Fatal(err)
			}
			w.AddAt(time.Duration(max(i-1, 0)/batch)*120*time.Millisecond, st.Machine)
		}
		suspicions := 0
		last := make([][]core.NodeID, n)
		w.OnEmit(func(at time.Duration, node core.NodeID, e core.Event) {
			switch e := e.(type) {
			case core.Suspected:
				if suspicions++; suspicions <= 3 {
					t.Errorf("seed %d (replay: go test ./group/stack -run TestBRRJoinsNoSuspicion -seed %d): %v suspected %v at %v", seed, seed, node, e.Node, at)
				}
			case member.ViewInstalled:
				last[node] = e.Members
			}
		})
		w.RunUntil(10 * time.Second)
		if suspicions > 0 {
			t.Errorf("seed %d: %d suspicions while the group grew", seed, suspicions)
		}
		for i, v := range last {
			if len(v) != n || !slices.Equal(v, last[0]) {
				t.Fatalf("seed %d: n%d's last view has %d members, not the %d of n0's", seed, i, len(v), len(last[0]))
			}
		}
	}
}
