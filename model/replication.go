package model

import (
	"fmt"
	"math"
	"time"
)

// AmdahlDuration returns the duration of a program of p processes each
// replicated r times (P2P-MPI §4.5): Amdahl's law for the unreplicated run,
// and an overhead linear in r on top,
//
//	T(p, r) = T_seq · ((1 − α) + α/p) · (1 + β·(r − 1))
//
// seq is T_seq, the sequential time; parallel is α ∈ [0, 1], the parallel
// part of the program; overhead is β ≥ 0, the relative cost of each replica
// beyond the first (β = 1: each replica adds the unreplicated run's time,
// as when every message is sent r times over the sender's link).
func AmdahlDuration(seq time.Duration, parallel float64, p, r int, overhead float64) (time.Duration, error) {
	if seq < 0 || !(parallel >= 0 && parallel <= 1) || p < 1 || r < 1 || !(overhead >= 0) || math.IsInf(overhead, 0) {
		return 0, fmt.Errorf("%w: T_seq = %v, α = %v, p = %d, r = %d, β = %v (want T_seq ≥ 0, 0 ≤ α ≤ 1, p ≥ 1, r ≥ 1, β ≥ 0)", ErrParam, seq, parallel, p, r, overhead)
	}
	t := seq.Seconds() * ((1 - parallel) + parallel/float64(p)) * (1 + overhead*float64(r-1))
	return time.Duration(t * float64(time.Second)), nil
}

// ReplicationModel is the setting of P2P-MPI §4.5's Figure 10: a program's
// duration from Amdahl's law with a replication overhead linear in r, and
// hosts that fail under the Weibull model over that duration.
type ReplicationModel struct {
	Processes int           // p
	Seq       time.Duration // T_seq, the sequential time
	Parallel  float64       // α, the parallel part
	Overhead  float64       // β, the relative cost of each extra replica
	Rate      float64       // λ, Weibull failures per second
	Shape     float64       // δ, Weibull shape
}

// Figure10Model returns the parameters cohort uses for the chapter's Figure
// 10 (10 processes). The chapter gives neither its parameters nor those of
// its reference [25]; these are chosen so that the curve has the figure's
// shape and minimum: λ = 10⁻³ s⁻¹ and δ = 1 (as the chapter's Figure 12),
// T_seq = 500 s with α = 0.9 (about 95 s on 10 processes unreplicated) and
// β = 1, which puts the lowest failure probability at r = 7.
func Figure10Model() ReplicationModel {
	return ReplicationModel{Processes: 10, Seq: 500 * time.Second, Parallel: 0.9, Overhead: 1, Rate: 1e-3, Shape: 1}
}

// Failure returns the probability that the application crashes with
// replication degree r: Eq. 2 with t = AmdahlDuration(p, r).
func (m ReplicationModel) Failure(r int) (float64, error) {
	t, err := AmdahlDuration(m.Seq, m.Parallel, m.Processes, r, m.Overhead)
	if err != nil {
		return 0, err
	}
	return AppFailureWeibull(m.Processes, r, m.Rate, m.Shape, t)
}

// BestDegree returns the replication degree in [1, maxR] with the lowest
// failure probability (the smallest such r on ties) and that probability.
func (m ReplicationModel) BestDegree(maxR int) (int, float64, error) {
	if maxR < 1 {
		return 0, 0, fmt.Errorf("%w: maxR = %d (want ≥ 1)", ErrParam, maxR)
	}
	best, bestP := 0, math.Inf(1)
	for r := 1; r <= maxR; r++ {
		p, err := m.Failure(r)
		if err != nil {
			return 0, 0, err
		}
		if p < bestP {
			best, bestP = r, p
		}
	}
	return best, bestP, nil
}
