package topo_test

import (
	"fmt"

	"github.com/cohort-mp/cohort/topo"
)

// The radix tree of a 21-member view with four children per node
// (Varma et al. §3.1): the root's children and the height H of §4.
func ExampleRadix() {
	t, err := topo.NewRadix(21, 4)
	if err != nil {
		panic(err)
	}
	lo, hi := t.Children(0)
	fmt.Println("children of the root:", lo, "to", hi-1)
	fmt.Println("parent of 17:", t.Parent(17))
	fmt.Println("height:", t.Height())
	fmt.Println("subtree of 1:", t.SubtreeSize(1))
	// Output:
	// children of the root: 1 to 4
	// parent of 17: 4
	// height: 3
	// subtree of 1: 5
}

// The paper's I_3^7: node 7 is missing and the edge 5–6 compensates.
func ExampleCubeNeighbors() {
	for v := 0; v < 7; v++ {
		ns, _ := topo.CubeNeighbors(7, v)
		fmt.Println(v, ns)
	}
	// Output:
	// 0 [1 2 4]
	// 1 [0 3 5]
	// 2 [0 3 6]
	// 3 [1 2]
	// 4 [0 5 6]
	// 5 [1 4 6]
	// 6 [2 4 5]
}

// One BRR cycle over 5 nodes seen from node 0: who it sends to and who it
// hears from (P2P-MPI §5.1, Eq. 4).
func ExampleSchedule_Target() {
	s, _ := topo.ParseSchedule("brr")
	n := 5
	for r := 1; r <= s.CycleLength(n); r++ {
		to, _ := s.Target(0, r, n)
		from, _ := s.Sources(0, r, n)
		fmt.Printf("round %d: 0 -> %d, %d -> 0\n", r, to, from)
	}
	rounds, _ := s.MinCleanupRounds(n)
	fmt.Println("min cleanup rounds:", rounds)
	// Output:
	// round 1: 0 -> 1, 4 -> 0
	// round 2: 0 -> 2, 3 -> 0
	// round 3: 0 -> 4, 1 -> 0
	// min cleanup rounds: 3
}

// A broadcast from rank 2 over 6 ranks: relative ranks are (rank-2) mod 6,
// the root sends farthest first (relative 4, 2, 1 = ranks 0, 4, 3) in rounds
// 1, 2, 3.
func ExampleBinomial() {
	b, _ := topo.NewBinomial(6, 2)
	for r := 0; r < 6; r++ {
		fmt.Println(r, "parent", b.Parent(r), "children", b.AppendChildren(nil, r), "round", b.ReceiveRound(r))
	}
	// Output:
	// 0 parent 2 children [1] round 1
	// 1 parent 0 children [] round 3
	// 2 parent -1 children [0 4 3] round 0
	// 3 parent 2 children [] round 3
	// 4 parent 2 children [5] round 2
	// 5 parent 4 children [] round 3
}
