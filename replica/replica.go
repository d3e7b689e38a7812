package replica

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// Stats counts what a [Layer] did. Backup is the number of sends held in
// the backup table now, PeakBackup its maximum since Start.
type Stats struct {
	Sent        uint64 // data messages sent by this process as master (one per destination replica)
	Resent      uint64 // data messages sent again from the backup table by a new master
	Retransmits uint64 // data messages sent again to a destination replica that acknowledged nothing new for Config.Retransmit
	Backed      uint64 // sends kept in the backup table by a non-master
	Skipped     uint64 // sends not kept: already committed when the program reached them
	ToFailed    uint64 // sends to a failed rank, dropped
	Delivered   uint64 // messages delivered to the application
	Duplicates  uint64 // data messages already delivered, dropped
	Early       uint64 // data messages held because an earlier one was missing
	Placed      uint64 // of Delivered, those whose payload the caller placed itself (ReserveNext)
	Acks        uint64 // acknowledgements sent (or, to itself, applied)
	Commits     uint64 // commit messages sent
	Decisions   uint64 // decisions whose value this process chose as master
	Takeovers   uint64 // times this process became the master of its rank
	BadRequests uint64 // Send or Decide requests refused (bad rank, decision out of order)
	BadMessages uint64 // messages dropped for naming the wrong rank or sender
	Backup      int
	PeakBackup  int
	// BackupBytes is the bytes of the payloads in the backup table now.
	BackupBytes int
}

type chanKey struct {
	Comm     uint64
	Src, Dst int
}

func (k chanKey) String() string { return fmt.Sprintf("c%d %d→%d", k.Comm, k.Src, k.Dst) }

// entry is one send of the program kept in the backup table.
type entry struct {
	seq     uint64
	tag     int64
	payload []byte
}

// outChan is a channel this process's rank sends on.
type outChan struct {
	key       chanKey
	next      uint64                 // sequence number of the program's last send
	committed uint64                 // sends ≤ committed are held by every live destination replica
	backup    []entry                // the program's sends beyond committed, by seq
	acked     map[core.NodeID]uint64 // destination replica → cumulative ack
	seen      map[core.NodeID]uint64 // acked at the last retransmission tick
	control   bool                   // a control channel (Send.Control)
}

// inChan is a channel this process's rank receives on.
type inChan struct {
	key       chanKey
	delivered uint64
	held      map[uint64]*Data // arrived before their predecessor
	acked     uint64           // last acknowledged
	dirty     bool             // an acknowledgement is due
	// reserved: delivered+1 is being placed by the caller (ReserveNext);
	// every other copy of it is held until the caller commits or
	// releases it.
	reserved bool
}

type ackTick struct{}

// resendTick is the master's retransmission timer.
type resendTick struct{}

// decVal is the value of one decision held by a replica, and the ballot
// (master index) it came from.
type decVal struct {
	value  []byte
	ballot int
}

// decisions is a replica's state of its rank's decisions.
type decisions struct {
	base      uint64   // decisions ≤ base are forgotten (final everywhere, consumed)
	vals      []decVal // vals[i] is decision base+1+i
	ballot    int      // highest master index heard from (own index while master)
	final     uint64   // decisions ≤ final are final here
	allFinal  uint64   // decisions ≤ allFinal are final at every live replica
	consumed  uint64   // Decided emitted up to here
	requested uint64   // the application asked up to here
	proposal  []byte   // the application's proposal for decision requested
	acks      map[core.NodeID]DecisionAck
}

func (d *decisions) top() uint64          { return d.base + uint64(len(d.vals)) }
func (d *decisions) get(k uint64) *decVal { return &d.vals[k-d.base-1] }
func (d *decisions) has(k uint64) bool    { return k > d.base && k <= d.top() }
func (d *decisions) set(k uint64, v decVal) bool {
	switch {
	case k == d.top()+1:
		d.vals = append(d.vals, v)
	case d.has(k):
		*d.get(k) = v
	default:
		return false
	}
	return true
}

// Layer is the replication machine of one physical process. Build it with
// [New] and place it in a core.Stack above the membership layer.
type Layer struct {
	cfg         Config
	lay         Layout
	env         core.Env
	self        core.NodeID
	rank, index int
	started     bool

	epoch   uint64
	alive   []bool        // by physical id
	masters []core.NodeID // by rank; core.None once the rank failed
	failed  []bool        // by rank

	outs     map[chanKey]*outChan
	outOrder []*outChan
	ins      map[chanKey]*inChan
	inOrder  []*inChan
	dirty    []*inChan
	ackArmed bool
	// resendArmed: the retransmission timer is set (master, something in
	// the backup table).
	resendArmed bool

	dec   decisions
	stats Stats
	// full: BackupFull was emitted and BackupRoom not yet.
	full bool

	// borrowed: the message being received lends its payload for the
	// call only (ReceiveBorrowed).
	borrowed bool
	// released: payloads the layer is done with (Config.KeepReleased).
	released [][]byte

	// copies: the Env is done with a message when Send returns
	// (core.SendCopies), so the Data of every transmission is outData,
	// filled again each time, not a message of its own (dataFor).
	copies    bool
	outData   Data
	outAck    Ack    // as outData, for acknowledgements
	outCommit Commit // as outData, for commits
	// deliveries takes Delivered events by value, when the Env does
	// (DeliveredEmitter).
	deliveries DeliveredEmitter

	fin       []bool // by physical id: its program finished (Fin received)
	finishing bool   // this process's program finished (Finish)
	finished  bool   // Finished was emitted
}

// New returns a layer for a process of cfg.Layout; the process learns its
// physical id at Start. Until the first view every process of the layout
// counts as alive.
func New(cfg Config) (*Layer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Layer{
		cfg:  cfg,
		lay:  cfg.Layout,
		outs: map[chanKey]*outChan{},
		ins:  map[chanKey]*inChan{},
	}
	l.alive = make([]bool, l.lay.Size())
	for i := range l.alive {
		l.alive[i] = true
	}
	l.failed = make([]bool, l.lay.Ranks)
	l.fin = make([]bool, l.lay.Size())
	l.masters = make([]core.NodeID, l.lay.Ranks)
	for r := range l.masters {
		l.masters[r] = l.lay.Phys(r, 0)
	}
	return l, nil
}

// Protos implements core.ProtoOwner.
func (l *Layer) Protos() []core.Proto { return []core.Proto{core.ProtoReplica} }

// Stats returns the counters. Call it from the goroutine that drives the
// machine.
func (l *Layer) Stats() Stats { return l.stats }

// Master returns the physical id of logical rank r's master in this
// process's view, or core.None if the rank failed.
func (l *Layer) Master(r int) core.NodeID { return l.masters[r] }

// Alive reports whether process p is in this process's view (a replica
// the layer still sends to); false for an id outside the layout.
func (l *Layer) Alive(p core.NodeID) bool { return l.lay.Contains(p) && l.alive[p] }

// IsMaster reports whether this process is its rank's master.
func (l *Layer) IsMaster() bool { return l.masters[l.rank] == l.self }

// Start implements core.Machine. It panics if the process's id is not in
// the layout: the job was assembled wrongly.
func (l *Layer) Start(env core.Env) {
	l.env = env
	l.self = env.Self()
	l.copies = core.SendCopies(env)
	l.deliveries, _ = env.(DeliveredEmitter)
	if !l.lay.Contains(l.self) {
		panic(fmt.Sprintf("replica: process %v outside a layout of %d×%d", l.self, l.lay.Ranks, l.lay.Replicas))
	}
	l.rank, l.index = l.lay.Rank(l.self), l.lay.Replica(l.self)
	l.dec.ballot = 0
	l.started = true
}

// SendMsg hands the layer an application send, as [Send] through Handle.
func (l *Layer) SendMsg(comm uint64, dst int, tag int64, payload []byte) {
	l.Handle(Send{Comm: comm, Dst: dst, Tag: tag, Payload: payload})
}

// Decide asks for the k-th decision with this replica's proposal, as
// [Decide] through Handle; the answer is a [Decided] event.
func (l *Layer) Decide(k uint64, value []byte) { l.Handle(Decide{K: k, Value: value}) }

// Handle implements core.Machine.
func (l *Layer) Handle(e core.Event) {
	if !l.started {
		return
	}
	switch x := e.(type) {
	case core.MembersChanged:
		l.onView(x.Epoch, x.Members)
	case member.ViewInstalled:
		l.onView(x.Epoch, x.Members)
	case Send:
		l.onSend(x)
	case Decide:
		l.onDecide(x)
	case Finish:
		l.onFinish()
	}
}

// Fire implements core.Machine.
func (l *Layer) Fire(t core.Timer) {
	if _, ok := t.(resendTick); ok {
		l.resendArmed = false
		l.retransmit()
		return
	}
	if _, ok := t.(ackTick); !ok {
		return
	}
	l.ackArmed = false
	dirty := l.dirty
	l.dirty = nil
	for _, ic := range dirty {
		if ic.dirty {
			l.ackNow(ic)
		}
	}
	clear(dirty)
	if l.dirty == nil {
		l.dirty = dirty[:0] // its array again, for the next tick's
	}
}

// release keeps payload for TakeReleased if the caller asked for it.
func (l *Layer) release(payload []byte) {
	if l.cfg.KeepReleased {
		l.released = append(l.released, payload)
	}
}

// TakeReleased appends to dst the payloads released since the last call
// (Config.KeepReleased) and returns it; the layer no longer refers to
// them. Call it from the goroutine that drives the machine.
func (l *Layer) TakeReleased(dst [][]byte) [][]byte {
	dst = append(dst, l.released...)
	clear(l.released)
	l.released = l.released[:0]
	return dst
}

// ReceiveBorrowed is Receive of a message that the caller lends, with its
// payload, for the call only (a transport's read buffer, a Data it decodes
// every message into): what the layer keeps beyond the call, a [Data]
// that arrived before its predecessor, it copies. The [Delivered] events
// the call emits still share m's payload; the caller must be done with
// them, or copy them, before it reuses it.
func (l *Layer) ReceiveBorrowed(from core.NodeID, m core.Msg) {
	l.borrowed = true
	l.Receive(from, m)
	l.borrowed = false
}

// Receive implements core.Machine.
func (l *Layer) Receive(from core.NodeID, m core.Msg) {
	if !l.started {
		return
	}
	if !l.lay.Contains(from) {
		l.stats.BadMessages++
		return
	}
	switch x := m.(type) {
	case *Data:
		l.onData(x)
	case *Ack:
		l.onAck(from, x)
	case *Commit:
		l.onCommit(from, x)
	case *Decision:
		l.onDecision(from, x)
	case *DecisionAck:
		l.onDecisionAck(from, x)
	case *DecisionCommit:
		l.onDecisionCommit(from, x)
	case *Fin:
		l.fin[from] = true
		l.finProgress()
	}
}

func (l *Layer) validRank(r int) bool { return r >= 0 && r < l.lay.Ranks }

// live returns the live replicas of rank r, by replica index.
func (l *Layer) live(r int) []core.NodeID {
	var out []core.NodeID
	for j := range l.lay.Replicas {
		if p := l.lay.Phys(r, j); l.alive[p] {
			out = append(out, p)
		}
	}
	return out
}

// fellows returns the live replicas of this process's rank but itself.
func (l *Layer) fellows() []core.NodeID {
	out := l.live(l.rank)
	return slices.DeleteFunc(out, func(p core.NodeID) bool { return p == l.self })
}

func (l *Layer) out(k chanKey) *outChan {
	oc := l.outs[k]
	if oc == nil {
		oc = &outChan{key: k, acked: map[core.NodeID]uint64{}}
		l.outs[k] = oc
		l.outOrder = append(l.outOrder, oc)
	}
	return oc
}

func (l *Layer) in(k chanKey) *inChan {
	ic := l.ins[k]
	if ic == nil {
		ic = &inChan{key: k}
		l.ins[k] = ic
		l.inOrder = append(l.inOrder, ic)
	}
	return ic
}

// ---- sending ----

// backup records that n sends of bytes bytes joined the backup table
// (negative: left it), and says when the table fills or has room again.
func (l *Layer) backup(n, bytes int) {
	l.stats.Backup += n
	l.stats.BackupBytes += bytes
	l.stats.PeakBackup = max(l.stats.PeakBackup, l.stats.Backup)
	switch full := l.BackupFull(); {
	case full && !l.full:
		l.full = true
		l.env.Emit(BackupFull{Sends: l.stats.Backup, Bytes: l.stats.BackupBytes})
	case !full && l.full:
		l.full = false
		l.env.Emit(BackupRoom{Sends: l.stats.Backup, Bytes: l.stats.BackupBytes})
	}
}

// BackupFull reports whether the backup table holds Config.MaxBackup sends
// or Config.MaxBackupBytes bytes: the application should then hand the
// layer no more sends until it has room again (the [BackupRoom] event).
// Call it from the goroutine that drives the machine.
func (l *Layer) BackupFull() bool {
	return l.stats.Backup >= l.cfg.MaxBackup || l.stats.BackupBytes >= l.cfg.MaxBackupBytes
}

// payloadBytes returns the bytes of the payloads of es.
func payloadBytes(es []entry) int {
	n := 0
	for _, e := range es {
		n += len(e.payload)
	}
	return n
}

func (l *Layer) onSend(s Send) {
	if !l.validRank(s.Dst) {
		l.stats.BadRequests++
		return
	}
	oc := l.out(chanKey{Comm: s.Comm, Src: l.rank, Dst: s.Dst})
	if oc.next == 0 {
		oc.control = s.Control
	}
	oc.next++
	e := entry{seq: oc.next, tag: s.Tag, payload: s.Payload}
	switch {
	case l.failed[s.Dst]:
		l.stats.ToFailed++
		l.release(s.Payload)
		return
	case e.seq <= oc.committed:
		l.stats.Skipped++
		l.release(s.Payload)
		return
	}
	oc.backup = append(oc.backup, e)
	l.backup(1, len(e.payload))
	if l.IsMaster() {
		l.stats.Sent += uint64(l.transmit(oc, e))
		l.armResend()
	} else {
		l.stats.Backed++
	}
}

// transmit sends one message to every live replica of its destination
// (delivering it at once if this process is one) and returns how many
// were sent.
func (l *Layer) transmit(oc *outChan, e entry) int {
	k := oc.key
	m := l.dataFor(Data{Comm: k.Comm, Src: k.Src, Dst: k.Dst, Tag: e.tag, Seq: e.seq, Payload: e.payload, Control: oc.control})
	n := 0
	for j := range l.lay.Replicas {
		q := l.lay.Phys(k.Dst, j)
		switch {
		case !l.alive[q]:
		case q == l.self:
			// Delivered here, it may be held for later: a message of
			// its own, never outData.
			own := *m
			l.onData(&own)
		default:
			l.env.Send(q, m)
			n++
		}
	}
	return n
}

// dataFor returns d as a message to hand env.Send: outData when the Env
// is done with it on return, which a message sent on every transmission
// then does not allocate; a copy of its own otherwise.
func (l *Layer) dataFor(d Data) *Data {
	if !l.copies {
		m := new(Data)
		*m = d
		return m
	}
	l.outData = d
	return &l.outData
}

func (l *Layer) onAck(from core.NodeID, a *Ack) {
	if a.Src != l.rank || !l.validRank(a.Dst) || l.lay.Rank(from) != a.Dst {
		l.stats.BadMessages++
		return
	}
	oc := l.out(chanKey{Comm: a.Comm, Src: a.Src, Dst: a.Dst})
	oc.acked[from] = max(oc.acked[from], a.Upto)
	l.tryCommit(oc)
}

// tryCommit commits, at the master, what every live destination replica
// has acknowledged, and tells the fellow replicas.
func (l *Layer) tryCommit(oc *outChan) {
	if !l.IsMaster() || l.failed[oc.key.Dst] {
		return
	}
	level := ^uint64(0)
	for j := range l.lay.Replicas {
		if q := l.lay.Phys(oc.key.Dst, j); l.alive[q] {
			level = min(level, oc.acked[q])
		}
	}
	if level <= oc.committed {
		return
	}
	l.commit(oc, level)
	for j := range l.lay.Replicas {
		if q := l.lay.Phys(l.rank, j); l.alive[q] && q != l.self {
			c := &l.outCommit
			if !l.copies {
				c = new(Commit)
			}
			*c = Commit{Comm: oc.key.Comm, Src: oc.key.Src, Dst: oc.key.Dst, Upto: level}
			l.env.Send(q, c)
			l.stats.Commits++
		}
	}
}

// commit records that sends ≤ upto are committed and drops them from the
// backup table.
func (l *Layer) commit(oc *outChan, upto uint64) {
	if upto <= oc.committed {
		return
	}
	oc.committed = upto
	i := 0
	for i < len(oc.backup) && oc.backup[i].seq <= upto {
		i++
	}
	if i > 0 {
		// A send to this process's own rank may still be waiting in a
		// Delivered event: its payload is not released.
		if l.cfg.KeepReleased && oc.key.Dst != l.rank {
			for _, e := range oc.backup[:i] {
				l.released = append(l.released, e.payload)
			}
		}
		l.backup(-i, -payloadBytes(oc.backup[:i]))
		oc.backup = slices.Delete(oc.backup, 0, i) // its array kept for the next sends

	}
}

func (l *Layer) onCommit(from core.NodeID, c *Commit) {
	if c.Src != l.rank || l.lay.Rank(from) != l.rank || !l.validRank(c.Dst) {
		l.stats.BadMessages++
		return
	}
	l.commit(l.out(chanKey{Comm: c.Comm, Src: c.Src, Dst: c.Dst}), c.Upto)
}

// ---- receiving ----

func (l *Layer) onData(m *Data) {
	if m.Dst != l.rank || !l.validRank(m.Src) || m.Seq == 0 {
		l.stats.BadMessages++
		return
	}
	ic := l.in(chanKey{Comm: m.Comm, Src: m.Src, Dst: m.Dst})
	switch {
	case m.Seq <= ic.delivered:
		l.stats.Duplicates++
		l.markDirty(ic) // a new master resends: it needs the level
		return
	case m.Seq > ic.delivered+1 || ic.reserved:
		if ic.held == nil {
			ic.held = map[uint64]*Data{}
		}
		if _, ok := ic.held[m.Seq]; !ok {
			if l.borrowed {
				c := *m
				c.Payload = slices.Clone(m.Payload)
				m = &c
			}
			ic.held[m.Seq] = m
			l.stats.Early++
		}
		return
	}
	l.deliver(ic, m)
	l.deliverHeld(ic)
}

// deliverHeld delivers what ic holds that now follows its last delivery,
// and acknowledges.
func (l *Layer) deliverHeld(ic *inChan) {
	for {
		next, ok := ic.held[ic.delivered+1]
		if !ok {
			break
		}
		delete(ic.held, next.Seq)
		l.deliver(ic, next)
	}
	for seq := range ic.held {
		if seq <= ic.delivered {
			delete(ic.held, seq)
		}
	}
	if ic.delivered-ic.acked >= uint64(l.cfg.AckEvery) {
		l.ackNow(ic)
	} else {
		l.markDirty(ic)
	}
}

// ReserveNext lets the caller place the payload of m, a Data from
// process from whose payload has not arrived yet (a transport reading it
// straight into the application's buffer): it reports true when m is the
// next message of its channel and no other copy of it is being placed.
// Until the caller ends the reservation with [Layer.CommitReserved] or
// [Layer.ReleaseReserved], the channel delivers nothing: every copy of
// that message, or a later one, received meanwhile (a new master's resend
// on another connection) is held. m.Payload is not looked at.
func (l *Layer) ReserveNext(from core.NodeID, m *Data) bool {
	if !l.started || !l.lay.Contains(from) || m.Control || m.Dst != l.rank || !l.validRank(m.Src) || m.Seq == 0 {
		return false
	}
	ic := l.in(chanKey{Comm: m.Comm, Src: m.Src, Dst: m.Dst})
	if ic.reserved || m.Seq != ic.delivered+1 {
		return false
	}
	ic.reserved = true
	return true
}

// CommitReserved ends a reservation of m (ReserveNext) whose payload the
// caller has placed: m is delivered, and the [Delivered] event says so
// (Placed; its Payload is m.Payload, which may be nil: the caller has the
// payload). Copies held meanwhile are dropped, later messages delivered.
func (l *Layer) CommitReserved(m *Data) {
	ic := l.reservedIn(m)
	ic.reserved = false
	ic.delivered++
	l.stats.Delivered++
	l.stats.Placed++
	l.emitDelivered(Delivered{Comm: m.Comm, Src: m.Src, Tag: m.Tag, Seq: m.Seq, Payload: m.Payload, Placed: true})
	l.deliverHeld(ic)
}

// ReleaseReserved ends a reservation of m (ReserveNext) whose payload did
// not arrive (a connection that failed during the read; or a caller that
// found nowhere to place it, and hands m to Receive instead): a copy
// received meanwhile is delivered now.
func (l *Layer) ReleaseReserved(m *Data) {
	ic := l.reservedIn(m)
	ic.reserved = false
	if _, ok := ic.held[ic.delivered+1]; ok {
		l.deliverHeld(ic)
	}
}

func (l *Layer) reservedIn(m *Data) *inChan {
	ic := l.ins[chanKey{Comm: m.Comm, Src: m.Src, Dst: m.Dst}]
	if ic == nil || !ic.reserved || m.Seq != ic.delivered+1 {
		panic(fmt.Sprintf("replica: %v seq %d ended without its reservation", chanKey{Comm: m.Comm, Src: m.Src, Dst: m.Dst}, m.Seq))
	}
	return ic
}

func (l *Layer) deliver(ic *inChan, m *Data) {
	ic.delivered++
	l.stats.Delivered++
	l.emitDelivered(Delivered{Comm: m.Comm, Src: m.Src, Tag: m.Tag, Seq: m.Seq, Payload: m.Payload})
}

// emitDelivered emits d, by value where the Env takes it so.
func (l *Layer) emitDelivered(d Delivered) {
	if l.deliveries != nil {
		l.deliveries.EmitDelivered(d)
		return
	}
	l.env.Emit(d)
}

func (l *Layer) markDirty(ic *inChan) {
	if !ic.dirty {
		ic.dirty = true
		l.dirty = append(l.dirty, ic)
	}
	if !l.ackArmed {
		l.ackArmed = true
		l.env.SetTimer(l.cfg.AckDelay, ackTick{})
	}
}

// ackNow acknowledges ic to the sender rank's master.
func (l *Layer) ackNow(ic *inChan) {
	ic.dirty = false
	to := l.masters[ic.key.Src]
	if to == core.None {
		return
	}
	ic.acked = ic.delivered
	a := &l.outAck // onAck keeps nothing of it, nor does Send (copies)
	if !l.copies {
		a = new(Ack)
	}
	*a = Ack{Comm: ic.key.Comm, Src: ic.key.Src, Dst: ic.key.Dst, Upto: ic.delivered}
	l.stats.Acks++
	if to == l.self {
		l.onAck(l.self, a)
		return
	}
	l.env.Send(to, a)
}

// ---- retransmission ----

// The links under the layer are reliable FIFO while a connection lives,
// but a host may drop a message (a peer's queue full) and a connection
// that breaks loses what it held. So the master sends again, to a live
// destination replica that acknowledged nothing new for
// Config.Retransmit while sends to it wait for its acknowledgement, every
// send of the backup table above its level (at most retransmitBurst of
// them per tick). A receiver drops duplicates and acknowledges them.

// retransmitBurst bounds the messages sent again to one replica per tick.
const retransmitBurst = 64

func (l *Layer) armResend() {
	if l.resendArmed || l.cfg.Retransmit <= 0 || !l.IsMaster() {
		return
	}
	l.resendArmed = true
	l.env.SetTimer(l.cfg.Retransmit, resendTick{})
}

func (l *Layer) retransmit() {
	if !l.IsMaster() {
		return
	}
	pending := false
	for _, oc := range l.outOrder {
		if len(oc.backup) == 0 || l.failed[oc.key.Dst] {
			continue
		}
		pending = true
		if oc.seen == nil {
			oc.seen = map[core.NodeID]uint64{}
		}
		top := oc.backup[len(oc.backup)-1].seq
		for _, q := range l.live(oc.key.Dst) {
			if q == l.self {
				continue
			}
			level, was := oc.acked[q], oc.seen[q]
			oc.seen[q] = level
			if level >= top || level > was {
				continue // holds everything, or made progress since the last tick
			}
			n := 0
			for _, e := range oc.backup {
				if e.seq <= level {
					continue
				}
				if n == retransmitBurst {
					break
				}
				l.env.Send(q, l.dataFor(Data{Comm: oc.key.Comm, Src: oc.key.Src, Dst: oc.key.Dst, Tag: e.tag, Seq: e.seq, Payload: e.payload, Control: oc.control}))
				l.stats.Retransmits++
				n++
			}
		}
	}
	if pending {
		l.armResend()
	}
}

// ---- the end ----

func (l *Layer) onFinish() {
	if l.finishing {
		return
	}
	l.finishing = true
	l.fin[l.self] = true
	for p, alive := range l.alive {
		if alive && core.NodeID(p) != l.self {
			l.env.Send(core.NodeID(p), &Fin{})
		}
	}
	l.finProgress()
}

// finProgress emits Finished once this process finished and every live
// process did too.
func (l *Layer) finProgress() {
	if !l.finishing || l.finished {
		return
	}
	for p, alive := range l.alive {
		if alive && !l.fin[p] {
			return
		}
	}
	l.finished = true
	l.env.Emit(Finished{})
}

// Describe summarises the layer's state for failure reports: the masters,
// the decisions, every channel with something in its backup table, and
// every channel it receives on: how far it delivered, what it holds early.
func (l *Layer) Describe() string {
	s := fmt.Sprintf("%v rank %d: masters %v, decisions base %d top %d final %d all %d consumed %d requested %d ballot %d",
		l.self, l.rank, l.masters, l.dec.base, l.dec.top(), l.dec.final, l.dec.allFinal, l.dec.consumed, l.dec.requested, l.dec.ballot)
	for _, oc := range l.outOrder {
		if len(oc.backup) > 0 {
			s += fmt.Sprintf("; %v next %d committed %d backup %d…%d acked %v", oc.key, oc.next, oc.committed, oc.backup[0].seq, oc.backup[len(oc.backup)-1].seq, oc.acked)
		}
	}
	for _, ic := range l.inOrder {
		s += fmt.Sprintf("; in %v delivered %d", ic.key, ic.delivered)
		if len(ic.held) > 0 {
			held := slices.Sorted(maps.Keys(ic.held))
			s += fmt.Sprintf(" held %v", held)
		}
	}
	return s
}
