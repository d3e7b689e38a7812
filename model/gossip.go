package model

import (
	"fmt"
	"math"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

// MinCleanupRounds returns T_cleanup^min in gossip rounds for schedule s over
// n nodes; it is topo's [topo.Schedule.MinCleanupRounds] (P2P-MPI §5.1–5.2):
// RR ⌈(√(1+8n)-1)/2⌉, BRR ⌈log2 n⌉, DBRR 2⌈log2 n⌉, 0 for n = 1. Random has
// no bound.
func MinCleanupRounds(s topo.Schedule, n int) (int, error) {
	r, err := s.MinCleanupRounds(n)
	if err != nil {
		return 0, fmt.Errorf("model: minimum cleanup of %v over %d nodes: %w", s, n, err)
	}
	return r, nil
}

// MinCleanup returns T_cleanup^min = MinCleanupRounds(s, n) · T_gossip, the
// time a heartbeat needs to reach every node when rounds are synchronous
// (P2P-MPI §5.1: "this can serve as T_cleanup only in synchronous systems").
// tGossip must be positive.
func MinCleanup(s topo.Schedule, n int, tGossip time.Duration) (time.Duration, error) {
	r, err := MinCleanupRounds(s, n)
	if err != nil {
		return 0, err
	}
	return rounds(r, tGossip)
}

// DefaultCleanupRounds returns, in gossip rounds, the T_cleanup that P2P-MPI
// sets, that is the minimum plus a margin for unsynchronized clocks and
// message delays ("the initial heartbeat adjustment", §5.3):
//
//   - DBRR: 3⌈log2 n⌉ (§5.2, stated: "we set T_cleanup = 3⌈log2(n)⌉ ×
//     T_gossip for DBRR"), i.e. the minimum 2⌈log2 n⌉ plus one BRR cycle;
//   - BRR: 2⌈log2 n⌉. The chapter does not print BRR's value; it sets DBRR's
//     "with the same assumptions as for BRR", so the same margin of one BRR
//     cycle (⌈log2 n⌉ rounds) is added to BRR's minimum ⌈log2 n⌉. This is
//     our reading, not a number from the text.
//
// RR and Random have no default in the paper: [ErrNoDefault]. It is 0 for
// n = 1.
func DefaultCleanupRounds(s topo.Schedule, n int) (int, error) {
	if s != topo.BinaryRoundRobin && s != topo.DoubleBinaryRoundRobin {
		if !s.Valid() {
			return 0, fmt.Errorf("%w: schedule %v", ErrParam, s)
		}
		return 0, fmt.Errorf("%w: %v", ErrNoDefault, s)
	}
	minRounds, err := MinCleanupRounds(s, n)
	if err != nil {
		return 0, err
	}
	return minRounds + topo.BinaryRoundRobin.CycleLength(n), nil
}

// DefaultCleanup returns DefaultCleanupRounds(s, n) · T_gossip (P2P-MPI §5.2,
// plotted as the "theoretical" detection time of Figure 13).
func DefaultCleanup(s topo.Schedule, n int, tGossip time.Duration) (time.Duration, error) {
	r, err := DefaultCleanupRounds(s, n)
	if err != nil {
		return 0, err
	}
	return rounds(r, tGossip)
}

// rounds returns r · tGossip, checking the domain and overflow.
func rounds(r int, tGossip time.Duration) (time.Duration, error) {
	if tGossip <= 0 {
		return 0, fmt.Errorf("%w: T_gossip = %v, want > 0", ErrParam, tGossip)
	}
	if r > 0 && tGossip > math.MaxInt64/time.Duration(r) {
		return 0, fmt.Errorf("%w: %d rounds of %v", ErrOverflow, r, tGossip)
	}
	return time.Duration(r) * tGossip, nil
}
