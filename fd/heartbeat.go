// The Phoenix heartbeat detector in one file (about 1,150 lines): its
// state, messages, monitor choice and per-peer deadlines are one protocol
// whose invariants (who monitors whom, which deadline is armed) would be
// split by cutting it; local health is in health.go.

package fd

import (
	"math/bits"
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
// had talked to nearly every other and sent n−1 insurance heartbeats per
// T_insurance. Only the processes' own choices make connections: a
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
// the stall: its clock restarts when the stall ends. With H = 0 every
// factor is 1 and the bound is the paper's. See [HealthStats].
//
// If all k monitors crash together with the process, its other connections
// (the processes that chose it as a monitor, its ring neighbours, its
// application peers; everyone in a small job) suspect it within
// T_insurance + T_timeout and broadcast the same way. A failure escapes
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
// Per peer the detector keeps one record of about 90 bytes (times, flags,
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

	// Notices sent and not yet acknowledged, retransmitted with back-off.
	pending    []hbPending
	retryTimer core.TimerID
	retryAt    time.Duration

	// Local health (health.go): nextDue is a lower bound of the earliest
	// pending deadline (-1: none), exact after refreshDue.
	health  health
	nextDue time.Duration

	// With HeartbeatConfig.SharedClock, heartbeats fall due at the
	// times t of Env's clock where t − gridOff is a multiple of Interval.
	aligned bool
	gridOff time.Duration

	stats HeartbeatStats
}

// hbPending is a notice awaiting its acknowledgement.
type hbPending struct {
	to    core.NodeID
	tries uint8
	n     HeartbeatNotice
	due   time.Duration // next retransmission
}

// hbRetryTimer is the timer of the notice retransmissions.
type hbRetryTimer struct{}

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

// hbPeer is what a process remembers of one peer (96 bytes).
type hbPeer struct {
	id       core.NodeID
	flags    uint8
	state    HeartbeatPeerState
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
	gInc     uint64        // incarnation of the newest notice about it
	timer    core.TimerID  // 0: none pending
	armedAt  time.Duration // when the pending timer fires
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
	return &HeartbeatDetector{cfg: cfg, members: members, pos: -1, nextDue: -1, refutedAt: -1,
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
// that notices were about. It is the detector's memory, at about 90 bytes
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
	if h.cfg.SharedClock != nil {
		h.aligned, h.gridOff = true, posMod(env.Now()-h.cfg.SharedClock.Now(), h.cfg.Interval)
	}
	h.setMembers(h.epoch, h.members, nil, true)
}

// gridFloor is the latest time at most t where the shared clock is a
// multiple of Interval (SharedClock).
func (h *HeartbeatDetector) gridFloor(t time.Duration) time.Duration {
	return t - posMod(t-h.gridOff, h.cfg.Interval)
}

// posMod is a mod m in [0, m).
func posMod(a, m time.Duration) time.Duration {
	if a %= m; a < 0 {
		a += m
	}
	return a
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
	case HeartbeatPong:
		// Its arrival was the point.
	}
}

// Fire implements [core.Machine].
func (h *HeartbeatDetector) Fire(t core.Timer) {
	if !h.started {
		return
	}
	if _, ok := t.(hbRetryTimer); ok {
		h.flush()
		h.health.fired(h.retryAt, h.env.Now())
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
	late := now - r.armedAt
	h.health.fired(r.armedAt, now)
	switch r.state {
	case HeartbeatSuspected:
		if d, ok := h.evidenceDue(r); ok && now >= d {
			r.flags |= hbAccused // our own timeout confirms what we heard
		}
		if now >= h.brokenDue(r) && !h.recheck(r, late) {
			h.fail(r)
		} else if now >= r.mark+h.cfg.Broken {
			h.health.stats.Postponed++
		}
	case HeartbeatAlive:
		if d, ok := h.recvDue(r); ok && now >= d && !h.recheck(r, late) {
			if r.flags&hbProbing == 0 && h.idleLink(r, now) {
				r.expect = 0 // see idleLink
				h.stats.Closed++
			} else {
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

// beatAlong sends, with the heartbeat just sent to r, the heartbeats that
// the other monitors are owed within half an Interval, when nothing but
// heartbeats went to them: the process then wakes once per Interval for
// all its monitors rather than once for each (in a real process every
// wake-up of an idle loop costs system calls, which are most of an idle
// rank's processor time). It costs no message once their heartbeats fall
// due together, which they do from then on; the first time, each such
// monitor gets its heartbeat up to Interval/2 early (never late).
func (h *HeartbeatDetector) beatAlong(r *hbPeer, now time.Duration) {
	if r.flags&hbMonitor == 0 {
		return
	}
	for _, id := range h.monitors {
		m := h.find(id)
		if m == nil || m == r || m.state == HeartbeatFailed || m.lastSend != m.beatAt {
			continue
		}
		if d, ok := h.sendDue(m); ok && d > now && d <= now+h.cfg.Interval/2 {
			h.beat(m)
			h.schedule(m)
		}
	}
}

// Handle implements [core.Machine]: it follows [core.MembersChanged] and
// probes the peer of a [core.PeerHint] with a ping (a hint is never a
// verdict: only the absence of any answer within T_timeout makes the peer
// suspected). A hint that the peer's connection was refused (nothing
// listens at its address: a crashed process) makes it suspected at once;
// it is declared failed only after T_broken, as any suspicion, and a live
// peer refutes it meanwhile.
func (h *HeartbeatDetector) Handle(e core.Event) {
	switch e := e.(type) {
	case core.MembersChanged:
		if !h.started {
			h.members, h.epoch = e.Members, e.Epoch
			return
		}
		h.flush()
		h.setMembers(e.Epoch, e.Members, e.Renewed, false)
	case core.PeerHint:
		if !h.started {
			return
		}
		h.flush()
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

// suppressed counts the heartbeat slots of r that ended since its last
// heartbeat while other traffic went on the link: those heartbeats were
// not needed. (Counted as traffic goes, not when a timer fires: r's timer
// moves with the traffic and may never fire while it lasts.)
func (h *HeartbeatDetector) suppressed(r *hbPeer, now time.Duration) {
	every := h.sendEvery(r)
	if every <= 0 || now-r.beatAt < every {
		return
	}
	k := (now - r.beatAt) / every
	h.stats.Suppressed += uint64(k)
	r.beatAt += k * every
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

// --- membership ---------------------------------------------------------

// setMembers installs a member list: records of departed peers are
// dropped (a departed peer we sent heartbeats to is told to stop expecting
// them), departed monitors replaced, ring and mesh connections added. The
// record of a renewed member (a new incarnation of a process of the last
// view, core.MembersChanged.Renewed) is dropped too, its verdict with it,
// and made afresh like a joiner's: the new process expects nothing of this
// node, and a ring neighbour or a monitor it chooses watches it from now.
func (h *HeartbeatDetector) setMembers(epoch uint64, members, renewed []core.NodeID, initial bool) {
	h.members, h.epoch = members, epoch
	h.sortedKnown = false
	h.pos = h.indexOf(h.self)
	var gone []*hbPeer
	kept := make([]*hbPeer, 0, len(h.peers))
	keptIDs := make([]core.NodeID, 0, len(h.peers))
	for _, r := range h.peers {
		if h.indexOf(r.id) >= 0 && !slices.Contains(renewed, r.id) {
			kept = append(kept, r)
			keptIDs = append(keptIDs, r.id)
		} else {
			gone = append(gone, r)
		}
	}
	h.peers, h.peerIDs = kept, keptIDs
	for _, r := range gone {
		if r.timer != 0 {
			h.env.CancelTimer(r.timer)
		}
		h.monitors = slices.DeleteFunc(h.monitors, func(id core.NodeID) bool { return id == r.id })
		if r.sentNext > 0 && r.state != HeartbeatFailed && h.indexOf(r.id) < 0 {
			h.stats.InsuranceSent++
			h.send(r.id, HeartbeatMsg{Next: 0}) // stop expecting us
		}
	}
	h.addStructural()
	h.chooseMonitors(initial)
}

// addStructural makes the ring neighbours, and every member in a small
// job, connections. The first insurance heartbeat to a new one is spread
// at random over one T_insurance.
func (h *HeartbeatDetector) addStructural() {
	n := len(h.members)
	if n == 0 {
		return
	}
	if n <= h.cfg.FullMeshMax {
		for _, id := range h.members {
			h.addStructuralPeer(id)
		}
	}
	if h.pos < 0 {
		return
	}
	for d := 1; d <= h.cfg.RingNeighbors && d < n; d++ {
		h.addStructuralPeer(h.members[(h.pos+d)%n])
		h.addStructuralPeer(h.members[(h.pos-d%n+n)%n])
	}
}

// structural reports whether member id is a connection by position: a
// ring neighbour, or any member in a full-mesh job.
func (h *HeartbeatDetector) structural(id core.NodeID) bool {
	n, i := len(h.members), h.indexOf(id)
	if i < 0 {
		return false
	}
	if n <= h.cfg.FullMeshMax {
		return true
	}
	if h.pos < 0 {
		return false
	}
	d := (i - h.pos + n) % n
	return d <= h.cfg.RingNeighbors || n-d <= h.cfg.RingNeighbors
}

// idle reports whether connection r has fallen idle at now and may close:
// made only by traffic, and no message of another layer either way for
// T_insurance.
func (h *HeartbeatDetector) idle(r *hbPeer, now time.Duration) bool {
	return r.flags&hbConn != 0 && h.idleLink(r, now)
}

// idleLink reports whether the link to r is one that either side closes
// when it falls idle, and has: neither side chose the other as a monitor,
// r is no ring neighbour, and no message of another layer went either way
// for T_insurance. Both sides see the same traffic (up to one latency), so
// a process whose deadline for r's insurance passes on an idle link does
// not suspect r: r closed the link, and the heartbeat that said so may
// have been lost.
func (h *HeartbeatDetector) idleLink(r *hbPeer, now time.Duration) bool {
	return r.flags&(hbMonitor|hbMonitoree) == 0 && r.state == HeartbeatAlive &&
		now-r.talkAt >= h.cfg.Insurance && !h.structural(r.id)
}

// close ends idle connection r: r is told to stop waiting for us (if we
// ever announced a period to it) and is owed nothing more.
func (h *HeartbeatDetector) close(r *hbPeer) {
	r.flags &^= hbConn
	if r.sentNext > 0 {
		h.stats.InsuranceSent++
		h.send(r.id, HeartbeatMsg{Next: 0})
		r.sentNext = 0
	}
	h.stats.Closed++
}

func (h *HeartbeatDetector) addStructuralPeer(id core.NodeID) {
	if id == h.self || id == core.None {
		return
	}
	r, created := h.findOrCreate(id)
	if r.flags&hbConn != 0 {
		return
	}
	r.flags |= hbConn
	if created {
		now := h.env.Now()
		r.lastSend = now - h.cfg.Insurance + h.jitter(h.cfg.Insurance)
		r.beatAt = r.lastSend
	}
	h.schedule(r)
}

// chooseMonitors tops the monitors up to k. Initial monitors get their
// first heartbeat at a random point of the first interval; a replacement
// gets one at once, so that it starts watching now.
func (h *HeartbeatDetector) chooseMonitors(initial bool) {
	for len(h.monitors) < h.cfg.Monitors {
		id := h.pickMonitor()
		if id == core.None {
			return
		}
		r, _ := h.findOrCreate(id)
		r.flags |= hbMonitor | hbConn
		h.monitors = append(h.monitors, id)
		if initial {
			// At start nothing was sent yet: the first heartbeat goes at a
			// random point of the first interval.
			first := h.env.Now() - h.cfg.Interval + h.jitter(h.cfg.Interval)
			if h.aligned { // at the next point of the shared grid
				first = h.gridFloor(h.env.Now()+h.cfg.Interval-1) - h.cfg.Interval
			}
			r.lastSend, r.beatAt = first, first
		} else {
			r.beatAt = h.env.Now()
			h.beat(r)
		}
		h.schedule(r)
	}
}

// pickMonitor draws a random live member that is not yet a monitor, or
// returns core.None if there is none.
func (h *HeartbeatDetector) pickMonitor() core.NodeID {
	n := len(h.members)
	if n == 0 {
		return core.None
	}
	rng := h.env.Rand()
	for range 16 {
		if id := h.members[rng.IntN(n)]; h.eligibleMonitor(id) {
			return id
		}
	}
	// Most members are ineligible (a small or crippled job): scan.
	start := rng.IntN(n)
	for i := range n {
		if id := h.members[(start+i)%n]; h.eligibleMonitor(id) {
			return id
		}
	}
	return core.None
}

func (h *HeartbeatDetector) eligibleMonitor(id core.NodeID) bool {
	if id == h.self || id == core.None || slices.Contains(h.monitors, id) {
		return false
	}
	r := h.find(id)
	return r == nil || r.state == HeartbeatAlive
}

// demote makes monitor r an ordinary connection and tells it to expect
// only insurance from now on.
func (h *HeartbeatDetector) demote(r *hbPeer) {
	r.flags &^= hbMonitor
	h.monitors = slices.DeleteFunc(h.monitors, func(id core.NodeID) bool { return id == r.id })
	if r.state != HeartbeatFailed {
		h.beat(r)
	}
	h.schedule(r)
}

// --- per-peer deadlines -------------------------------------------------

// sendEvery is the period of heartbeats owed to r (0: none). A failed
// connection gets them every Interval, each with a ping (see beat): if it
// was cut off rather than dead (a partition that healed), that is how it
// hears from us again, recovers us and learns that it must refute its own
// suspicion, and how we hear from it. A record is kept for members of the
// view only, and the membership drops a dead member within a view change,
// so these go to a member held failed that the view cannot drop (a side
// without a majority), to the few connections a node has: its ring
// neighbours, monitors, monitorees and the peers it talks to. At the
// insurance period, two sides of a partition that healed took up to
// T_insurance to hear from each other again (a heartbeat-detector swarm of
// the member package, seed 3381810774: 38 s of its LAN timing's 40 s).
func (h *HeartbeatDetector) sendEvery(r *hbPeer) time.Duration {
	switch {
	case r.flags&hbMonitor != 0:
		return h.cfg.Interval
	case r.flags&hbConn != 0 && r.state == HeartbeatFailed:
		return h.cfg.Interval
	case r.flags&hbConn != 0:
		return h.cfg.Insurance
	}
	return 0
}

// sendDue is when the next message to r is owed: one period after the
// last message of any layer, and never later than what we announced.
//
// Other traffic stands in for a heartbeat only once r knows what to
// expect: r waits for nothing from us until a heartbeat announced the
// period, so until the current period is announced a heartbeat is due one
// period after the last one whatever else we sent (otherwise a layer that
// talks to r from the start would keep r from ever watching us, and our
// crash would go unnoticed by r). And a monitor gets a heartbeat at least
// every T_insurance even under traffic, so that an announcement lost on
// the way is repeated (k/T_insurance messages per process per second).
func (h *HeartbeatDetector) sendDue(r *hbPeer) (time.Duration, bool) {
	every := h.sendEvery(r)
	if every == 0 {
		return 0, false
	}
	announced := r.sentNext == every
	if r.sentNext > 0 && r.sentNext < every {
		every = r.sentNext
	}
	due := r.lastSend + every
	if !announced {
		due = min(due, r.beatAt+every)
	}
	if r.sentNext > 0 && r.flags&hbMonitor != 0 {
		due = min(due, r.toldAt+h.cfg.Insurance)
	}
	if h.aligned && r.lastSend == r.beatAt {
		due = h.gridFloor(due) // only heartbeats on this link: keep them on the grid
	}
	return due, true
}

// recvDue is when r becomes suspected if nothing arrives from it: the
// announced interval + T_timeout after its last message, or T_timeout after
// an unanswered ping.
func (h *HeartbeatDetector) recvDue(r *hbPeer) (time.Duration, bool) {
	if r.state != HeartbeatAlive {
		return 0, false
	}
	var due time.Duration
	ok := false
	if r.expect > 0 {
		due, ok = h.health.from(r.lastRecv)+r.expect+h.timeout(r), true
	}
	if r.flags&hbProbing != 0 {
		if p := h.health.from(r.mark) + h.cfg.Timeout*h.health.scale(); !ok || p < due {
			due, ok = p, true
		}
	}
	return max(due, r.hold), ok
}

// schedule arms r's timer for its earliest deadline. A timer armed for an
// earlier time is moved too: left alone, it would fire for nothing once per
// heartbeat received (each one pushes the deadline on by an interval), and
// in a real process every firing is a wake-up of an otherwise idle loop.
func (h *HeartbeatDetector) schedule(r *hbPeer) {
	due, ok := h.sendDue(r)
	if d, has := h.recvDue(r); has && (!ok || d < due) {
		due, ok = d, true
	}
	if r.state == HeartbeatSuspected {
		if d := h.brokenDue(r); !ok || d < due {
			due, ok = d, true
		}
		if d, has := h.evidenceDue(r); has && (!ok || d < due) {
			due, ok = d, true
		}
	}
	if !ok {
		if r.timer != 0 {
			h.env.CancelTimer(r.timer)
			r.timer = 0
		}
		return
	}
	if r.timer != 0 {
		if r.armedAt == due {
			return
		}
		h.env.CancelTimer(r.timer)
	}
	after := max(due-h.env.Now(), 0)
	r.timer = h.env.SetTimer(after, hbTimer(r.id))
	r.armedAt = due
	h.armed(due)
}

// beat sends r the heartbeat it is owed, announcing the period to the
// next one. The slots of that period skipped since the last heartbeat,
// because other traffic served, are counted as suppressed.
func (h *HeartbeatDetector) beat(r *hbPeer) {
	every := h.sendEvery(r)
	monitor := r.flags&hbMonitor != 0
	now := h.env.Now()
	if every > 0 && now-r.beatAt > every {
		h.stats.Suppressed += uint64((now - r.beatAt - 1) / every) // slots strictly before now
	}
	h.send(r.id, HeartbeatMsg{Next: every, Monitor: monitor})
	if r.state == HeartbeatFailed {
		// A peer that does not hold this process a member ignores its
		// heartbeats and sends it none (the other side of a healed
		// partition, which excluded us): a ping, which any process
		// answers, lets the verdict end if the peer is alive.
		h.send(r.id, HeartbeatPing{})
		h.stats.PingsSent++
	}
	r.sentNext = every
	r.beatAt, r.toldAt = now, now
	if monitor {
		h.stats.HeartbeatsSent++
	} else {
		h.stats.InsuranceSent++
	}
}

// --- suspicion, failure, recovery ---------------------------------------

// touch records a message from r received at time at: it refreshes r's
// deadline and clears a suspicion or failure.
func (h *HeartbeatDetector) touch(r *hbPeer, at time.Duration) {
	if at > r.lastRecv {
		h.measure(r, at)
		r.lastRecv = at
	}
	r.flags &^= hbProbing
	switch r.state {
	case HeartbeatAlive:
		return
	case HeartbeatSuspected:
		r.state = HeartbeatAlive
		h.stats.Unsuspicions++
		h.env.Emit(core.Unsuspected{Node: r.id})
	case HeartbeatFailed:
		r.state = HeartbeatAlive
		h.stats.Recoveries++
		h.env.Emit(core.Recovered{Node: r.id})
	}
	if r.flags&hbGossipSuspect != 0 {
		r.flags |= hbTell
	}
	h.schedule(r)
	h.chooseMonitors(false)
}

// tell sends r the suspicion that others may still hold of it, if touch
// found one, so that it refutes (a restarted process learns here that it
// was declared failed). It is not sent if what r sent was its refutation.
func (h *HeartbeatDetector) tell(r *hbPeer) {
	if r.flags&hbTell == 0 {
		return
	}
	r.flags &^= hbTell
	if r.flags&hbGossipSuspect != 0 {
		h.sendNotice(r.id, HeartbeatNotice{Subject: r.id, Inc: r.gInc})
	}
}

// suspect starts suspecting r. A suspicion of our own (local) is
// broadcast, and sent to r itself so that it refutes if it is alive.
func (h *HeartbeatDetector) suspect(r *hbPeer, local bool) {
	if r.state != HeartbeatAlive {
		return
	}
	r.state = HeartbeatSuspected
	r.mark = h.env.Now()
	r.flags &^= hbProbing | hbAccused | hbRefused
	if local {
		r.flags |= hbAccused
	}
	h.stats.Suspicions++
	h.env.Emit(core.Suspected{Node: r.id})
	if local {
		h.stats.Accusations++
		n := HeartbeatNotice{Subject: r.id, Inc: r.gInc}
		if r.flags&hbGossipSuspect == 0 {
			r.flags |= hbGossipSuspect
			h.forward(n, core.None)
		}
		h.sendNotice(r.id, n)
	}
	if r.flags&hbMonitor != 0 {
		h.demote(r)
		h.chooseMonitors(false)
	}
	h.schedule(r)
}

// fail declares r failed: it stayed suspected for T_broken.
func (h *HeartbeatDetector) fail(r *hbPeer) {
	r.state = HeartbeatFailed
	h.stats.Failures++
	h.env.Emit(core.Failed{Node: r.id})
}

// notice handles a broadcast notice: applied and forwarded once if it is
// newer than what we knew of its subject; a suspicion of ourselves is
// refuted.
func (h *HeartbeatDetector) notice(from core.NodeID, n HeartbeatNotice) {
	h.stats.NoticesReceived++
	h.stats.AcksSent++
	h.send(from, HeartbeatNoticeAck(n))
	if n.Subject == h.self {
		switch {
		case !n.Alive && n.Inc >= h.inc:
			h.inc = n.Inc + 1
			h.refute()
		case !n.Alive && (h.refutedAt < 0 || h.env.Now()-h.refutedAt >= h.cfg.Broken):
			// A suspicion of an older incarnation. Whoever sent it
			// never learnt the newer one, and neither may others: the
			// processes that saw this process leave the view and come
			// back forgot what they knew of it. Refute it with the
			// current incarnation, which every process that already
			// has it drops unforwarded. Copies within T_broken of a
			// refutation (the other monitors' notices of the same
			// silence) are covered by it.
			h.refute()
		case n.Alive && n.Inc > h.inc:
			h.inc = n.Inc
		}
		if r := h.find(from); !n.Alive && r != nil && r.flags&(hbConn|hbMonitor) != 0 {
			// A suspicion of us comes from the process that timed out
			// (forwarders skip the subject): it may have missed the
			// heartbeat announcing what to expect from us. Repeat it.
			h.beat(r)
			h.schedule(r)
		}
		return
	}
	if h.indexOf(n.Subject) < 0 {
		return
	}
	r := h.find(n.Subject)
	var inc uint64
	suspected := false
	if r != nil {
		inc, suspected = r.gInc, r.flags&hbGossipSuspect != 0
	}
	if n.Inc < inc || n.Inc == inc && (n.Alive || suspected) {
		return // not newer
	}
	if r == nil {
		r, _ = h.findOrCreate(n.Subject)
	}
	r.gInc = n.Inc
	if n.Alive {
		r.flags &^= hbGossipSuspect
		// The subject spoke: as good as a message from it, except that
		// there is nothing left to tell it.
		r.lastRecv = max(r.lastRecv, h.env.Now())
		r.flags &^= hbProbing
		switch r.state {
		case HeartbeatSuspected:
			r.state = HeartbeatAlive
			h.stats.Unsuspicions++
			h.env.Emit(core.Unsuspected{Node: r.id})
		case HeartbeatFailed:
			r.state = HeartbeatAlive
			h.stats.Recoveries++
			h.env.Emit(core.Recovered{Node: r.id})
		}
		h.chooseMonitors(false)
	} else {
		r.flags |= hbGossipSuspect
		h.suspect(r, false)
	}
	h.forward(n, from)
	h.schedule(r)
}

// refute broadcasts that this process is alive at its incarnation.
func (h *HeartbeatDetector) refute() {
	h.stats.Refutations++
	h.refutedAt = h.env.Now()
	h.forward(HeartbeatNotice{Subject: h.self, Inc: h.inc, Alive: true}, core.None)
}

// forward sends n to the members at distances 1, 2, 4, … after us in the
// member list, except its subject and the peer it came from.
func (h *HeartbeatDetector) forward(n HeartbeatNotice, from core.NodeID) {
	cnt := len(h.members)
	if cnt < 2 {
		return
	}
	fan := h.cfg.NoticeFanout
	if fan == 0 {
		fan = bits.Len(uint(cnt - 1)) // ⌈log2 cnt⌉
	}
	base := h.pos
	if base < 0 {
		base = cnt - 1
	}
	for j, d := 0, 1; j < fan && d < cnt; j, d = j+1, d*2 {
		to := h.members[(base+d)%cnt]
		if to == h.self || to == from || to == n.Subject {
			continue
		}
		h.sendNotice(to, n)
	}
}

// sendNotice sends n to to and keeps it until acknowledged.
func (h *HeartbeatDetector) sendNotice(to core.NodeID, n HeartbeatNotice) {
	h.send(to, n)
	h.stats.NoticesSent++
	due := h.env.Now() + h.cfg.Timeout
	h.pending = append(h.pending, hbPending{to: to, n: n, due: due})
	h.armRetry(due)
}

// acked forgets the pending notice n to from.
func (h *HeartbeatDetector) acked(from core.NodeID, n HeartbeatNotice) {
	h.pending = slices.DeleteFunc(h.pending, func(p hbPending) bool { return p.to == from && p.n == n })
}

// retry retransmits the notices whose acknowledgement is overdue, with
// exponential back-off from T_timeout up to T_insurance, as long as they
// are worth it: the recipient is a member not declared failed and the
// notice is still the newest about its subject.
func (h *HeartbeatDetector) retry() {
	now := h.env.Now()
	next := time.Duration(-1)
	kept := h.pending[:0]
	for _, p := range h.pending {
		if p.due <= now {
			if !h.stillPending(p) {
				continue
			}
			h.send(p.to, p.n)
			h.stats.NoticesResent++
			p.tries = min(p.tries+1, 30)
			p.due = now + min(h.cfg.Timeout<<p.tries, h.cfg.Insurance)
		}
		kept = append(kept, p)
		if next < 0 || p.due < next {
			next = p.due
		}
	}
	clear(h.pending[len(kept):])
	h.pending = kept
	if next >= 0 {
		h.armRetry(next)
	}
}

func (h *HeartbeatDetector) stillPending(p hbPending) bool {
	if h.indexOf(p.to) < 0 {
		return false
	}
	if r := h.find(p.to); r != nil && r.state == HeartbeatFailed {
		return false
	}
	if p.n.Subject == h.self {
		return p.n.Alive && p.n.Inc == h.inc
	}
	r := h.find(p.n.Subject)
	return r != nil && r.gInc == p.n.Inc && (r.flags&hbGossipSuspect != 0) == !p.n.Alive
}

// armRetry makes the retransmission timer fire no later than due.
func (h *HeartbeatDetector) armRetry(due time.Duration) {
	if h.retryTimer != 0 {
		if h.retryAt <= due {
			return
		}
		h.env.CancelTimer(h.retryTimer)
	}
	h.retryTimer = h.env.SetTimer(max(due-h.env.Now(), 0), hbRetryTimer{})
	h.retryAt = due
	h.armed(due)
}

// probe pings id on a transport hint.
func (h *HeartbeatDetector) probe(id core.NodeID) {
	r := h.connect(id)
	if r == nil || r.flags&hbProbing != 0 {
		return
	}
	h.send(id, HeartbeatPing{})
	h.stats.PingsSent++
	if r.state == HeartbeatAlive {
		r.flags |= hbProbing
		r.mark = h.env.Now()
	}
	h.schedule(r)
}

// --- records and sending ------------------------------------------------

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

// member returns the record of member id, creating it without making it a
// connection; nil for ourselves and for non-members.
func (h *HeartbeatDetector) member(id core.NodeID) *hbPeer {
	if id == h.self {
		return nil
	}
	if r := h.find(id); r != nil {
		return r
	}
	if h.indexOf(id) < 0 {
		return nil
	}
	r, _ := h.findOrCreate(id)
	return r
}

// connect returns the record of member id as a connection, creating it;
// nil for ourselves and for non-members. The first insurance heartbeat to
// a new connection is due at a random point of the next T_insurance, so
// that connections opened together (every monitor hears from the
// processes that chose it in the first interval) do not all get their
// insurance in the same interval, T_insurance later (the burst of the
// paper's Fig. 2).
func (h *HeartbeatDetector) connect(id core.NodeID) *hbPeer {
	r := h.member(id)
	if r == nil {
		return nil
	}
	if r.flags&hbConn == 0 {
		r.flags |= hbConn
		first := h.env.Now() - h.cfg.Insurance + h.jitter(h.cfg.Insurance)
		if first < r.lastSend {
			r.lastSend, r.beatAt = first, first
		}
		h.schedule(r)
	}
	return r
}

func (h *HeartbeatDetector) find(id core.NodeID) *hbPeer {
	i, ok := slices.BinarySearch(h.peerIDs, id)
	if !ok {
		return nil
	}
	return h.peers[i]
}

// findOrCreate returns id's record, creating a fresh one (no flags, times
// set to now) if needed.
func (h *HeartbeatDetector) findOrCreate(id core.NodeID) (*hbPeer, bool) {
	i, ok := slices.BinarySearch(h.peerIDs, id)
	if ok {
		return h.peers[i], false
	}
	now := h.env.Now()
	r := &hbPeer{id: id, lastSend: now, lastRecv: now, beatAt: now, lossAt: -1}
	h.peers = slices.Insert(h.peers, i, r)
	h.peerIDs = slices.Insert(h.peerIDs, i, id)
	return r, true
}

// indexOf returns the position of id in the member list, or -1: O(1) when
// ids are dense and in order, O(log n) when the list is sorted, O(n) only
// for an unsorted list.
func (h *HeartbeatDetector) indexOf(id core.NodeID) int {
	ms := h.members
	if uint64(id) < uint64(len(ms)) && ms[id] == id {
		return int(id)
	}
	if i, ok := slices.BinarySearch(ms, id); ok && ms[i] == id {
		return i
	}
	if !h.sortedKnown {
		h.sorted, h.sortedKnown = slices.IsSorted(ms), true
	}
	if h.sorted {
		return -1
	}
	return slices.Index(ms, id)
}

// jitter draws a random duration in [0, d).
func (h *HeartbeatDetector) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(h.env.Rand().Int64N(int64(d)))
}
