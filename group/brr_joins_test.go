package group_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/sim"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// A BRR group grows from one node to 256 by joins, 8 every 120 ms, with
// 50 ms gossip rounds (the memberlist benchmark's 20 messages per second):
// nobody is suspected, and every node ends in one view of all 256. Before,
// the joins made thousands of false suspicions (8,745 under the
// first seed), and the real benchmark's 256 nodes in one process went through
// cascades of evictions: a newcomer's first heartbeats, counted from 0
// before the others' tables aligned it, ended the grace of its entry and
// were aged as heartbeats of long ago; a newcomer that jumped to the
// others' count aged every entry its view had given it; and newcomers
// catching up from each other carried the group's count ahead of its
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
		cfg := func(id core.NodeID) group.Config {
			c := group.DefaultLocalConfig()
			c.ID = id
			c.Detector = group.DetectorBRR
			c.GossipInterval = 50 * time.Millisecond
			c.PingTimeout = 125 * time.Millisecond
			return c
		}
		for i := range n {
			id := core.NodeID(i)
			opts := group.StackOptions{Join: true, Contacts: []core.NodeID{0}}
			var members []core.NodeID
			if i == 0 {
				opts, members = group.StackOptions{}, []core.NodeID{0}
			}
			st, err := group.NewStack(cfg(id), members, opts)
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
					t.Errorf("seed %d (replay: go test ./group -run TestBRRJoinsNoSuspicion -seed %d): %v suspected %v at %v", seed, seed, node, e.Node, at)
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
