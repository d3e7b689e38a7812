package tcp

import (
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"io"
	"net"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// read delivers c's frames to the handler until c fails or is closed.
func (t *Transport) read(c *conn) {
	defer close(c.readerDone)
	if c.prev != nil {
		// FIFO across a replacement: the old reader may still hold frames.
		<-c.prev.readerDone
		c.prev = nil
	}
	// No wait for a handler here: the peer's acknowledgements are read
	// without one (a process that only sends would otherwise fill its
	// resend log); the first frame to deliver waits for it (handler).
	c.fr.SetMaxFrameSize(t.streamMax())
	var err error
	if c.shm == nil {
		for err == nil {
			err = t.readFrame(c, false)
		}
		t.connDied(c, err)
		return
	}
	// A shared-memory connection: frames are read under rd, which a
	// caller's progress may take between two frames (progress.go).
	t.addRing(c)
	// Under rd it reads only while there is something to read: a caller
	// may have taken the bytes that ended await, and a reader waiting in
	// Read under rd would keep callers out.
	for err == nil {
		c.shm.await()
		c.rd.Lock()
		c.shm.handoff.Store(false)
		t.working.Add(1)
		// A read deadline that passed (a replaced connection whose peer
		// never ended its stream) also ends await: Read reports it.
		for err == nil && (c.fr.Buffered() > 0 || c.shm.readable() || c.shm.readExpired()) {
			err = t.readFrame(c, false)
		}
		t.working.Add(-1)
		c.rd.Unlock()
	}
	t.removeRing(c)
	t.connDied(c, err)
}

// readFrame reads c's next frame and delivers it (under c.rd on a
// shared-memory connection). try is a caller's progress: it reads only a
// frame the ring holds whole and smaller than wire.PlaceMin, and returns
// wire.ErrWouldBlock otherwise, having read nothing.
func (t *Transport) readFrame(c *conn, try bool) error {
	var f wire.Frame
	var placed bool
	var err error
	if try {
		var ok, empty bool
		if c.fr.Buffered() == 0 && c.fr.Err() == nil {
			if c.scratch == nil {
				c.scratch = make([]byte, wire.PlaceMin-1)
			}
			ok, empty = c.shm.nextFrame(&f, c.scratch, t.cfg.MaxFrameSize)
		}
		switch {
		case empty:
			err = wire.ErrWouldBlock
		case !ok:
			f, err = c.fr.TryReadFrame(c.shm.try, wire.PlaceMin)
		}
	} else {
		c.placer, c.relayBuf = nil, nil
		f, placed, err = c.fr.ReadFramePlaced(c.place)
		if c.pr != nil {
			// An acknowledgement, a pad or a sequence mark between two
			// large frames (a collective's steps acknowledged between
			// them) keeps the next read capped too: the next frame is
			// as likely large and placed as after the large one itself.
			c.afterPlaced = placed || (c.afterPlaced && err == nil && ownSmall(f.Kind))
			if c.afterPlaced && c.fr.Buffered() == 0 {
				c.pr.headFirst()
			}
		}
	}
	if placed && c.relayBuf != nil {
		// A large relayed frame to forward, read into its own buffer.
		buf := c.relayBuf
		c.relayBuf = nil
		if err == nil {
			c.markActive()
			f.Payload = *buf
			t.onRelayed(c, f, buf)
		} else {
			putBigBuf(buf)
		}
		return err
	}
	if placed {
		if err == nil {
			c.markActive()
			t.stats.framesIn.Add(1)
			t.stats.placed.Add(1)
			c.poll.mark()
		}
		c.placer.Placed(f, err == nil)
		if err == nil && c.next != 0 {
			// placeWith took it only if it was not a duplicate.
			c.next++
			t.delivered(c, c.next-1, c.placedLen)
		}
	}
	if c.placeLock != nil {
		c.placeLock.Unlock()
		c.placeLock = nil
	}
	if err != nil || placed {
		return err
	}
	c.markActive()
	if f.Kind == wire.KindGoodbye && f.Src == c.peer && f.Dst == t.self {
		t.peerRetired(c)
		return nil
	}
	if f.Kind == wire.KindPad && f.Src == c.peer && f.Dst == t.self {
		return nil
	}
	if (f.Kind == wire.KindSeq || f.Kind == wire.KindAck) && f.Src == c.peer && f.Dst == t.self {
		n, err := wire.DecodeCount(f.Payload)
		if err != nil {
			return fmt.Errorf("%w: %v: %w", wire.ErrMalformedFrame, f.Kind, err)
		}
		if f.Kind == wire.KindSeq {
			if n == 0 {
				return fmt.Errorf("%w: a sequence mark of 0", wire.ErrMalformedFrame)
			}
			c.next = n
		} else {
			c.owner.log.ack(c.peerStream, n)
		}
		return nil
	}
	// seq is the frame's number in the pair's stream (0: not counted,
	// which only a peer that broke the protocol causes).
	//
	// The check and the delivery are under the pair's delivery lock: the
	// same frame may come relayed at the same time (relay.go).
	var seq uint64
	var dl *hotsync.Mutex
	if c.next != 0 && f.Kind != wire.KindRelay {
		seq = c.next
		c.next++
		dl = c.owner.lockDelivery()
		if seq <= c.rs.recvd.Load() {
			// Written again on this connection after the last one broke,
			// or delivered through a relay, already.
			dl.Unlock()
			t.stats.duplicates.Add(1)
			t.duplicate(c.rs)
			return nil
		}
	}
	if f.Kind == wire.KindRelay || f.Kind == wire.KindRoute {
		// The transport's own, handled outside the pair's lock (a
		// relayed frame takes its origin's). A route is counted in the
		// stream; a relayed frame is not: its origin's stream counts it
		// and resends it if a hop loses it.
		if f.Src == c.peer && f.Dst == t.self && seq != 0 {
			t.delivered(c, seq, len(f.Payload))
		}
		if dl != nil {
			dl.Unlock()
		}
		if f.Src == c.peer && f.Dst == t.self {
			if f.Kind == wire.KindRelay {
				t.onRelayed(c, f, nil)
				if !try {
					c.poll.mark() // a relayed frame: the next may follow soon
				}
			} else {
				t.onRoute(c, f)
			}
		}
		return nil
	}
	if f.Src != c.peer || f.Dst != t.self || f.Kind == wire.KindHello || f.Kind == wire.KindProof || f.Kind == wire.KindGoodbye || f.Kind == wire.KindResume {
		if dl != nil {
			dl.Unlock()
		}
		t.stats.misaddressed.Add(1)
		if !c.warned {
			c.warned = true
			t.log.Warn("tcp: dropping frames not from the authenticated peer to us",
				"peer", uint32(c.peer), "remote", c.remote, "frame", f.String())
		}
		return nil
	}
	if try { // counted in FramesIn too (Stats)
		if c.polledOut {
			t.stats.polled.Add(1)
		} else {
			bump(&c.polled)
		}
	} else {
		t.stats.framesIn.Add(1)
	}
	h := t.slot.Get()
	if h == nil {
		if h = t.slot.Wait(c.dead, t.closing); h == nil {
			if dl != nil {
				dl.Unlock()
			}
			return net.ErrClosed
		}
	}
	h.Deliver(f)
	if seq != 0 {
		t.delivered(c, seq, len(f.Payload))
	}
	if dl != nil {
		dl.Unlock()
	}
	if !try && f.Kind.Proto() != core.ProtoFD {
		// A data frame: the next may follow soon. A caller's progress
		// (try) does not mark: the caller polls for the next itself, and
		// the reader goroutine, parked meanwhile, need not poll after it
		// (nor the caller pay a clock read per frame).
		c.poll.mark()
		if c.shm == nil && c.fr.Buffered() == 0 {
			c.poll.yieldToHandler()
		}
	}
	return nil
}

// ownSmall reports whether a frame of kind k is one of the transport's
// own small frames between a peer's messages.
func ownSmall(k core.Kind) bool {
	return k == wire.KindAck || k == wire.KindPad || k == wire.KindSeq
}

// placeWith returns c's wire.PlaceFunc: a large frame's payload is offered to the
// handler (see transport.Placer); c.placer is the one that took it.
func (c *conn) placeWith(t *Transport) wire.PlaceFunc {
	return func(f wire.Frame, n int) (int, []byte) {
		if f.Kind == wire.KindRelay {
			return 0, t.placeRelayed(c, f, n)
		}
		pl, ok := t.slot.Get().(transport.Placer)
		if !ok || f.Src != c.peer || f.Dst != t.self || f.Kind.Proto() == core.ProtoCore {
			return 0, nil
		}
		var dl *hotsync.Mutex
		if c.next != 0 {
			// Held until the frame is delivered (readFrame): the same
			// frame may come relayed meanwhile.
			dl = c.owner.lockDelivery()
			if c.next <= c.rs.recvd.Load() {
				dl.Unlock()
				return 0, nil // a duplicate: readFrame drops it
			}
		}
		skip, dst := pl.Place(f, n)
		if dst != nil {
			c.placer, c.placedLen = pl, n
			c.placeLock = dl
			c.poll.mark() // a large data frame: poll while its body comes
		} else if dl != nil {
			dl.Unlock()
		}
		return skip, dst
	}
}

// connDied closes c, clears it from its peer and, unless it was closed on
// purpose, logs why and hints the handler.
func (t *Transport) connDied(c *conn, readErr error) {
	c.close(false, readErr)
	// Whether c was retired when it died, not now: closing it ends the
	// peer's side too, and the peer may redial and get c retired as
	// replaced before this reader goes on.
	retired := c.diedRetired
	t.mu.Lock()
	if p := t.peers[c.peer]; p != nil {
		if p.cur == c {
			p.setCur(nil)
			p.unreachable = !c.byUs
			p.signal()
			t.routeChanged()
		}
		if p.draining == c {
			// retireIdle sets draining before it sends the goodbye and
			// marks c retired, and the peer may answer in between.
			p.draining, retired = nil, true
		}
	}
	t.mu.Unlock()
	if c.byUs || retired || t.isClosing() {
		return
	}
	t.stats.lost.Add(1)
	cause := c.cause
	switch {
	case errors.Is(cause, wire.ErrRecordAuth) || errors.Is(cause, wire.ErrRecordLength):
		t.stats.tampered.Add(1)
		t.log.Error("tcp: a record failed its integrity check (altered, replayed or reordered on the way): closing the connection; its frames are resent on the next",
			"peer", uint32(c.peer), "remote", c.remote, "err", cause)
	case errors.Is(cause, wire.ErrMalformedFrame) || errors.Is(cause, wire.ErrFrameTooLarge):
		t.stats.malformed.Add(1)
		t.log.Error("tcp: malformed frame, closing the connection", "peer", uint32(c.peer), "remote", c.remote, "err", cause)
	case errors.Is(cause, io.EOF):
		t.log.Info("tcp: connection closed by the peer", "peer", uint32(c.peer), "remote", c.remote)
	default:
		t.log.Info("tcp: connection lost", "peer", uint32(c.peer), "remote", c.remote, "err", cause)
	}
	reason := "connection closed by the peer"
	if !errors.Is(cause, io.EOF) {
		reason = fmt.Sprintf("connection lost: %v", cause)
	}
	t.hintOf(connLostHint(c, reason))
}
