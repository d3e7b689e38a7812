package comm

import (
	"cmp"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/tcp"
)

// Data to non-masters. Of the replicas of a destination rank, only its
// master's program sends anything on: the others run the same program a
// little behind, their sends kept in their backup tables until the
// master's commit. A message reaching a non-master at once serves nobody
// waiting, yet, on a machine where the replicas share the cores, wakes a
// parked process for every message (a doorbell written, a reader and a
// program scheduled), and that work takes cores from the critical path.
// So the master writes a program's Data to its destination's master at
// once, and holds those to the other replicas (their payloads are the
// backup table's: nothing is copied) until lazyMax of them or lazyMaxBytes
// bytes are waiting, or lazyDelay has passed since the first: one wake-up
// of a non-master carries many messages.
//
// The protocol is unchanged: a Data held here is, to its receiver, a Data
// delayed by the network, which the layer already allows (it may also be
// dropped; the layer retransmits after Config.Retransmit, well above
// lazyDelay). The receiver's acknowledgements, and so the commits that
// empty both backup tables, come up to lazyDelay later, within the
// tables' bound. Data to a replica that left the view meanwhile are
// dropped before its payload can go back to reuse (afterCallLocked).
// Only a program's data sends are held: control channels, the layer's
// resends and retransmissions go at once.
//
// A batch is at most half the ring to its replica (lazyMaxBytes), so that
// it fits while the replica still reads the one before. A batch is written
// on the program's goroutine, and a write that finds no room waits until
// that replica, parked and sharing the cores, is scheduled and reads,
// holding up the program's next send to the destination's master: a batch
// of a whole ring (lazyMax messages from 16 KiB on) waited so every time.

// Bounds of the Data held for non-masters: their number, their payload
// bytes, and how long the first of them waits.
const (
	lazyMax      = 16
	lazyMaxBytes = tcp.DefaultShmRingSize / 2
	lazyDelay    = time.Millisecond
)

// lazyData is the Data held for non-masters (lmu), in the order the layer
// sent them.
type lazyData struct {
	held  []directData
	bytes int
	// spares are the slices of the last batches, for the next: two, so
	// that one is at hand while a flush writes the other (a sender holds
	// new Data meanwhile), and none is made again.
	spares [2][]directData
	timer  *time.Timer // flushes after the wait (armed: pending)
	armed  bool
	wait   time.Duration // how long the first waits: lazyDelay if 0 (tests set it)
	flush  sync.Mutex    // one flush at a time, so that a replica gets them in order
	batch  lazyBatch     // writeLazy's, under flush
}

// deferLocked moves the Data of direct addressed to replicas that are not
// their rank's master to r.lazy, and returns the rest, to write now, and
// whether the held ones are due to be written too (flushLazy); lmu is
// held.
func (r *replicated) deferLocked(direct []directData) ([]directData, bool) {
	now := direct[:0]
	l := &r.lazy
	for _, d := range direct {
		if d.m.Control || r.layer.Master(r.layout.Rank(d.to)) == d.to {
			now = append(now, d)
			continue
		}
		if l.held == nil {
			l.held = l.takeSpare()
		}
		l.held = append(l.held, d)
		l.bytes += len(d.m.Payload)
	}
	if len(l.held) == 0 {
		return now, false
	}
	if len(l.held) >= lazyMax || l.bytes >= lazyMaxBytes {
		return now, true
	}
	if !l.armed {
		l.armed = true
		wait := cmp.Or(l.wait, lazyDelay)
		if l.timer == nil {
			l.timer = time.AfterFunc(wait, r.lazyExpired)
		} else {
			l.timer.Reset(wait)
		}
	}
	return now, false
}

// lazyExpired writes the held Data once the first has waited.
func (r *replicated) lazyExpired() {
	r.lmu.Lock()
	r.lazy.armed = false
	r.lmu.Unlock()
	if r.sess.base.Err() == nil {
		r.flushLazy()
	}
}

// flushLazy writes the Data held for non-masters, in order, outside the
// layer's lock (writeLazy: over a socket the small ones to a replica in
// one write, the others as any other Data, sendDirect).
func (r *replicated) flushLazy() {
	l := &r.lazy
	l.flush.Lock()
	defer l.flush.Unlock()
	r.lmu.Lock()
	batch := l.held
	l.held, l.bytes = nil, 0
	r.lmu.Unlock()
	r.writeLazy(batch)
	r.lmu.Lock()
	for i := range l.spares {
		if l.spares[i] == nil {
			l.spares[i] = batch[:0]
			break
		}
	}
	r.lmu.Unlock()
}

// takeSpare returns an empty slice for the Data to hold: a spare, else a
// new one of lazyMax; lmu is held.
func (l *lazyData) takeSpare() []directData {
	for i, s := range l.spares {
		if s != nil {
			l.spares[i] = nil
			return s
		}
	}
	return make([]directData, 0, lazyMax)
}

// dropLazyLocked drops the held Data to replicas that left the view, whose
// payloads the layer may have released; lmu is held.
func (r *replicated) dropLazyLocked() {
	l := &r.lazy
	if len(l.held) == 0 {
		return
	}
	keep := l.held[:0]
	for _, d := range l.held {
		if r.layer.Alive(d.to) {
			keep = append(keep, d)
		} else {
			l.bytes -= len(d.m.Payload)
		}
	}
	clear(l.held[len(keep):])
	l.held = keep
}

// Acknowledgements from non-masters. The transport acknowledges a peer's
// frames with a frame of its own once 256 KiB have come since the last
// (the sender's resend log holds them until then), and toward a master
// that is a frame and a doorbell, a wake-up of the master's reader, every
// four messages of 64 KiB: about 0.25 a round trip from each non-master
// of a ping-pong, on top of the masters' one each. A non-master's
// acknowledgements serve no one waiting: its source's master keeps the
// sends in its backup table until the layer's own acknowledgement (every
// AckEvery deliveries or AckDelay) and the commit that follows, and the
// transport's acknowledgement rides on that frame (its writer appends one
// to any frame it writes to the peer). So a process holds the transport's
// prompt acknowledgements (tcp.Transport.HoldAcks) while it is not its
// rank's master, and lets them go when it becomes one. The transport
// still writes one within its ackDelay, and at once past a quarter of its
// resend buffer or 128 frames: the sender's log stays bounded.

// A non-master's rings are read lazily too (tcp.Transport.SetLazyReads):
// while a ring to it is less than half full, its reader is not rung but
// looks every lazyLook, so that most of a master's batches cost the master
// no doorbell, and the non-master no wake-up beside the master that rang
// it; a batch that brings the ring past half is rung, as before. The
// delay this adds to the non-master's data (a lazyLook at most) is of
// lazyDelay's order, far within Config.Retransmit.

// lazyLook is how often a non-master's readers look at their rings: the
// Go runtime's shortest sleep in the netpoller.
const lazyLook = time.Millisecond

// fellowLocked reports whether this process holds the transport's
// acknowledgements: the layer started and it is not its rank's master;
// lmu is held.
func (r *replicated) fellowLocked() bool {
	return r.started && r.sess.tcpTr != nil && !r.layer.IsMaster()
}

// holdAcks makes the transport hold its prompt acknowledgements (hold) or
// ends the hold, if that changes anything. Called outside lmu: a release
// writes the acknowledgements held.
func (r *replicated) holdAcks(hold bool) {
	if r.ackHeld.Load() == hold {
		return
	}
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	if r.ackHeld.Load() == hold {
		return
	}
	if hold {
		r.sess.tcpTr.HoldAcks()
		r.sess.tcpTr.SetLazyReads(lazyLook)
	} else {
		r.sess.tcpTr.SetLazyReads(0)
		r.sess.tcpTr.ReleaseAcks(core.None)
	}
	r.ackHeld.Store(hold)
}
