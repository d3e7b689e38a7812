package stack

import (
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/fd"
	"github.com/cohort-mp/cohort/topo"
)

// Detector names the failure detector a node runs under its membership.
// The zero value means [DetectorHeartbeat]: of the detectors, it agrees
// on a crash soonest, declares the fewest live members failed under
// partial partitions, and sends per node a heartbeat to k monitors per
// interval whatever the group's size, where a gossip table grows with it
// (docs/PERFORMANCE.md, "Choice of the default detector").
type Detector string

// The detectors.
const (
	// DetectorBRR is the gossip detector of P2P-MPI §5 with the binary
	// round-robin schedule: every T_gossip each node sends its heartbeat
	// table to one peer; a crash is suspected after T_cleanup = 2⌈log2 n⌉
	// rounds and declared after T_consensus of pings.
	DetectorBRR Detector = "brr"
	// DetectorDBRR is the gossip detector with the double binary
	// round-robin schedule (T_cleanup = ⌈log2 n⌉ + 1 rounds, twice the
	// messages of BRR).
	DetectorDBRR Detector = "dbrr"
	// DetectorHeartbeat is the Phoenix heartbeat detector: each node sends
	// heartbeats to k random monitors every T_interval; a monitor suspects
	// after T_timeout of silence and declares after T_broken more.
	DetectorHeartbeat Detector = "heartbeat"
	// DetectorHeartbeatPaper is the heartbeat detector with the Phoenix
	// paper's parameters (Table 1: k = 2, T_interval = T_timeout =
	// T_broken = 5 s, T_insurance = 200 s), whatever the Config's timings.
	DetectorHeartbeatPaper Detector = "heartbeat-paper"
	// DetectorOff runs no failure detector: no detector traffic, and a
	// crashed member is never excluded. It exists to measure the
	// detector's overhead; a service should not use it.
	DetectorOff Detector = "off"
)

// Detectors lists the detector names (the default is DetectorHeartbeat).
var Detectors = []Detector{DetectorBRR, DetectorDBRR, DetectorHeartbeat, DetectorHeartbeatPaper, DetectorOff}

func (d Detector) orDefault() Detector {
	if d == "" {
		return DetectorHeartbeat
	}
	return d
}

// String returns the detector's name.
func (d Detector) String() string { return string(d.orDefault()) }

// MarshalText implements encoding.TextMarshaler.
func (d Detector) MarshalText() ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler (for flags and config
// files): one of the names of [Detectors].
func (d *Detector) UnmarshalText(text []byte) error {
	x := Detector(text)
	if err := x.Validate(); err != nil {
		return err
	}
	*d = x
	return nil
}

// Validate reports whether d names a detector.
func (d Detector) Validate() error {
	for _, k := range Detectors {
		if d.orDefault() == k {
			return nil
		}
	}
	return fmt.Errorf("%w: unknown detector %q (want brr, dbrr, heartbeat, heartbeat-paper or off)", ErrConfig, string(d))
}

// QuietDelay is how long a quiet detector (StackOptions.QuietDetector)
// waits before it suspects or declares anything: longer than any benchmark
// runs. A quiet gossip detector also ignores transport hints
// (fd.GossipConfig.IgnoreHints).
const QuietDelay = time.Hour

// gossipConfig is the gossip detector's configuration under c.
func (c *Config) gossipConfig() fd.GossipConfig {
	g := fd.LANGossipConfig()
	g.Schedule = topo.BinaryRoundRobin
	if c.Detector.orDefault() == DetectorDBRR {
		g.Schedule = topo.DoubleBinaryRoundRobin
	}
	g.GossipInterval = c.GossipInterval
	g.PingTimeout = c.PingTimeout
	return g
}

// heartbeatConfig is the heartbeat detector's configuration under c.
func (c *Config) heartbeatConfig() fd.HeartbeatConfig {
	if c.Detector.orDefault() == DetectorHeartbeatPaper {
		return fd.DefaultHeartbeatConfig()
	}
	h := fd.AggressiveHeartbeatConfig()
	h.Monitors = c.HeartbeatMonitors
	h.Interval = c.HeartbeatInterval
	h.Insurance = 40 * c.HeartbeatInterval // the paper's ratio, kept whatever the interval
	// No full mesh: a group may be of any size and its nodes talk to few
	// others, so insurance goes to the connections a node really has (its
	// ring neighbours, the nodes that chose it as a monitor, the peers it
	// talks to). At n = 64 the full mesh cost 61 insurance heartbeats per
	// 40 intervals, three quarters of the heartbeat traffic, to cover a
	// node whose k monitors crash with it, which its ring neighbours
	// already cover.
	h.FullMeshMax = 0
	h.Timeout = c.SuspectTimeout
	h.Broken = c.FailTimeout
	if c.AlignHeartbeats {
		h.SharedClock = wallClock{}
	}
	return h
}

// wallClock is the system's wall clock, which the processes of a host
// share (fd.HeartbeatConfig.SharedClock).
type wallClock struct{}

func (wallClock) Now() time.Duration { return time.Duration(time.Now().UnixNano()) }

// newDetector returns the detector machine of c watching members (nil for
// a joiner that learns its view later). For DetectorOff it returns nil.
func (c *Config) newDetector(members []core.NodeID, quiet bool) (core.Machine, error) {
	switch c.Detector.orDefault() {
	case DetectorBRR, DetectorDBRR:
		g := c.gossipConfig()
		if quiet {
			g.Cleanup, g.PingTimeout = QuietDelay, QuietDelay
			// A probe could not conclude before QuietDelay: its ping
			// would only have the transport dial the crashed node.
			g.IgnoreHints = true
		}
		return fd.NewGossip(g, members)
	case DetectorHeartbeat, DetectorHeartbeatPaper:
		h := c.heartbeatConfig()
		if quiet {
			h.Timeout, h.Broken = QuietDelay, QuietDelay
		}
		return fd.NewHeartbeat(h, members)
	case DetectorOff:
		return nil, nil
	}
	return nil, c.Detector.Validate()
}

// DetectionBound says how long the detector of c takes at most, as
// configured, to declare a crashed member of an n-member view failed once
// the crashed member's last message is out, and how that bound is made up:
// for gossip T_cleanup(n) + T_consensus (plus up to one round for the last
// heartbeat to age), for the heartbeat detector T_interval + T_timeout +
// T_broken at the crashed node's monitors. With DetectorOff it is 0 (never).
func (c Config) DetectionBound(n int) (time.Duration, string) {
	switch c.Detector.orDefault() {
	case DetectorBRR, DetectorDBRR:
		g := c.gossipConfig()
		tc, tcons := g.CleanupTime(n), g.ConsensusTime()
		return tc + tcons, fmt.Sprintf("T_cleanup %v + T_consensus %v (T_gossip %v)", tc, tcons, g.GossipInterval)
	case DetectorHeartbeat, DetectorHeartbeatPaper:
		h := c.heartbeatConfig()
		total := h.Interval + h.Timeout + h.Broken
		return total, fmt.Sprintf("T_interval %v + T_timeout %v + T_broken %v", h.Interval, h.Timeout, h.Broken)
	}
	return 0, "no detector: failures are never declared"
}
