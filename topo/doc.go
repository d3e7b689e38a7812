// Package topo is the pure topology maths that cohort's protocols are built
// on. Every function here is a pure function of its arguments: no state, no
// I/O, no global randomness (a random choice takes the caller's *rand.Rand).
//
// It provides four structures, each taken from one of the papers in
// shared/papers:
//
//   - [Radix]: the a-ary radix tree of the membership service (Varma et al.,
//     ICS'06, §3.1–3.2). The members of a view, in view order, are laid out
//     as an a-ary heap; parent, children, depth, height and subtree size of
//     a position are constant-time shifts. The member package maps member
//     ids to positions and back; this package only knows positions.
//   - [Cube]: the incomplete hypercube I_m^n of the stability paper (Friedman,
//     Manor, Guo, §3.3): hypercube edges between present nodes plus one
//     compensating edge per missing node, paired by the paper's rule.
//     [CubeNeighbors] answers for one node; [Cube.Graph] builds the whole
//     adjacency; [ZeroNeighbors] lists node 0's neighbours, the nodes the
//     paper crashes in its fault experiment (§4.2.5).
//   - [Schedule]: the gossip schedules of P2P-MPI (Genaud, Rattanapoka,
//     §5.1–5.2): random, round-robin (RR), binary round-robin (BRR) and
//     double binary round-robin (DBRR), with their cycle lengths, targets,
//     sources (the inverse) and minimum cleanup rounds.
//   - [Binomial] trees rooted at any rank and binomial graphs
//     ([AppendBinomialNeighbors]), for broadcasts and collectives over any
//     number of ranks.
//
// Positions, ranks and node numbers are plain ints in [0, n). Queries on a
// validated structure never panic: a position out of range answers with the
// documented "none" value ([None], an empty range, 0). Constructors and
// free functions validate their arguments and return errors wrapping one of
// the sentinel errors below.
//
// A membership layer uses the radix tree like this:
//
//	t, err := topo.NewRadix(len(view.Members), 4)
//	if err != nil { ... }
//	me := view.Position(self)
//	parent := t.Parent(me)                       // topo.None at the root
//	lo, hi := t.Children(me)                     // children are positions lo..hi-1
//	for c := lo; c < hi; c++ { send(view.Members[c], msg) }
//
// and a gossip failure detector picks the peer of round r like this:
//
//	r := topo.BinaryRoundRobin.Round(step, n)   // step counts gossip periods
//	to, err := topo.BinaryRoundRobin.Target(self, r, n)
package topo

import (
	"errors"
	"math/bits"
)

// None is the position, rank or node returned when there is none: the parent
// of a root, the first child of a leaf, any answer about a position out of
// range.
const None = -1

// Sentinel errors. Errors returned by this package wrap one of them with %w
// and add the offending values.
var (
	// ErrSize reports a node count that is out of range (negative, zero
	// where at least one node is needed, or above the supported maximum).
	ErrSize = errors.New("topo: invalid node count")
	// ErrFanout reports a radix-tree fan-out that is not a power of two ≥ 2
	// or is above [MaxFanout].
	ErrFanout = errors.New("topo: fan-out must be a power of two ≥ 2")
	// ErrIndex reports a position, node or rank outside [0, n).
	ErrIndex = errors.New("topo: index out of range")
	// ErrRound reports a gossip round outside 1..CycleLength(n).
	ErrRound = errors.New("topo: round out of range")
	// ErrNoPeer reports that a gossip schedule has no target because the
	// node is alone (n = 1).
	ErrNoPeer = errors.New("topo: no peer to gossip with")
	// ErrRandomSchedule reports a deterministic question (a fixed target, a
	// source, a cleanup bound) asked of the Random schedule, or a random
	// choice asked without a *rand.Rand.
	ErrRandomSchedule = errors.New("topo: the random schedule has no deterministic answer")
	// ErrSchedule reports an unknown schedule name or value.
	ErrSchedule = errors.New("topo: unknown gossip schedule")
)

// MaxNodes is the largest node count any structure of this package accepts
// (2^30). It keeps every label, sum and intermediate product inside an int
// even where int has 32 bits.
const MaxNodes = 1 << 30

// ceilLog2 returns ⌈log2 n⌉ for n ≥ 1 (0 for n ≤ 1).
func ceilLog2(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len64(uint64(n - 1))
}

// CeilLog2 returns ⌈log2 n⌉, computed exactly on integers; it is 0 for
// n ≤ 1. It is the dimension m of the incomplete hypercube over n nodes, the
// BRR cycle length and the number of rounds of a binomial broadcast.
func CeilLog2(n int) int { return ceilLog2(n) }
