package vsync

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of package vsync.
var (
	// ErrConfig reports an invalid Config field.
	ErrConfig = errors.New("vsync: invalid config")
	// ErrQueueFull is the reason of a [Refused] multicast: Config.MaxQueued
	// messages already wait for the flow-control window.
	ErrQueueFull = errors.New("vsync: send queue full")
	// ErrTooLarge is the reason of a [Refused] multicast whose payload is
	// longer than Config.MaxPayload.
	ErrTooLarge = errors.New("vsync: payload too large")
	// ErrMessage is wrapped by the decoding errors of messages whose fields
	// are inconsistent.
	ErrMessage = errors.New("vsync: malformed message")
)

// Config configures a [Layer]. Every field may differ between nodes.
type Config struct {
	// Window is the flow-control limit, in messages: a node sends its next
	// multicast only while fewer than Window of its own messages of the
	// current view are unstable (sent but not yet reported stable by the
	// stability layer). Further multicasts wait in a queue. Since every
	// receiver frees a message once it is stable and delivered, a healthy
	// group buffers at most about Window messages per sender at each node.
	Window int
	// MaxQueued is the number of multicasts that may wait for the window
	// (or for a view change to end); one more is refused ([Refused] with
	// [ErrQueueFull]).
	MaxQueued int
	// MaxPayload is the largest payload accepted, in bytes.
	MaxPayload int
	// Retransmit is the period of the retransmission timer, and the
	// minimum time between two negative acknowledgements for one sender's
	// stream. Each period a sender whose own unstable messages made no
	// progress sends a digest (how many it has sent); a receiver that sees
	// a gap, or a digest beyond what it holds, asks for the missing
	// messages (NACK). During a flush the same timer resends the flush
	// messages that have not been answered.
	Retransmit time.Duration
	// MaxResend caps the messages sent in answer to one NACK.
	MaxResend int
}

// DefaultConfig returns a configuration for a group on a LAN: a window of
// 1,024 messages per sender, 4,096 queued multicasts, payloads up to
// 1 MiB, retransmission every 50 ms, at most 256 messages per NACK.
func DefaultConfig() Config {
	return Config{Window: 1024, MaxQueued: 4096, MaxPayload: 1 << 20, Retransmit: 50 * time.Millisecond, MaxResend: 256}
}

// SimConfig is DefaultConfig with a window of 64 messages and
// retransmission every 20 ms: small enough that simulated runs exercise
// flow control and retransmission.
func SimConfig() Config {
	c := DefaultConfig()
	c.Window = 64
	c.Retransmit = 20 * time.Millisecond
	return c
}

// Validate reports the first invalid field as an error wrapping
// [ErrConfig].
func (c Config) Validate() error {
	switch {
	case c.Window < 1:
		return fmt.Errorf("%w: Window %d, want ≥ 1", ErrConfig, c.Window)
	case c.MaxQueued < 0:
		return fmt.Errorf("%w: MaxQueued %d is negative", ErrConfig, c.MaxQueued)
	case c.MaxPayload < 0:
		return fmt.Errorf("%w: MaxPayload %d is negative", ErrConfig, c.MaxPayload)
	case c.Retransmit <= 0:
		return fmt.Errorf("%w: Retransmit %v must be positive", ErrConfig, c.Retransmit)
	case c.MaxResend < 1:
		return fmt.Errorf("%w: MaxResend %d, want ≥ 1", ErrConfig, c.MaxResend)
	}
	return nil
}
