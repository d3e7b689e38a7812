package tcp

import (
	"context"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// The relay's and the destination's side of relaying (see relay.go): a
// relayed frame read from a connection is forwarded, unopened, if it is
// for another node, or checked and delivered in its pair's stream if it
// is for us.

// placeRelayed returns the buffer a large relayed frame is read into: a
// relay then queues it as it is, not copied, and the destination checks
// and delivers the frame from it, without growing the frame reader's
// buffer to the frame's size and moving the frame's first bytes to its
// start. It returns nil for a frame to read as usual (one that is not
// from c's peer to us).
func (t *Transport) placeRelayed(c *conn, f wire.Frame, n int) []byte {
	d := wire.NewDecoder(f.Payload)
	d.NodeID() // the origin
	d.NodeID() // the destination
	if d.Err() != nil || f.Src != c.peer || f.Dst != t.self {
		return nil
	}
	b := getBigBuf(n)
	*b = (*b)[:n]
	c.relayBuf = b
	return *b
}

// onRelayed handles a KindRelay frame read from c: forwarded if it is for
// another node, delivered if it is for us. owned, if not nil, is the
// buffer of getBigBuf's that holds f.Payload, which forwarding keeps (or
// gives back) and delivery gives back.
func (t *Transport) onRelayed(c *conn, f wire.Frame, owned *[]byte) {
	h, headLen, body, _, err := wire.DecodeRelay(f.Payload)
	if err != nil {
		putBigBuf(owned)
		t.relayRejected(c, "a malformed relayed frame", err)
		return
	}
	if h.Final != t.self {
		t.forward(c, h, f.Payload, owned)
		return
	}
	// Ours: delivered before this returns (Deliver keeps no payload).
	defer putBigBuf(owned)
	if owned != nil {
		// Read placed, by the reader goroutine: the next frame may
		// follow soon, as readFrame marks after a relayed frame it read
		// whole.
		defer c.poll.mark()
	}
	if h.Origin == t.self {
		t.relayRejected(c, "a relayed frame from ourselves", nil)
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	p := t.peerLocked(h.Origin)
	t.mu.Unlock()
	var plain []byte
	if h.Flags&wire.RelaySealed != 0 {
		plain = make([]byte, 0, len(body))
	}
	inner, err := wire.OpenRelay(plain, t.openKey(p), f.Payload, h, headLen, body)
	if err != nil {
		t.stats.relayTagFailures.Add(1)
		t.relayRejected(c, "a relayed frame that fails its end-to-end check", err)
		return
	}
	fi, n, err := wire.DecodeFrameMax(inner, max(t.cfg.MaxFrameSize, len(inner)))
	if err != nil || n != len(inner) || fi.Src != h.Origin || fi.Dst != t.self {
		t.stats.misaddressed.Add(1)
		t.relayRejected(c, "a relayed frame whose inner frame is malformed or misaddressed", err)
		return
	}
	t.deliverRelayed(p, h, fi, c)
}

// relayRejected logs a dropped relayed frame, at most once per relay
// every refusalLogInterval.
func (t *Transport) relayRejected(c *conn, what string, err error) {
	if ok, suppressed := t.refusals.allow(fmt.Sprintf("relay %d", c.peer), time.Now()); ok {
		t.log.Warn("tcp: dropping "+what, "relay", uint32(c.peer), "err", err, "suppressed", suppressed)
	}
}

// forward queues a relayed frame read from c to its destination, if we
// reach it directly: the payload is copied (unless owned), not opened.
func (t *Transport) forward(c *conn, h wire.Relay, payload []byte, owned *[]byte) {
	t.mu.Lock()
	d := t.peers[h.Final]
	ok := d != nil && !d.routeDownLocked() && h.Origin == c.peer && !t.cfg.NoRelay
	if ok {
		t.noteDutyLocked(h.Origin, h.Final, time.Now())
	}
	t.mu.Unlock()
	if !ok {
		// Not ours to carry: unreachable from here, unknown, or not
		// from its origin (two hops at most).
		putBigBuf(owned)
		t.stats.relayDropped.Add(1)
		return
	}
	if t.rt.forwardHook == nil {
		// A small frame is written on this goroutine if D's connection
		// is idle (no wake-up of D's writer).
		if t.writeRelayedNow(h.Final, wire.Frame{Kind: wire.KindRelay, Payload: payload}) {
			putBigBuf(owned)
			t.stats.forwarded.Add(1)
			return
		}
	}
	if owned == nil {
		owned = getRelayBuf(len(payload))
		*owned = append((*owned)[:0], payload...)
	}
	f := wire.Frame{Kind: wire.KindRelay, Payload: *owned}
	if hook := t.rt.forwardHook; hook != nil {
		hook(f.Payload)
	}
	control := h.Flags&wire.RelayControl != 0
	if t.enqueue(doneCtx, h.Final, f, owned, control) != nil {
		ctx, cancel := context.WithTimeout(context.Background(), relayRetransmit)
		err := t.enqueue(ctx, h.Final, f, owned, control)
		cancel()
		if err != nil {
			putCopyBuf(owned)
			t.stats.relayDropped.Add(1)
			return
		}
	}
	t.stats.forwarded.Add(1)
}

// deliverRelayed delivers fi, relayed from p (header h), if it is the
// next frame of p's stream; or takes the acknowledgement it is.
func (t *Transport) deliverRelayed(p *peer, h wire.Relay, fi wire.Frame, c *conn) {
	p.rl.dmu.Lock()
	defer p.rl.dmu.Unlock()
	t.mu.Lock()
	if h.SrcStream != p.peerStream {
		t.newPeerStream(p, h.SrcStream)
	}
	mine := h.DstStream == p.stream
	r := p.rs
	if p.cur == nil {
		p.rl.in.Store(true)
	}
	t.mu.Unlock()
	p.rl.heard.Store(true)
	if fi.Kind == wire.KindAck && h.Seq == 0 {
		n, err := wire.DecodeCount(fi.Payload)
		if err != nil {
			t.relayRejected(c, "a malformed relayed acknowledgement", err)
			return
		}
		if mine {
			before := p.log.ackPoint()
			p.log.ack(h.SrcStream, n)
			if p.log.ackPoint() == before && !p.log.empty() {
				p.rl.gapAck.Store(true)
			}
		}
		return
	}
	if h.Seq == 0 || fi.Kind == wire.KindAck || fi.Kind == wire.KindSeq || fi.Kind == wire.KindHello ||
		fi.Kind == wire.KindProof || fi.Kind == wire.KindGoodbye || fi.Kind == wire.KindResume || fi.Kind == wire.KindRelay {
		t.stats.misaddressed.Add(1)
		return
	}
	recvd := r.recvd.Load()
	switch {
	case !mine:
		// The origin does not know our stream: tell it.
		t.stats.relayGaps.Add(1)
		t.wantRelayAck(p)
		return
	case h.Seq <= recvd:
		// Sent again after a stall: its acknowledgement may have been
		// lost, so acknowledge again.
		t.stats.duplicates.Add(1)
		t.wantRelayAck(p)
		return
	case h.Seq > recvd+1:
		// A frame after a gap (a relay dropped some): the origin goes
		// back to the acknowledgement point.
		t.stats.relayGaps.Add(1)
		t.wantRelayAck(p)
		return
	}
	if fi.Kind == wire.KindRoute {
		// Routes travel direct only.
		t.deliveredTo(p, r, h.Seq, len(fi.Payload))
		return
	}
	hd := t.slot.Get()
	if hd == nil {
		if hd = t.slot.Wait(c.dead, t.closing); hd == nil {
			return
		}
	}
	t.stats.framesIn.Add(1)
	hd.Deliver(fi)
	t.deliveredAckAfter(p, r, h.Seq, len(fi.Payload), t.relayAckBytes())
}

// relayAckBytes is how many bytes of relayed frames a destination
// delivers before it acknowledges them at once (ackBytes on a
// connection): a sixteenth of the resend log (Config.ResendBuffer, the
// origin's too in a job whose processes share their configuration),
// between ackBytes and relayAckMax. A relayed acknowledgement crosses
// both hops on its own, not carried by a frame the other way: it is
// sealed and written by the destination, read and forwarded by the
// relay, read and opened by the origin, whose reader wakes for it; the
// origin's log, sixteen times as large, does not wait for it. Frames
// delivered more slowly are acknowledged within ackDelay as on a
// connection.
func (t *Transport) relayAckBytes() uint64 {
	return uint64(min(max(ackBytes, t.cfg.ResendBuffer/16), relayAckMax))
}

// relayAckMax bounds relayAckBytes: past it an acknowledgement costs
// little beside the frames it acknowledges, and a destination with a
// larger log than its origin's still acknowledges before the origin's
// default log fills.
const relayAckMax = DefaultResendBuffer / 16

// wantRelayAck asks p's writer for a relayed acknowledgement.
func (t *Transport) wantRelayAck(p *peer) {
	p.rl.ackWanted.Store(true)
	t.wakeWriter(p)
}

// newPeerStream starts p's streams with p's stream id stream, learnt from
// a relayed frame, as a handshake's resume would (startStream): a peer
// whose id changed restarted, and the frames kept for its predecessor
// are dropped; a first id keeps the frames queued for it. t.mu is held.
func (t *Transport) newPeerStream(p *peer, stream uint64) {
	if p.peerStream != 0 {
		t.stats.restarts.Add(1)
		t.log.Info("tcp: the peer restarted or forgot us: the pair's streams start afresh", "peer", uint32(p.id))
		p.log.reset(stream)
	} else {
		p.log.bind(stream)
	}
	p.peerStream = stream
	p.rs.timer.Stop()
	p.rs = t.newRecvStream(p, stream)
	p.rl.routeSent = 0
	p.rl.rewind.Store(true) // resend what we hold under the stream we now know
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// recvStreamOf returns p's stream of frames to us (p.rs, which t.mu
// guards).
func (t *Transport) recvStreamOf(p *peer) *recvStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return p.rs
}

// lockDelivery takes p's delivery lock (see relayState.dmu).
func (p *peer) lockDelivery() *hotsync.Mutex {
	p.rl.dmu.Lock()
	return &p.rl.dmu
}
