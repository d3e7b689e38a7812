package replica

import (
	"errors"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Sentinel errors of package replica.
var (
	// ErrConfig reports an invalid Config field.
	ErrConfig = errors.New("replica: invalid config")
	// ErrMessage is wrapped by the decoding errors of messages whose fields
	// are inconsistent.
	ErrMessage = errors.New("replica: malformed message")
)

// Layout maps a job of Ranks logical ranks, each run as Replicas
// replicas, onto physical process ids. Physical ids are replica-major, the
// order package p2p/place uses: p = replica·Ranks + rank, so replica 0 of
// every rank comes first (ids 0…Ranks−1), then replica 1, and so on. The
// membership service runs over the physical ids 0…Ranks·Replicas−1.
type Layout struct {
	Ranks    int // logical ranks N, ≥ 1
	Replicas int // replication degree R, ≥ 1
}

// Size is the number of physical processes, Ranks·Replicas.
func (l Layout) Size() int { return l.Ranks * l.Replicas }

// Phys returns the physical id of replica j of logical rank r.
func (l Layout) Phys(r, j int) core.NodeID { return core.NodeID(j*l.Ranks + r) }

// Rank returns the logical rank that physical process p runs.
func (l Layout) Rank(p core.NodeID) int { return int(p) % l.Ranks }

// Replica returns which replica of its rank physical process p is.
func (l Layout) Replica(p core.NodeID) int { return int(p) / l.Ranks }

// Contains reports whether p is a physical id of the layout.
func (l Layout) Contains(p core.NodeID) bool { return p != core.None && int64(p) < int64(l.Size()) }

// Validate reports an empty layout as an error wrapping [ErrConfig].
func (l Layout) Validate() error {
	if l.Ranks < 1 || l.Replicas < 1 || l.Ranks > 1<<24 || l.Replicas > 64 {
		return fmt.Errorf("%w: layout %d ranks × %d replicas (want 1–2^24 ranks, 1–64 replicas)", ErrConfig, l.Ranks, l.Replicas)
	}
	return nil
}

// Config configures a [Layer]. Layout must be the same at every process of
// a job; the acknowledgement settings may differ.
type Config struct {
	Layout Layout
	// AckEvery and AckDelay bound the batching of acknowledgements: a
	// receiving replica acknowledges a channel (cumulatively, to the
	// sender's master) at the latest after AckEvery more deliveries on it,
	// or AckDelay after the first delivery not yet acknowledged, whichever
	// comes first. So a commit waits at most AckDelay plus a round trip
	// after the last acknowledgement it needs was delivered.
	AckEvery int
	AckDelay time.Duration
	// Retransmit is how long the master waits for a destination replica
	// to acknowledge more before it sends it again what it lacks (a
	// message dropped by a full queue, or lost with a broken connection);
	// 0 turns retransmission off.
	Retransmit time.Duration
	// MaxBackup and MaxBackupBytes bound the backup table: the sends it
	// holds, and the bytes of their payloads. Once it holds either, the
	// layer says so ([Layer.BackupFull], the [BackupFull] event) and the
	// application hands it no more sends until the [BackupRoom] event;
	// the layer itself still keeps every send it is given (dropping one
	// would lose it for good if this process became master). Commits free
	// the table, so the bound holds the program back only while a
	// destination replica that the view still lists does not acknowledge
	// (a slow or wedged process, or one that withholds its
	// acknowledgements).
	MaxBackup      int
	MaxBackupBytes int
	// KeepReleased makes the layer keep the payloads of the sends it is
	// done with — committed to another rank, or never kept (already
	// committed, or to a failed rank) — for the caller to take with
	// [Layer.TakeReleased] and reuse: nothing in the layer refers to them
	// any more. A caller that sets it takes them after every call.
	KeepReleased bool
}

// DefaultConfig returns a configuration for layout: acknowledgements after
// 32 deliveries or 2 ms, retransmission after 200 ms without progress, a
// backup table of at most 4096 sends and 64 MiB.
func DefaultConfig(layout Layout) Config {
	return Config{Layout: layout, AckEvery: 32, AckDelay: 2 * time.Millisecond, Retransmit: 200 * time.Millisecond,
		MaxBackup: 4096, MaxBackupBytes: 64 << 20}
}

// Validate reports the first invalid field as an error wrapping
// [ErrConfig].
func (c Config) Validate() error {
	if err := c.Layout.Validate(); err != nil {
		return err
	}
	switch {
	case c.AckEvery < 1:
		return fmt.Errorf("%w: AckEvery %d, want ≥ 1", ErrConfig, c.AckEvery)
	case c.AckDelay <= 0:
		return fmt.Errorf("%w: AckDelay %v must be positive", ErrConfig, c.AckDelay)
	case c.Retransmit < 0:
		return fmt.Errorf("%w: Retransmit %v must not be negative", ErrConfig, c.Retransmit)
	case c.MaxBackup < 1 || c.MaxBackupBytes < 1:
		return fmt.Errorf("%w: MaxBackup %d and MaxBackupBytes %d must be positive", ErrConfig, c.MaxBackup, c.MaxBackupBytes)
	}
	return nil
}
