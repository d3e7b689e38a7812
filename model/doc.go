// Package model holds the analytical models of the papers behind cohort:
// closed formulas that experiments plot next to measurements and that tests
// use as expectations. Every function is pure, documents its formula and
// names the paper section (and equation number, where the paper numbers it)
// it comes from.
//
// Four families:
//
//   - Gossip cleanup times of P2P-MPI (Genaud and Rattanapoka, §5.1–5.2):
//     [MinCleanup] (T_cleanup^min, the time for a heartbeat to reach every
//     node) and [DefaultCleanup] (the T_cleanup that P2P-MPI configures),
//     both derived from the schedules of package topo.
//   - Failure probabilities of P2P-MPI §4.5: [WeibullFailure] (Eq. 1), the
//     probability that a host fails before t, and [AppFailure] (Eq. 2), the
//     probability that an application of p processes replicated r times
//     crashes.
//   - Tree stabilization time of the membership service (Varma et al.,
//     ICS'06, §4 and §7): the base model [StabilizationTime] (Eq. 1–2), the
//     BlueGene/L distance model [DistanceStabilizationTime] (§7.1) and the
//     switch-contention model [ContentionStabilizationTime] (§7.2).
//   - The checkpoint interval of coordinated checkpoint/restart (what
//     package resil does): Young's and Daly's optimum intervals
//     [YoungInterval], [DalyInterval], and the first-order waste
//     [CheckpointWaste] of an interval.
//
// Durations are time.Duration; rates are per second (float64); probabilities
// are float64 in [0, 1]. Invalid parameters give an error wrapping
// [ErrParam]; a result that does not fit in a time.Duration gives
// [ErrOverflow].
//
// Example: the detection bound of a 256-process job gossiping BRR every
// half second, as in the P2P-MPI Grid'5000 experiment (§5.3):
//
//	min, _ := model.MinCleanup(topo.BinaryRoundRobin, 256, 500*time.Millisecond) // 4s
//	def, _ := model.DefaultCleanup(topo.DoubleBinaryRoundRobin, 256, 500*time.Millisecond) // 12s
package model

import "errors"

var (
	// ErrParam reports a parameter outside the model's domain.
	ErrParam = errors.New("model: invalid parameter")
	// ErrOverflow reports a result too large for a time.Duration.
	ErrOverflow = errors.New("model: result overflows time.Duration")
	// ErrNoDefault reports a gossip schedule for which P2P-MPI defines no
	// cleanup time.
	ErrNoDefault = errors.New("model: the paper defines no default cleanup time for this schedule")
)
