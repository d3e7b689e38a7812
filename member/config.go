package member

import (
	"errors"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

// ErrConfig is wrapped by every error [Config.Validate] returns.
var ErrConfig = errors.New("member: invalid config")

// PartitionPolicy chooses what a group of nodes cut off from the others does.
type PartitionPolicy uint8

const (
	// PartitionPaper is the behaviour of the paper (§3.3): a link failure is
	// handled like the failure of the unreachable nodes, so every side of a
	// partition reorganizes with its own root and installs its own views.
	// When the partition heals, the side whose view has the lower epoch
	// merges into the other (see the package documentation).
	PartitionPaper PartitionPolicy = iota
	// PartitionMajority lets a root install a view only if that view keeps
	// a strict majority of the members of the view it replaces. A side
	// without such a majority stops installing views, every node of it
	// emits [Minority], and it waits until the partition heals (then it
	// merges into the majority's view).
	PartitionMajority
)

func (p PartitionPolicy) String() string {
	switch p {
	case PartitionPaper:
		return "paper"
	case PartitionMajority:
		return "majority"
	}
	return fmt.Sprintf("PartitionPolicy(%d)", uint8(p))
}

// Config is the configuration of one membership machine. Every node of a job
// must use the same Fanout and Partition; the durations may differ.
type Config struct {
	// Fanout is a, the number of children of an inner node of the radix
	// tree: a power of two between 2 and topo.MaxFanout. A larger fan-out
	// gives a lower tree (fewer stabilization phases when several levels
	// fail, §3.5) but busier inner nodes.
	Fanout int

	// AckTimeout is the time one tree level is given to acknowledge a
	// proposal, in virtual or real time. A node whose subtree is h levels
	// deep (a parent of leaves has h = 1) waits h×AckTimeout for the ACKs
	// of its children; a child that has not acknowledged by then is
	// reported to the root as failed (§3.4: "failure to receive a
	// FAILURE_ACK message will invoke another instance of the failure
	// detector"). It must exceed two network latencies plus the time the
	// root needs to restart the proposal, or live but slow nodes are
	// excluded (paper footnote 1).
	AckTimeout time.Duration

	// ReportRetry is how long a node that reported a failure (NODE_FAILURE
	// or ROOT_FAILURE) waits for the root's FAILURE_DET_ACK before it
	// reports again, to the root it believes in at that time.
	ReportRetry time.Duration

	// JoinRetry is how long a joining node (NEW_NODE, NODE_ALIVE) waits to
	// be admitted before it asks the next node of its list (§3.7).
	JoinRetry time.Duration

	// CommitTimeout is how long a node that acknowledged a proposal waits,
	// beyond the proposal's own acknowledgement time (AckTimeout × tree
	// height), for the commit before it asks the proposal's root for the
	// outcome (VIEW_QUERY). It matters only when messages are lost.
	CommitTimeout time.Duration

	// ProbeInterval is how often the root sends an EXCLUDED notice to the
	// nodes that left its view most recently and to the nodes of its list
	// that are not in its view, so that a node excluded by a partition (not
	// crashed) learns it and re-joins once the partition heals even if its
	// failure detector no longer watches it. At the same period the root
	// re-examines the failures and joins it has not acted on, and any node
	// that installed a view skipping views tells the members of its former
	// view that the new view left out, again (a few times). Zero disables
	// all three (the first such notice is still sent).
	ProbeInterval time.Duration

	// MaxProbes bounds how many departed nodes the root remembers and
	// probes, most recent first.
	MaxProbes int

	// NoticeInterval is the least time between two EXCLUDED notices sent
	// to the same node in answer to its messages (probes are not limited by
	// it).
	NoticeInterval time.Duration

	// Partition is the partition policy; see [PartitionPolicy].
	Partition PartitionPolicy
}

// DefaultConfig returns a configuration for a cluster LAN (latencies well
// below a millisecond): fan-out 4, 50 ms per tree level for
// acknowledgements, the paper's partition behaviour.
func DefaultConfig() Config {
	return Config{
		Fanout:         4,
		AckTimeout:     50 * time.Millisecond,
		ReportRetry:    500 * time.Millisecond,
		JoinRetry:      time.Second,
		CommitTimeout:  time.Second,
		ProbeInterval:  time.Second,
		MaxProbes:      64,
		NoticeInterval: 100 * time.Millisecond,
		Partition:      PartitionPaper,
	}
}

// WANConfig returns DefaultConfig with every duration scaled for
// wide-area latencies (tens of milliseconds).
func WANConfig() Config {
	c := DefaultConfig()
	c.AckTimeout = 500 * time.Millisecond
	c.ReportRetry = 3 * time.Second
	c.JoinRetry = 5 * time.Second
	c.CommitTimeout = 5 * time.Second
	c.ProbeInterval = 5 * time.Second
	c.NoticeInterval = time.Second
	return c
}

// Validate reports the first invalid field, wrapped around [ErrConfig].
func (c Config) Validate() error {
	if _, err := topo.NewRadix(1, c.Fanout); err != nil {
		return fmt.Errorf("%w: Fanout %d: %w", ErrConfig, c.Fanout, err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"AckTimeout", c.AckTimeout},
		{"ReportRetry", c.ReportRetry},
		{"JoinRetry", c.JoinRetry},
		{"CommitTimeout", c.CommitTimeout},
		{"NoticeInterval", c.NoticeInterval},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %v", ErrConfig, d.name, d.v)
		}
	}
	if c.ProbeInterval < 0 {
		return fmt.Errorf("%w: ProbeInterval must not be negative, got %v", ErrConfig, c.ProbeInterval)
	}
	if c.MaxProbes < 0 {
		return fmt.Errorf("%w: MaxProbes must not be negative, got %d", ErrConfig, c.MaxProbes)
	}
	if c.Partition > PartitionMajority {
		return fmt.Errorf("%w: unknown partition policy %d", ErrConfig, uint8(c.Partition))
	}
	return nil
}
