package stack

import (
	"errors"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// ErrConfig: a Config field is invalid; the message names it.
var ErrConfig = errors.New("stack: invalid configuration")

// Config is what a node's machines need: its id, the detector and its
// timings, the membership's tree and timings, and the multicast layer's
// bounds. Package group builds one from its own Config; comm and cohort's
// runners start from a preset. Every node of a group uses the same values
// (the id aside).
type Config struct {
	// ID is the node's id (core.None is not allowed).
	ID core.NodeID

	// Detector is the failure detector, by name (see [Detector]).
	Detector Detector
	// GossipInterval is the gossip detectors' round (brr, dbrr).
	GossipInterval time.Duration
	// PingTimeout is how long the gossip detectors wait for a ping's
	// answer before they count a suspect as unresponsive.
	PingTimeout time.Duration
	// HeartbeatMonitors is k, the number of monitors of each node
	// (heartbeat detector).
	HeartbeatMonitors int
	// HeartbeatInterval is how often a node sends heartbeats to its
	// monitors; insurance heartbeats go every 40 intervals (Phoenix's
	// ratio) on the node's other connections.
	HeartbeatInterval time.Duration
	// AlignHeartbeats sends heartbeats when the wall clock is a multiple
	// of HeartbeatInterval (fd.HeartbeatConfig.SharedClock): the nodes of
	// a host then wake together. For real processes only.
	AlignHeartbeats bool
	// SuspectTimeout is the heartbeat detector's T_timeout.
	SuspectTimeout time.Duration
	// FailTimeout is the heartbeat detector's T_broken.
	FailTimeout time.Duration

	// Fanout is the membership's radix-tree fan-out (a power of two ≥ 2;
	// 0: member.DefaultConfig's).
	Fanout int
	// AckTimeout is how long, per tree level below it, a node waits for
	// its children's acknowledgements (0: member's default).
	AckTimeout time.Duration
	// JoinRetry is how long a joiner waits before it asks its next
	// contact (0: member's default).
	JoinRetry time.Duration
	// Majority selects member.PartitionMajority.
	Majority bool

	// Multicast adds the stability detector and view-synchronous multicast.
	Multicast bool
	// MulticastWindow is how many of its own multicasts a node may have in
	// flight.
	MulticastWindow int
	// MaxMessageSize bounds a multicast payload, in bytes.
	MaxMessageSize int
}

// DefaultLANConfig is the configuration for one local network: the
// heartbeat detector with k = 2 monitors, heartbeats every 200 ms,
// suspected after 600 ms and declared 400 ms later (or, if chosen, the
// gossip detector with a 200 ms round and 500 ms pings); fan-out 4 and 500 ms per tree level; joins retried every
// 2 s; a multicast window of 256 messages of at most 1 MiB.
func DefaultLANConfig() Config {
	return Config{
		Detector:          DetectorHeartbeat,
		GossipInterval:    200 * time.Millisecond,
		PingTimeout:       500 * time.Millisecond,
		HeartbeatMonitors: 2,
		HeartbeatInterval: 200 * time.Millisecond,
		SuspectTimeout:    600 * time.Millisecond,
		FailTimeout:       400 * time.Millisecond,
		Fanout:            4,
		AckTimeout:        500 * time.Millisecond,
		JoinRetry:         2 * time.Second,
		MulticastWindow:   256,
		MaxMessageSize:    1 << 20,
	}
}

// DefaultWANConfig is DefaultLANConfig with timings five times longer.
func DefaultWANConfig() Config {
	c := DefaultLANConfig()
	c.GossipInterval *= 5
	c.PingTimeout *= 5
	c.HeartbeatInterval *= 5
	c.SuspectTimeout *= 5
	c.FailTimeout *= 5
	c.AckTimeout *= 5
	c.JoinRetry *= 5
	return c
}

// DefaultLocalConfig is for nodes on one machine: a 100 ms gossip round,
// 250 ms pings, heartbeats every 100 ms with a suspicion after 200 ms and
// a failure 100 ms later, 200 ms per tree level (a loaded machine can
// stall a process for tens of milliseconds), joins retried every second.
func DefaultLocalConfig() Config {
	c := DefaultLANConfig()
	c.GossipInterval = 100 * time.Millisecond
	c.PingTimeout = 250 * time.Millisecond
	c.HeartbeatInterval = 100 * time.Millisecond
	c.SuspectTimeout = 200 * time.Millisecond
	c.FailTimeout = 100 * time.Millisecond
	c.AckTimeout = 200 * time.Millisecond
	c.JoinRetry = time.Second
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if err := c.Detector.Validate(); err != nil {
		return err
	}
	switch {
	case c.ID == core.None:
		return bad("ID %d is reserved", uint32(c.ID))
	case c.GossipInterval <= 0 || c.PingTimeout <= 0:
		return bad("GossipInterval and PingTimeout must be positive (got %v, %v)", c.GossipInterval, c.PingTimeout)
	case c.HeartbeatMonitors < 1:
		return bad("HeartbeatMonitors must be at least 1 (got %d)", c.HeartbeatMonitors)
	case c.HeartbeatInterval <= 0 || c.SuspectTimeout <= 0 || c.FailTimeout <= 0:
		return bad("HeartbeatInterval, SuspectTimeout and FailTimeout must be positive (got %v, %v, %v)",
			c.HeartbeatInterval, c.SuspectTimeout, c.FailTimeout)
	case c.JoinRetry <= 0:
		return bad("JoinRetry must be positive (got %v)", c.JoinRetry)
	case c.Multicast && c.MulticastWindow < 1:
		return bad("MulticastWindow must be at least 1 (got %d)", c.MulticastWindow)
	case c.Multicast && c.MaxMessageSize < 1:
		return bad("MaxMessageSize must be at least 1 (got %d)", c.MaxMessageSize)
	}
	if err := c.MemberConfig().Validate(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// MemberConfig is the membership's configuration under c.
func (c Config) MemberConfig() member.Config {
	m := member.DefaultConfig()
	if c.Fanout != 0 {
		m.Fanout = c.Fanout
	}
	if c.AckTimeout != 0 {
		m.AckTimeout = c.AckTimeout
	}
	if c.JoinRetry != 0 {
		m.JoinRetry = c.JoinRetry
	}
	if c.Majority {
		m.Partition = member.PartitionMajority
	}
	return m
}
