// Package membertest runs package member's machines in the simulator and
// checks them: a [Harness] (a sim.Checker of the membership's safety
// properties, with an oracle failure detector driven by the simulated
// faults) and the randomized swarm of the package documentation of member
// ([Swarm], [SwarmRun]), shared by member's tests and by
// `cohort sim swarm --protocol member`.
//
// One seed:
//
//	res := membertest.Swarm(seed, member.PartitionPaper)
//	if res.Err != nil { ... }   // a violation, a panic or no convergence
//
// Each call builds its own sim.World, so seeds can run in parallel.
package membertest
