package model

import (
	"fmt"
	"math"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

// The stabilization-time models of the membership paper (Varma, Wang,
// Mueller, Engelmann, Scott, ICS'06). T_s is the time from the root's
// FAILED_NODE broadcast to the root holding every child's acknowledgement
// after a single node failure: the message goes down the radix tree and the
// acknowledgements come back up, one point-to-point latency per level each
// way, and every level spends O_cp updating its copy of the tree.
//
// H is the height of the radix tree counted in levels (a lone root has
// H = 1), as [topo.Radix.Height] returns it; H-1 levels of parent–child
// links separate the root from the deepest leaf.

// CommOverhead returns the base model's communication overhead (§4, Eq. 1):
//
//	O_cm = 2 × L × (H - 1)
//
// latency is L, the point-to-point latency between adjacent tree nodes (half
// a ping-pong round trip); height is H ≥ 1.
func CommOverhead(latency time.Duration, height int) (time.Duration, error) {
	if latency < 0 || height < 1 {
		return 0, fmt.Errorf("%w: L = %v, H = %d (want L ≥ 0, H ≥ 1)", ErrParam, latency, height)
	}
	return mulAdd(2*int64(height-1), latency, 0, 0)
}

// StabilizationTime returns the base model's stabilization time (§4, Eq. 2):
//
//	T_s = O_cm + O_cp × H = 2 × L × (H - 1) + O_cp × H
//
// computation is O_cp, the time to update the tree on one node. The paper's
// parameters: BlueGene/L over MPI L = 4.6 µs, O_cp = 2 µs (§7.1); TCP on
// Gigabit Ethernet L = 118 µs, O_cp = 2 µs (§7.2).
func StabilizationTime(latency, computation time.Duration, height int) (time.Duration, error) {
	if latency < 0 || computation < 0 || height < 1 {
		return 0, fmt.Errorf("%w: L = %v, O_cp = %v, H = %d (want L, O_cp ≥ 0, H ≥ 1)", ErrParam, latency, computation, height)
	}
	return mulAdd(2*int64(height-1), latency, int64(height), computation)
}

// TreeHeight returns H, the number of levels of the radix tree over n ≥ 1
// members with the given fan-out (a power of two ≥ 2).
func TreeHeight(n, fanout int) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("%w: n = %d members, want ≥ 1", ErrParam, n)
	}
	t, err := topo.NewRadix(n, fanout)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrParam, err)
	}
	return t.Height(), nil
}

// StabilizationTimeN is StabilizationTime for a view of n members and a
// radix tree of the given fan-out: H = TreeHeight(n, fanout). It draws the
// paper's base-model step curve (§7.2: for a = 4 the height grows above 5
// and 21 nodes).
func StabilizationTimeN(latency, computation time.Duration, n, fanout int) (time.Duration, error) {
	h, err := TreeHeight(n, fanout)
	if err != nil {
		return 0, err
	}
	return StabilizationTime(latency, computation, h)
}

// DistanceCommOverhead returns the communication overhead of the distance
// model of §7.1 (BlueGene/L, where adjacent tree nodes may be several torus
// hops apart and each hop costs L):
//
//	O_cm = 2 × L × Σ_levels max(hops between a parent and its child at that level)
//
// levelMaxHops[d] is the largest hop count between a node at depth d and one
// of its children, for d = 0 … H-2 (one entry per level of links; see
// [LevelMaxHops]); hop counts are ≥ 0.
//
// The paper prints the formula with one more factor, (H - 1), after L. We
// leave it out: the text defines the overall number of hops as "the sum over
// all levels in the tree of the maximum distance in hops at each level",
// each hop costing L, and with one hop per level the sum is already H - 1,
// so only this form reduces to Eq. 1 (the printed one would give
// 2·L·(H-1)²).
func DistanceCommOverhead(latency time.Duration, levelMaxHops []int) (time.Duration, error) {
	if latency < 0 {
		return 0, fmt.Errorf("%w: L = %v", ErrParam, latency)
	}
	var hops int64
	for d, h := range levelMaxHops {
		if h < 0 {
			return 0, fmt.Errorf("%w: level %d has %d hops", ErrParam, d, h)
		}
		hops += int64(h)
		if hops > math.MaxInt64/2 {
			return 0, fmt.Errorf("%w: %d hops", ErrOverflow, hops)
		}
	}
	return mulAdd(2*hops, latency, 0, 0)
}

// DistanceStabilizationTime returns the distance model's stabilization time
// (§7.1): Eq. 2 with O_cm from DistanceCommOverhead and
// H = len(levelMaxHops) + 1:
//
//	T_s = 2 × L × Σ_levels max hops + O_cp × H
func DistanceStabilizationTime(latency, computation time.Duration, levelMaxHops []int) (time.Duration, error) {
	if computation < 0 {
		return 0, fmt.Errorf("%w: O_cp = %v", ErrParam, computation)
	}
	ocm, err := DistanceCommOverhead(latency, levelMaxHops)
	if err != nil {
		return 0, err
	}
	return mulAdd(1, ocm, int64(len(levelMaxHops)+1), computation)
}

// LevelMaxHops returns, for the radix tree t, the largest value of
// hops(parent, child) over the parent–child links at each depth: entry d
// covers the links from depth d to depth d+1, d = 0 … Height-2. hops
// receives tree positions (map them to nodes, e.g. MPI ranks placed on a
// torus, inside the function) and must return a hop count ≥ 0. This is the
// per-level maximum of the §7.1 distance model.
func LevelMaxHops(t topo.Radix, hops func(parent, child int) int) []int {
	h := t.Height()
	if h < 2 {
		return []int{}
	}
	out := make([]int, h-1)
	for c := 1; c < t.Len(); c++ {
		p := t.Parent(c)
		d := t.Depth(p)
		out[d] = max(out[d], hops(p, c))
	}
	return out
}

// ContentionStabilizationTime returns the contention model's stabilization
// time (§7.2): the base model with the point-to-point latency L replaced by
// the switch-contention latency measured for the same number of nodes
// (the paper's Figure 7),
//
//	T_s = 2 × L_c(n) × (H - 1) + O_cp × H,   H = TreeHeight(n, fanout)
//
// contention is the curve L_c measured for the tree's shape (Figure 7 has
// one for pairs of nodes, one for a parent with two children and one for a
// parent with four; for example sim.SwitchConfig.Latency, flat up to a knee
// of about twelve nodes, then rising linearly); it must return a latency
// ≥ 0.
func ContentionStabilizationTime(contention func(nodes int) time.Duration, computation time.Duration, n, fanout int) (time.Duration, error) {
	if contention == nil {
		return 0, fmt.Errorf("%w: nil contention curve", ErrParam)
	}
	h, err := TreeHeight(n, fanout)
	if err != nil {
		return 0, err
	}
	return StabilizationTime(contention(n), computation, h)
}

// mulAdd returns a·x + b·y for a, b ≥ 0 and x, y ≥ 0, or ErrOverflow.
func mulAdd(a int64, x time.Duration, b int64, y time.Duration) (time.Duration, error) {
	ax, ok1 := mul(a, int64(x))
	by, ok2 := mul(b, int64(y))
	if !ok1 || !ok2 || ax > math.MaxInt64-by {
		return 0, fmt.Errorf("%w: %d × %v + %d × %v", ErrOverflow, a, x, b, y)
	}
	return time.Duration(ax + by), nil
}

// mul returns a·b for a, b ≥ 0 and whether it fits in an int64.
func mul(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > math.MaxInt64/b {
		return 0, false
	}
	return a * b, true
}
