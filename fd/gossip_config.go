package fd

import (
	"errors"
	"fmt"
	"time"

	"github.com/cohort-mp/cohort/topo"
)

// ErrGossipConfig reports an invalid [GossipConfig]; Validate wraps it with
// the offending field.
var ErrGossipConfig = errors.New("fd: invalid gossip config")

// GossipConfig configures the gossip failure detector of P2P-MPI §5
// ([Gossip]). Build it from [DefaultGossipConfig] or one of the presets
// derived from it, change fields, and check it with Validate.
type GossipConfig struct {
	// Schedule chooses the node a table is sent to in each round (P2P-MPI
	// §5.1–5.2): topo.Random, topo.RoundRobin, topo.BinaryRoundRobin or
	// topo.DoubleBinaryRoundRobin (the default, §5.2).
	Schedule topo.Schedule

	// GossipInterval is T_gossip, the time between two consecutive gossip
	// messages of a node (one round). Each node increments its own heartbeat
	// and sends its whole table once per interval. Paper default: 0.5 s
	// (§5.3).
	GossipInterval time.Duration

	// Cleanup is T_cleanup, how long an entry's heartbeat must stay
	// unchanged before the node is suspected. Zero (the default) derives it
	// from the current member count n on every view change, see
	// [GossipConfig.CleanupTime]:
	//
	//	BRR:    2⌈log2 n⌉·T_gossip  (= T_cleanup^min + ⌈log2 n⌉·T_gossip)
	//	DBRR:   3⌈log2 n⌉·T_gossip  (P2P-MPI §5.2)
	//	RR:     2⌈(√(1+8n)−1)/2⌉·T_gossip  (= 2·T_cleanup^min)
	//	Random: 3⌈log2 n⌉·T_gossip
	//
	// A non-zero value fixes T_cleanup whatever n is. The check runs once
	// per round, so the effective cleanup is ⌈Cleanup/GossipInterval⌉
	// rounds; see the package documentation for the resulting detection
	// bound.
	Cleanup time.Duration

	// PingTimeout is how long the consensus phase waits for the pong of one
	// ping to a suspect before it tries again or gives up. It must exceed the
	// round-trip time between any two nodes, or live nodes are declared
	// failed. Default: 0.5 s.
	PingTimeout time.Duration

	// PingAttempts is how many pings (each waiting PingTimeout) a suspect
	// gets before it is declared failed; T_consensus =
	// PingAttempts·PingTimeout. More than one attempt tolerates the loss of
	// a ping or a pong. Default: 2.
	PingAttempts int

	// LocalHealthMax is the ceiling of the local health score (Lifeguard's
	// awareness multiplier, see [HealthStats]): a node whose own round
	// timer fires more than LateTolerance late (or that handles a table
	// while its round is that overdue) restarts every entry's T_cleanup
	// from that round, raises its score by one and multiplies T_cleanup
	// and PingTimeout by 1 + score; the score decays by one per round on
	// time. Each of its suspicions that the suspect disproves (a pong, or
	// its heartbeat increasing) adds ⌈c/4⌉ rounds to an adaptive margin on
	// T_cleanup, which decays by one round per c rounds without such a
	// false alarm. These stay within (1 + LocalHealthMax)·c rounds and
	// (1 + LocalHealthMax)·PingTimeout per ping. Beyond them, the
	// detector remembers the longest stall M it saw lately (its own
	// lateness, or how much longer than the others a suspect was silent
	// before it proved alive; at most [GossipConfig.StallCap]): it
	// suspects ⌈2M/T_gossip⌉ rounds later and declares 2M later, and a
	// node that was starved itself takes a gap in all its inputs for its
	// own isolation once (see [GossipStallStats]). 0 turns all of it off
	// (the paper's fixed T_cleanup). Must be between 0 and 64. Default: 3.
	LocalHealthMax int

	// LateTolerance is how late the round timer may fire and still count
	// as on time. 0 means GossipInterval/2. Must be ≥ 0.
	LateTolerance time.Duration

	// IndirectProbes is k of the indirect probe: when the consensus phase
	// starts, the detector also asks that many other members, drawn at
	// random, to ping the suspect on its behalf (SWIM's ping-req), since
	// an unanswered ping may only mean that the link is down. A helper
	// that gets the suspect's pong answers ([GossipProbeAck]), and the
	// answer refutes the suspicion as a pong would: the suspect gets a
	// fresh T_cleanup and is counted unreachable
	// ([Gossip.Unreachable]). 0 turns indirect probes off (the paper's
	// detector). Must be between 0 and 16. Default: 3.
	IndirectProbes int

	// ProbeTimeout is how long an indirect probe waits for a helper's
	// answer, counted from the start of the consensus phase: the failure
	// is declared when the pings are exhausted and the probe has had its
	// time, so a ProbeTimeout no longer than T_consensus delays no
	// failure. 0 means T_consensus = PingAttempts·PingTimeout. Must be
	// ≥ 0.
	ProbeTimeout time.Duration

	// IgnoreHints makes the detector ignore transport hints
	// (core.PeerHint): it starts no probe when a connection to a member
	// drops or is refused, and a crash is found by T_cleanup alone. For
	// a detector whose verdicts are postponed beyond any measurement
	// (package group's quiet detector): there a probe cannot lead to a
	// verdict, and its ping only makes the transport dial the crashed node
	// again and again, beside the view change being measured. Default
	// false.
	IgnoreHints bool
}

// lateTolerance is LateTolerance with its default applied.
// probeTimeout is ProbeTimeout with its default applied.
func (c GossipConfig) probeTimeout() time.Duration {
	if c.ProbeTimeout > 0 {
		return c.ProbeTimeout
	}
	return time.Duration(c.PingAttempts) * c.PingTimeout
}

func (c GossipConfig) lateTolerance() time.Duration {
	if c.LateTolerance > 0 {
		return c.LateTolerance
	}
	return c.GossipInterval / 2
}

// DefaultGossipConfig returns the paper's settings (P2P-MPI §5.2–5.3):
// DBRR, T_gossip = 0.5 s, T_cleanup = 3⌈log2 n⌉·T_gossip derived from the
// current n, and a consensus phase of 2 pings of 0.5 s each; and, not in
// the paper, lateness awareness with a local health score of at most 3 and
// indirect probes through 3 members during the consensus phase.
func DefaultGossipConfig() GossipConfig {
	return GossipConfig{
		Schedule:       topo.DoubleBinaryRoundRobin,
		GossipInterval: 500 * time.Millisecond,
		PingTimeout:    500 * time.Millisecond,
		PingAttempts:   2,
		LocalHealthMax: 3,
		IndirectProbes: 3,
	}
}

// LANGossipConfig is the default tuned for a local network, where round
// trips are well under a millisecond: gossip every 100 ms and wait 100 ms
// for a pong (detection about 5× faster than the default, 5× the traffic).
func LANGossipConfig() GossipConfig {
	c := DefaultGossipConfig()
	c.GossipInterval = 100 * time.Millisecond
	c.PingTimeout = 100 * time.Millisecond
	return c
}

// WANGossipConfig is the default tuned for wide-area links (round trips up
// to several hundred milliseconds, occasional loss): gossip every second,
// wait a second for a pong, three attempts.
func WANGossipConfig() GossipConfig {
	c := DefaultGossipConfig()
	c.GossipInterval = time.Second
	c.PingTimeout = time.Second
	c.PingAttempts = 3
	return c
}

// SimGossipConfig is the default for the simulator: the paper's timing (so
// simulated detection times compare with §5.3) and a single ping, since the
// simulated network loses nothing unless told to.
func SimGossipConfig() GossipConfig {
	c := DefaultGossipConfig()
	c.PingAttempts = 1
	return c
}

// Validate reports the first invalid field, wrapping [ErrGossipConfig].
func (c GossipConfig) Validate() error {
	switch {
	case !c.Schedule.Valid():
		return fmt.Errorf("%w: Schedule %v is not one of random, rr, brr, dbrr", ErrGossipConfig, c.Schedule)
	case c.GossipInterval <= 0:
		return fmt.Errorf("%w: GossipInterval %v must be positive", ErrGossipConfig, c.GossipInterval)
	case c.Cleanup < 0:
		return fmt.Errorf("%w: Cleanup %v is negative (0 derives it from n)", ErrGossipConfig, c.Cleanup)
	case c.Cleanup > 0 && c.Cleanup < c.GossipInterval:
		return fmt.Errorf("%w: Cleanup %v is shorter than one GossipInterval %v", ErrGossipConfig, c.Cleanup, c.GossipInterval)
	case c.Cleanup > 0 && c.Cleanup/c.GossipInterval > maxCleanupTicks:
		return fmt.Errorf("%w: Cleanup %v is more than %d GossipIntervals", ErrGossipConfig, c.Cleanup, maxCleanupTicks)
	case c.PingTimeout <= 0:
		return fmt.Errorf("%w: PingTimeout %v must be positive", ErrGossipConfig, c.PingTimeout)
	case c.PingAttempts < 1 || c.PingAttempts > 255:
		return fmt.Errorf("%w: PingAttempts %d must be in 1..255", ErrGossipConfig, c.PingAttempts)
	case c.LocalHealthMax < 0 || c.LocalHealthMax > 64:
		return fmt.Errorf("%w: LocalHealthMax %d must be in 0..64", ErrGossipConfig, c.LocalHealthMax)
	case c.LateTolerance < 0:
		return fmt.Errorf("%w: LateTolerance %v is negative", ErrGossipConfig, c.LateTolerance)
	case c.IndirectProbes < 0 || c.IndirectProbes > 16:
		return fmt.Errorf("%w: IndirectProbes %d must be in 0..16", ErrGossipConfig, c.IndirectProbes)
	case c.ProbeTimeout < 0:
		return fmt.Errorf("%w: ProbeTimeout %v is negative", ErrGossipConfig, c.ProbeTimeout)
	}
	return nil
}

// maxCleanupTicks bounds T_cleanup in rounds so that tick arithmetic on
// uint32 counters never wraps within one cleanup period.
const maxCleanupTicks = 1 << 30

// CleanupRounds returns T_cleanup in gossip rounds for n members: the
// formula of the Cleanup field when Cleanup is zero, else
// ⌈Cleanup/GossipInterval⌉. It is 0 when n ≤ 1 (nobody to watch). The
// detector suspects an entry at the first round that starts more than
// CleanupRounds rounds after the round in which the entry last increased.
func (c GossipConfig) CleanupRounds(n int) int {
	if n <= 1 {
		return 0
	}
	if c.Cleanup > 0 {
		return int((c.Cleanup + c.GossipInterval - 1) / c.GossipInterval)
	}
	l := topo.CeilLog2(n)
	switch c.Schedule {
	case topo.BinaryRoundRobin:
		return 2 * l
	case topo.RoundRobin:
		m, err := c.Schedule.MinCleanupRounds(n)
		if err != nil {
			return 3 * l // n out of topo's range; unreachable for valid views
		}
		return 2 * m
	default: // DBRR, Random
		return 3 * l
	}
}

// CleanupTime returns T_cleanup for n members: CleanupRounds(n)·GossipInterval.
// It is what a node on time applies; a node that ran late, or whose
// suspicions were disproved, applies up to (1 + LocalHealthMax) times it,
// plus twice the stall it remembers (see [GossipConfig.LocalHealthMax]
// and [LoadedDetectionBound]).
func (c GossipConfig) CleanupTime(n int) time.Duration {
	return time.Duration(c.CleanupRounds(n)) * c.GossipInterval
}

// ConsensusTime returns T_consensus, the longest the consensus phase waits
// before declaring a silent suspect failed: PingAttempts·PingTimeout.
func (c GossipConfig) ConsensusTime() time.Duration {
	return time.Duration(c.PingAttempts) * c.PingTimeout
}

// VerdictTime returns how long after a suspicion the failure is declared
// when nothing answers: T_consensus, or the indirect probe's ProbeTimeout
// if that is longer (the probe starts with the consensus phase, so it
// costs nothing while ProbeTimeout ≤ T_consensus, the default).
func (c GossipConfig) VerdictTime() time.Duration {
	if c.IndirectProbes == 0 {
		return c.ConsensusTime()
	}
	return max(c.ConsensusTime(), c.probeTimeout())
}
