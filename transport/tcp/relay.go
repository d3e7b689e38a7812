package tcp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/cohort-mp/cohort/transport/hotsync"
	"maps"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// Relaying. When the direct link to a peer D is down (a dial failed or
// the connection died, or stopped delivering while a relay reaches D:
// checkLinks; D accepts no connection and has none with us; or
// D's frames reach us relayed) and some peer R reaches D (route.go), D's
// writer runs relayLoop instead of waiting to redial: it numbers D's
// frames in the pair's stream as on a connection, keeps them in D's
// resend log, wraps each in a wire.KindRelay frame tagged end to end
// (wire.SealRelay) and queues it to R, all in R's data queue so that the
// pair's frames stay in their order through R. R forwards the payload
// unchanged into its queue for D, or drops it if it cannot reach D
// itself. D checks the tag and delivers the inner frame only if it is the
// next of the pair's stream (recvStream.recvd+1), under the pair's
// delivery lock, which the connection readers take too: a pair's frames
// are delivered once and in order whichever path each came by.
// D acknowledges through a relay too (an unsequenced relayed
// acknowledgement, in the relays' control lanes). The writer goes back to
// the acknowledgement point (go-back-N) whenever its path changes, and
// when the point stands still while frames are unacknowledged (a relay
// that died or dropped; see relayPatience), taking the next relay.
// Meanwhile it redials D with back-off; a direct connection, once back,
// takes the traffic over with its resume (resend.go).

// relayNowMax bounds the relayed frames an origin writes on its sender's
// goroutine (relayNow) and a relay on its reader's goroutine when the
// next hop's connection is idle (sendNow copies the frame once more; a
// larger one goes to that connection's writer, which does not, and
// writes while the sender or the reader prepares the next); a wake-up of
// a writer matters only beside a small frame's cost.
const relayNowMax = 4 << 10

// relayRetransmit is the tick at which a relaying writer looks whether
// the acknowledgement point moved (see relayPatience). It also bounds how
// long a relay's reader waits for room in the destination's queue before
// it drops a frame, and a relaying writer for room in the relay's.
const relayRetransmit = 300 * time.Millisecond

// streamMax is the frame body limit on the connections' streams:
// Config.MaxFrameSize, plus what relaying wraps around a frame that large
// (wire.KindRelay's header and tag, and the inner frame's prefix and
// header).
func (t *Transport) streamMax() int { return t.cfg.MaxFrameSize + relayOverhead }

// relayOverhead bounds what a relayed frame adds to its inner frame's
// body: the outer header, the relay header (at most 53 bytes), the tag,
// the inner frame's length prefix and header.
const relayOverhead = 2*wire.MaxHeaderSize + wire.LengthSize + 53 + wire.RelayTagSize

// relayPatience is how many ticks of relayRetransmit a relaying writer
// waits, while the acknowledgement point stands still and the peer says
// nothing of a gap, before it goes back to the point; maxRelayPatience
// bounds it once it has doubled after each such rewind in a row (about
// 5 s).
const (
	relayPatience    = 2
	maxRelayPatience = 16
)

// relaySilentSwitch is how many rewinds in a row, each after a silence
// of the peer's (no frame or acknowledgement from it by any path), make
// a relaying writer take the next relay. A relay that died, or that says
// it cannot reach the peer, is left at once (chooseRelay); one through
// which the peer is only slow to answer (a starved process on a loaded
// machine) is kept: moving to another would not make the peer faster,
// and pairs that switch back and forth resend their backlog each time.
const relaySilentSwitch = 2

// doneCtx is a context that is done: Send's attempt without waiting.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// relayState is a peer's relaying state.
type relayState struct {
	// dmu is held while a frame of the peer's stream is checked and
	// delivered, by a connection's reader or by a relayed frame's: the
	// two paths may carry the same frame at once.
	dmu hotsync.Mutex
	// via is the relay in use for the peer as last reported (core.None:
	// direct), the writer's.
	via core.NodeID
	// in: frames from the peer arrived relayed since our last
	// connection with it (it cannot reach us): our writer relays too.
	in atomic.Bool
	// ackWanted: the peer needs a relayed acknowledgement now (its
	// frame named a stream of ours that is not ours, or left a gap).
	ackWanted atomic.Bool
	// rewind: go back to the acknowledgement point now (the peer's
	// stream became known).
	rewind atomic.Bool
	// gapAck: an acknowledgement from the peer did not move the point
	// while frames wait for it: the peer missed one (relay_in.go).
	gapAck atomic.Bool
	// heard: a relayed frame or acknowledgement came from the peer since
	// the writer last looked (relay_in.go): the peer runs and its path to
	// us works, so a still acknowledgement point is not the relay's fault.
	heard atomic.Bool
	// now is the relay in use while the writer relays and keeps up (nil
	// otherwise): relayNow relays through it on the sender's goroutine.
	now atomic.Pointer[peer]
	// routeSent is the version of our route the peer has (t.mu).
	routeSent uint64
	// sealOnce/seal and openOnce/open are the end-to-end keys of our
	// frames to the peer and of its frames to us.
	sealOnce, openOnce sync.Once
	seal, open         *wire.RelayCipher
}

func (t *Transport) sealKey(p *peer) *wire.RelayCipher {
	p.rl.sealOnce.Do(func() { p.rl.seal = t.relayKey(t.self, p.id) })
	return p.rl.seal
}

func (t *Transport) openKey(p *peer) *wire.RelayCipher {
	p.rl.openOnce.Do(func() { p.rl.open = t.relayKey(p.id, t.self) })
	return p.rl.open
}

func (t *Transport) relayKey(src, dst core.NodeID) *wire.RelayCipher {
	k, err := wire.RelayKey(t.cfg.Secret, t.cfg.JobID, src, dst)
	if err != nil {
		panic("tcp: " + err.Error()) // AES-256 with a 32-byte key cannot fail
	}
	return k
}

// relayFlags are the flags of our relayed frames.
func (t *Transport) relayFlags() uint8 {
	if t.cfg.TLS != nil {
		return wire.RelaySealed
	}
	return 0
}

// relayWanted reports whether p's writer should relay: relaying is on, p
// has no connection in use, its direct link is down or its frames come
// relayed, and a relay reaches it.
func (t *Transport) relayWanted(p *peer) bool {
	if t.cfg.NoRelay {
		return false
	}
	t.mu.Lock()
	want := p.cur == nil && (p.routeDownLocked() || p.rl.in.Load())
	t.mu.Unlock()
	return want && t.chooseRelay(p, core.None, false) != nil
}

// roomInQueue reports whether p's data queue exists and has room now
// (Send takes t.mu as well).
func (t *Transport) roomInQueue(p *peer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return p.q != nil && len(p.q) < cap(p.q)
}

// relayIdle reports whether p's relaying writer has nothing left to do.
func (t *Transport) relayIdle(p *peer, pending *wire.Frame) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return pending == nil && !p.kept && p.senders.Load() == 0 && len(p.q) == 0 && len(p.hq) == 0 &&
		p.log.empty() && !p.rs.due.Load() && !p.rl.ackWanted.Load()
}

// relayLoop is p's writer while p's direct link is down (see above). It
// returns, with the frame it holds if any, when a connection to p is in
// use, when it has nothing left to do, or when p is removed or the
// transport closes.
func (t *Transport) relayLoop(p *peer, pending *wire.Frame) *wire.Frame {
	var via *peer
	gen := t.rt.gen.Load() - 1
	rewind := true // a path change: resend from the acknowledgement point
	lastFirst := uint64(0)
	// stillTicks counts the ticks the acknowledgement point stood still
	// with frames unacknowledged; patience is how many make a rewind.
	stillTicks, patience := 0, relayPatience
	// silentRewinds counts the rewinds in a row after which nothing came
	// from the peer (relaySilentSwitch).
	silentRewinds := 0
	// idleTicks counts the ticks the writer had nothing to do: it ends
	// after one, not at once, so that the next burst's senders find it
	// and relay their frames themselves (relayNow) instead of queueing
	// them to a writer started anew, which would then keep them all.
	idleTicks := 0
	tick := time.NewTicker(relayRetransmit)
	defer tick.Stop()
	attempt := 0
	redial := time.NewTimer(t.backoff(attempt))
	defer redial.Stop()
	dialed := make(chan bool, 1)
	dialing := false
	defer p.rl.now.Store(nil)
	for {
		if t.isClosing() || isClosed(p.removed) {
			return pending
		}
		if p.live.Load() != nil {
			return pending // the direct link is back: manage resumes on it
		}
		if !dialing && t.relayIdle(p, pending) {
			if idleTicks > 0 {
				return nil
			}
		} else {
			idleTicks = 0
		}
		if g := t.rt.gen.Load(); g != gen || via == nil || via.live.Load() == nil {
			gen = g
			// A relay whose queue was full a moment ago is kept if
			// it is still a candidate (hysteresis).
			cur := p.rl.via
			if via != nil {
				cur = via.id
			}
			if nv := t.chooseRelay(p, cur, false); nv != via {
				p.rl.now.Store(nil)
				via, rewind = nv, true
				t.reportVia(p, via)
			}
		}
		full := false
		if via != nil {
			if rewind || p.rl.rewind.Swap(false) {
				p.wmu.Lock() // relayNow waits (see relaySend)
				resent := t.relayResend(p, via)
				p.wmu.Unlock()
				if !resent {
					gen-- // the relay stalled: choose again
				}
				rewind = false
				lastFirst = p.log.ackPoint()
			}
			if t.recvStreamOf(p).due.Load() || p.rl.ackWanted.Load() {
				t.relayAck(p, via)
			}
			// Until the peer's stream is known (its first relayed
			// acknowledgement names it), one frame goes out at a time:
			// the peer drops those that name no stream of its own.
			probing := p.log.probing()
			if pending == nil && !probing {
				if x, ok := p.take(); ok {
					pending = &x.f
				}
			}
			if pending != nil {
				switch t.relaySend(p, via, pending) {
				case relaySent:
					pending = nil
					continue
				case relayFull:
					full = true
				case relayStalled:
					pending = nil // kept in the log: resent from there
					via, gen = nil, gen-1
					continue
				}
			} else {
				p.wmu.Lock()
				p.flushed.Store(p.written)
				p.wmu.Unlock()
			}
		}
		// Wait for something to do; meanwhile senders may relay
		// themselves (relayNow) while nothing is queued.
		if full || p.log.probing() {
			p.rl.now.Store(nil)
		} else {
			t.publishPeer(p)
			p.rl.now.Store(via)
		}
		var hq, q <-chan queued
		var space <-chan struct{}
		if pending == nil && via != nil && !p.log.probing() {
			hq, q = p.hq, p.q
		}
		if full {
			space = p.log.space
		}
		select {
		case x := <-hq:
			pending = &x.f
		case x := <-q:
			pending = &x.f
		case <-space:
		case <-p.kick:
		case <-p.wake:
		case <-tick.C:
			idleTicks++
			first := p.log.ackPoint()
			gap := p.rl.gapAck.Swap(false)
			if p.rl.heard.Swap(false) {
				silentRewinds = -1 // the stall below is not the relay's
			}
			switch {
			case first != lastFirst || p.log.empty():
				stillTicks, patience, silentRewinds = 0, relayPatience, 0
			case via != nil:
				stillTicks++
			}
			if stillTicks > 0 && gap || stillTicks >= patience {
				// The acknowledgement point is still: go back to it.
				// At once if the peer said it missed a frame (an
				// acknowledgement that did not move the point: it
				// sends one for each frame after a gap); after a
				// silence, waiting twice as long each time in a row
				// (up to maxRelayPatience ticks): a peer that is only
				// slow to answer (a loaded machine, a deep socket
				// buffer on the way) is not sent its backlog again and
				// again. Through the same relay unless the peer stayed
				// silent relaySilentSwitch times in a row
				// (hysteresis: see relaySilentSwitch).
				if silentRewinds++; !gap && silentRewinds >= relaySilentSwitch {
					if nv := t.chooseRelay(p, via.id, true); nv != nil && nv != via {
						p.rl.now.Store(nil)
						via = nv
						t.reportVia(p, via)
					}
					silentRewinds = 0
				}
				rewind = true
				stillTicks, patience = 0, min(2*patience, maxRelayPatience)
			}
			lastFirst = first
			gen-- // look at the routes again
		case <-redial.C:
			if t.startRedial(p, dialed) {
				dialing = true
			} else {
				redial.Reset(t.backoff(attempt))
			}
		case ok := <-dialed:
			dialing = false
			if !ok {
				attempt++
				redial.Reset(t.backoff(attempt))
			}
		case <-p.removed:
		case <-t.closing:
		}
	}
}

// reportVia records and reports p's new relay (nil: none for now).
func (t *Transport) reportVia(p *peer, via *peer) {
	if via == nil || p.rl.via == via.id {
		return
	}
	p.rl.via = via.id
	t.stats.pathChanges.Add(1)
	t.log.Info("tcp: relaying the frames of a peer", "peer", uint32(p.id), "via", uint32(via.id))
	t.reportPath(transport.PairRelayed{Peer: p.id, Via: via.id})
}

// reportDirect reports that p's frames go direct again, if they were
// relayed; p's writer calls it with a connection in use.
func (t *Transport) reportDirect(p *peer) {
	if p.rl.via == core.None {
		return
	}
	p.rl.via = core.None
	t.stats.pathChanges.Add(1)
	t.log.Info("tcp: the frames of a peer go direct again", "peer", uint32(p.id))
	t.reportPath(transport.PairDirect{Peer: p.id})
}

func (t *Transport) reportPath(ev core.Event) {
	if pr, ok := t.slot.Get().(transport.PathReporter); ok {
		pr.Path(ev)
	}
}

// startRedial dials p once in the background, unless a dial or an
// inbound handshake is under way or p cannot be dialled; done receives
// whether a connection is in use after it. It reports whether it
// started one.
func (t *Transport) startRedial(p *peer, done chan<- bool) bool {
	t.mu.Lock()
	if t.closed || p.dialing || p.inbound > 0 || p.addr == "" || p.dialOutOnly || p.cur != nil {
		t.mu.Unlock()
		return false
	}
	p.dialing = true
	addr := p.addr
	t.wg.Add(1) // the writer holds a count: Close is not past Wait
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		_, err := t.dial(p, addr)
		t.mu.Lock()
		p.dialing = false
		settled := p.cur != nil || p.inbound > 0
		t.mu.Unlock()
		if err != nil && !settled && !t.isClosing() && !errors.Is(err, errRefusedAfterProof) {
			t.dialFailed(p, addr, err)
		}
		done <- err == nil || settled
	}()
	return true
}

// dialFailed counts, logs and hints a failed dial to p, and marks p's
// direct link down.
func (t *Transport) dialFailed(p *peer, addr string, err error) {
	t.stats.dialFailures.Add(1)
	t.log.Info("tcp: dial failed", "peer", uint32(p.id), "addr", addr, "err", err)
	t.hintOf(core.PeerHint{Node: p.id, Reason: fmt.Sprintf("dial %s: %v", addr, err),
		Refused: errors.Is(err, syscall.ECONNREFUSED)})
	t.mu.Lock()
	p.unreachable = p.cur == nil
	t.routeChanged()
	t.mu.Unlock()
}

// Results of relaySend.
const (
	relaySent    = iota
	relayFull    // p's resend log is full: nothing kept
	relayStalled // kept in the log, but the relay's queue had no room
)

// relaySend numbers f in p's stream, keeps it in p's log and queues it,
// relayed, to via. A frame a relay queued for p (forwarded), which we
// cannot deliver ourselves, is dropped.
func (t *Transport) relaySend(p, via *peer, f *wire.Frame) int {
	if f.Kind == wire.KindRelay {
		t.stats.relayDropped.Add(1)
		p.wmu.Lock()
		p.written++
		p.wmu.Unlock()
		return relaySent
	}
	// Numbered, kept and queued to via under p.wmu, so that frames
	// relayed on the senders' goroutines (relayNow) keep their order.
	// The payload is ours: Send's caller gave it up, SendCopy's copy is
	// not given back once taken from the queue.
	p.wmu.Lock()
	defer p.wmu.Unlock()
	buf, body, ok := t.relayWrap(p, f, true)
	if !ok {
		return relayFull
	}
	p.written++
	if !t.queueRelayed(via, buf, body, false) {
		return relayStalled
	}
	return relaySent
}

// relayWrap numbers f in p's stream, keeps it in p's log and returns its
// relayed payload (in a buffer of getRelayBuf's), or reports false,
// having kept nothing, if the log is full. owned: the caller gives up
// f.Payload (Send's ownership), which the log may then hold by
// reference. An owned payload of relayRefMin bytes or more, only
// authenticated, is not copied at all: the payload returned is the relay
// header and the frame's head, then the tag, and body is f.Payload, to
// write between them (queued.body). Otherwise the frame is encoded once,
// where it goes in the payload, and kept in the log from there (or, owned,
// by reference); an authenticated-only one is tagged as it is encoded
// (wire.AppendRelay), while its pieces are in the cache, and a sealed one
// once it is kept, since the log keeps it in the clear. The caller holds
// p.wmu.
func (t *Transport) relayWrap(p *peer, f *wire.Frame, owned bool) (buf *[]byte, body []byte, ok bool) {
	ref := owned && len(f.Payload) >= relayRefMin
	if ref && t.relayFlags()&wire.RelaySealed == 0 && wire.RelayTagInPieces() {
		return t.relayWrapRef(p, f)
	}
	size := wire.EncodedSize(*f)
	buf = getRelayBuf(size + 128)
	for {
		seq, stream := p.log.nextNumber()
		h := wire.Relay{Origin: t.self, Final: p.id, SrcStream: p.stream, DstStream: stream, Seq: seq, Flags: t.relayFlags()}
		rand.Read(h.Nonce[:])
		sealed := h.Flags&wire.RelaySealed != 0
		var b []byte
		var headLen int
		if sealed {
			b = wire.AppendRelayHeader((*buf)[:0], h)
			headLen = len(b)
			b = wire.AppendFrame(b, *f)
		} else {
			if !p.log.hasRoom(size) {
				putCopyBuf(buf)
				return nil, nil, false
			}
			b, headLen = wire.AppendRelay((*buf)[:0], t.sealKey(p), h, *f)
		}
		enc := b[headLen : headLen+size]
		var kept, same bool
		if ref {
			kept, same = p.log.addRefAt(seq, stream, enc[:size-len(f.Payload)], f.Payload)
		} else {
			kept, same = p.log.addAt(seq, stream, enc)
		}
		switch {
		case kept && sealed:
			*buf = wire.SealRelayTail(b, t.sealKey(p), h, headLen)
			return buf, nil, true
		case kept:
			*buf = b
			return buf, nil, true
		case same:
			putCopyBuf(buf)
			return nil, nil, false
		}
		// The peer's stream became known meanwhile: number it again.
	}
}

// relayRefMin is the smallest payload relayWrap holds by reference:
// below it the copy costs less than a second piece to keep and write.
const relayRefMin = 4 << 10

// relayWrapRef is relayWrap for an owned, authenticated-only payload of
// relayRefMin bytes or more, which it neither copies nor encodes: the log
// keeps the frame's head and refers to its payload, and the relayed
// payload is returned in pieces (the relay header and the frame's head,
// then the tag, in a buffer of getCopyBuf's; body is f.Payload).
func (t *Transport) relayWrapRef(p *peer, f *wire.Frame) (buf *[]byte, body []byte, ok bool) {
	head := *f
	head.Payload = nil
	buf = getCopyBuf()
	for {
		seq, stream := p.log.nextNumber()
		h := wire.Relay{Origin: t.self, Final: p.id, SrcStream: p.stream, DstStream: stream, Seq: seq, Flags: t.relayFlags()}
		rand.Read(h.Nonce[:])
		b := wire.AppendRelayHeader((*buf)[:0], h)
		headLen := len(b)
		b = head.AppendHead(b, len(f.Payload))
		kept, same := p.log.addRefAt(seq, stream, b[headLen:], f.Payload)
		switch {
		case kept:
			*buf, _ = wire.AppendRelayTag(b, t.sealKey(p), h, b, f.Payload)
			return buf, f.Payload, true
		case same:
			putCopyBuf(buf)
			return nil, nil, false
		}
		// The peer's stream became known meanwhile: number it again.
	}
}

// bigBufs are the buffers of relayed payloads, reused once written: a
// relayed stream of large frames then neither allocates nor zeroes one
// per frame (a sync.Pool: a collection empties it, and a burst allocates
// again).
var bigBufs sync.Pool

// getBigBuf returns a buffer of at least n bytes' capacity.
func getBigBuf(n int) *[]byte {
	if b, ok := bigBufs.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := make([]byte, 0, max(n, 2*maxCopyBuf))
	return &b
}

// getRelayBuf returns a buffer for a relayed payload of about n bytes:
// one of SendCopy's for a small one, else one of getBigBuf's. putCopyBuf
// gives either back.
func getRelayBuf(n int) *[]byte {
	if n <= maxCopyBuf {
		return getCopyBuf()
	}
	return getBigBuf(n)
}

// putBigBuf gives back a buffer of getBigBuf's, no longer referenced.
func putBigBuf(b *[]byte) {
	if b != nil {
		bigBufs.Put(b)
	}
}

// relayNow relays f to node to on the calling goroutine when to's writer
// relays (relayLoop) and has nothing queued or in hand, and the relay's
// queue has room: no hand-off to that writer per frame, as SendNow spares
// one on a connection. It wraps f (relayWrap) and writes a small frame
// at once if the relay's connection is idle, else queues it to the
// relay's writer, without waiting for a small frame, waiting at most
// relayRetransmit for room for a large one. It reports whether it took
// the frame; if not, the caller queues it. (If the relay's queue had no
// room, the frame is in the log and the writer resends it.)
//
// A large frame that finds to's resend log full waits here (until ctx is
// done) for the acknowledgements that free it, as the writer would have:
// handed to the writer instead, it would draw the frames after it there
// too, each then handed off.
func (t *Transport) relayNow(ctx context.Context, to core.NodeID, f *wire.Frame, owned bool) bool {
	for {
		took, full := t.relayNowOnce(to, f, owned)
		if took || full == nil || len(f.Payload) <= relayNowMax {
			return took
		}
		wait := time.NewTimer(relayRetransmit)
		select {
		case <-full.log.space:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
		if ctx.Err() != nil {
			return false
		}
	}
}

// relayNowOnce is one attempt of relayNow: took reports whether it took
// f; full, if not nil, is to's peer, whose log had no room for f.
func (t *Transport) relayNowOnce(to core.NodeID, f *wire.Frame, owned bool) (took bool, full *peer) {
	if f.Kind == wire.KindRelay || f.Kind == wire.KindRoute || to == t.self {
		return false, nil
	}
	f.Src, f.Dst = t.self, to
	if wire.EncodedSize(*f)-wire.LengthSize > t.cfg.MaxFrameSize {
		return false, nil // Send reports the size
	}
	m := t.byID.Load()
	if m == nil {
		return false, nil
	}
	p := (*m)[to]
	if p == nil {
		return false, nil
	}
	via := p.rl.now.Load()
	if via == nil || via.live.Load() == nil || p.live.Load() != nil || !p.wmu.TryLock() {
		return false, nil
	}
	defer p.wmu.Unlock()
	if p.flushed.Load() != p.accepted.Load() || p.rl.now.Load() != via || p.log.probing() || !t.roomInQueue(via) {
		return false, nil
	}
	buf, body, ok := t.relayWrap(p, f, owned)
	if !ok {
		return false, p
	}
	p.accepted.Add(1)
	p.written++
	p.flushed.Store(p.written)
	if len(f.Payload) > relayNowMax || body != nil {
		// Written by the relay's writer, while the caller prepares
		// the next frame.
		if !t.queueRelayed(via, buf, body, false) {
			t.relayNowLost(p)
		}
		return true, nil
	}
	f = &wire.Frame{Kind: wire.KindRelay, Payload: *buf}
	if t.writeRelayedNow(via.id, *f) {
		putCopyBuf(buf)
		t.stats.relayed.Add(1)
		return true, nil
	}
	if t.enqueue(doneCtx, via.id, *f, buf, false) != nil {
		putCopyBuf(buf)
		t.relayNowLost(p)
		return true, nil
	}
	t.stats.relayed.Add(1)
	return true, nil
}

// publishPeer makes t.byID hold p, so that relayNow finds it without
// t.mu (current builds byID only for peers with a connection).
func (t *Transport) publishPeer(p *peer) {
	if m := t.byID.Load(); m != nil && (*m)[p.id] == p {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.peers[p.id] != p {
		return
	}
	if m := t.byID.Load(); m == nil || (*m)[p.id] != p {
		byID := maps.Clone(t.peers)
		t.byID.Store(&byID)
	}
}

// relayNowLost has p's writer resend from the acknowledgement point a
// frame relayNow kept in the log but could not queue to the relay.
func (t *Transport) relayNowLost(p *peer) {
	p.rl.rewind.Store(true)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// relayPush seals the frame enc (number seq of p's stream, whose id for
// p's side is stream) and queues it to via. It reports false if via's
// queue had no room within relayRetransmit.
func (t *Transport) relayPush(p, via *peer, seq, stream uint64, enc []byte, control bool) bool {
	return t.queueRelayed(via, t.relaySeal(p, seq, stream, enc, control), nil, control)
}

// relaySeal returns, in a buffer of getRelayBuf's, the relayed payload of
// the frame enc, number seq of p's stream (stream: its id for p's side).
func (t *Transport) relaySeal(p *peer, seq, stream uint64, enc []byte, control bool) *[]byte {
	h := wire.Relay{Origin: t.self, Final: p.id, SrcStream: p.stream, DstStream: stream, Seq: seq, Flags: t.relayFlags()}
	if control {
		h.Flags |= wire.RelayControl
	}
	rand.Read(h.Nonce[:])
	buf := getRelayBuf(len(enc) + 128)
	*buf = wire.SealRelay((*buf)[:0], t.sealKey(p), h, enc)
	return buf
}

// writeRelayedNow writes a small relayed frame f to node to's idle
// connection on the calling goroutine with one non-blocking write
// (sendNow, which declines while frames wait for to's writer), without
// keeping it in the hop's stream: no hand-off to to's writer. A large
// one goes to the writer, which then writes while the caller prepares
// the next (a relay reads the next, an origin seals it): on a machine
// with cores to spare the two overlap.
func (t *Transport) writeRelayedNow(to core.NodeID, f wire.Frame) bool {
	return len(f.Payload) <= relayNowMax && t.sendNow(to, f, false)
}

// queueRelayed queues a relayed payload of ours, in a buffer of
// getRelayBuf's that the writer gives back, to via, waiting at most
// relayRetransmit for room; it reports whether it did. body, if not nil,
// is the payload's middle piece (queued.body).
func (t *Transport) queueRelayed(via *peer, buf *[]byte, body []byte, control bool) bool {
	x := queued{f: wire.Frame{Kind: wire.KindRelay, Payload: *buf}, buf: buf, body: body}
	if body == nil && t.writeRelayedNow(via.id, x.f) {
		putCopyBuf(buf)
		t.stats.relayed.Add(1)
		return true
	}
	if t.push(doneCtx, via.id, x, control) != nil {
		ctx, cancel := context.WithTimeout(context.Background(), relayRetransmit)
		err := t.push(ctx, via.id, x, control)
		cancel()
		if err != nil {
			putCopyBuf(buf) // not queued: still ours
			return false
		}
	}
	t.stats.relayed.Add(1)
	return true
}

// relayResend queues again, through via, every frame of p's log from the
// acknowledgement point. It reports false if via's queue stalled.
func (t *Transport) relayResend(p, via *peer) bool {
	stream, from, frames := p.log.sinceAck()
	n := uint64(0)
	for len(frames) > 0 {
		_, k, err := wire.DecodeFrameMax(frames, max(t.cfg.MaxFrameSize, len(frames)))
		if err != nil {
			panic("tcp: a frame of the resend log does not decode: " + err.Error())
		}
		if !t.relayPush(p, via, from+n, stream, frames[:k], false) {
			return false
		}
		frames = frames[k:]
		n++
	}
	if n > 0 {
		t.stats.resent.Add(n)
		t.log.Debug("tcp: resent frames through a relay", "peer", uint32(p.id), "via", uint32(via.id), "from", from, "frames", n)
	}
	return true
}

// relayAck acknowledges p's stream through via: how many of its frames
// we delivered, under our stream id, which tells a peer that did not
// know it. Acknowledgements are built and sent under p.wmu, so that they
// leave in the order of their counts (relayAckNow sends them too): one
// overtaken by an older one would look to p like a gap.
func (t *Transport) relayAck(p, via *peer) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	wanted := p.rl.ackWanted.Swap(false)
	r := t.recvStreamOf(p)
	n, b := r.recvd.Load(), r.bytes.Load()
	r.due.Store(false)
	if n == r.ackedN.Load() && !wanted {
		// relayAckNow sent this count meanwhile: the same again would
		// tell p that we missed a frame.
		return
	}
	if t.relayPush(p, via, 0, r.stream, relayAckFrame(t.self, p.id, n), true) {
		r.ackedN.Store(n)
		r.ackedBytes.Store(b)
		t.stats.acks.Add(1)
	} else {
		p.rl.ackWanted.Store(true)
	}
}

// relayAckFrame returns the encoding of an acknowledgement of n frames
// from self to peer.
func relayAckFrame(self, peer core.NodeID, n uint64) []byte {
	var pb [binaryMaxVarint]byte
	return wire.AppendFrame(nil, wire.Frame{Kind: wire.KindAck, Src: self, Dst: peer, Payload: wire.AppendCount(pb[:0], n)})
}

// relayAckNow acknowledges r, p's stream, on the calling goroutine (the
// reader that delivered the frames), through the relay p's relaying
// writer keeps up with (relayState.now), with one non-blocking write to
// that relay's idle connection, as ackInline does on a connection: no
// wake-up of p's writer for each acknowledgement. It reports false,
// having sent nothing, if p's writer has no such relay, is busy, or the
// relay's connection is not idle.
func (t *Transport) relayAckNow(p *peer, r *recvStream) bool {
	via := p.rl.now.Load()
	if via == nil || !p.wmu.TryLock() {
		return false
	}
	defer p.wmu.Unlock()
	if p.rl.now.Load() != via || p.live.Load() != nil || t.recvStreamOf(p) != r {
		return false
	}
	n, b := r.recvd.Load(), r.bytes.Load()
	buf := t.relaySeal(p, 0, r.stream, relayAckFrame(t.self, p.id, n), true)
	defer putCopyBuf(buf)
	if !t.writeRelayedNow(via.id, wire.Frame{Kind: wire.KindRelay, Payload: *buf}) {
		return false
	}
	r.ackedN.Store(n)
	r.ackedBytes.Store(b)
	r.due.Store(false) // an acknowledgement asked of the writer is sent
	t.stats.acks.Add(1)
	t.stats.relayed.Add(1)
	return true
}
