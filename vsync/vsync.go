// The multicast layer's state, delivery and flush are in this file: the
// flush rewrites the delivery state and is only checkable beside it.

package vsync

import (
	"fmt"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/stable"
)

// Stats counts what a [Layer] did. Buffered and BufferedBytes are what it
// holds now (messages and payload bytes, every view, own messages
// included); the peaks are their maxima since Start.
type Stats struct {
	Sent          uint64 // own messages multicast
	Delivered     uint64 // messages delivered to the application, own included
	Received      uint64 // data messages received that were new
	Duplicates    uint64 // data messages received that were already held (or too far ahead)
	Late          uint64 // data messages of a view this node has left
	Expired       uint64 // data messages of a view not installed here in time, dropped (see expireEarly)
	Resent        uint64 // data messages sent in answer to a NACK
	Nacks         uint64 // NACKs sent
	Digests       uint64 // digests sent
	Refused       uint64 // multicasts refused
	Flushes       uint64 // flushes completed
	Queued        int    // multicasts waiting for the window or a view
	Buffered      int
	BufferedBytes int
	PeakBuffered  int
	PeakBytes     int
}

// Layer is the reliable-multicast and view-synchrony machine of one node.
// Build it with [New] and place it in a core.Stack above the membership
// and stability layers.
type Layer struct {
	cfg  Config
	env  core.Env
	self core.NodeID

	app *viewState // the application's view (nil before the first)
	cur *viewState // the membership layer's newest view

	fl   *flush
	done *record // the last flush completed (answers stragglers)

	early   map[uint64][]*Data       // data of views newer than cur
	earlyAt map[uint64]time.Duration // when the first of each early view's data arrived
	earlyN  int
	pending map[uint64]map[core.NodeID]*Flush // reports for targets newer than cur

	queue [][]byte

	installedAt   time.Duration // when cur arrived
	stuckSince    time.Duration // when own stability last advanced
	lastStableOwn uint64
	progressDirty bool
	started       bool

	stats Stats
}

// flush is a running flush from the application's view old to the
// membership layer's view target.
type flush struct {
	target, old *viewState
	report      *Flush                 // this node's (frozen)
	wait        []core.NodeID          // members of target that were in old
	reports     map[core.NodeID]*Flush // from wait
	cut         []uint64               // nil until every report is in
	parts       []core.NodeID          // participants: reports with the same old view
	oks         map[core.NodeID]bool   // FLUSH_OK received
	reached     bool                   // this node holds the cut
}

// record is a completed flush, kept to answer nodes that still run it.
type record struct {
	target, old uint64
	report      *Flush
}

type tick struct{}

// New returns a layer. Its first view comes from the membership layer
// (core.MembersChanged), as do all later ones.
func New(cfg Config) (*Layer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Layer{
		cfg:     cfg,
		early:   map[uint64][]*Data{},
		earlyAt: map[uint64]time.Duration{},
		pending: map[uint64]map[core.NodeID]*Flush{},
	}, nil
}

// Protos implements core.ProtoOwner.
func (l *Layer) Protos() []core.Proto { return []core.Proto{core.ProtoVsync} }

// Stats returns the counters. Call it from the goroutine that drives the
// machine.
func (l *Layer) Stats() Stats {
	s := l.stats
	s.Queued = len(l.queue)
	return s
}

// View returns the application's view epoch (0 before the first) and
// whether a flush is running.
func (l *Layer) View() (epoch uint64, flushing bool) {
	if l.app == nil {
		return 0, false
	}
	return l.app.epoch, l.fl != nil
}

// Start implements core.Machine.
func (l *Layer) Start(env core.Env) {
	l.env = env
	l.self = env.Self()
	l.started = true
	env.SetTimer(l.cfg.Retransmit, tick{})
}

// Fire implements core.Machine.
func (l *Layer) Fire(t core.Timer) {
	if _, ok := t.(tick); !ok {
		return
	}
	l.env.SetTimer(l.cfg.Retransmit, tick{})
	l.onTick()
	l.finish()
}

// Handle implements core.Machine.
func (l *Layer) Handle(e core.Event) {
	if !l.started {
		return
	}
	switch x := e.(type) {
	case core.MembersChanged:
		l.onView(x)
	case stable.Stable:
		l.onStable(x)
	case Multicast:
		l.onMulticast(x)
	default:
		return
	}
	l.finish()
}

// Receive implements core.Machine.
func (l *Layer) Receive(from core.NodeID, m core.Msg) {
	if !l.started {
		return
	}
	switch x := m.(type) {
	case *Data:
		l.onData(x)
	case *Nack:
		l.onNack(from, x)
	case *Digest:
		l.onDigest(from, x)
	case *Flush:
		l.onFlush(from, x)
	case *FlushOK:
		l.onFlushOK(from, x)
	default:
		return
	}
	l.finish()
}

// finish emits the progress of the membership layer's view if it changed.
func (l *Layer) finish() {
	if !l.progressDirty || l.cur == nil {
		return
	}
	l.progressDirty = false
	l.env.Emit(stable.Progress{Epoch: l.cur.epoch, Have: l.cur.haves()})
}

// buffer accounts for msgs messages of bytes payload bytes entering (or,
// negative, leaving) the buffers.
func (l *Layer) buffer(msgs, bytes int) {
	l.stats.Buffered += msgs
	l.stats.BufferedBytes += bytes
	l.stats.PeakBuffered = max(l.stats.PeakBuffered, l.stats.Buffered)
	l.stats.PeakBytes = max(l.stats.PeakBytes, l.stats.BufferedBytes)
}

func (l *Layer) dropView(vs *viewState) {
	for i := range vs.streams {
		m, b := vs.streams[i].count()
		l.buffer(-m, -b)
		vs.streams[i].held = nil
	}
}

// viewOf returns the state of view epoch if this node keeps one.
func (l *Layer) viewOf(epoch uint64) *viewState {
	switch {
	case l.app != nil && l.app.epoch == epoch:
		return l.app
	case l.cur != nil && l.cur.epoch == epoch:
		return l.cur
	}
	return nil
}

// maxAhead bounds how far beyond the freed prefix a stream holds messages.
func (l *Layer) maxAhead() uint64 { return 4 * uint64(l.cfg.Window) }

// ---- views and flushes ----

func (l *Layer) onView(mc core.MembersChanged) {
	if l.cur != nil && mc.Epoch <= l.cur.epoch {
		return
	}
	if !slices.Contains(mc.Members, l.self) {
		return // the membership layer installs only views that hold this node
	}
	prev := l.cur
	l.cur = newViewState(mc.Epoch, mc.Members, l.self)
	l.installedAt = l.env.Now()
	l.progressDirty = true
	if prev != nil && prev != l.app {
		l.dropView(prev) // a target abandoned for a newer view: never delivered
	}
	for e, ms := range l.early {
		if e <= mc.Epoch {
			delete(l.early, e)
			delete(l.earlyAt, e)
			l.earlyN -= len(ms)
			for _, m := range ms {
				l.buffer(-1, -len(m.Payload))
				if e == mc.Epoch {
					l.onData(m)
				}
			}
		}
	}
	if l.app == nil {
		l.done = &record{target: mc.Epoch, report: &Flush{Target: mc.Epoch}}
		l.switchTo(l.cur, 0, 0, 0, 0)
		return
	}
	l.startFlush()
}

// startFlush (re)starts the flush from the application's view to cur.
func (l *Layer) startFlush() {
	old, t := l.app, l.cur
	fl := &flush{
		target:  t,
		old:     old,
		report:  &Flush{Target: t.epoch, Old: old.epoch, Vector: old.delivered()},
		reports: map[core.NodeID]*Flush{},
		oks:     map[core.NodeID]bool{},
	}
	for _, q := range t.members {
		if q == l.self {
			continue
		}
		l.env.Send(q, fl.report)
		if _, ok := old.pos[q]; ok {
			fl.wait = append(fl.wait, q)
		}
	}
	for q, r := range l.pending[t.epoch] {
		if slices.Contains(fl.wait, q) {
			fl.reports[q] = r
		}
	}
	for e := range l.pending {
		if e <= t.epoch {
			delete(l.pending, e)
		}
	}
	l.fl = fl
	l.tryCut()
}

func (l *Layer) onFlush(from core.NodeID, m *Flush) {
	fl := l.fl
	switch {
	case fl != nil && m.Target == fl.target.epoch:
		_, dup := fl.reports[from]
		waited := slices.Contains(fl.wait, from)
		if !dup && waited {
			fl.reports[from] = m
		}
		if dup || !waited {
			// The peer sends again: it lacks this node's report or OK. Or
			// this node does not wait for the peer (the peer was not in
			// its old view) while the peer, whose old view holds this
			// node, waits for this node's report: this node's first
			// report to it may have been lost, and this node resends only
			// to the members it waits for, so it answers.
			l.env.Send(from, fl.report)
			if fl.reached && m.Old == fl.old.epoch {
				l.env.Send(from, &FlushOK{Target: m.Target, Old: m.Old})
			}
		}
		l.tryCut()
	case l.done != nil && m.Target == l.done.target:
		l.env.Send(from, l.done.report)
		if l.done.old != 0 && m.Old == l.done.old {
			l.env.Send(from, &FlushOK{Target: m.Target, Old: m.Old})
		}
	case l.cur == nil || m.Target > l.cur.epoch:
		byNode := l.pending[m.Target]
		if byNode == nil {
			if len(l.pending) >= 8 {
				return // a bound: the peer sends again
			}
			byNode = map[core.NodeID]*Flush{}
			l.pending[m.Target] = byNode
		}
		if _, ok := byNode[from]; !ok {
			byNode[from] = m
		}
	}
}

func (l *Layer) onFlushOK(from core.NodeID, m *FlushOK) {
	fl := l.fl
	if fl == nil || m.Target != fl.target.epoch || m.Old != fl.old.epoch {
		return
	}
	fl.oks[from] = true
	l.checkDone()
}

// tryCut computes the cut once every awaited report is in: the element-wise
// maximum of the vectors of the participants (this node and the reporters
// whose application is in the same old view).
func (l *Layer) tryCut() {
	fl := l.fl
	if fl == nil || fl.cut != nil {
		return
	}
	for _, q := range fl.wait {
		if fl.reports[q] == nil {
			return
		}
	}
	cut := slices.Clone(fl.report.Vector)
	for _, q := range fl.wait {
		r := fl.reports[q]
		if r.Old != fl.old.epoch || len(r.Vector) != len(cut) {
			continue
		}
		fl.parts = append(fl.parts, q)
		for i, v := range r.Vector {
			cut[i] = max(cut[i], v)
		}
	}
	fl.cut = cut
	l.pull()
	l.checkReached()
}

// pull delivers what this node holds of the cut and asks a participant
// that reported the missing messages for the rest.
func (l *Layer) pull() {
	fl := l.fl
	if fl == nil || fl.cut == nil {
		return
	}
	now := l.env.Now()
	for i := range fl.old.streams {
		l.deliver(fl.old, i)
		st := &fl.old.streams[i]
		if st.have >= fl.cut[i] || (st.nacked && now-st.lastNack < l.cfg.Retransmit) {
			continue
		}
		var holders []core.NodeID
		for _, q := range fl.parts {
			if fl.reports[q].Vector[i] >= fl.cut[i] {
				holders = append(holders, q)
			}
		}
		if len(holders) == 0 {
			panic(fmt.Sprintf("vsync: %v: cut %d of sender %d held by nobody", l.self, fl.cut[i], i))
		}
		q := holders[l.env.Rand().IntN(len(holders))]
		to := min(fl.cut[i], st.have+uint64(l.cfg.MaxResend))
		l.env.Send(q, &Nack{Epoch: fl.old.epoch, Sender: fl.old.members[i], From: st.have + 1, To: to})
		l.stats.Nacks++
		st.lastNack, st.nacked = now, true
	}
}

func (l *Layer) checkReached() {
	fl := l.fl
	if fl == nil || fl.cut == nil || fl.reached {
		return
	}
	for i := range fl.old.streams {
		if fl.old.streams[i].delivered < fl.cut[i] {
			return
		}
	}
	fl.reached = true
	for _, q := range fl.parts {
		l.env.Send(q, &FlushOK{Target: fl.target.epoch, Old: fl.old.epoch})
	}
	l.checkDone()
}

func (l *Layer) checkDone() {
	fl := l.fl
	if fl == nil || !fl.reached {
		return
	}
	for _, q := range fl.parts {
		if !fl.oks[q] {
			return
		}
	}
	old := fl.old
	l.done = &record{target: fl.target.epoch, old: old.epoch, report: fl.report}
	l.fl = nil
	l.dropView(old)
	l.stats.Flushes++
	l.switchTo(fl.target, old.epoch, old.count, old.digest, l.env.Now()-l.installedAt)
}

// switchTo makes vs the application's view and delivers what it holds.
func (l *Layer) switchTo(vs *viewState, prev, count, digest uint64, took time.Duration) {
	l.app = vs
	l.env.Emit(ViewChanged{Epoch: vs.epoch, Members: vs.members, Previous: prev, Count: count, Digest: digest, Flush: took})
	for i := range vs.streams {
		l.deliver(vs, i)
	}
	l.stuckSince = l.env.Now()
	l.lastStableOwn = vs.stable[vs.me]
	l.sendQueued()
}

// limit is how far the application may be delivered messages of the
// sender at position i of its view: everything held, except during a flush
// (nothing beyond the report until the cut is known, then the cut).
func (l *Layer) limit(i int) uint64 {
	switch {
	case l.fl == nil:
		return ^uint64(0)
	case l.fl.cut == nil:
		return l.fl.report.Vector[i]
	}
	return l.fl.cut[i]
}

// deliver hands the application the held messages of sender i of its view,
// up to the limit, then frees what is stable.
func (l *Layer) deliver(vs *viewState, i int) {
	if vs != l.app {
		return
	}
	st := &vs.streams[i]
	upTo := min(st.have, l.limit(i))
	for st.delivered < upTo {
		st.delivered++
		m := st.get(st.delivered)
		vs.count++
		vs.digest += MessageHash(m.Sender, m.Seq, m.Payload)
		l.stats.Delivered++
		l.env.Emit(Delivered{Epoch: vs.epoch, Sender: m.Sender, Seq: m.Seq, Payload: m.Payload})
	}
	msgs, bytes := st.free(vs.stable[i])
	l.buffer(-msgs, -bytes)
}

// ---- data path ----

func (l *Layer) onMulticast(x Multicast) {
	switch {
	case len(x.Payload) > l.cfg.MaxPayload:
		l.stats.Refused++
		l.env.Emit(Refused{Payload: x.Payload, Err: ErrTooLarge})
	case len(l.queue) >= l.cfg.MaxQueued:
		l.stats.Refused++
		l.env.Emit(Refused{Payload: x.Payload, Err: ErrQueueFull})
	default:
		l.queue = append(l.queue, x.Payload)
		l.sendQueued()
	}
}

// sendQueued multicasts queued payloads while the window allows.
func (l *Layer) sendQueued() {
	for l.fl == nil && l.app != nil && len(l.queue) > 0 {
		vs := l.app
		st := &vs.streams[vs.me]
		if st.have-vs.stable[vs.me] >= uint64(l.cfg.Window) {
			return
		}
		payload := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		if len(l.queue) == 0 {
			l.queue = nil
		}
		m := &Data{Epoch: vs.epoch, Sender: l.self, Seq: st.have + 1, Payload: payload}
		st.put(m, 1<<62)
		l.buffer(1, len(payload))
		l.stats.Sent++
		l.progressDirty = true
		for _, q := range vs.members {
			if q != l.self {
				l.env.Send(q, m)
			}
		}
		l.deliver(vs, vs.me)
	}
}

func (l *Layer) onData(m *Data) {
	if m.Sender == l.self {
		return // a node holds its own messages until they are stable
	}
	vs := l.viewOf(m.Epoch)
	if vs == nil {
		if l.cur == nil || m.Epoch > l.cur.epoch {
			if l.earlyN >= int(l.maxAhead()) {
				return // a bound: retransmission fetches it later
			}
			if len(l.early[m.Epoch]) == 0 {
				l.earlyAt[m.Epoch] = l.env.Now()
			}
			l.early[m.Epoch] = append(l.early[m.Epoch], m)
			l.earlyN++
			l.buffer(1, len(m.Payload))
			return
		}
		l.stats.Late++
		return
	}
	i, ok := vs.pos[m.Sender]
	if !ok {
		return
	}
	st := &vs.streams[i]
	if !st.put(m, l.maxAhead()) {
		l.stats.Duplicates++
		return
	}
	l.stats.Received++
	l.buffer(1, len(m.Payload))
	if vs == l.cur {
		l.progressDirty = true
	}
	l.deliver(vs, i)
	l.nackGap(vs, i)
	if l.fl != nil && vs == l.app {
		l.checkReached()
	}
}

// nackGap asks the sender for the messages a stream misses, at most once
// per Retransmit. During a flush the old view's messages are pulled from
// the participants instead (the sender may be gone).
func (l *Layer) nackGap(vs *viewState, i int) {
	st := &vs.streams[i]
	if st.top <= st.have || (l.fl != nil && vs == l.app) || i == vs.me {
		return
	}
	now := l.env.Now()
	if st.nacked && now-st.lastNack < l.cfg.Retransmit {
		return
	}
	st.lastNack, st.nacked = now, true
	top := st.top
	if st.get(top) != nil {
		top-- // the newest is held: ask for the hole below it
	}
	to := min(top, st.have+uint64(l.cfg.MaxResend))
	l.env.Send(vs.members[i], &Nack{Epoch: vs.epoch, Sender: vs.members[i], From: st.have + 1, To: to})
	l.stats.Nacks++
}

func (l *Layer) onNack(from core.NodeID, m *Nack) {
	vs := l.viewOf(m.Epoch)
	if vs == nil {
		return
	}
	i, ok := vs.pos[m.Sender]
	if !ok {
		return
	}
	st := &vs.streams[i]
	n := 0
	for seq := max(m.From, st.base+1); seq <= m.To && n < l.cfg.MaxResend; seq++ {
		d := st.get(seq)
		if d == nil {
			if seq > st.top {
				break
			}
			continue
		}
		l.env.Send(from, d)
		l.stats.Resent++
		n++
	}
}

func (l *Layer) onDigest(from core.NodeID, m *Digest) {
	vs := l.viewOf(m.Epoch)
	if vs == nil {
		return
	}
	i, ok := vs.pos[from]
	if !ok || i == vs.me {
		return
	}
	st := &vs.streams[i]
	st.top = max(st.top, m.Sent)
	l.nackGap(vs, i)
}

func (l *Layer) onStable(s stable.Stable) {
	vs := l.viewOf(s.Epoch)
	if vs == nil {
		return
	}
	for i := range min(len(s.Vector), len(vs.stable)) {
		// A stable count never exceeds what this node holds (it is one of
		// the members); the min guards against a faulty stability layer.
		vs.stable[i] = max(vs.stable[i], min(s.Vector[i], vs.streams[i].have))
	}
	if vs != l.app {
		return
	}
	for i := range vs.streams {
		msgs, bytes := vs.streams[i].free(vs.stable[i])
		l.buffer(-msgs, -bytes)
	}
	if own := vs.stable[vs.me]; own > l.lastStableOwn {
		l.lastStableOwn = own
		l.stuckSince = l.env.Now()
	}
	l.sendQueued()
}

// onTick retransmits: flush messages that are unanswered, requests for
// missing messages, and a digest when this node's own messages have made
// no stability progress for two periods.
func (l *Layer) onTick() {
	now := l.env.Now()
	if fl := l.fl; fl != nil {
		for _, q := range fl.wait {
			lacksOK := fl.cut != nil && slices.Contains(fl.parts, q) && !fl.oks[q]
			if fl.reports[q] == nil || lacksOK {
				l.env.Send(q, fl.report)
				if fl.reached && lacksOK {
					l.env.Send(q, &FlushOK{Target: fl.target.epoch, Old: fl.old.epoch})
				}
			}
		}
		l.pull()
	} else if vs := l.app; vs != nil {
		st := &vs.streams[vs.me]
		if st.have > vs.stable[vs.me] && now-l.stuckSince >= 2*l.cfg.Retransmit {
			l.stuckSince = now
			for _, q := range vs.members {
				if q != l.self {
					l.env.Send(q, &Digest{Epoch: vs.epoch, Sent: st.have})
				}
			}
			l.stats.Digests++
		}
	}
	if vs := l.cur; vs != nil {
		for i := range vs.streams {
			l.nackGap(vs, i)
		}
	}
	l.expireEarly(now)
}

// earlyHold is how long, in Retransmit periods, data of a view not yet
// installed here is kept.
const earlyHold = 20

// expireEarly drops the data of views not installed here within
// earlyHold·Retransmit of their first message. Such a view may never be
// installed here: a proposal of a root that died or was cut off before
// committing it (its epoch can even exceed every view the survivors
// install later, epochs of different lineages being unordered), whose data
// would otherwise be held for good. Dropping is safe: if the view is
// installed after all, its senders still hold the data until it is stable
// and send it again on request (a gap, or their digest).
func (l *Layer) expireEarly(now time.Duration) {
	for e, at := range l.earlyAt {
		if now-at < earlyHold*l.cfg.Retransmit {
			continue
		}
		for _, m := range l.early[e] {
			l.buffer(-1, -len(m.Payload))
		}
		l.earlyN -= len(l.early[e])
		l.stats.Expired += uint64(len(l.early[e]))
		delete(l.early, e)
		delete(l.earlyAt, e)
	}
}
