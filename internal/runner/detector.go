package runner

import (
	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group"
)

// Detector names the failure detector a node runs under its membership
// (package group: brr, dbrr, heartbeat, heartbeat-paper, off).
type Detector = group.Detector

// The detectors of a node.
const (
	DetectorBRR            = group.DetectorBRR
	DetectorDBRR           = group.DetectorDBRR
	DetectorHeartbeat      = group.DetectorHeartbeat
	DetectorHeartbeatPaper = group.DetectorHeartbeatPaper
	DetectorOff            = group.DetectorOff
)

// QuietDelay is how long a quiet detector waits before it suspects or
// declares anything (group.QuietDelay).
const QuietDelay = group.QuietDelay

// LocalConfig is the group configuration of a node of a job on this machine
// (group.DefaultLocalConfig) with the given detector and fan-out (0: the
// default).
func LocalConfig(self core.NodeID, d Detector, fanout int) group.Config {
	c := group.DefaultLocalConfig()
	c.ID = self
	c.Detector = d
	if fanout != 0 {
		c.Fanout = fanout
	}
	return c
}
