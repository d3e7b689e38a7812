package group

import (
	"time"

	"github.com/cohort-mp/cohort/group/stack"
)

// Detector names the failure detector a node runs under its membership.
// The zero value means [DetectorHeartbeat] (see [stack.Detector] for
// why). It is text-marshalable, for flags and configuration files.
type Detector = stack.Detector

// The detectors.
const (
	// DetectorBRR is the gossip detector of P2P-MPI §5 with the binary
	// round-robin schedule: every GossipInterval each node sends its
	// heartbeat table to one peer; a crash is suspected after
	// 2⌈log2 n⌉ rounds and declared after a round of pings.
	DetectorBRR = stack.DetectorBRR
	// DetectorDBRR is the gossip detector with the double binary
	// round-robin schedule (⌈log2 n⌉ + 1 rounds, twice the messages).
	DetectorDBRR = stack.DetectorDBRR
	// DetectorHeartbeat is the Phoenix heartbeat detector: each node sends
	// heartbeats to HeartbeatMonitors random monitors every
	// HeartbeatInterval; a monitor suspects after SuspectTimeout of
	// silence and declares after FailTimeout more.
	DetectorHeartbeat = stack.DetectorHeartbeat
	// DetectorHeartbeatPaper is the heartbeat detector with the Phoenix
	// paper's parameters (k = 2, 5 s, 5 s, 5 s), whatever the timings.
	DetectorHeartbeatPaper = stack.DetectorHeartbeatPaper
	// DetectorOff runs no failure detector: a crashed member is never
	// excluded. It measures the detector's overhead; a service should not
	// use it.
	DetectorOff = stack.DetectorOff
)

// DetectionBound says how long the detector of c takes at most, as
// configured, to declare a crashed member of an n-member view failed, and
// how that bound is made up. With DetectorOff it is 0 (never).
func (c Config) DetectionBound(n int) (time.Duration, string) {
	return c.stackConfig(0).DetectionBound(n)
}
