package membertest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cohort-mp/cohort/member"
)

// SwarmLeaves runs the membership swarm on one seed under policy with
// graceful leaves on top of the seed's faults: one to three live members
// announce that they leave (member.LeaveRequest) at random times and stop
// 0–30 ms later, as a process that finished ends, its announcement perhaps
// still in flight. Besides the swarm's checks, every member that reports
// a departure from a view reports it alike, as a leave or not, and only
// nodes that announced a leave are reported as leavers (Harness.checkLeft).
// The leaves draw from a random source of their own, so the seed's other
// faults are those of [Swarm].
func SwarmLeaves(seed uint64, policy member.PartitionPolicy) Result {
	return swarmLeaves(seed, policy, true)
}

// SwarmLeavesAsCrashes is [SwarmLeaves] with every leave replaced by a
// plain crash at the moment the leaver would stop: the control that tells
// whether a seed's outcome is the leaves' doing or that of one more crash.
func SwarmLeavesAsCrashes(seed uint64, policy member.PartitionPolicy) Result {
	return swarmLeaves(seed, policy, false)
}

func swarmLeaves(seed uint64, policy member.PartitionPolicy, announce bool) Result {
	s := NewSwarmRun(seed, policy)
	s.H.W.SetReplay(fmt.Sprintf("go test ./member -run 'TestSwarmLeaves%s$' -seed=%%d", policyTest(policy)))
	r := rand.New(rand.NewPCG(seed, 0x1ea7e5))
	for range 1 + r.IntN(3) {
		at := time.Duration(20+r.IntN(int(s.Horizon/time.Millisecond)-20)) * time.Millisecond
		stop := time.Duration(r.IntN(30)) * time.Millisecond
		s.H.W.At(at, func() {
			if !s.mayCrash() {
				return
			}
			if ids := s.Pick(1); len(ids) > 0 && !s.H.Member(ids[0]).Joining() {
				s.H.Leave(ids[0], stop, announce)
			}
		})
	}
	err := s.RunSafe()
	return Result{Err: err, Stuck: s.Stuck, Installs: s.H.Installs, Lefts: s.H.Lefts, Events: s.H.W.Stats().Events}
}

// ReplayLeavesCommand is the command that replays one seed of
// [SwarmLeaves].
func ReplayLeavesCommand(seed uint64, policy member.PartitionPolicy) string {
	return fmt.Sprintf("go test ./member -run 'TestSwarmLeaves%s$' -seed=%d", policyTest(policy), seed)
}
