package runner

import (
	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
)

// Detector names the failure detector a node runs under its membership
// (package group/stack: brr, dbrr, heartbeat, heartbeat-paper, off).
type Detector = stack.Detector

// The detectors of a node.
const (
	DetectorBRR            = stack.DetectorBRR
	DetectorDBRR           = stack.DetectorDBRR
	DetectorHeartbeat      = stack.DetectorHeartbeat
	DetectorHeartbeatPaper = stack.DetectorHeartbeatPaper
	DetectorOff            = stack.DetectorOff
)

// QuietDelay is how long a quiet detector waits before it suspects or
// declares anything (stack.QuietDelay).
const QuietDelay = stack.QuietDelay

// LocalConfig is the group configuration of a node of a job on this machine
// (stack.DefaultLocalConfig) with the given detector and fan-out (0: the
// default).
func LocalConfig(self core.NodeID, d Detector, fanout int) stack.Config {
	c := stack.DefaultLocalConfig()
	c.ID = self
	c.Detector = d
	if fanout != 0 {
		c.Fanout = fanout
	}
	return c
}
