package cluster

import (
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/topo"
)

// Detector names the failure detector a node runs under its membership.
type Detector uint8

// The detectors of a node.
const (
	// DetectorBRR is the gossip detector of P2P-MPI §5 with the binary
	// round-robin schedule, at loopback speed ([LoopbackGossipConfig]).
	DetectorBRR Detector = iota + 1
	// DetectorDBRR is the gossip detector with the double binary
	// round-robin schedule, at loopback speed.
	DetectorDBRR
	// DetectorHeartbeat is the Phoenix heartbeat detector with k monitors,
	// in its aggressive preset ([LoopbackHeartbeatConfig]).
	DetectorHeartbeat
	// DetectorHeartbeatPaper is the Phoenix heartbeat detector with the
	// paper's parameters (Table 1: k = 2, T_interval = T_timeout =
	// T_broken = 5 s, T_insurance = 200 s; fd.DefaultHeartbeatConfig), the
	// "FT" setting of its overhead experiment (§6.1, Table 2).
	DetectorHeartbeatPaper
	// DetectorOff runs no failure detector at all: the node sends no
	// detector traffic and its membership never hears of a failure (a
	// crashed peer is never excluded, so a program waiting for it waits
	// forever). It exists to measure the detector's overhead (`cohort bench
	// overhead`, the "Normal" setting of Phoenix Table 2); [Detector.New]
	// returns a nil machine and [NewNode] leaves the layer out.
	DetectorOff
)

var detectorNames = map[Detector]string{DetectorBRR: "brr", DetectorDBRR: "dbrr", DetectorHeartbeat: "heartbeat",
	DetectorHeartbeatPaper: "heartbeat-paper", DetectorOff: "off"}

func (d Detector) String() string {
	if s, ok := detectorNames[d]; ok {
		return s
	}
	return fmt.Sprintf("detector(%d)", uint8(d))
}

// MarshalText implements encoding.TextMarshaler.
func (d Detector) MarshalText() ([]byte, error) {
	if _, ok := detectorNames[d]; !ok {
		return nil, fmt.Errorf("cluster: unknown detector %d", uint8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: "brr", "dbrr" or
// "heartbeat", "heartbeat-paper" or "off".
func (d *Detector) UnmarshalText(text []byte) error {
	for k, name := range detectorNames {
		if string(text) == name {
			*d = k
			return nil
		}
	}
	return fmt.Errorf("cluster: unknown detector %q (want brr, dbrr, heartbeat, heartbeat-paper or off)", text)
}

// Loopback timing of the detectors: round trips on 127.0.0.1 are tens of
// microseconds, but the machine may be loaded (many processes on a few
// cores), so pings wait 100 ms.
const (
	LoopbackGossipInterval = 100 * time.Millisecond
	LoopbackPingTimeout    = 250 * time.Millisecond
)

// LoopbackGossipConfig is fd.LANGossipConfig with the given schedule and a
// gossip round every 50 ms: with BRR, T_cleanup = 2⌈log2 n⌉ rounds, so a
// crash in 16 nodes is suspected after 400 ms and declared after at most
// two pings of 100 ms.
func LoopbackGossipConfig(s topo.Schedule) fd.GossipConfig {
	c := fd.LANGossipConfig()
	c.Schedule = s
	c.GossipInterval = LoopbackGossipInterval
	c.PingTimeout = LoopbackPingTimeout
	return c
}

// LoopbackHeartbeatConfig is fd.AggressiveHeartbeatConfig: heartbeats every
// 100 ms to k = 2 monitors, a suspicion after 200 ms of silence, a failure
// 100 ms later.
func LoopbackHeartbeatConfig() fd.HeartbeatConfig { return fd.AggressiveHeartbeatConfig() }

// New returns the detector machine, watching members (in view order; nil
// for a node that joins and learns its view later). members is kept by the
// detector and must not be modified. For DetectorOff it returns a nil
// machine and no error.
func (d Detector) New(members []core.NodeID) (core.Machine, error) {
	return d.newMachine(members, false)
}

// QuietDelay is how long a quiet detector ([Detector.NewQuiet]) waits before
// it suspects or declares anything: longer than any benchmark runs.
const QuietDelay = time.Hour

// NewQuiet returns the detector machine with the same traffic as [New]
// (gossip tables every 100 ms, or heartbeats every 100 ms to k monitors)
// but whose verdicts wait [QuietDelay]: T_cleanup and the ping timeout of
// gossip, T_timeout and T_broken of the heartbeat detector. It never
// declares a crash of a benchmark's sample failed, so the only verdict is
// the one the orchestrator injects (`cohort bench membership --report
// one`, the paper's experiment: one detector reports the failure).
func (d Detector) NewQuiet(members []core.NodeID) (core.Machine, error) {
	return d.newMachine(members, true)
}

func (d Detector) newMachine(members []core.NodeID, quiet bool) (core.Machine, error) {
	switch d {
	case DetectorBRR, DetectorDBRR:
		s := topo.BinaryRoundRobin
		if d == DetectorDBRR {
			s = topo.DoubleBinaryRoundRobin
		}
		c := LoopbackGossipConfig(s)
		if quiet {
			c.Cleanup, c.PingTimeout = QuietDelay, QuietDelay
		}
		return fd.NewGossip(c, members)
	case DetectorHeartbeat:
		c := LoopbackHeartbeatConfig()
		if quiet {
			c.Timeout, c.Broken = QuietDelay, QuietDelay
		}
		return fd.NewHeartbeat(c, members)
	case DetectorHeartbeatPaper:
		c := fd.DefaultHeartbeatConfig()
		if quiet {
			c.Timeout, c.Broken = QuietDelay, QuietDelay
		}
		return fd.NewHeartbeat(c, members)
	case DetectorOff:
		return nil, nil
	}
	return nil, fmt.Errorf("cluster: unknown detector %d", uint8(d))
}

// Timeout describes how long the detector takes at most, as configured, to
// declare a crashed member of an n-node view failed once its last message
// is out: for gossip T_cleanup(n) + T_consensus (plus up to one round for
// the last heartbeat to age), for the heartbeat detector
// T_interval + T_timeout + T_broken at the crashed node's monitors.
func (d Detector) Timeout(n int) (time.Duration, string) {
	switch d {
	case DetectorBRR, DetectorDBRR:
		s := topo.BinaryRoundRobin
		if d == DetectorDBRR {
			s = topo.DoubleBinaryRoundRobin
		}
		c := LoopbackGossipConfig(s)
		tc, tcons := c.CleanupTime(n), c.ConsensusTime()
		return tc + tcons, fmt.Sprintf("T_cleanup %v + T_consensus %v (T_gossip %v)", tc, tcons, c.GossipInterval)
	case DetectorHeartbeat:
		c := LoopbackHeartbeatConfig()
		total := c.Interval + c.Timeout + c.Broken
		return total, fmt.Sprintf("T_interval %v + T_timeout %v + T_broken %v", c.Interval, c.Timeout, c.Broken)
	case DetectorHeartbeatPaper:
		c := fd.DefaultHeartbeatConfig()
		total := c.Interval + c.Timeout + c.Broken
		return total, fmt.Sprintf("T_interval %v + T_timeout %v + T_broken %v", c.Interval, c.Timeout, c.Broken)
	case DetectorOff:
		return 0, "no detector: failures are never declared"
	}
	return 0, "unknown detector"
}
