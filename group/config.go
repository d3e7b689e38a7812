package group

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// NodeID is a member's number in the group: derived from its name
// ([Member.ID]), so a node that restarts under its name has the same one.
type NodeID = core.NodeID

// Limits on what a node says about itself, in bytes.
const (
	// MaxNameLen bounds Config.Name.
	MaxNameLen = 128
	// MaxMetaSize bounds Config.Meta and SetMeta's metadata: metadata
	// travels with every view change (the root sends every member the
	// metadata of all), so it is for a few facts (a zone, a port, a
	// weight, a version), not for data.
	MaxMetaSize = 512
)

// The directory enforces the same bounds on the wire: these fail to
// compile if they differ.
const (
	_ = uint(MaxNameLen-stack.MaxNameLen) + uint(stack.MaxNameLen-MaxNameLen)
	_ = uint(MaxMetaSize-stack.MaxMetaLen) + uint(stack.MaxMetaLen-MaxMetaSize)
)

// Errors of the package. Errors returned by its functions wrap one of
// these (test with errors.Is) with the details.
var (
	// ErrConfig: a Config field is invalid; the message names it.
	ErrConfig = errors.New("group: invalid configuration")
	// ErrDuplicate: a seed answered with this node's own id: another
	// node runs under the same name (or, rarely, a name whose id is the
	// same: ids are a 32-bit hash of the name).
	ErrDuplicate = errors.New("group: another node has this node's name")
	// ErrSecret: a seed did not prove the group's Secret, or refused ours.
	ErrSecret = errors.New("group: secret mismatch")
	// ErrCluster: a seed belongs to another Cluster.
	ErrCluster = errors.New("group: seed of another cluster")
	// ErrNoSeed: a seed source failed, or no seed could be reached while
	// some were refused (see ErrSecret, ErrCluster).
	ErrNoSeed = errors.New("group: no seed reachable")
	// ErrClosed: the group has been closed (or left).
	ErrClosed = errors.New("group: closed")
	// ErrNoMulticast: Multicast on a group started without Config.Multicast.
	ErrNoMulticast = errors.New("group: multicast is not enabled")
	// ErrMulticastFull: the multicast queue is full (flow control); try
	// again when deliveries catch up.
	ErrMulticastFull = errors.New("group: multicast queue full")
	// ErrTooLarge: a multicast payload exceeds Config.MaxMessageSize, or
	// metadata exceeds MaxMetaSize.
	ErrTooLarge = errors.New("group: too large")
)

// Config configures one node of a group. Start from a preset
// ([DefaultLANConfig], [DefaultLocalConfig], [DefaultWANConfig]), set
// Cluster, Secret and Seeds, and adjust; every node of a group must use the
// same Cluster, Secret, Detector, Fanout and timings (and TLS, or none).
type Config struct {
	// Name is this node's name in the group, unique among its members; at
	// most MaxNameLen bytes. Empty means the host name (os.Hostname): set
	// it when a host runs several nodes of one group. The node's id is
	// derived from it, so a node restarted under its name rejoins as
	// itself (the others see it depart and join in one view change).
	Name string
	// Meta is this node's metadata at the start, at most MaxMetaSize
	// bytes; change it with [Group.SetMeta]. Every member sees the same
	// metadata of every member with a given view ([View.Members]).
	Meta []byte
	// Seeds are the nodes this one asks to join ("host:port" of members
	// or of nodes starting with it); nil for a node that may start alone.
	// A seed that is this node (its address, or a name of this host at
	// its port) is skipped, so every node may be given the same list. See
	// [New] for how a group forms.
	Seeds SeedSource

	// BindAddr is the TCP address the node listens on, "host:port"; port 0
	// picks a free port.
	BindAddr string
	// AdvertiseAddr is the address other nodes dial to reach this one. Empty
	// means the bound address, which must then be a specific IP (not
	// 0.0.0.0 or ::): a node bound to every interface must say which
	// address the others should use.
	AdvertiseAddr string

	// Cluster names the group: nodes of another cluster are refused at the
	// handshake. At most 255 bytes.
	Cluster string
	// Secret is the group's shared secret: every connection proves that
	// both ends know it (HMAC-SHA256 challenge–response) before any frame
	// is accepted. At least 16 bytes, random.
	Secret []byte
	// TLS, if not nil, wraps every connection in TLS (the secret's proof
	// then runs inside it). It is used both to accept (as a server) and to
	// dial (as a client): give it Certificates, RootCAs and, for mutual
	// authentication, ClientAuth and ClientCAs. Every node must set it.
	TLS *tls.Config
	// WrapTransport, if not nil, wraps the node's TCP transport before the
	// node's protocols use it: a test or a benchmark injects faults this
	// way (transport/fault) or counts frames. The wrapper must pass
	// SetPeer, RemovePeer, SetHandler and Close through; joining
	// (introductions to the seeds) uses the TCP transport directly.
	WrapTransport func(transport.Transport) transport.Transport
	// IdleTimeout closes a connection on which nothing was read or written
	// for this long, without loss; it is dialled again when needed. 0
	// means 30 s. Shorter frees the file descriptors of connections used
	// for a moment (joins, view changes) sooner, which matters to a
	// process that hosts many nodes; keep it well above the detector's
	// period (HeartbeatInterval·40 for the heartbeat detector, whose
	// insurance heartbeats keep a node's other connections, GossipInterval
	// times ⌈log2 n⌉ for brr), or connections in use close and reopen.
	IdleTimeout time.Duration

	// Detector is the failure detector, by name (see [Detector]); its
	// worst-case detection time is [Config.DetectionBound].
	Detector Detector
	// GossipInterval is the gossip detectors' round (brr, dbrr): every
	// GossipInterval each node sends its heartbeat table to one peer.
	GossipInterval time.Duration
	// PingTimeout is how long the gossip detectors wait for the answer to
	// a ping before they count a suspect as unresponsive.
	PingTimeout time.Duration
	// HeartbeatMonitors is k, the number of monitors of each node for the
	// heartbeat detector.
	HeartbeatMonitors int
	// HeartbeatInterval is how often a node sends heartbeats to its
	// monitors (heartbeat detector). Every other connection of the node
	// (its ring neighbours on each side, the nodes that chose it as a
	// monitor, the peers it talks to) gets an insurance heartbeat every 40
	// intervals (Phoenix's ratio), so a quiet node sends about
	// (k + (k+2)/40)/T messages per second, whatever the group's size.
	HeartbeatInterval time.Duration
	// AlignHeartbeats makes the heartbeat detector send its heartbeats
	// when the wall clock is a multiple of HeartbeatInterval, as every
	// node that sets it does (fd.HeartbeatConfig.SharedClock): the nodes
	// of a host then wake together once per interval, rather than once
	// per heartbeat sent or received. For real processes (package comm
	// sets it); a simulation leaves it off.
	AlignHeartbeats bool
	// SuspectTimeout is the heartbeat detector's silence before a monitor
	// suspects a node (T_timeout).
	SuspectTimeout time.Duration
	// FailTimeout is the time a suspicion lasts before the heartbeat
	// detector declares the node failed (T_broken).
	FailTimeout time.Duration

	// Fanout is the membership's radix-tree fan-out a (a power of two ≥ 2).
	Fanout int
	// AckTimeout is how long, per tree level below it, a node waits for its
	// children's acknowledgements of a view change before it reports the
	// silent ones failed.
	AckTimeout time.Duration
	// JoinRetry is how long a joiner waits to be admitted before it asks
	// its next seed.
	JoinRetry time.Duration
	// Majority makes a side of a partition that does not hold a majority of
	// the last view stop installing views (and say so) instead of
	// reorganizing on its own; see package member, PartitionMajority.
	Majority bool

	// Multicast adds view-synchronous reliable multicast ([Group.Multicast],
	// [Group.Deliveries]): every member that moves from one view to the
	// next delivered the same messages in the first.
	Multicast bool
	// MulticastWindow is how many of its own multicasts a node may have in
	// flight (not yet stable) before Multicast returns ErrMulticastFull.
	MulticastWindow int
	// MaxMessageSize bounds a multicast payload, in bytes.
	MaxMessageSize int

	// Logger receives the node's structured logs; nil discards them.
	Logger *slog.Logger
	// Events, if not nil, receives every event of the node's machines as
	// one JSON line (views, suspicions, stabilizations, ...).
	Events io.Writer
	// Metrics, if not nil, receives the node's counters, gauges and
	// durations (see [Metrics]).
	Metrics Metrics
	// RandomSeed seeds the node's random source (monitor choice, gossip
	// targets); 0 draws one.
	RandomSeed uint64

	// Delegate, if not nil, is called with every view, suspicion and
	// delivery, in order, from one goroutine of the node's (see
	// [Delegate] for the slow reader).
	Delegate Delegate
	// EventBuffer bounds each queue of events not yet taken by their
	// reader (the channels of Views, Suspicions and Deliveries, and the
	// Delegate's): 0 means 1024. See [Delegate] for what happens when one
	// is full.
	EventBuffer int
}

// DefaultLANConfig returns the configuration for a group on one local
// network: listen on every interface at port 7950 (so AdvertiseAddr must be
// set), the BRR gossip detector with a 200 ms round, 500 ms pings, fan-out
// 4, 500 ms per tree level for acknowledgements.
func DefaultLANConfig() Config {
	c := fromStack(stack.DefaultLANConfig())
	c.BindAddr = "0.0.0.0:7950"
	return c
}

// DefaultWANConfig is DefaultLANConfig with timings five times longer, for
// groups whose round trips are tens of milliseconds.
func DefaultWANConfig() Config {
	c := fromStack(stack.DefaultWANConfig())
	c.BindAddr = "0.0.0.0:7950"
	return c
}

// DefaultLocalConfig is for groups on one machine (tests, loopback
// deployments): listen on 127.0.0.1 at a free port, a 100 ms gossip round,
// 250 ms pings, heartbeats every 100 ms with a suspicion after 200 ms and a
// failure 100 ms later, 200 ms per tree level for acknowledgements (a
// loaded machine can stall a process for tens of milliseconds).
func DefaultLocalConfig() Config {
	c := fromStack(stack.DefaultLocalConfig())
	c.BindAddr = "127.0.0.1:0"
	return c
}

// fromStack is the Config with the machines' settings of s.
func fromStack(s stack.Config) Config {
	return Config{
		Detector: s.Detector, GossipInterval: s.GossipInterval, PingTimeout: s.PingTimeout,
		HeartbeatMonitors: s.HeartbeatMonitors, HeartbeatInterval: s.HeartbeatInterval,
		AlignHeartbeats: s.AlignHeartbeats, SuspectTimeout: s.SuspectTimeout, FailTimeout: s.FailTimeout,
		Fanout: s.Fanout, AckTimeout: s.AckTimeout, JoinRetry: s.JoinRetry, Majority: s.Majority,
		Multicast: s.Multicast, MulticastWindow: s.MulticastWindow, MaxMessageSize: s.MaxMessageSize,
	}
}

// stackConfig is the machines' part of c, for node id.
func (c Config) stackConfig(id NodeID) stack.Config {
	return stack.Config{
		ID: id, Detector: c.Detector, GossipInterval: c.GossipInterval, PingTimeout: c.PingTimeout,
		HeartbeatMonitors: c.HeartbeatMonitors, HeartbeatInterval: c.HeartbeatInterval,
		AlignHeartbeats: c.AlignHeartbeats, SuspectTimeout: c.SuspectTimeout, FailTimeout: c.FailTimeout,
		Fanout: c.Fanout, AckTimeout: c.AckTimeout, JoinRetry: c.JoinRetry, Majority: c.Majority,
		Multicast: c.Multicast, MulticastWindow: c.MulticastWindow, MaxMessageSize: c.MaxMessageSize,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if err := c.stackConfig(0).Validate(); err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), stack.ErrConfig.Error()+": "))
	}
	switch {
	case len(c.Name) > MaxNameLen:
		return bad("Name has %d bytes, at most %d", len(c.Name), MaxNameLen)
	case len(c.Meta) > MaxMetaSize:
		return bad("Meta has %d bytes, at most %d", len(c.Meta), MaxMetaSize)
	case c.EventBuffer < 0:
		return bad("EventBuffer must not be negative (got %d)", c.EventBuffer)
	case len(c.Secret) < 16:
		return bad("Secret has %d bytes, want at least 16", len(c.Secret))
	case len(c.Cluster) > wire.MaxJobIDLen:
		return bad("Cluster has %d bytes, at most %d", len(c.Cluster), wire.MaxJobIDLen)
	case c.IdleTimeout < 0:
		return bad("IdleTimeout must not be negative (got %v)", c.IdleTimeout)
	}
	if c.BindAddr == "" {
		return bad("BindAddr is empty")
	}
	if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
		return bad("BindAddr %q: %v", c.BindAddr, err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			return bad("AdvertiseAddr %q: %v", c.AdvertiseAddr, err)
		}
		if len(c.AdvertiseAddr) > stack.MaxAddrLen {
			return bad("AdvertiseAddr is longer than %d bytes", stack.MaxAddrLen)
		}
	}
	return nil
}

// Metrics receives a node's measurements. Its methods are called on the
// node's event loop: they must be quick and must not block (hand the value
// to a Prometheus collector, expvar, an atomic). Names are fixed strings:
//
//	counters:  views_installed, suspicions, unsuspicions, failures_declared,
//	           members_joined, members_departed, members_left,
//	           multicasts_delivered
//	gauges:    members (the size of the installed view), epoch_counter
//	durations: stabilization (a root's view change, report to commit),
//	           flush (view-synchronous multicast's flush)
type Metrics interface {
	Count(name string, delta int64)
	Gauge(name string, value float64)
	Duration(name string, d time.Duration)
}
