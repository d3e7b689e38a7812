package fd

import (
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// HeartbeatDetector is the Phoenix heartbeat failure detector (Horita,
// Taura, Chikayama §4). It is a [core.Machine] that owns [core.ProtoFD] and
// a [core.TrafficObserver]: put it in a node's [core.Stack] (usually as the
// lowest layer) so that it sees every message of every layer, because every
// message counts as a heartbeat (§4.2.3).
//
// What each process does:
//
//   - It picks k = Monitors monitors at random among the members (from
//     Env.Rand) and makes sure each receives a message from it at least
//     every Interval: a [HeartbeatMsg] announcing Interval, unless some
//     other message (of any layer) already went to that monitor within
//     Interval (§4.2.1, §4.2.3). Heartbeats owed to several monitors
//     within half an Interval go together, the later ones early, so
//     that a process wakes once per Interval for all of them. Other
//     traffic replaces heartbeats only once a heartbeat has told the
//     monitor the interval (a monitor waits for nothing it was not told
//     to expect), and a monitor still gets one heartbeat every Insurance
//     under traffic, in case that announcement was lost. A monitor that
//     leaves the member list or is suspected is replaced by a new random
//     one, which is told at once; the old one is told to expect only
//     insurance from now on.
//   - It sends insurance heartbeats, announcing Insurance, to every other
//     connection at least every Insurance (§4.2.2), again only when no
//     other message went there.
//   - For every peer that announced an interval, it suspects the peer
//     ([core.Suspected]) when nothing arrived from it for the announced
//     interval + Timeout. Any message from a suspected peer clears the
//     suspicion ([core.Unsuspected]); a peer still suspected after Broken
//     is declared failed ([core.Failed], once per failure, §4.3); a failed
//     peer heard from again is [core.Recovered].
//   - When its own timeout makes it suspect a peer, it broadcasts a
//     [HeartbeatNotice] so that every member suspects it too (see
//     Completeness).
//
// # Connections
//
// In Phoenix a connection is a direct link between two processes, opened
// when they first talk. Here the connections of a process are: its
// monitors, the processes that chose it as a monitor, its RingNeighbors on
// each side in the member list, every member it sent a message to or
// received a message from (any layer, except broadcast notices that merely
// pass through), and, in a job of at most FullMeshMax members, every member
// (the paper's setting, where all processes of the job were connected).
// "Every other connection" of §4.2.2 is therefore every connection that is
// not a monitor.
//
// A connection made by traffic closes when it falls idle, as an idle link
// would: when its insurance heartbeat falls due and no message of another
// layer went either way for T_insurance, and the peer is neither a
// monitor, nor a process that chose this one as its monitor, nor a ring
// neighbour (nor, in a full-mesh job, a member), the process sends it a
// heartbeat announcing nothing (which tells it to stop waiting) instead of
// insurance, and owes it nothing more until they talk again. Without this
// every peer a process ever talked to would get insurance for ever: a
// membership's tree changes with every view, so after n joins each node
// would have talked to nearly every other and send n−1 insurance
// heartbeats per T_insurance. Only the processes' own choices make connections: a
// monitor's heartbeat makes its sender one, an insurance heartbeat or a
// ping does not (the receiver watches the sender as told, but owes it
// nothing back; otherwise a connection closed on one side would be
// reopened by its own last heartbeat). Sending insurance to all n−1 peers would cost n²/T_insurance
// messages per second in total, which outgrows the heartbeats themselves
// (k·n/T_interval) beyond a few dozen processes (with the paper's values,
// above n ≈ 80); so a large job keeps insurance on the connections a
// process really has, which is what Phoenix did, since it only ever sent
// heartbeats over established connections.
//
// A receiver waits for a peer only after the peer announced an interval in
// a heartbeat (so a peer that does not consider the link a connection
// causes no false suspicion); application messages then refresh the
// deadline. Only what a process receives from a peer refreshes the peer's
// deadline: what it sends to the peer, whatever the layer, is no sign of
// the peer's life.
//
// # Completeness
//
// A process that crashes is suspected by each of its live monitors within
// T_interval + T_timeout (plus one message latency) of the crash. Phoenix
// then relies on its routing layer to tell everybody (§4.2: "it suffices
// that one process notices"): here the detecting monitor broadcasts a
// [HeartbeatNotice], which every process forwards once to the members at
// distances 1, 2, 4, … after it in the member list, so that every live
// member suspects the crashed process within ⌈log2 n⌉ further hops and
// declares it failed T_broken later (the monitors that timed out
// themselves, plus a quarter of the process's interval, or twice the
// link's measured jitter if longer, so that a heartbeat due at that moment
// is not out-raced), or up to (1 + LocalHealthMax)·
// T_broken later (the members that only heard the notice; see below). Each notice is acknowledged
// ([HeartbeatNoticeAck]) and retransmitted with back-off until it is, or
// until its recipient is declared failed or the notice is superseded: a
// lost message delays a member's knowledge, it cannot deprive it of it.
// The broadcast costs n·⌈log2 n⌉ notices and as many acknowledgements per
// failure (NoticeFanout trades that against speed and redundancy).
//
// With lateness awareness (LocalHealthMax = H > 0, the default) these
// bounds stretch only where something was slow: a monitor waits
// T_interval + T_timeout·(1 + score) for its own local health score
// (0 while its timers fire on time), or twice the largest recent excess of
// the crashed process's gaps over its announced interval if that is
// longer, never more than T_interval + (1 + H)·T_timeout; and T_broken
// becomes T_broken·(1 + score) ≤ (1 + H)·T_broken for a suspicion a
// monitor made itself, and (1 + H)·T_broken for one a process only heard
// of by notice, made from a peer's insurance alone, or made as a monitor
// of a peer whose link lost a heartbeat within the last 64 intervals (as
// in Lifeguard: the suspect's refutation crosses the suspect's own,
// possibly slow, links while the notice went around them; one lost
// insurance heartbeat is a silence of T_insurance, not of a few
// intervals; and on a link that loses messages a run of losses looks like
// a crash; the monitors of a clean link still declare first, and the
// membership needs one declaration). A monitor
// that is itself late (a timer more than LateTolerance past its deadline) counts
// the silence from the moment it caught up, and a timer late by any
// amount re-checks once, as late again, before it accuses. So every live
// process declares a crash within
//
//	T_interval + (1 + H)·(T_timeout + T_broken) + ⌈log2 n⌉ hops + latency
//
// of it, plus, for a process whose own loop stalled during that time,
// the stall: its clock restarts when the stall ends; and for a process
// that heard nothing from anyone meanwhile (every peer it watches
// silent at once: its own input gap), or for a crash that settles (in
// the SettleIntervals after the detector began to watch its group, or
// in twice that after the crashed process joined the view), a verdict
// held up to 2·(1 + H)·(T_timeout + T_broken) longer ("Under load" in
// the package documentation). With H = 0 every factor is 1 and the bound is the
// paper's. See [HealthStats].
//
// If all k monitors crash together with the process, its other connections
// (the processes that chose it as a monitor, its ring neighbours, its
// application peers; everyone in a small job) suspect it within
// T_insurance + T_timeout and broadcast the same way. So do its ring
// neighbours (everyone, in a full-mesh job) if it stops before its first
// heartbeat announced anything: they wait for its insurance from their
// own start, as if it had announced T_insurance. The same holds for a
// member that becomes a ring neighbour when a view changes, so that a
// process whose every connection died with it (a whole host of
// consecutive ranks) is waited for by the live ring neighbours of the
// next view, within T_insurance + T_timeout of it. A failure escapes
// detection only if every connection of the process fails at once.
//
// # Accuracy
//
// A suspicion is refuted the way Phoenix lets a reachable route come back
// (§4.3): the suspect itself receives the notice (the detecting process
// sends it directly), raises its incarnation and broadcasts an Alive
// notice, which clears the suspicion everywhere; if that happens within
// T_broken, nobody declares the failure. A suspicion of an older
// incarnation than the suspect's is refuted too, at the current one (not
// within T_broken of its last refutation): processes that saw the suspect
// leave the view and come back forgot its incarnation and would believe
// it. A process that hears from a
// suspect directly clears its own suspicion at once and sends it the
// notice. A restarted process learns the same way, from the first monitor
// it beats to, that it had been declared failed; its refutation makes
// every process report it [core.Recovered]. A failed connection gets a
// heartbeat and a ping every Interval (not every T_insurance), so that the
// two sides of a healed partition hear from each other within an interval
// and recover: a side that excluded this process from its view ignores
// its heartbeats and sends it none, but any process answers a ping.
//
// # Memory
//
// Per peer the detector keeps one record of about 160 bytes (times, flags,
// one timer) only for the peers above: O(k + connections) records, plus
// one for each peer a notice was received about (it remembers the newest
// notice, so that a late copy cannot revive a refuted suspicion). With
// 1,024 processes and the defaults that is 6 records per process on
// average. The member list itself is shared with the caller, never copied
// (the nodes of a simulation can all hold the same slice), and looked up
// in O(1) when member ids are dense and in order, in O(log n) when sorted.
//
// # Time
//
// All deadlines of a peer share one timer, re-armed lazily: traffic only
// moves timestamps, and the timer, when it fires early, re-arms itself.
// Notice retransmissions share one more timer. A HeartbeatDetector must
// not be used by two goroutines at once (see [core.Machine]).
type HeartbeatDetector struct {
	cfg     HeartbeatConfig
	env     core.Env
	self    core.NodeID
	members []core.NodeID // shared with the caller, read only
	leavers departing     // members that announced they leave: no verdict on them
	epoch   uint64
	pos     int // index of self in members, -1 if absent

	sortedKnown, sorted bool // whether members is sorted, computed on first need

	peers    []*hbPeer     // sorted by id
	peerIDs  []core.NodeID // peers[i].id, searched without touching the records
	monitors []core.NodeID
	inc      uint64 // this process's incarnation (refutations raise it)
	// refutedAt is when this process last broadcast a refutation (-1 never).
	refutedAt time.Duration

	started  bool
	selfSend bool // inside our own Env.Send: ObserveSend must ignore it

	// A message observed from a peer that is not (yet) a connection makes
	// it one unless the message turns out to be a notice passing through;
	// the decision waits for the next call into the detector.
	stashed bool
	stash   core.NodeID
	stashAt time.Duration

	// Indirect probes made on behalf of others (heartbeat_probe.go).
	helps []hbHelp

	// Notices sent and not yet acknowledged, retransmitted with back-off.
	pending    []hbPending
	retryTimer core.TimerID
	retryAt    time.Duration // the retransmission timer's deadline
	retryFires time.Duration // when it could fire first (see hbPeer.firesAt)

	// Local health (health.go): nextDue is a lower bound of the earliest
	// moment a pending timer could fire (-1: none), exact after
	// refreshDue.
	health  health
	nextDue time.Duration
	// stalls remembers the peers' stalls longer than health does
	// (heartbeat_health.go).
	stalls stallMemory
	// watchAt is when this process first had peers to watch (-1: not
	// yet); the verdicts of the SettleIntervals after it wait the
	// longest stall (settling).
	watchAt time.Duration
	// joined lists the members that joined the view lately, to settle
	// their suspicions too (heartbeat_newcomers.go).
	joined []hbJoin
	// inputAt is when a message from any peer last arrived; gapFrom and
	// gapTo bound this process's last input gap, and gapPingAt is when it
	// first pinged helpers to test its input since then (-1: never;
	// heartbeat_gap.go).
	inputAt, gapFrom, gapTo, gapPingAt time.Duration

	// With HeartbeatConfig.SharedClock, heartbeats fall due at the
	// times t of Env's clock where t − gridOff is a multiple of Interval.
	aligned bool
	gridOff time.Duration

	stats HeartbeatStats
}

// HeartbeatStats counts what a [HeartbeatDetector] did since it started.
// Experiments read it with [HeartbeatDetector.Stats].
type HeartbeatStats struct {
	HeartbeatsSent     uint64 // heartbeats to monitors (every T_interval)
	InsuranceSent      uint64 // insurance heartbeats to other connections (every T_insurance), and heartbeats that demote or drop a link
	Closed             uint64 // idle links closed: connections this process closed, and waits for a peer's insurance dropped on a link idle on our side (see Connections in the type's doc)
	HeartbeatsReceived uint64 // heartbeats from processes that have this one as a monitor
	InsuranceReceived  uint64 // other heartbeats received
	Suppressed         uint64 // heartbeats that fell due but were not sent, because other traffic on the link had served as one (§4.2.3); counted when the link's timer next fires, so up to one period late
	PingsSent          uint64 // pings sent on a core.PeerHint
	PongsSent          uint64 // answers to pings
	NoticesSent        uint64 // notice messages sent (originated or forwarded), retransmissions excluded
	NoticesResent      uint64 // notice retransmissions (no acknowledgement in time)
	NoticesReceived    uint64 // notice messages received
	AcksSent           uint64 // acknowledgements of notices
	Refutations        uint64 // times this process refuted a suspicion of itself
	Accusations        uint64 // suspicions that started here (a timeout of this process), broadcast to the others
	Suspicions         uint64 // core.Suspected emitted
	Unsuspicions       uint64 // core.Unsuspected emitted
	Failures           uint64 // core.Failed emitted
	Recoveries         uint64 // core.Recovered emitted
	ProbeRequests      uint64 // indirect probe requests sent (IndirectProbes per suspicion of our own)
	ProbesHelped       uint64 // indirect probe requests received from others and carried out
	ProbesPassed       uint64 // requests sent to helpers of our own, for others' requests whose subject we did not reach
	ProbeAcksSent      uint64 // answers to those requests: the suspect was heard
	IndirectAlive      uint64 // suspicions of our own refuted by a helper's answer: the suspect is alive but unreachable from here
	Rechecks           uint64 // silences of a peer already known unreachable checked through helpers instead of suspected (see Unreachable)
	Rechecked          uint64 // those answered: the peer is still alive, and still unreachable from here
	Reprobes           uint64 // indirect probes started again while a suspicion's verdict was held past the first probe
	InputGaps          uint64 // input gaps that ended: nothing arrived from anyone for T_interval or more, a ping to test the input went unanswered past T_timeout, and two or more watched peers were overdue
	GapHeld            uint64 // suspicions whose verdict was held for such a gap (see heartbeat_gap.go)
}

// HeartbeatPeerState is what a [HeartbeatDetector] believes of a peer.
type HeartbeatPeerState uint8

// The states of a peer.
const (
	HeartbeatAlive     HeartbeatPeerState = iota // not suspected
	HeartbeatSuspected                           // suspected, not yet for T_broken
	HeartbeatFailed                              // declared failed
)

func (s HeartbeatPeerState) String() string {
	switch s {
	case HeartbeatAlive:
		return "alive"
	case HeartbeatSuspected:
		return "suspected"
	case HeartbeatFailed:
		return "failed"
	}
	return "invalid"
}

// Record flags.
const (
	hbConn          uint8 = 1 << iota // a connection: owed insurance heartbeats
	hbMonitor                         // one of our monitors: owed heartbeats every Interval
	hbMonitoree                       // it announced us as one of its monitors
	hbProbing                         // a ping is outstanding since mark
	hbGossipSuspect                   // the newest notice about it (at gInc) is a suspicion
	hbTell                            // it was heard while suspected: tell it (see tell)
	hbAccused                         // the current suspicion is our own (a timeout here), not only heard
	hbRefused                         // the current suspicion is our own from a refused connection
)

// hbPeer is what a process remembers of one peer (160 bytes).
type hbPeer struct {
	id       core.NodeID
	flags    uint8
	state    HeartbeatPeerState
	waved    bool          // the indirect probe's second wave went out
	gapHeld  bool          // the current suspicion's verdict was held for an input gap (counted once)
	lastSend time.Duration // last message of any layer sent to it
	lastRecv time.Duration // last message of any layer received from it
	talkAt   time.Duration // last message of another layer, either way (see idle)
	expect   time.Duration // interval it last announced to us; 0: we wait for nothing
	sentNext time.Duration // interval we last announced to it; 0: none
	beatAt   time.Duration // last heartbeat sent, or last slot counted as suppressed
	toldAt   time.Duration // last heartbeat really sent (an announcement of sentNext)
	slack    time.Duration // decayed largest excess of its gaps over expect (adaptive timeout)
	lossAt   time.Duration // when a gap that looked like a lost message last ended; -1: none
	hold     time.Duration // no accusation before this (a late timer's re-check)
	mark     time.Duration // suspected: start of the suspicion; probing: when the ping left
	joinAt   time.Duration // when it joined the view, if lately (joinedAt); -1: not a newcomer
	gInc     uint64        // incarnation of the newest notice about it
	// probeUntil: the end of the indirect probe of a suspicion of ours,
	// or, alive, of a recheck (recheckIndirect); 0: none.
	probeUntil time.Duration
	// viaAt: when a helper, or a refutation that came round the link,
	// last proved it alive (0: never, or a message from it arrived since).
	viaAt time.Duration
	// pingAt: suspected, when it was last pinged (indirect probes on).
	pingAt time.Duration
	// teller: the peer whose notice made us suspect it (indirect probes
	// on; core.None: none), owed the refutation (see notice).
	teller  core.NodeID
	timer   core.TimerID  // 0: none pending
	armedAt time.Duration // the deadline the pending timer was armed for
	// firesAt: when the pending timer could fire first, armedAt or, if
	// that had passed when it was set, the moment it was set. Lateness is
	// measured from it: a deadline already past when the timer was set
	// says nothing of this process's loop running late.
	firesAt time.Duration
	// answeredAt: suspected, when the transport last found its link
	// answering (heartbeat_answering.go); 0: never.
	answeredAt time.Duration
}

// hbTimer is the single timer of the record of a peer.
type hbTimer core.NodeID

// NewHeartbeat returns a detector with configuration cfg that monitors the
// given members (in view order; the detector keeps the slice, which must
// not be modified afterwards, and never modifies it). members may include
// the detector's own node and may be nil until a [core.MembersChanged]
// arrives. An invalid cfg is an error wrapping [ErrHeartbeatConfig].
func NewHeartbeat(cfg HeartbeatConfig, members []core.NodeID) (*HeartbeatDetector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &HeartbeatDetector{cfg: cfg, members: members, pos: -1, nextDue: -1, refutedAt: -1, watchAt: -1, gapFrom: -1, gapTo: -1, gapPingAt: -1,
		health: newHealth(cfg.LocalHealthMax, cfg.lateTolerance(), cfg.Interval)}, nil
}

// Protos reports [core.ProtoFD].
func (h *HeartbeatDetector) Protos() []core.Proto { return []core.Proto{core.ProtoFD} }

// Config returns the configuration in use.
func (h *HeartbeatDetector) Config() HeartbeatConfig { return h.cfg }

// Stats returns the counters so far.
func (h *HeartbeatDetector) Stats() HeartbeatStats { return h.stats }

// Health returns what the local health measurement saw so far (see
// [HeartbeatConfig.LocalHealthMax]).
func (h *HeartbeatDetector) Health() HealthStats { return h.health.stats }

// Monitors returns the current monitors, in the order they were chosen (a
// new slice).
func (h *HeartbeatDetector) Monitors() []core.NodeID { return slices.Clone(h.monitors) }

// Incarnation returns this process's incarnation: 0 at start, raised each
// time it refutes a suspicion of itself.
func (h *HeartbeatDetector) Incarnation() uint64 { return h.inc }

// State returns what the detector believes of peer id (alive for a peer it
// keeps no record of).
func (h *HeartbeatDetector) State(id core.NodeID) HeartbeatPeerState {
	if r := h.find(id); r != nil {
		return r.state
	}
	return HeartbeatAlive
}

// Connections returns the number of connections (peers owed heartbeats or
// insurance), monitors included.
func (h *HeartbeatDetector) Connections() int {
	c := 0
	for _, r := range h.peers {
		if r.flags&(hbConn|hbMonitor) != 0 {
			c++
		}
	}
	return c
}

// Tracked returns the number of peer records kept: connections and peers
// that notices were about. It is the detector's memory, at about 160 bytes
// a record.
func (h *HeartbeatDetector) Tracked() int { return len(h.peers) }

// Start implements [core.Machine]: it chooses the monitors and schedules
// the first heartbeats, spread at random over one interval (and the first
// insurance heartbeats over one T_insurance) so that processes started
// together do not beat in step.
func (h *HeartbeatDetector) Start(env core.Env) {
	h.env = env
	h.self = env.Self()
	h.started = true
	h.inputAt = env.Now()
	if h.cfg.SharedClock != nil {
		h.aligned, h.gridOff = true, posMod(env.Now()-h.cfg.SharedClock.Now(), h.cfg.Interval)
	}
	h.setMembers(h.epoch, h.members, nil, true)
}

// SetConfig changes the parameters while running (the paper's
// ph_set_parameter, §5.1). An invalid cfg is an error wrapping
// [ErrHeartbeatConfig] and changes nothing. Monitors are added or demoted
// to match the new k; every timer is re-armed for the new periods. A
// longer Interval or Insurance takes effect after the next heartbeat on each
// link, which announces it, so that no peer that still expects the old
// period suspects this process.
func (h *HeartbeatDetector) SetConfig(cfg HeartbeatConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	h.cfg = cfg
	h.health.max, h.health.tolerance, h.health.period = cfg.LocalHealthMax, cfg.lateTolerance(), cfg.Interval
	h.health.score = min(h.health.score, cfg.LocalHealthMax)
	if !h.started {
		return nil
	}
	h.flush()
	for len(h.monitors) > cfg.Monitors {
		h.demote(h.find(h.monitors[len(h.monitors)-1]))
	}
	h.addStructural()
	h.chooseMonitors(false)
	for _, r := range h.peers {
		if r.timer != 0 {
			h.env.CancelTimer(r.timer)
			r.timer = 0
		}
		h.schedule(r)
	}
	return nil
}

// Receive implements [core.Machine].
func (h *HeartbeatDetector) Receive(from core.NodeID, m core.Msg) {
	if !h.started {
		return
	}
	now := h.env.Now()
	if h.stashed && h.stash == from {
		h.stashed = false // this is the message the Stack showed us
	}
	h.flush()
	h.checkLate(now)
	h.input(now)
	h.heard(from)
	k := m.Kind()
	if k == KindHeartbeatNotice || k == KindHeartbeatNoticeAck {
		// A notice passing through makes no connection. Its content
		// comes first: a refutation from its subject must not be
		// answered by telling the subject that it is suspected.
		if r := h.find(from); r != nil {
			h.touch(r, now)
		}
		switch m := m.(type) {
		case HeartbeatNotice:
			h.notice(from, m)
		case HeartbeatNoticeAck:
			h.acked(from, HeartbeatNotice(m))
		}
		if r := h.find(from); r != nil {
			h.tell(r)
		}
		return
	}
	var r *hbPeer
	if hb, ok := m.(HeartbeatMsg); ok && hb.Monitor {
		r = h.connect(from) // it chose us: we owe it insurance
	} else {
		r = h.member(from)
	}
	if r != nil {
		h.touch(r, now)
		h.tell(r)
	}
	switch m := m.(type) {
	case HeartbeatMsg:
		if r == nil {
			return // not a member
		}
		if m.Monitor {
			r.flags |= hbMonitoree
			h.stats.HeartbeatsReceived++
		} else {
			r.flags &^= hbMonitoree
			h.stats.InsuranceReceived++
		}
		r.expect = m.Next
		h.schedule(r)
	case HeartbeatPing:
		h.stats.PongsSent++
		h.send(from, HeartbeatPong{})
		if r != nil && r.sentNext > 0 && r.flags&(hbConn|hbMonitor) != 0 && now-r.toldAt >= h.cfg.Interval {
			// A peer that doubts the link may have missed our last
			// announcement too (a monitor demoted across a cut link
			// keeps waiting for heartbeats every T_interval, and
			// suspects us again as soon as it hears us directly).
			h.beat(r)
			h.schedule(r)
		}
	case HeartbeatPong:
		// Its arrival was the point.
	case HeartbeatProbeReq:
		h.helpProbe(from, m)
	case HeartbeatProbeAck:
		h.probeAnswered(m)
		h.answerHelps(m.Subject, from) // a request we passed on was answered
	}
}

// Fire implements [core.Machine].
func (h *HeartbeatDetector) Fire(t core.Timer) {
	if !h.started {
		return
	}
	if _, ok := t.(hbRetryTimer); ok {
		h.flush()
		h.health.fired(h.retryFires, h.env.Now())
		h.retryTimer = 0
		h.retry()
		return
	}
	ht, ok := t.(hbTimer)
	if !ok {
		return
	}
	h.flush()
	r := h.find(core.NodeID(ht))
	if r == nil || r.timer == 0 {
		return
	}
	r.timer = 0
	now := h.env.Now()
	late := now - r.firesAt
	h.health.fired(r.firesAt, now)
	switch r.state {
	case HeartbeatSuspected:
		if d, ok := h.repingDue(r); ok && now >= d {
			h.reping(r)
		}
		if d, ok := h.waveDue(r); ok && now >= d {
			h.secondWave(r)
		}
		if d, ok := h.evidenceDue(r); ok && now >= d {
			h.confirm(r)
		}
		if d, ok := h.reprobeDue(r); ok && now >= d {
			h.reprobe(r)
		}
		if now >= h.verdictDue(r) && !h.recheck(r, late) {
			h.fail(r)
		} else if now >= r.mark+h.cfg.Broken {
			h.health.stats.Postponed++
			h.countGapHold(r, now)
		}
	case HeartbeatAlive:
		if d, ok := h.recvDue(r); ok && now >= d && !h.recheck(r, late) {
			switch {
			case h.rechecking(r):
				r.probeUntil = 0 // no helper reached it either
				h.suspect(r, true)
			case r.flags&hbProbing == 0 && h.idleLink(r, now):
				r.expect = 0 // see idleLink
				h.stats.Closed++
			case r.viaAt > 0 && h.cfg.IndirectProbes > 0:
				h.stats.Rechecks++
				h.recheckIndirect(r)
			default:
				h.suspect(r, true)
			}
		} else if r.expect > 0 && now >= r.lastRecv+r.expect+h.cfg.Timeout {
			h.health.stats.Postponed++
		}
	}
	if d, ok := h.sendDue(r); ok {
		if now >= d && h.idle(r, now) {
			h.close(r)
		} else if now >= d {
			h.beat(r)
			h.beatAlong(r, now)
		} else {
			h.suppressed(r, now)
		}
	}
	h.schedule(r)
}

// Handle implements [core.Machine]: it follows [core.MembersChanged] and
// probes the peer of a [core.PeerHint] with a ping (a hint is never a
// verdict: only the absence of any answer within T_timeout makes the peer
// suspected). A hint that the peer's connection was refused (nothing
// listens at its address: a crashed process) makes it suspected at once;
// it is declared failed only after T_broken, as any suspicion, and a live
// peer refutes it meanwhile. A hint that the peer's link answers holds
// the verdict on it (answering).
func (h *HeartbeatDetector) Handle(e core.Event) {
	switch e := e.(type) {
	case core.MembersChanged:
		h.leavers.keep(e.Members, e.Renewed)
		if !h.started {
			h.members, h.epoch = e.Members, e.Epoch
			return
		}
		h.flush()
		h.setMembers(e.Epoch, e.Members, e.Renewed, false)
	case core.Departing:
		h.leavers.add(e.DepartingNode())
	case core.PeerHint:
		if !h.started {
			return
		}
		h.flush()
		if e.Answering {
			h.answering(e.Node)
			return
		}
		if e.Refused {
			// Nothing listens at its address: suspect it now rather
			// than after a ping's T_timeout (T_broken still applies).
			if r := h.connect(e.Node); r != nil && r.state == HeartbeatAlive {
				h.suspect(r, true)
				r.flags |= hbRefused
				h.schedule(r)
			}
			return
		}
		h.probe(e.Node)
	}
}

// ObserveSend implements [core.TrafficObserver]: a message of any layer to
// a member makes it a connection and counts as a heartbeat to it.
func (h *HeartbeatDetector) ObserveSend(to core.NodeID) {
	if h.selfSend || !h.started {
		return
	}
	h.flush()
	if r := h.connect(to); r != nil {
		r.lastSend = h.env.Now()
		r.talkAt = r.lastSend
		h.suppressed(r, r.lastSend)
		h.schedule(r)
	}
}

// ObserveReceive implements [core.TrafficObserver]: a message of any layer
// from a peer is a sign of life and refreshes its deadline.
func (h *HeartbeatDetector) ObserveReceive(from core.NodeID) {
	if !h.started || from == h.self {
		return
	}
	h.flush()
	now := h.env.Now()
	h.checkLate(now)
	h.input(now)
	h.heard(from)
	if r := h.find(from); r != nil {
		h.touch(r, now)
	}
	h.stashed, h.stash, h.stashAt = true, from, now
}

// flush settles a stashed observation when the message went to another
// layer: its sender is a connection, and is told if others suspect it.
// (When the message is ours, Receive settles it, knowing what it is.)
func (h *HeartbeatDetector) flush() {
	if !h.stashed {
		return
	}
	h.stashed = false
	if r := h.connect(h.stash); r != nil {
		r.talkAt = max(r.talkAt, h.stashAt)
		h.touch(r, h.stashAt)
		h.tell(r)
	}
}

// send sends m to id, recording it as traffic on the link; our own sends
// are hidden from ObserveSend.
func (h *HeartbeatDetector) send(to core.NodeID, m core.Msg) {
	h.selfSend = true
	h.env.Send(to, m)
	h.selfSend = false
	if r := h.find(to); r != nil {
		r.lastSend = h.env.Now()
	}
}
