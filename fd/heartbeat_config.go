package fd

import (
	"errors"
	"fmt"
	"time"
)

// ErrHeartbeatConfig is wrapped by every error of [HeartbeatConfig.Validate]
// (and so of [NewHeartbeat] and [HeartbeatDetector.SetConfig]).
var ErrHeartbeatConfig = errors.New("fd: invalid heartbeat config")

// HeartbeatConfig holds the parameters of the Phoenix heartbeat detector
// (Horita, Taura, Chikayama §4; the names follow the paper's T_interval,
// T_timeout, T_insurance, T_broken and k). Every process may use its own
// values (§4.2.1) and change them while running
// ([HeartbeatDetector.SetConfig], the paper's ph_set_parameter, §5.1): a
// heartbeat announces the interval to the next one, so a monitor never
// assumes the sender's settings. Only Timeout and Broken are local: they
// decide how long this process waits before it suspects and before it
// declares a failure.
//
// Start from [DefaultHeartbeatConfig] or a preset derived from it and change
// fields; check with Validate.
type HeartbeatConfig struct {
	// Monitors is k, the number of monitors: peers chosen at random among
	// the members to which this process sends a heartbeat every Interval
	// (§4.2.1). With fewer than k other live members, all of them are
	// monitors. Must be ≥ 1. Paper: 2.
	Monitors int

	// Interval is T_interval: the longest time between two messages this
	// process sends to each of its monitors. Any message counts (§4.2.3):
	// a heartbeat is sent only when Interval has passed since the last
	// message of any layer to that monitor. Each heartbeat announces it,
	// and a monitor expects the next message within Interval + its own
	// Timeout. Must be > 0. Paper: 5 s.
	Interval time.Duration

	// Timeout is T_timeout: the grace this process adds to the interval a
	// peer announced before it suspects the peer. A monitor therefore
	// suspects a process whose last message arrived more than
	// Interval + Timeout ago (§4.2.1). It also bounds how long a ping sent
	// on a [core.PeerHint] waits for any answer. With Timeout ≤ Interval
	// (the paper's values) one lost heartbeat is enough for a suspicion,
	// which costs a broadcast and its refutation (but no failure, thanks
	// to Broken); Timeout > Interval tolerates one loss (the WAN preset).
	// With LocalHealthMax = H > 0 the grace stretches up to (1 + H)·Timeout
	// when this process runs late or the peer's messages arrive
	// irregularly (see LocalHealthMax), so the worst case is
	// Interval + (1 + H)·Timeout. Must be > 0. Paper: 5 s.
	Timeout time.Duration

	// Insurance is T_insurance: the longest time between two messages this
	// process sends on every other connection, that is to every connected
	// peer that is not one of its monitors (§4.2.2). It is meant to be
	// much larger than Interval: insurance exists so that a process whose
	// k monitors die with it is still detected, within Insurance + Timeout,
	// by the peers it is connected to. Must be ≥ Interval. Paper: 200 s
	// (100 s in the message count experiment, §6.2).
	Insurance time.Duration

	// Broken is T_broken: how long a peer stays suspected (unreachable,
	// with no message from it) before this process declares it failed
	// (§4.3). A suspicion that is refuted within Broken (the peer, or a
	// message from it, reaches this process) never becomes a failure.
	// Must be ≥ 0; 0 declares a failure as soon as it is suspected.
	// A process that runs late waits Broken·(1 + score), at most
	// (1 + LocalHealthMax)·Broken. Paper: 5 s.
	Broken time.Duration

	// FullMeshMax is the largest member count for which every other member
	// is a connection, so that insurance heartbeats reach all of them, as
	// in the paper's experiments where every process of the job had a
	// connection to every other (Fig. 2: 63 insurance heartbeats per
	// process with 64 processes). Larger jobs keep insurance on the
	// connections the process really has (see [HeartbeatDetector]): its
	// monitors, the processes that chose it as a monitor, its RingNeighbors
	// and every peer it exchanged any message with. Full mesh costs
	// (n−1−k)/Insurance messages per process per second against
	// k/Interval for heartbeats, so the default keeps it for jobs where
	// insurance stays below heartbeat traffic. 0 never uses full mesh.
	// Must be ≥ 0. Default: 64.
	FullMeshMax int

	// RingNeighbors is the number of members on each side of this process
	// in the member list (successors and predecessors, wrapping around)
	// that are always connections. They guarantee that every process has
	// insurance watchers even if it talks to nobody and its monitors die
	// with it. Must be ≥ 0. Default: 1.
	RingNeighbors int

	// NoticeFanout is the number of peers a suspicion notice is forwarded
	// to by each process: the members at distances 1, 2, 4, …,
	// 2^(NoticeFanout−1) after it in the member list, so that a notice
	// reaches every live member in at most ⌈log2 n⌉ hops without
	// failures, with many disjoint paths. 0 means ⌈log2 n⌉ (each process
	// forwards to log2 n peers, n·log2 n messages per notice). Must be
	// between 0 and 32.
	NoticeFanout int

	// LocalHealthMax is the ceiling of the local health score (Lifeguard's
	// awareness multiplier, see [HealthStats]): a process that finds its
	// own timers firing more than LateTolerance late does not suspect or
	// declare anyone failed on the strength of silence that began before
	// it caught up, raises its score by one, and multiplies T_timeout and
	// T_broken by 1 + score; the score decays by one per T_interval on
	// time. The same ceiling caps the timeout a peer gets for its measured
	// irregularity (twice the largest recent excess of its inter-arrival
	// gaps over the interval it announced, when that exceeds T_timeout).
	// A process also waits, after a peer's last message and after a
	// suspicion began, twice the longest stall it saw lately more: its
	// own lateness, or how long a suspicion lasted before the suspect
	// refuted it (or, declared failed, was heard again), at most
	// (1 + LocalHealthMax)·(T_timeout + T_broken) (a decayed maximum,
	// [HealthStats.Lateness]); on an overloaded host its peers
	// stall that long. So no accusation waits more than
	// (1 + LocalHealthMax)·T_timeout, or (1 + LocalHealthMax)·T_broken,
	// plus that margin, beyond its base; a group that runs on time keeps
	// the first bound.
	// 0 turns all of this off (the paper's fixed timeouts). Must be
	// between 0 and 64. Default: 3.
	LocalHealthMax int

	// LateTolerance is how late a timer may fire, after its deadline,
	// and still count as on time. 0 means T_timeout/2. Must be ≥ 0.
	LateTolerance time.Duration

	// IndirectProbes is k of the indirect probe: before a suspicion of
	// its own becomes a failure, this process asks that many other members,
	// drawn at random, to reach the suspect on its behalf (SWIM's
	// ping-req; Phoenix's "unreachable for a while" is not "failed"). A
	// member that hears from the suspect answers, and the answer refutes
	// the suspicion: the suspect stays a member and is counted unreachable
	// ([HeartbeatDetector.Unreachable]). 0 turns indirect probes off (the
	// paper's detector). Must be between 0 and 16. Default: 3.
	IndirectProbes int

	// ProbeTimeout is how long an indirect probe waits for a helper's
	// answer: a suspicion of its own is declared a failure no earlier than
	// ProbeTimeout after it began. The probe runs while the suspicion
	// waits T_broken for a refutation, so a ProbeTimeout no longer than
	// T_broken delays no failure. 0 means T_broken, or T_timeout when
	// T_broken is 0. Must be ≥ 0.
	ProbeTimeout time.Duration

	// SettleIntervals is, in T_interval, how long after this process
	// began to watch its group (its first members) its verdicts go by
	// the stalls seen only: a suspicion that begins sooner waits 2·(1 + LocalHealthMax)·
	// (T_timeout + T_broken) more before it becomes a failure, the margin
	// of the longest stall the memory can hold, unless it comes from a
	// refused connection. The processes of a job start together, and on
	// a host with more of them than cores some are still starved for a
	// second when the first view makes the detectors watch each other,
	// before any stall has been seen that the memory could have learnt.
	// A process that joins a running group (a respawned one too) begins
	// to watch when its first view arrives, and settles from then; a
	// newcomer starved longer than that, its inbox unread while it
	// catches up, is covered by the input-gap hold instead (see the
	// package documentation, "Under load"). The members' suspicions of
	// a newcomer (a member that was not in a detector's last view, or a
	// renewed one) settle the same way for 2·SettleIntervals T_interval
	// after the detector installed the view with it: the newcomer's
	// start-up work (the state it takes over, its catching up) begins at
	// its join. A newcomer that crashes then is declared within the
	// same worst case as a crash in the group's first second. A member
	// watched anew because a view change moved the monitors or the ring
	// is no newcomer and gets no settling.
	// 0 (the default, and with LocalHealthMax = 0) adds nothing. Must be
	// ≥ 0. AggressiveHeartbeatConfig, a job's timing on one machine: 10.
	SettleIntervals int

	// SharedClock, if set, tells the time of a clock that the job's
	// processes share (a runtime gives the wall clock; only its value
	// modulo Interval matters). It is read once, at Start. Heartbeats
	// then fall due where that clock is a multiple of Interval, in every
	// process alike (never later than owed: the first one comes early),
	// so that the processes of a host send theirs, and receive each
	// other's, in one wake-up per Interval rather than one per message.
	// A link that carries other traffic is not aligned (its traffic
	// stands in for heartbeats as usual). Nil (the default, and in the
	// simulator): each process picks a random point of its first
	// interval.
	SharedClock Clock
}

// A Clock tells the time (HeartbeatConfig.SharedClock).
type Clock interface {
	Now() time.Duration
}

// probeTimeout is ProbeTimeout with its default applied.
func (c HeartbeatConfig) probeTimeout() time.Duration {
	switch {
	case c.ProbeTimeout > 0:
		return c.ProbeTimeout
	case c.Broken > 0:
		return c.Broken
	}
	return c.Timeout
}

// lateTolerance is LateTolerance with its default applied.
func (c HeartbeatConfig) lateTolerance() time.Duration {
	if c.LateTolerance > 0 {
		return c.LateTolerance
	}
	return c.Timeout / 2
}

// DefaultHeartbeatConfig returns the paper's parameters (Table 1, §6.1):
// k = 2, T_interval = 5 s, T_timeout = 5 s, T_insurance = 200 s,
// T_broken = 5 s; full mesh up to 64 members, one ring neighbour on each
// side, notices forwarded to ⌈log2 n⌉ peers; and, not in the paper,
// lateness awareness with a local health score of at most 3 and indirect
// probes through 3 members for up to T_broken.
func DefaultHeartbeatConfig() HeartbeatConfig {
	return HeartbeatConfig{
		Monitors:       2,
		Interval:       5 * time.Second,
		Timeout:        5 * time.Second,
		Insurance:      200 * time.Second,
		Broken:         5 * time.Second,
		FullMeshMax:    64,
		RingNeighbors:  1,
		NoticeFanout:   0,
		LocalHealthMax: 3,
		IndirectProbes: 3,
	}
}

// LANHeartbeatConfig is the default tuned for one cluster network, where
// latency is well under a millisecond and loss rare: every period is 5
// times shorter (T_interval = T_timeout = 1 s, T_insurance = 40 s,
// T_broken = 1 s), so a crash is known everywhere in about 3 s.
func LANHeartbeatConfig() HeartbeatConfig {
	c := DefaultHeartbeatConfig()
	c.Interval /= 5
	c.Timeout /= 5
	c.Insurance /= 5
	c.Broken /= 5
	return c
}

// WANHeartbeatConfig is the default for a grid across wide-area links
// (the paper's target, §3.1): T_timeout and T_broken are doubled and
// tripled (10 s, 15 s) to absorb delay spikes, lost heartbeats and routes
// that come back, at the price of slower detection; the message rate is
// unchanged.
func WANHeartbeatConfig() HeartbeatConfig {
	c := DefaultHeartbeatConfig()
	c.Timeout *= 2
	c.Broken *= 3
	return c
}

// SimHeartbeatConfig is the default with T_insurance = 100 s, the setting
// of the paper's message-count experiment (§6.2, Fig. 2), which the
// simulations reproduce.
func SimHeartbeatConfig() HeartbeatConfig {
	c := DefaultHeartbeatConfig()
	c.Insurance = 100 * time.Second
	return c
}

// AggressiveHeartbeatConfig detects a crash everywhere in about 300 ms on a
// fast network: T_interval = T_timeout = 100 ms, T_broken = 100 ms, and
// T_insurance = 4 s (the paper's 40:1 ratio to T_interval). It sends 50
// times more heartbeats than the default and suspects a process whose
// messages are delayed by more than 100 ms (a long GC pause is enough).
func AggressiveHeartbeatConfig() HeartbeatConfig {
	c := DefaultHeartbeatConfig()
	c.Interval = 100 * time.Millisecond
	c.Timeout = 100 * time.Millisecond
	c.Broken = 100 * time.Millisecond
	c.Insurance = 40 * c.Interval
	c.SettleIntervals = 10
	return c
}

// Validate reports the first field out of its domain, as an error wrapping
// [ErrHeartbeatConfig].
func (c HeartbeatConfig) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrHeartbeatConfig, field, v, want)
	}
	switch {
	case c.Monitors < 1:
		return bad("Monitors", c.Monitors, "≥ 1")
	case c.Interval <= 0:
		return bad("Interval", c.Interval, "> 0")
	case c.Timeout <= 0:
		return bad("Timeout", c.Timeout, "> 0")
	case c.Insurance < c.Interval:
		return bad("Insurance", c.Insurance, fmt.Sprintf("≥ Interval (%v)", c.Interval))
	case c.Broken < 0:
		return bad("Broken", c.Broken, "≥ 0")
	case c.FullMeshMax < 0:
		return bad("FullMeshMax", c.FullMeshMax, "≥ 0")
	case c.RingNeighbors < 0:
		return bad("RingNeighbors", c.RingNeighbors, "≥ 0")
	case c.NoticeFanout < 0 || c.NoticeFanout > 32:
		return bad("NoticeFanout", c.NoticeFanout, "between 0 and 32")
	case c.LocalHealthMax < 0 || c.LocalHealthMax > 64:
		return bad("LocalHealthMax", c.LocalHealthMax, "between 0 and 64")
	case c.LateTolerance < 0:
		return bad("LateTolerance", c.LateTolerance, "≥ 0")
	case c.IndirectProbes < 0 || c.IndirectProbes > 16:
		return bad("IndirectProbes", c.IndirectProbes, "between 0 and 16")
	case c.ProbeTimeout < 0:
		return bad("ProbeTimeout", c.ProbeTimeout, "≥ 0")
	case c.SettleIntervals < 0:
		return bad("SettleIntervals", c.SettleIntervals, "≥ 0")
	}
	return nil
}
