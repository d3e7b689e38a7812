package topo

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Schedule is a gossip schedule of the P2P-MPI failure detector (Genaud and
// Rattanapoka, §5.1–5.2): the rule that tells node s which node d to send its
// heartbeat table to in round r of a cycle, among n nodes numbered 0..n-1.
//
// Rounds are numbered from 1 to CycleLength(n), as in the paper, and wrap
// around (the paper's "circular counter"); [Schedule.Round] turns a count of
// gossip periods into a round number.
//
// For the deterministic schedules each round is a permutation of the nodes:
// every node sends exactly one message and receives exactly one, so
// [Schedule.Sources] is the inverse of [Schedule.Target]. The schedules are
// circulant: d-s mod n depends only on r and n.
//
// Small groups: with n = 1 there is nobody to gossip with; CycleLength is 0,
// MinCleanupRounds is 0, and Target and Sources return [ErrNoPeer]. With
// n = 2 every schedule sends to the other node in every round (RR and BRR
// have a one-round cycle, DBRR a two-round one whose counter-clockwise round
// reaches the same node).
//
// The zero Schedule is invalid; [ParseSchedule] and the constants below are
// the valid values.
type Schedule uint8

// The gossip schedules. Values are stable (configuration may store them) but
// prefer the names of [Schedule.String] in files.
const (
	// Random sends to a node drawn uniformly among the n-1 others in every
	// round (the original gossip protocol, van Renesse et al., P2P-MPI §5.1).
	// It has no fixed target: use [Schedule.TargetRand].
	Random Schedule = iota + 1
	// RoundRobin (RR, §5.1 Eq. 3) sends to d = (s + r) mod n,
	// 1 ≤ r ≤ n-1.
	RoundRobin
	// BinaryRoundRobin (BRR, §5.1 Eq. 4) sends to d = (s + 2^(r-1)) mod n,
	// 1 ≤ r ≤ ⌈log2 n⌉.
	BinaryRoundRobin
	// DoubleBinaryRoundRobin (DBRR, §5.2 Eq. 5) runs BRR clockwise for the
	// first ⌈log2 n⌉ rounds, then counter-clockwise:
	// d = (s - 2^(r-⌈log2 n⌉-1)) mod n for ⌈log2 n⌉ < r ≤ 2⌈log2 n⌉.
	DoubleBinaryRoundRobin
)

var scheduleNames = [...]string{
	Random:                 "random",
	RoundRobin:             "rr",
	BinaryRoundRobin:       "brr",
	DoubleBinaryRoundRobin: "dbrr",
}

// Schedules lists the valid schedules in declaration order.
var Schedules = []Schedule{Random, RoundRobin, BinaryRoundRobin, DoubleBinaryRoundRobin}

// String returns the schedule's short name: "random", "rr", "brr" or "dbrr".
// An invalid value prints as "schedule(N)".
func (s Schedule) String() string {
	if s.Valid() {
		return scheduleNames[s]
	}
	return fmt.Sprintf("schedule(%d)", uint8(s))
}

// Valid reports whether s is one of the four schedules.
func (s Schedule) Valid() bool { return s >= Random && s <= DoubleBinaryRoundRobin }

// Deterministic reports whether s fixes its targets (every valid schedule
// but Random).
func (s Schedule) Deterministic() bool { return s.Valid() && s != Random }

// ParseSchedule returns the schedule named name, one of the names of
// [Schedule.String] ("random", "rr", "brr", "dbrr"; exact, lower case).
func ParseSchedule(name string) (Schedule, error) {
	for _, s := range Schedules {
		if scheduleNames[s] == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: %q (want random, rr, brr or dbrr)", ErrSchedule, name)
}

// MarshalText encodes s as its name, for configuration files and flags.
func (s Schedule) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrSchedule, uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText decodes a name written by MarshalText.
func (s *Schedule) UnmarshalText(text []byte) error {
	v, err := ParseSchedule(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// CycleLength returns the number of rounds of one cycle over n nodes: n-1 for
// RR, ⌈log2 n⌉ for BRR, 2⌈log2 n⌉ for DBRR and 1 for Random (whose rounds
// are all alike). It is 0 when n ≤ 1 or s is invalid.
func (s Schedule) CycleLength(n int) int {
	if n <= 1 || n > MaxNodes {
		return 0
	}
	switch s {
	case Random:
		return 1
	case RoundRobin:
		return n - 1
	case BinaryRoundRobin:
		return ceilLog2(n)
	case DoubleBinaryRoundRobin:
		return 2 * ceilLog2(n)
	}
	return 0
}

// Round returns the round number, in 1..CycleLength(n), of the gossip period
// numbered step (0 for the first period): step mod CycleLength(n) + 1. It is
// 0 when the cycle is empty (n ≤ 1) or step is negative.
func (s Schedule) Round(step, n int) int {
	c := s.CycleLength(n)
	if c == 0 || step < 0 {
		return 0
	}
	return step%c + 1
}

// check validates the arguments shared by Target and Sources.
func (s Schedule) check(v, r, n int) error {
	if !s.Valid() {
		return fmt.Errorf("%w: %d", ErrSchedule, uint8(s))
	}
	if n < 1 || n > MaxNodes {
		return fmt.Errorf("%w: n = %d", ErrSize, n)
	}
	if v < 0 || v >= n {
		return fmt.Errorf("%w: node %d of %d", ErrIndex, v, n)
	}
	if n == 1 {
		return ErrNoPeer
	}
	if s == Random {
		return ErrRandomSchedule
	}
	if c := s.CycleLength(n); r < 1 || r > c {
		return fmt.Errorf("%w: round %d of %v over %d nodes, want 1..%d", ErrRound, r, s, n, c)
	}
	return nil
}

// offset returns d-s for round r, a value in (-n, n); r is valid.
func (s Schedule) offset(r, n int) int {
	switch s {
	case RoundRobin:
		return r
	case BinaryRoundRobin:
		return 1 << (r - 1)
	default: // DoubleBinaryRoundRobin
		if l := ceilLog2(n); r > l {
			return -(1 << (r - l - 1))
		}
		return 1 << (r - 1)
	}
}

// Target returns the node that node src sends to in round r of a
// deterministic schedule over n nodes (Eq. 3, 4 and 5 of P2P-MPI §5). It
// fails with [ErrNoPeer] when n = 1, [ErrRandomSchedule] for Random,
// [ErrRound] when r is outside 1..CycleLength(n) and [ErrIndex] when src is
// outside [0, n). The target is never src itself.
func (s Schedule) Target(src, r, n int) (int, error) {
	if err := s.check(src, r, n); err != nil {
		return None, err
	}
	return mod(src+s.offset(r, n), n), nil
}

// TargetRand is Target for any schedule: for Random it draws the target
// uniformly among the n-1 nodes other than src from rng (one rng.IntN call;
// r is ignored); for the deterministic schedules it returns Target(src, r, n)
// and does not touch rng (which may then be nil).
func (s Schedule) TargetRand(rng *rand.Rand, src, r, n int) (int, error) {
	if s != Random {
		return s.Target(src, r, n)
	}
	if err := s.check(src, 1, n); err != ErrRandomSchedule {
		return None, err
	}
	if rng == nil {
		return None, fmt.Errorf("%w: nil *rand.Rand", ErrRandomSchedule)
	}
	d := rng.IntN(n - 1)
	if d >= src {
		d++
	}
	return d, nil
}

// Sources returns the node that sends to dst in round r: the unique s with
// Target(s, r, n) = dst. It fails like Target.
func (s Schedule) Sources(dst, r, n int) (int, error) {
	if err := s.check(dst, r, n); err != nil {
		return None, err
	}
	return mod(dst-s.offset(r, n), n), nil
}

// MinCleanupRounds returns the paper's lower bound on the cleanup time over n
// nodes, in gossip rounds (T_cleanup^min = MinCleanupRounds·T_gossip, P2P-MPI
// §5.1–5.2):
//
//   - RR: ⌈(√(1+8n)-1)/2⌉, the least r with r(r+1)/2 ≥ n, computed on
//     integers;
//   - BRR: ⌈log2 n⌉, one cycle;
//   - DBRR: 2⌈log2 n⌉, one cycle.
//
// It is 0 for n = 1 (there is no one to inform; the RR formula would say 1).
// Random has no such bound and returns [ErrRandomSchedule].
func (s Schedule) MinCleanupRounds(n int) (int, error) {
	if !s.Valid() {
		return 0, fmt.Errorf("%w: %d", ErrSchedule, uint8(s))
	}
	if n < 1 || n > MaxNodes {
		return 0, fmt.Errorf("%w: n = %d", ErrSize, n)
	}
	if s == Random {
		return 0, ErrRandomSchedule
	}
	if n == 1 {
		return 0, nil
	}
	switch s {
	case RoundRobin:
		return triangularRoot(n), nil
	case BinaryRoundRobin:
		return ceilLog2(n), nil
	default:
		return 2 * ceilLog2(n), nil
	}
}

// triangularRoot returns the least r ≥ 0 with r(r+1)/2 ≥ n, that is
// ⌈(√(1+8n)-1)/2⌉, exactly: the floating-point square root is only a first
// guess that integer comparisons then correct.
func triangularRoot(n int) int {
	m := int64(n)
	r := int64(math.Sqrt(2 * float64(n)))
	for r > 0 && (r-1)*r/2 >= m {
		r--
	}
	for r*(r+1)/2 < m {
		r++
	}
	return int(r)
}

// mod returns x mod n in [0, n) for n > 0.
func mod(x, n int) int {
	x %= n
	if x < 0 {
		x += n
	}
	return x
}
