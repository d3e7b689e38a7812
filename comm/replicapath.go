package comm

import (
	"bytes"
	"cmp"
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"
	"unsafe"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/replica"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// The replicated data path. Package replica's layer is a pure machine; the
// host would drive it from its event loop, so that every send and every
// message of the protocol took a hop onto the loop and back. Here comm
// drives it itself, under a lock of its own (replicated.lmu), from whichever
// goroutine has work for it:
//
//   - the program's goroutine hands it a send (replicaSend), and the
//     layer's message to the destination's master leaves at once, on
//     that goroutine, once it has left the lock, by the transport's
//     direct write, as an unreplicated send does (sendDirect); those to
//     its other replicas leave the same way a few at a time
//     (replicalazy.go);
//   - the transport's reader goroutine hands it every frame of the
//     protocol (Session.dataPath), so a message is delivered to the
//     matching engine, and acknowledgements and commits are sent, without
//     the loop;
//   - the loop hands it what only the loop has: the membership's views,
//     Decide and Finish requests;
//   - its timers expire on a goroutine of the runtime's (see Timers).
//
// Every call into the layer holds that lock, so the layer still sees one
// call at a time, as its contract asks. Every other message it sends goes
// to the transport under that lock, never waiting: a Data that finds the
// data queue full is dropped (the layer retransmits), a control message
// goes in the transport's control lane, or waits in a lane of comm's own
// when that is full (replicalane.go). A direct write may wait for the
// peer's buffer, so it must not hold the lock: a reader that waited for
// it would stop reading, and two processes could each wait for the
// other's. The data messages of two sends made at once by two goroutines
// of the program may so leave out of order; the receiver holds the early
// one until the gap fills (the layer delivers in sequence order). The
// events it emits are queued under the lock and handed to the session in
// that order by one goroutine at a time (dispatch), never under the lock:
// the session's handlers take its own lock and may send, which calls the
// layer again.
//
// Timers: the layer's timers are the runtime's (time.AfterFunc), whose
// expiry calls the layer like any other goroutine, under the lock. They
// are mostly set off the loop (an acknowledgement due after a delivery on
// a reader), where arming one on the loop would take a goroutine's
// wake-up and a turn of the loop, and firing it another turn. The layer
// arms its acknowledgement timer once per Config.AckDelay at most and its
// retransmission timer once per Config.Retransmit, so this costs a few
// wake-ups a millisecond at most, not one per message.
//
// What the host did for the layer's messages comm does here: it stamps a
// frame with the session's epoch and encodes it with the job's codec; the
// stack's traffic observers no longer see these frames, so the failure
// detector keeps its own heartbeats toward a peer that only exchanges
// replicated data.

// layerMachine is the replica layer as the host's stack sees it: every
// call goes through that lock.
type layerMachine struct {
	r *replicated
}

// Protos implements core.ProtoOwner.
func (lm layerMachine) Protos() []core.Proto { return lm.r.layer.Protos() }

// Start implements core.Machine.
func (lm layerMachine) Start(env core.Env) {
	r := lm.r
	r.lmu.Lock()
	r.loopEnv = env
	r.layer.Start(layerEnv{r})
	r.started = true
	r.startedFlag.Store(true)
	// The messages that came before the layer started, in their order: a
	// layer not started drops what it receives, and the protocol resends
	// only data (a decision proposed then would be waited for for ever).
	early := r.early
	r.early = nil
	for _, e := range early {
		r.layer.Receive(e.from, e.m)
	}
	r.afterCallLocked()
	hold := r.fellowLocked()
	r.lmu.Unlock()
	r.holdAcks(hold)
	r.dispatch()
}

// Handle implements core.Machine.
func (lm layerMachine) Handle(e core.Event) { lm.r.call(func(l *replica.Layer) { l.Handle(e) }) }

// Receive implements core.Machine: the messages of the protocol that reach
// the loop (none, once the data path takes them; a node's own messages).
func (lm layerMachine) Receive(from core.NodeID, m core.Msg) {
	lm.r.call(func(l *replica.Layer) { l.Receive(from, m) })
}

// Fire implements core.Machine.
func (lm layerMachine) Fire(t core.Timer) { lm.r.call(func(l *replica.Layer) { l.Fire(t) }) }

// call runs f on the layer, from any goroutine.
func (r *replicated) call(f func(l *replica.Layer)) {
	r.lmu.Lock()
	f(r.layer)
	r.afterCallLocked()
	hold := r.fellowLocked()
	r.lmu.Unlock()
	r.holdAcks(hold)
	r.dispatch()
}

// afterCallLocked runs what a call left: messages the layer sent to its
// own process, and sends held while the backup table was full once it has
// room again.
func (r *replicated) afterCallLocked() {
	for len(r.selfQ) > 0 {
		m := r.selfQ[0]
		r.selfQ[0] = nil
		r.selfQ = r.selfQ[1:]
		r.layer.Receive(r.phys, m)
	}
	r.selfQ = nil
	r.shared.d, r.shared.b = replica.Data{}, nil
	r.dropLazyLocked()
	r.keepReleasedLocked()
	for len(r.held) > 0 && r.started && !r.layer.BackupFull() {
		e := r.held[0]
		r.held[0] = pendingSend{}
		r.held = r.held[1:]
		r.handOverLocked(e)
	}
	if r.heldControl > 0 && r.started {
		// Control channels do not wait for room (replicaSend).
		r.held = slices.DeleteFunc(r.held, func(e pendingSend) bool {
			if e.send.Control {
				r.handOverLocked(e)
			}
			return e.send.Control
		})
	}
	if len(r.held) == 0 {
		r.held = nil
		r.stalled.Store(false)
		if r.idle != nil {
			close(r.idle)
			r.idle = nil
		}
	}
}

// handOverLocked hands a held send to the layer; lmu is held.
func (r *replicated) handOverLocked(e pendingSend) {
	if e.send.Control {
		r.heldControl--
	}
	r.layer.Handle(e.send)
	if e.req != nil {
		r.completed = append(r.completed, e.req)
	}
}

// dispatch hands the events the layer emitted to the session, in order,
// and completes the requests of held sends that went out. One goroutine
// dispatches at a time; one that finds another at it leaves its events
// to that one.
func (r *replicated) dispatch() {
	r.lmu.Lock()
	if r.dispatching {
		r.lmu.Unlock()
		return
	}
	r.dispatching = true
	r.dispatchLocked()
}

// dispatchLocked is dispatch for a caller that holds the lock and has set
// dispatching; it returns with the lock released.
func (r *replicated) dispatchLocked() {
	for len(r.events) > 0 || len(r.completed) > 0 {
		evs, reqs := r.events, r.completed
		r.events, r.completed = r.spareEvents[:0], nil
		r.lmu.Unlock()
		for _, req := range reqs {
			req.complete(Status{}, nil)
		}
		for i, e := range evs {
			if e.ev == nil {
				r.sess.onDelivered(e.d)
			} else {
				r.sess.onReplicaEvent(e.ev)
			}
			evs[i] = layerEvent{}
		}
		r.lmu.Lock()
		r.spareEvents = evs[:0]
	}
	r.dispatching = false
	r.lmu.Unlock()
}

// layerEnv is the Env of the replica layer: every method runs under
// layerLock, on the loop or off it.
type layerEnv struct{ r *replicated }

func (e layerEnv) Self() core.NodeID { return e.r.phys }

func (e layerEnv) Now() time.Duration { return e.r.loopEnv.Now() }

func (e layerEnv) Rand() *rand.Rand { return e.r.loopEnv.Rand() }

// Send hands m to the transport at once. A control message (all but
// Data) is never dropped (sendControl, replicalane.go). A Data is dropped
// if the peer's data queue is full (the layer retransmits); a small one is
// encoded into a buffer the layer reuses, which the transport copies, a
// large one (more than sharedEncoding bytes) once into a buffer of its own
// that the frames to every replica of the destination share: the layer
// sends one message to each in a row, and the transport only reads a
// frame's payload. The layer reuses one Data for all its transmissions
// (SendCopies), so Send keeps a copy of what it holds for later (direct)
// and knows the shared message by its contents, not its address.
func (e layerEnv) Send(to core.NodeID, m core.Msg) {
	r := e.r
	if to == r.phys {
		r.selfQ = append(r.selfQ, m)
		return
	}
	d, ok := m.(*replica.Data)
	if !ok || d.Control {
		r.sendControl(to, m)
		return
	}
	if r.collecting {
		r.direct = append(r.direct, directData{to: to, m: *d})
		return
	}
	f := wire.Frame{Kind: m.Kind(), Epoch: r.sess.epoch.Load()}
	var err error
	if len(d.Payload) > sharedEncoding {
		if !sameData(&r.shared.d, d) {
			b, merr := r.codec.Marshal(m)
			if merr != nil {
				panic("comm: the replica layer sent a message its codec cannot encode: " + merr.Error())
			}
			r.shared.d, r.shared.b = *d, b
		}
		f.Payload = r.shared.b
		err = r.sess.tr.Send(doneCtx, to, f)
	} else {
		r.enc.B = r.enc.B[:0]
		if eerr := r.codec.Encode(&r.enc, m); eerr != nil {
			panic("comm: the replica layer sent a message its codec cannot encode: " + eerr.Error())
		}
		f.Payload = r.enc.B
		if c, ok := r.sess.tr.(transport.Copier); ok {
			err = c.SendCopy(doneCtx, to, f)
		} else {
			f.Payload = bytes.Clone(f.Payload)
			err = r.sess.tr.Send(doneCtx, to, f)
		}
	}
	if err != nil {
		r.dropped.Add(1)
	}
}

// sameData reports whether a and b are the same message of the layer:
// the same identifier and the same payload buffer.
func sameData(a, b *replica.Data) bool {
	return a.Comm == b.Comm && a.Src == b.Src && a.Dst == b.Dst && a.Tag == b.Tag && a.Seq == b.Seq &&
		a.Control == b.Control && len(a.Payload) == len(b.Payload) &&
		unsafe.SliceData(a.Payload) == unsafe.SliceData(b.Payload)
}

// sendDirect writes m to replica to as an unreplicated data frame goes
// (transport/tcp's TrySendDirect, then SendDirect): on the calling
// goroutine, its header built on the stack and its payload written from
// the backup table, with no copy, when the connection is idle; otherwise
// copied and queued, or dropped if the queue is full (the layer
// retransmits). A large payload is lent to the transport's resend log
// (lend), which then keeps no copy of its own. It runs after the
// layer's lock is released, so a write that waits for the peer's buffer
// holds back only this goroutine, never the readers that hand the layer
// the peer's frames.
func (r *replicated) sendDirect(to core.NodeID, m *replica.Data) {
	// The header is built on the stack: every transport call here copies
	// what it keeps (SendDirect copies a frame it queues).
	var hb [replica.DataHeaderMax]byte
	epoch := r.sess.epoch.Load()
	f := wire.Frame{Kind: replica.KindData, Epoch: epoch, Payload: m.AppendHeader(hb[:0])}
	if len(m.Payload) >= reuseMin {
		release := r.lend(m.Payload)
		if r.sess.tcpTr.TryLendDirectAny(to, f, m.Payload, release) {
			return
		}
		release() // not lent
	}
	if r.sess.tcpTr.TrySendDirect(to, f, m.Payload) {
		return
	}
	if err := r.sess.tcpTr.SendDirect(r.sess.try, to, f, m.Payload); err != nil {
		r.dropped.Add(1)
	}
}

// sharedEncoding is the payload size above which a Data message is encoded
// once for every replica of its destination (layerEnv.Send).
const sharedEncoding = 4 << 10

// SendCopies implements core.SendCopier: Send is done with m on return.
func (e layerEnv) SendCopies() bool { return true }

// SetTimer arms t on the runtime's timers: when it expires, the layer
// fires it under the lock, unless the session has ended. The layer keeps
// no timer id. A runtime timer that fired is armed again for the next
// timer equal to its own: the layer arms its acknowledgement and
// retransmission timers again and again, one at a time.
func (e layerEnv) SetTimer(after time.Duration, t core.Timer) core.TimerID {
	r := e.r
	comparable := reflect.TypeOf(t).Comparable()
	for _, lt := range r.timers {
		if !lt.armed && comparable && lt.comparable && lt.t == t {
			lt.armed = true
			lt.timer.Reset(after)
			return 0
		}
	}
	lt := &layerTimer{t: t, armed: true, comparable: comparable}
	lt.timer = time.AfterFunc(after, func() { r.fire(lt) })
	r.timers = append(r.timers, lt)
	return 0
}

// layerTimer is a runtime timer of the layer's (SetTimer); lmu.
type layerTimer struct {
	t          core.Timer
	timer      *time.Timer
	armed      bool // t is due: the timer is not to be armed for another
	comparable bool // t can be compared with ==
}

// fire fires lt's timer in the layer, unless the session has ended.
func (r *replicated) fire(lt *layerTimer) {
	if r.sess.base.Err() != nil {
		return
	}
	r.call(func(l *replica.Layer) {
		lt.armed = false
		l.Fire(lt.t)
	})
}

// CancelTimer does nothing: the layer cancels no timer.
func (e layerEnv) CancelTimer(core.TimerID) {}

// Emit queues ev for dispatch.
func (e layerEnv) Emit(ev core.Event) { e.r.events = append(e.r.events, layerEvent{ev: ev}) }

// EmitDelivered implements replica.DeliveredEmitter: d is queued for
// dispatch as it is, not boxed in an interface.
func (e layerEnv) EmitDelivered(d replica.Delivered) {
	e.r.events = append(e.r.events, layerEvent{d: d})
}

// layerEvent is an event of the layer waiting for dispatch: ev, or when
// ev is nil the delivery d (EmitDelivered).
type layerEvent struct {
	ev core.Event
	d  replica.Delivered
}

// receive takes a frame of the replication protocol on the transport's
// reader goroutine: decoded and handed to the layer. It reports false for
// a frame that does not decode, for the host to count.
//
// The transport reuses the payload once receive returns. A Data is
// decoded in place, into the one Data of the lock's holder (rdata), and
// lent to the layer (ReceiveBorrowed: it copies what it holds for later),
// so that receiving it allocates nothing, and its delivery is dispatched before receive
// returns, by this goroutine, into the matching engine, which copies what
// it keeps, as for an unreplicated frame; only when another goroutine is
// dispatching, and may reach the delivery later, is it copied. Every other
// message is decoded from a copy (the layer keeps decisions' values).
func (r *replicated) receive(f wire.Frame) bool {
	if (f.Kind == replica.KindAck || f.Kind == replica.KindCommit) && r.startedFlag.Load() {
		return r.receiveLevel(f)
	}
	if f.Kind == replica.KindData && r.startedFlag.Load() {
		r.lmu.Lock()
		if r.decodeLocked(f.Payload, func(d *wire.Decoder) error { return replica.DecodeDataInto(d, &r.rdata) }) != nil {
			r.lmu.Unlock()
			return false
		}
		from := len(r.events)
		r.layer.ReceiveBorrowed(f.Src, &r.rdata)
		r.rdata = replica.Data{}
		r.afterCallLocked()
		if !r.dispatching {
			r.dispatching = true
			r.dispatchLocked()
			return true
		}
		for i := from; i < len(r.events); i++ {
			if e := &r.events[i]; e.ev == nil {
				e.d.Payload = bytes.Clone(e.d.Payload)
			} else if d, ok := e.ev.(replica.Delivered); ok {
				d.Payload = bytes.Clone(d.Payload)
				e.ev = d
			}
		}
		r.lmu.Unlock()
		return true
	}
	payload := f.Payload
	if !r.codec.Detached(f.Kind) {
		payload = bytes.Clone(payload)
	}
	m, err := r.codec.Unmarshal(f.Kind, payload)
	if err != nil {
		return false
	}
	r.lmu.Lock()
	if !r.started {
		r.early = append(r.early, earlyMsg{from: f.Src, m: m})
		r.lmu.Unlock()
		return true
	}
	r.lmu.Unlock()
	r.call(func(l *replica.Layer) { l.Receive(f.Src, m) })
	return true
}

// decodeLocked decodes a received payload whole with into, through the
// decoder kept for it (r.lmu held), and lets go of the payload after.
func (r *replicated) decodeLocked(payload []byte, into func(*wire.Decoder) error) error {
	r.rdec.Reset(payload)
	err := into(&r.rdec)
	if err == nil {
		err = r.rdec.Finish()
	}
	r.rdec.Reset(nil)
	return err
}

// receiveLevel is receive of an Ack or a Commit, decoded under the lock
// into the one message of its kind that it reuses (the layer keeps
// neither).
func (r *replicated) receiveLevel(f wire.Frame) bool {
	r.lmu.Lock()
	var m core.Msg
	var err error
	if f.Kind == replica.KindAck {
		m, err = &r.rack, r.decodeLocked(f.Payload, func(d *wire.Decoder) error { return replica.DecodeAckInto(d, &r.rack) })
	} else {
		m, err = &r.rcommit, r.decodeLocked(f.Payload, func(d *wire.Decoder) error { return replica.DecodeCommitInto(d, &r.rcommit) })
	}
	if err != nil {
		r.lmu.Unlock()
		return false
	}
	r.layer.Receive(f.Src, m)
	r.afterCallLocked()
	r.lmu.Unlock()
	r.dispatch()
	return true
}

// earlyMsg is a message of the protocol received before the layer
// started, kept for Start.
type earlyMsg struct {
	from core.NodeID
	m    core.Msg
}

// doneCtx is a context that is already done: a send given it never waits.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Placing replicated data. A large replicated Data whose receive is
// posted is read from the kernel straight into the receive's buffer, as an
// unreplicated message is (place.go), not into the reader's buffer and
// then copied. Its header is decoded first, and the layer is asked under
// its lock to reserve the channel's next sequence number for it
// (Layer.ReserveNext): only that number is placed, and while it is
// reserved the layer holds every other copy of it (a new master's resend
// on another connection) and every later message of the channel, so that
// the message is delivered once, in order. It is placed only when no
// event of the layer is waiting for dispatch, nor being dispatched: every
// message delivered before it is then in the matching engine, and the
// first posted receive it matches there is the one it would have matched
// the usual way. Once its last byte is in, the receive completes and the
// layer commits the delivery (CommitReserved; the Delivered event it
// emits is marked Placed and goes no further). If the read fails (the
// connection broke: its sender died, or a link failed), the receive goes
// back among the posted ones and the layer releases the number
// (ReleaseReserved): a copy it held meanwhile is delivered, or the
// source's master sends it again. A frame that finds another copy being
// placed goes the usual way (receive).
//
// A frame that finds no posted receive is read the same way into the
// pooled buffer the matching engine keeps an unexpected message in (as an
// unreplicated one is, place.go), and handed to the engine as its own once
// its last byte is in, before the layer commits it (so before any later
// message of its channel, which the reservation holds back): not into the
// reader's buffer first and copied from there. This is the common case at
// a replica that is not its rank's master: its program runs behind, and
// its data come in batches, before its receives are posted.

// replicaPlacement is a replicated Data being read into a posted
// receive's buffer (r.placing, by the sending process).
type replicaPlacement struct {
	d  replica.Data // its header; Payload nil
	q  *queue
	op *recvOp
	st Status
	// held: no receive was posted; msg is the message, its data the
	// pooled buffer being filled, for context ctxID.
	held  bool
	msg   message
	ctxID uint64
	// active: in use (a Data of the sender being placed); placing keeps
	// the sender's placement between its messages.
	active bool
}

// place is transport.Placer's Place of a replicated Data.
func (r *replicated) place(f wire.Frame, n int) (int, []byte) {
	var d replica.Data
	hl, size, ok := replica.DecodeDataHeader(f.Payload, &d)
	kind := core.Kind(d.Comm)
	if !ok || hl+size != n || d.Comm > 0xffff || (kind != kindData && kind != kindCData) {
		return 0, nil
	}
	h, data, err := parseData(f.Payload[hl:], kind)
	if err != nil {
		return 0, nil // refused the usual way
	}
	skip := len(f.Payload) - len(data)
	r.lmu.Lock()
	p := r.placing[f.Src]
	if !r.started || r.dispatching || len(r.events) > 0 || p != nil && p.active || !r.layer.ReserveNext(f.Src, &d) {
		r.lmu.Unlock()
		return 0, nil
	}
	r.lmu.Unlock()
	dst, pl, ok := r.sess.placeReplica(core.NodeID(d.Src), h, n-skip)
	r.lmu.Lock()
	if !ok {
		r.layer.ReleaseReserved(&d)
		r.afterCallLocked()
		r.lmu.Unlock()
		r.dispatch()
		return 0, nil
	}
	pl.d, pl.active = d, true
	if p == nil {
		// One per sending process, reused: a placement allocates
		// nothing.
		if r.placing == nil {
			r.placing = make(map[core.NodeID]*replicaPlacement)
		}
		p = new(replicaPlacement)
		r.placing[f.Src] = p
	}
	*p = pl
	r.lmu.Unlock()
	return skip, dst
}

// placeReplica takes the first posted receive that a message of size
// bytes from rank src with header h matches, if it may be placed there,
// or else a pooled buffer to keep it in as unexpected; it takes s.mu.
func (s *Session) placeReplica(src core.NodeID, h dataHeader, size int) ([]byte, replicaPlacement, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != nil || int(src) >= len(s.failed) || s.failed[src] {
		return nil, replicaPlacement{}, false
	}
	q := s.queues[h.ctxID]
	if q == nil || q.comm == nil || q.comm.revoked {
		return nil, replicaPlacement{}, false
	}
	rank, ok := q.comm.rankOf(src)
	if !ok {
		return nil, replicaPlacement{}, false
	}
	for i, op := range q.posted {
		if !op.matches(src, h.tag, 0) {
			continue
		}
		if !op.alloc && len(op.buf) < size {
			return nil, replicaPlacement{}, false // truncated: the usual path says so
		}
		dst := op.buf[:size:size]
		if op.alloc {
			dst = make([]byte, size)
			op.req.data = dst
		}
		q.posted = slices.Delete(q.posted, i, i+1)
		if h.credit > 0 {
			s.addCreditLocked(src, h.credit)
		}
		s.stats.placed.Add(1)
		return dst, replicaPlacement{q: q, op: op, st: Status{Source: rank, Tag: h.tag, Count: size}}, true
	}
	if h.credit > 0 {
		s.addCreditLocked(src, h.credit)
	}
	s.stats.placedHeld.Add(1)
	dst, buf := pooledBuf(size)
	return dst, replicaPlacement{held: true, ctxID: h.ctxID,
		msg: message{src: src, tag: h.tag, vnode: VNode(h.vnode), data: dst, buf: buf}}, true
}

// placed is transport.Placer's Placed of a replicated Data: its receive
// completes and the layer commits it, or (ok false) the receive goes back
// among the posted ones and the layer releases it.
func (r *replicated) placed(f wire.Frame, ok bool) {
	r.lmu.Lock()
	var p replicaPlacement
	if q := r.placing[f.Src]; q != nil {
		p, *q = *q, replicaPlacement{}
	}
	r.lmu.Unlock()
	if !p.active {
		return
	}
	s := r.sess
	if p.held {
		r.placedHeld(&p, ok)
		return
	}
	op := p.op
	s.mu.Lock()
	switch {
	case ok:
		op.req.complete(p.st, nil)
	case s.state != nil:
		op.req.complete(Status{}, s.state)
	default:
		if op.alloc {
			op.req.data = nil
		}
		i, _ := slices.BinarySearchFunc(p.q.posted, op.seq, func(o *recvOp, seq uint64) int {
			return cmp.Compare(o.seq, seq)
		})
		p.q.posted = slices.Insert(p.q.posted, i, op)
		s.recheckLocked(p.q)
	}
	s.mu.Unlock()
	r.settleReserved(&p.d, ok)
}

// settleReserved tells the layer how a placement it reserved ended:
// committed if ok, released otherwise; then dispatches what that emits.
func (r *replicated) settleReserved(d *replica.Data, ok bool) {
	r.lmu.Lock()
	if ok {
		r.layer.CommitReserved(d)
	} else {
		r.layer.ReleaseReserved(d)
	}
	r.afterCallLocked()
	r.lmu.Unlock()
	r.dispatch()
}

// placedHeld is placed of a message read into a pooled buffer (no receive
// was posted): the engine takes it as its own, then the layer commits it;
// or, cut off, the buffer goes back and the layer releases it.
func (r *replicated) placedHeld(p *replicaPlacement, ok bool) {
	if ok {
		r.sess.deliverMsg(int(p.msg.src), p.ctxID, p.msg, true)
	} else {
		p.msg.recycle()
	}
	r.settleReserved(&p.d, ok)
}
