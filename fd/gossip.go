// The gossip detector: the table, the schedule's rounds and the ping
// consensus share one state.

package fd

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// ErrMembers reports an invalid member list: a duplicate id or core.None.
var ErrMembers = errors.New("fd: invalid member list")

// GossipStatus is what a gossip detector currently believes about a member.
type GossipStatus uint8

// The states of a monitored entry. See the package documentation for the
// transitions and the events they emit.
const (
	// StatusUnknown: the node is not in the detector's member list.
	StatusUnknown GossipStatus = iota
	// StatusAlive: its heartbeat increased within T_cleanup (or its grace
	// period has not ended).
	StatusAlive
	// StatusProbing: a core.PeerHint made the detector ping it; nothing has
	// been emitted yet.
	StatusProbing
	// StatusSuspected: core.Suspected was emitted after a hinted probe got
	// no pong; the consensus phase starts when T_cleanup also expires.
	StatusSuspected
	// StatusConsensus: core.Suspected was emitted and the detector is
	// pinging the node (P2P-MPI §5.1's consensus phase).
	StatusConsensus
	// StatusFailed: core.Failed was emitted.
	StatusFailed
)

// statusGrace marks an entry that is alive by other evidence than its
// heartbeat (it just joined the view, or answered a ping): its T_cleanup
// runs from the round in which the grace began (gossipWatch.since) until
// its heartbeat increases. It is kept apart from the table so that the
// table only ever carries heartbeats the nodes really sent. Status reports
// it as StatusAlive.
const statusGrace GossipStatus = 200

var statusNames = [...]string{"unknown", "alive", "probing", "suspected", "consensus", "failed"}

func (s GossipStatus) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Gossip is the gossip-style failure detector of P2P-MPI §5, after van
// Renesse et al.: each node keeps a heartbeat table over the current member
// list and, once per round, increments its own heartbeat and sends the whole
// table to the node its schedule (random, RR, BRR or DBRR) names for that
// round; tables are merged by maximum; an entry that has not increased for
// T_cleanup makes its node suspected, and a direct ping then decides (the
// consensus phase). See the package documentation for the protocol, the
// detection-time bound and the memory figures.
//
// Gossip is a core.Machine and a core.ProtoOwner for core.ProtoFD; it is
// single-threaded like every machine. Create it with [NewGossip].
type Gossip struct {
	cfg  GossipConfig
	env  core.Env
	self core.NodeID

	// The view. members is read-only and may be shared with other nodes
	// and with the messages this node sends.
	epoch   uint64
	members []core.NodeID
	byID    []int32 // positions sorted by id; nil when members is increasing
	idsSize int     // encoded size of the members column
	me      int     // this node's position, -1 when it is not a member

	// The table, indexed by position in members.
	beats   []uint32 // heartbeat counters, merged by maximum
	flagged []uint64 // bit i set: position i has an entry in watches

	watches []gossipWatch // the few entries that are not simply alive
	leavers departing     // members that announced they leave: no verdict on them

	own      uint32 // this node's heartbeat; also its round counter
	tick     uint32 // rounds started by this node (never adjusted)
	cleanup  uint32 // T_cleanup in rounds for the current n
	lowest   uint32 // a lower bound of beats[i] over unflagged i ≠ me
	adjusted bool   // the initial heartbeat adjustment has been decided
	tickID   core.TimerID
	lastSeq  uint32
	started  bool

	// Indirect probes (gossip_probe.go): pings sent on others' behalf,
	// members known alive only through a helper, the last senders (asked
	// first) and counters.
	helps       []gossipHelp
	told        []gossipTold
	origins     []gossipOrigin
	unreachable []core.NodeID
	recent      []core.NodeID // the last senders, most recent first
	probes      GossipProbeStats

	// Reuse of messages, where the Env allows it (the real host): with
	// copies, a table for another node is sent as scratch, pointing at the
	// live table, since the Env is done with it when Send returns; with a
	// recycler, a received table goes back to it once merged.
	copies   bool
	scratch  GossipMsg
	recycler core.Recycler

	// Local health (health.go, gossip_health.go).
	health    health
	tickDue   time.Duration // when the pending round timer is due
	fresh     uint32        // ages count from this round at the earliest (judgement restarted)
	margin    uint32        // adaptive rounds added to T_cleanup after false alarms
	marginAt  uint32        // round of the last false alarm or margin decay
	skew      uint32        // rounds credited to every entry after this node's count jumped
	skewUntil uint32        // the credit ends at this round
	stalls    gossipStalls  // the stalls seen lately, and input gaps taken for isolation
}

// gossipWatch is the state of one entry that is probing, suspected, in
// consensus or failed.
type gossipWatch struct {
	id        core.NodeID
	pos       int32
	status    GossipStatus
	beat      uint32       // the entry's heartbeat when the watch began
	since     uint32       // statusGrace: this node's heartbeat when the grace began
	attempts  uint8        // pings sent in the current probe or consensus
	seq       uint32       // the outstanding ping, 0 when none
	first     uint32       // the first ping of the current probe or consensus
	timer     core.TimerID // its timeout
	due       time.Duration
	rechecked bool // the timeout fired late and was re-armed once
	// The indirect probe of the consensus phase: its request's sequence
	// number (0: none running) and when its ProbeTimeout ends.
	probeSeq   uint32
	probeUntil time.Duration
	asked      []core.NodeID // the first wave's helpers, until the second
	// The verdict held back by the stall margin: pinged on until then
	// (0: not held yet).
	holdUntil time.Duration
	// alone: the suspicion was made while this node had heard nothing
	// fresh from anyone for that long (gossip_health.go, inputGap); its
	// refutation says nothing of the suspect, and its verdict waits as
	// long again.
	alone time.Duration
	// refused: a connection to the suspect was refused (core.PeerHint
	// with Refused), which a crashed process leaves behind and a starved
	// or cut-off one does not; the verdict is not held for the stalls
	// remembered, and only a young heartbeat ends the suspicion.
	refused bool
}

// Timers of the gossip detector.
type (
	gossipTick        struct{}
	gossipPingTimeout struct{ seq uint32 }
	gossipCheck       struct{} // a late round's cleanup check, re-armed as late again
)

// NewGossip returns a detector monitoring members (in view order; epoch 0)
// with configuration cfg. It retains members without copying: the caller
// must not modify the slice afterwards (the simulator can then share one
// list among all its nodes). The node's own id, learnt at Start, need not
// be in the list: a node outside its member list answers pings but neither
// gossips nor suspects until a core.MembersChanged includes it.
func NewGossip(cfg GossipConfig, members []core.NodeID) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gossip{cfg: cfg, me: -1, health: newHealth(cfg.LocalHealthMax, cfg.lateTolerance(), cfg.GossipInterval)}
	if err := g.install(0, members); err != nil {
		return nil, err
	}
	return g, nil
}

// Protos reports core.ProtoFD: a Stack routes the fd kinds to this
// detector. (Only one fd detector can sit in a stack.)
func (g *Gossip) Protos() []core.Proto { return []core.Proto{core.ProtoFD} }

// Start begins the first round at once and schedules the next ones every
// GossipInterval. Every entry's grace period starts now.
func (g *Gossip) Start(env core.Env) {
	g.env = env
	g.self = env.Self()
	g.me = g.pos(g.self)
	g.started = true
	g.copies = core.SendCopies(env)
	g.recycler = core.RecyclerOf(env)
	g.tickDue = env.Now()
	g.round()
}

// Receive handles a gossip table, a ping or a pong. Other kinds are
// ignored.
func (g *Gossip) Receive(from core.NodeID, m core.Msg) {
	g.heardFrom(from)
	switch m := m.(type) {
	case *GossipMsg:
		g.receiveTable(from, m)
		if g.recycler != nil {
			g.recycler.Recycle(m) // receiveTable keeps nothing of m
		}
	case GossipPing:
		g.env.Send(from, GossipPong{Seq: m.Seq})
	case GossipPong:
		if !g.helpedPong(from, m.Seq) {
			g.receivePong(from, m.Seq)
		}
	case GossipProbeReq:
		g.helpProbe(from, m)
	case GossipProbeRelay:
		g.relayAnswer(from, m)
	case GossipProbeAck:
		if !g.relayAck(from, m) {
			g.probeAnswered(m)
		}
	}
}

// Fire handles the round timer and ping timeouts.
func (g *Gossip) Fire(t core.Timer) {
	switch t := t.(type) {
	case gossipTick:
		g.round()
	case gossipPingTimeout:
		g.pingTimedOut(t.seq)
	case gossipCheck:
		g.checkCleanup()
	case gossipProbeDeadline:
		g.probeExpired(t.seq)
	case gossipProbeWave:
		g.secondWave(t.seq)
	case gossipHelpWave:
		g.helpWave(t.subSeq)
	}
}

// Handle follows core.MembersChanged (a newer epoch, or the same epoch with
// a different list) and probes the node of a core.PeerHint (unless
// IgnoreHints). Other events are ignored.
func (g *Gossip) Handle(e core.Event) {
	switch e := e.(type) {
	case core.MembersChanged:
		if e.Epoch < g.epoch || (e.Epoch == g.epoch && slices.Equal(e.Members, g.members)) {
			return
		}
		// The member layer guarantees a valid list; a broken one is
		// ignored rather than half-installed.
		if g.install(e.Epoch, e.Members) == nil {
			g.renew(e.Renewed)
			g.leavers.keep(e.Members, e.Renewed)
		}
	case core.Departing:
		g.leavers.add(e.DepartingNode())
	case core.PeerHint:
		if !g.cfg.IgnoreHints && !e.Answering {
			g.hint(e.Node, e.Refused)
		}
	}
}

// round is one gossip period: increment the own heartbeat, send the table to
// this round's target, look for expired entries, and schedule the next
// round.
func (g *Gossip) round() {
	late := g.roundLate()
	g.tick++
	g.own++
	n := len(g.members)
	if g.me >= 0 {
		g.beats[g.me] = g.own
		if n > 1 {
			s := g.cfg.Schedule
			r := s.Round(int(g.own-1), n)
			if to, err := s.TargetRand(g.env.Rand(), g.me, r, n); err == nil {
				g.sendRound(to)
			}
			g.lateCheck(late)
		}
	}
	g.tickDue = g.env.Now() + g.cfg.GossipInterval
	g.tickID = g.env.SetTimer(g.cfg.GossipInterval, gossipTick{})
}

// sendRound sends this round's table to the scheduled target at position
// to, or past it when this node doubts the target (it is probing it,
// suspects it, is in consensus about it or has declared it failed): then
// the table goes to the first member after this node in view order that it
// does not doubt, so that a node whose scheduled targets all died keeps
// its heartbeat spreading. A failed target gets the table as well, so a
// member that comes back (restarted, or falsely declared across a healed
// partition) still hears from the group: at most two tables a round. With
// no member left undoubted, the scheduled target gets it. See the package
// documentation ("Doubted targets").
func (g *Gossip) sendRound(to int) {
	st := g.statusAt(to)
	if !doubted(st) {
		g.sendTable(to)
		return
	}
	alt := g.undoubtedAfterSelf()
	if alt < 0 || st == StatusFailed {
		g.sendTable(to)
	}
	if alt >= 0 && alt != to {
		g.sendTable(alt)
	}
}

// doubted reports whether a target in state st gets the table only by way
// of a replacement (see sendRound): this node has a reason of its own to
// think it may be dead. An entry in its grace period is alive by evidence.
func doubted(st GossipStatus) bool {
	switch st {
	case StatusProbing, StatusSuspected, StatusConsensus, StatusFailed:
		return true
	}
	return false
}

// statusAt is the state of the entry at position i (statusGrace included).
func (g *Gossip) statusAt(i int) GossipStatus {
	if !g.isFlagged(i) {
		return StatusAlive
	}
	return g.watches[g.watchAt(i)].status
}

// undoubtedAfterSelf returns the first position after this node's in view
// order (me+1, me+2, … wrapping) whose member it does not doubt, or -1.
// Starting from this node rather than from the doubted target spreads the
// replacements: each live member is the first undoubted successor of one
// live member only, whereas starting from the target would send every
// table aimed at a dead block of the view to the one member after it.
func (g *Gossip) undoubtedAfterSelf() int {
	n := len(g.members)
	for k := 1; k < n; k++ {
		i := (g.me + k) % n
		if !doubted(g.statusAt(i)) {
			return i
		}
	}
	return -1
}

// sendTable sends the table to the member at position to. Unless the Env
// is done with the message when Send returns (core.SendCopier), the
// message holds a copy of the table: the price of the rule that a sent
// message is never mutated, as the table keeps changing.
func (g *Gossip) sendTable(to int) {
	id := g.members[to]
	size := gossipHeaderSize(g.epoch, len(g.beats)) + g.idsSize + gossipBeatsSize(g.beats)
	if g.copies && id != g.self {
		g.scratch = GossipMsg{Epoch: g.epoch, Members: g.members, Beats: g.beats, size: size}
		g.env.Send(id, &g.scratch)
		g.scratch = GossipMsg{} // keep no old table alive
		return
	}
	beats := make([]uint32, len(g.beats))
	copy(beats, g.beats)
	g.env.Send(id, &GossipMsg{Epoch: g.epoch, Members: g.members, Beats: beats, size: size})
}

// checkCleanup suspects every unflagged entry that has not increased for
// more than T_cleanup rounds, and moves watched entries whose T_cleanup has
// expired to the consensus phase (a hinted suspect starts pinging again; a
// probe in flight carries on as the consensus, so a hint can bring the
// failure forward by at most T_consensus). The full scan runs only when the oldest
// possible stamp is old enough to expire.
func (g *Gossip) checkCleanup() {
	if g.ageOf(g.lowest) > g.cleanupNow() && g.isolated() {
		return
	}
	gap := time.Duration(-1) // this node's input gap: unknown yet
	alone := func() time.Duration {
		if gap < 0 {
			gap = g.inputGap()
		}
		return gap
	}
	for i := range g.watches {
		w := &g.watches[i]
		if w.status == statusGrace {
			if g.ageOf(w.since) > g.cleanupNow() {
				w.status = StatusConsensus
				w.attempts = 0
				if w.alone = alone(); w.alone > 0 {
					g.stalls.stats.Alone++
				}
				g.env.Emit(core.Suspected{Node: w.id})
				g.ping(w)
				g.probeIndirect(w)
			}
			continue
		}
		if g.age(int(w.pos)) <= g.cleanupNow() {
			continue
		}
		switch w.status {
		case StatusSuspected: // a hinted probe failed earlier
			w.status = StatusConsensus
			w.attempts = 0
			g.ping(w)
			g.probeIndirect(w)
		case StatusProbing: // the probe in flight becomes the consensus
			w.status = StatusConsensus
			g.env.Emit(core.Suspected{Node: w.id})
			g.probeIndirect(w)
		}
	}
	c := g.cleanupNow()
	if g.ageOf(g.lowest) <= c {
		return
	}
	lowest := g.own
	for i, b := range g.beats {
		if i == g.me || g.isFlagged(i) {
			continue
		}
		if g.ageOf(b) > c {
			g.suspect(i, alone())
			continue
		}
		lowest = min(lowest, b)
	}
	g.lowest = lowest
}

// age is how many rounds old the heartbeat this node holds for position i
// is: its own heartbeat (the round counter, aligned across nodes by the
// heartbeat adjustment) minus the entry, or 0 when the entry is ahead.
// Ages count from g.fresh at the earliest: the round in which this node
// last found itself late (gossip_health.go).
func (g *Gossip) age(i int) uint32 { return g.ageOf(g.beats[i]) }

// ageOf is the age of a heartbeat b: rounds since b (or since g.fresh if
// later), less the credit of a recent jump of this node's count.
func (g *Gossip) ageOf(b uint32) uint32 {
	b = max(b, g.fresh)
	if g.skew > 0 && g.own < g.skewUntil {
		b += g.skew
	}
	return g.own - min(b, g.own)
}

// suspect starts the consensus phase for position i (P2P-MPI §5.1);
// alone is this node's input gap (0: none).
func (g *Gossip) suspect(i int, alone time.Duration) {
	g.setFlag(i)
	g.watches = append(g.watches, gossipWatch{id: g.members[i], pos: int32(i), beat: g.beats[i], status: StatusConsensus, alone: alone})
	if alone > 0 {
		g.stalls.stats.Alone++
	}
	g.env.Emit(core.Suspected{Node: g.members[i]})
	w := &g.watches[len(g.watches)-1]
	g.ping(w)
	g.probeIndirect(w)
}

// hint probes a member named by a core.PeerHint, unless it is already
// watched. A refused connection (refused) starts the consensus at once,
// or turns the watch running into one, and marks it refused (see
// gossipWatch.refused): nothing listens at the member's address any
// more, so the silence the stall memory waits out is no question there
// (see the package documentation, "Refused connections").
func (g *Gossip) hint(id core.NodeID, refused bool) {
	i := g.pos(id)
	if i < 0 || i == g.me {
		return
	}
	if g.isFlagged(i) {
		k := g.watchAt(i)
		w := &g.watches[k]
		switch {
		case w.status == statusGrace:
			g.clearWatch(k) // the probe or consensus replaces the grace
		case refused && w.status != StatusFailed:
			g.refuse(w)
			return
		default:
			return
		}
	}
	if refused {
		g.suspect(i, 0)
		g.watches[len(g.watches)-1].refused = true
		return
	}
	g.setFlag(i)
	g.watches = append(g.watches, gossipWatch{id: id, pos: int32(i), beat: g.beats[i], status: StatusProbing})
	g.ping(&g.watches[len(g.watches)-1])
}

// refuse marks watch w refused and, if it is a hinted probe or its
// suspicion, makes it the consensus now.
func (g *Gossip) refuse(w *gossipWatch) {
	w.refused = true
	switch w.status {
	case StatusProbing:
		g.env.Emit(core.Suspected{Node: w.id})
	case StatusSuspected:
	default:
		return
	}
	w.status = StatusConsensus
	if w.seq == 0 {
		w.attempts = 0
		g.ping(w)
	}
	g.probeIndirect(w)
}

// ping sends one ping of a probe or consensus and arms its timeout.
func (g *Gossip) ping(w *gossipWatch) { g.pingFor(w, g.pingTimeout()) }

// pingFor sends one ping of a probe or consensus and times it out after
// after.
func (g *Gossip) pingFor(w *gossipWatch, after time.Duration) {
	w.seq = g.nextSeq()
	if w.attempts == 0 {
		w.first = w.seq
	}
	w.attempts = min(w.attempts+1, 255) // a held verdict pings on
	g.env.Send(w.id, GossipPing{Seq: w.seq})
	w.due, w.rechecked = g.env.Now()+after, false
	w.timer = g.env.SetTimer(after, gossipPingTimeout{seq: w.seq})
}

func (g *Gossip) pingTimedOut(seq uint32) {
	k := g.watchBySeq(seq)
	if k < 0 {
		return // answered, or the entry left the view
	}
	w := &g.watches[k]
	if g.pingLate(w) {
		return
	}
	w.seq, w.timer = 0, 0
	if int(w.attempts) < g.cfg.PingAttempts {
		g.ping(w)
		return
	}
	switch w.status {
	case StatusProbing:
		w.status = StatusSuspected
		g.env.Emit(core.Suspected{Node: w.id})
	case StatusConsensus:
		if w.probeSeq != 0 && g.env.Now() < w.probeUntil {
			return // the indirect probe decides when its time ends (probeExpired)
		}
		g.verdict(w)
	}
}

// verdict declares the suspect of watch w failed, unless the stall
// memory holds the verdict back (holdVerdict).
func (g *Gossip) verdict(w *gossipWatch) {
	if g.holdVerdict(w) {
		return
	}
	w.status = StatusFailed
	if g.leavers.has(w.id) {
		return // it finished: the membership excludes it without a verdict
	}
	g.env.Emit(core.Failed{Node: w.id})
}

func (g *Gossip) receivePong(from core.NodeID, seq uint32) {
	// The pong of any ping of the current probe or consensus proves life:
	// one that comes after its own timeout (a delay spike longer than
	// PingTimeout) counts as well as the answer to the last ping.
	k := -1
	for j := range g.watches {
		if w := &g.watches[j]; w.id == from && w.seq != 0 && seq >= w.first && seq <= w.seq {
			k = j
			break
		}
	}
	if seq == 0 || k < 0 {
		return // too late (the verdict is in), forged, or not ours
	}
	i := int(g.watches[k].pos)
	g.clearWatch(k)
	// A pong is evidence of life now: a fresh T_cleanup from this round.
	g.grace(i)
	if len(g.helps) > 0 {
		g.tellHelps(from, g.beats[i], true)
	}
}

// grace starts a grace period for position i (which must not be watched).
func (g *Gossip) grace(i int) {
	g.setFlag(i)
	g.watches = append(g.watches, gossipWatch{id: g.members[i], pos: int32(i), beat: g.beats[i], since: g.own, status: statusGrace})
}

// watchAt returns the index of the watch of flagged position i.
func (g *Gossip) watchAt(i int) int {
	for k := range g.watches {
		if int(g.watches[k].pos) == i {
			return k
		}
	}
	panic(fmt.Sprintf("fd: position %d flagged without a watch", i))
}

// clearWatch ends the watch at index k because its node showed it is alive
// (a pong, or a heartbeat increase) and emits what that means.
func (g *Gossip) clearWatch(k int) {
	w := g.dropWatch(k)
	switch w.status {
	case StatusSuspected, StatusConsensus:
		if w.holdUntil != 0 {
			g.stalls.stats.Rescued++
		}
		if w.alone == 0 {
			g.refuted(&w)
			g.falseAlarm()
		}
		g.env.Emit(core.Unsuspected{Node: w.id})
	case StatusFailed:
		if w.alone == 0 {
			g.refuted(&w)
		}
		g.env.Emit(core.Recovered{Node: w.id})
	}
}

// dropWatch ends the watch at index k without a word (its ping's timeout
// cancelled, its position unflagged) and returns it.
func (g *Gossip) dropWatch(k int) gossipWatch {
	w := g.watches[k]
	if w.seq != 0 {
		g.env.CancelTimer(w.timer)
	}
	g.clearFlag(int(w.pos))
	g.watches = slices.Delete(g.watches, k, k+1)
	return w
}

// receiveTable merges a received table by maximum, then performs the
// initial heartbeat adjustment if this is the first table of this
// incarnation.
func (g *Gossip) receiveTable(from core.NodeID, m *GossipMsg) {
	if len(m.Beats) != len(m.Members) {
		return // only a hand-built message can be malformed like this
	}
	g.tableLate()
	if sameMembers(m.Members, g.members) {
		mergeMax(g.beats, m.Beats)
	} else {
		for k, id := range m.Members {
			if i := g.pos(id); i >= 0 && m.Beats[k] > g.beats[i] {
				g.beats[i] = m.Beats[k]
			}
		}
	}
	// A watched entry that increased belongs to a live node, provided the
	// new heartbeat is itself younger than T_cleanup (proofOfLife): one
	// that is not would be suspected on its own, and it is what a node
	// that had no news from the others for a while (its senders died in
	// the same crash) receives of a dead node once tables reach it again
	// by way of a replacement target (sendRound); taken as life, it would
	// undo a correct verdict with Unsuspected or Recovered. A new member's
	// grace ends only with a heartbeat counted since the grace began: a
	// joiner counts from 0 until the first table it receives aligns it
	// with the others (adjust), and those first heartbeats, far below
	// everyone's count, would otherwise end its grace and be aged as
	// heartbeats of long ago.
	for k := 0; k < len(g.watches); {
		w := &g.watches[k]
		b := g.beats[w.pos]
		if b != w.beat && g.proofOfLife(w, b) {
			g.clearWatch(k)
			continue
		}
		k++
	}
	if len(g.helps) > 0 {
		g.helpsFromTable()
	}
	// Others can hold a higher heartbeat of this node only from an earlier
	// incarnation; continue above it so that they see this one as new.
	if g.me >= 0 && g.beats[g.me] > g.own {
		g.own = g.beats[g.me]
	}
	if !g.adjusted {
		g.adjust(from, m)
	} else if k := g.senderPos(from, m); k >= 0 && m.Beats[k] > g.own+1 {
		// Keep counting with the others: a node whose rounds fell behind
		// (a stalled process, a slow clock) would otherwise make every
		// entry look older and every other node see its own heartbeat age.
		// The period is not re-phased, so the count taken is the one the
		// sender had a round ago: taking the sender's own, a node whose
		// rounds start earlier than the sender's would lead it by one
		// until the sender's next round, and a chain of newcomers catching
		// up from each other would carry the whole group's count ahead of
		// its rounds, ageing every entry held by a node that has not
		// caught up.
		target := m.Beats[k] - 1
		jump := target - g.own
		g.own = target
		if g.me >= 0 {
			g.beats[g.me] = g.own
		}
		if g.tick <= g.cleanup {
			// A node that started less than T_cleanup ago and whose
			// first table came from another newcomer (so adjust did
			// not move it): this is its adjustment, ages count from
			// here.
			g.fresh = max(g.fresh, g.own)
		}
		g.caughtUp(jump)
	}
}

// proofOfLife reports whether heartbeat b, higher than the one watch w
// began with, shows w's node alive. A grace ends with a heartbeat counted
// since the grace began. A suspicion ends with any increase (a starved
// live node's heartbeats are old; see the package documentation, "Late
// news of the dead"), but one from a refused connection, like a failure
// verdict, only with one younger than the
// plain T_cleanup, c rounds: after a crash of many nodes, a node whose
// senders died with them can hold a dead node's heartbeat a little older
// than the others do, and the fresher one, arriving after the verdict, is
// no sign of a new incarnation (a restarted node adopts the group's count,
// so its heartbeat is young).
func (g *Gossip) proofOfLife(w *gossipWatch, b uint32) bool {
	switch w.status {
	case statusGrace:
		return b >= w.since
	case StatusFailed:
		return g.ageOf(b) <= g.cleanup
	}
	return !w.refused || g.ageOf(b) <= g.cleanup
}

// senderPos is the position of the sender's own entry in m, or -1.
func (g *Gossip) senderPos(from core.NodeID, m *GossipMsg) int {
	if sameMembers(m.Members, g.members) {
		return g.pos(from)
	}
	return slices.Index(m.Members, from)
}

// adjust is the initial heartbeat adjustment: the first table a node
// receives tells it how far the others have counted. If the sender's own
// heartbeat is more than one ahead — more than phase differences between
// nodes started together explain — this node started late (it joined, or
// restarted): it adopts the sender's count, so its round counter follows the
// same schedule position as everyone's, and restarts its period T_gossip
// after this arrival, so its rounds follow the sender's by the message
// latency.
func (g *Gossip) adjust(from core.NodeID, m *GossipMsg) {
	g.adjusted = true
	k := g.senderPos(from, m)
	if k < 0 || m.Beats[k] <= g.own+1 {
		return
	}
	g.own = m.Beats[k]
	if g.me >= 0 {
		g.beats[g.me] = g.own
	}
	// Ages count from here: an entry this node knows nothing newer of
	// than its view gave it (a member that joined just before it, whose
	// heartbeat has not reached the sender yet) would otherwise be as old
	// as the jump and suspected at the next check.
	g.fresh = max(g.fresh, g.own)
	g.env.CancelTimer(g.tickID)
	g.tickDue = g.env.Now() + g.cfg.GossipInterval
	g.tickID = g.env.SetTimer(g.cfg.GossipInterval, gossipTick{})
}

// mergeMax sets beats[i] = max(beats[i], in[i]). It is the hot loop of the
// simulation (n entries per received table), written without a
// data-dependent branch. It is exempt from the race detector (go:norace):
// it touches only the machine's own table and a received message that no
// one mutates, and instrumenting its n loads and stores per table made the
// simulation tests under -race ten times slower.
//
//go:norace
func mergeMax(beats, in []uint32) {
	beats = beats[:len(in)]
	for i, b := range in {
		beats[i] = max(b, beats[i])
	}
}

func (g *Gossip) watchBySeq(seq uint32) int {
	for k := range g.watches {
		if g.watches[k].seq == seq {
			return k
		}
	}
	return -1
}

// Epoch returns the epoch of the current view (0 for the initial list).
func (g *Gossip) Epoch() uint64 { return g.epoch }

// Members returns the current member list. The caller must not modify it.
func (g *Gossip) Members() []core.NodeID { return g.members }

// Heartbeat returns the highest heartbeat known for id and whether id is a
// member.
func (g *Gossip) Heartbeat(id core.NodeID) (uint32, bool) {
	if id == g.self && g.started {
		return g.own, g.me >= 0
	}
	i := g.pos(id)
	if i < 0 {
		return 0, false
	}
	return g.beats[i], true
}

// Status returns what the detector believes about id.
func (g *Gossip) Status(id core.NodeID) GossipStatus {
	i := g.pos(id)
	if i < 0 {
		return StatusUnknown
	}
	if g.isFlagged(i) {
		if st := g.watches[g.watchAt(i)].status; st != statusGrace {
			return st
		}
	}
	return StatusAlive
}

// Rounds returns the number of rounds this node has started.
func (g *Gossip) Rounds() uint32 { return g.tick }

// CleanupRounds returns T_cleanup in rounds for the current view.
func (g *Gossip) CleanupRounds() int { return int(g.cleanup) }

// TableBytes returns the memory the detector's per-member state occupies:
// 4 bytes of heartbeat per member, one bit of flag,
// 4 bytes of id index per member when the member ids are not increasing,
// and the watches. The member list itself (4 bytes per member) is not
// counted because it may be shared.
func (g *Gossip) TableBytes() int {
	return 4*len(g.beats) + 8*len(g.flagged) + 4*len(g.byID) +
		cap(g.watches)*32
}
