package model_test

import (
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/model"
	"github.com/cohort-mp/cohort/topo"
)

// Detection times of a 256-process job gossiping every half second, as in
// the P2P-MPI Grid'5000 experiment (§5.3).
func ExampleDefaultCleanup() {
	tGossip := 500 * time.Millisecond
	for _, s := range []topo.Schedule{topo.BinaryRoundRobin, topo.DoubleBinaryRoundRobin} {
		minimum, _ := model.MinCleanup(s, 256, tGossip)
		def, _ := model.DefaultCleanup(s, 256, tGossip)
		fmt.Printf("%s: min %v, default %v\n", s, minimum, def)
	}
	// Output:
	// brr: min 4s, default 8s
	// dbrr: min 8s, default 12s
}

// The base stabilization model on BlueGene/L (membership paper §7.1) for
// a binary tree of 1024 nodes: H = 11 levels.
func ExampleStabilizationTimeN() {
	ts, _ := model.StabilizationTimeN(4600*time.Nanosecond, 2*time.Microsecond, 1024, 2)
	fmt.Println(ts)
	// Output: 114µs
}

// The probability that a 10-process job fails within 100 s when hosts fail
// at λ = 10⁻³/s (δ = 1), without and with replication (P2P-MPI §4.5).
func ExampleAppFailureWeibull() {
	for r := 1; r <= 3; r++ {
		p, _ := model.AppFailureWeibull(10, r, 1e-3, 1, 100*time.Second)
		fmt.Printf("r=%d: %.6f\n", r, p)
	}
	// Output:
	// r=1: 0.632121
	// r=2: 0.086956
	// r=3: 0.008585
}
