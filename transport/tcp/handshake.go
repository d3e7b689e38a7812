package tcp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport"
	"github.com/cohort-mp/cohort/wire"
)

// Errors of the TCP transport, beyond those of package transport.
var (
	// ErrHandshake: a connection failed the handshake. It wraps the cause
	// (wire.ErrAuth, wire.ErrJob, wire.ErrVersion, a timeout, ...).
	ErrHandshake = errors.New("tcp: handshake failed")
	// errTieBreak: an inbound connection lost to ours (simultaneous dial).
	errTieBreak = errors.New("tcp: our connection to the peer wins the tie-break")
	// errRefusedAfterProof: the peer verified our proof and answered with
	// its own in a goodbye: the tie-break, its own connection to us wins.
	errRefusedAfterProof = errors.New("tcp: the peer refused the connection after our proof (tie-break)")
)

// handshakeIn runs the acceptor's side of the handshake on nc, from
// source, and logs a refusal.
func (t *Transport) handshakeIn(nc net.Conn, source string) (*conn, error) {
	t.setOptions(nc)
	remote := remoteOf(nc)
	if err := checkPeerUser(nc); err != nil {
		t.stats.refused.Add(1)
		t.logRefusal("tcp: refused connection", source, remote, err)
		return nil, err
	}
	if t.cfg.TLS != nil {
		nc = tls.Server(nc, t.cfg.TLS)
	}
	c, err := t.accept(nc, remote)
	if err != nil {
		switch {
		case errors.Is(err, errTieBreak):
			t.stats.tieBreaks.Add(1)
			t.log.Debug("tcp: inbound connection lost the tie-break", "remote", remote, "err", err)
		case t.isClosing():
		default:
			t.stats.refused.Add(1)
			t.logRefusal("tcp: refused connection", source, remote, err)
		}
		return nil, err
	}
	return c, nil
}

// checkPeerUser refuses a connection on the same-host Unix socket from a
// process of another user (SO_PEERCRED, as of its connect call): any
// local user may connect to an abstract socket, and only our own may
// speak to us there. A TCP connection passes (the proof of the secret is
// its only check).
func checkPeerUser(nc net.Conn) error {
	if _, ok := nc.(*net.UnixConn); !ok {
		return nil
	}
	uid, _, ok := peerCred(nc)
	switch {
	case !ok:
		return fmt.Errorf("%w: the user of the connecting process is unknown", ErrHandshake)
	case uid != os.Getuid():
		return fmt.Errorf("%w: the connecting process runs as uid %d, not %d", ErrHandshake, uid, os.Getuid())
	}
	return nil
}

// newHello returns our Hello with a fresh nonce.
func (t *Transport) newHello(nc net.Conn) wire.Hello {
	h := wire.Hello{Version: wire.Version, JobID: t.cfg.JobID, Node: t.self, Integrity: t.wantRecords(nc)}
	rand.Read(h.Nonce[:])
	return h
}

// accept runs the acceptor's handshake (package wire, steps 1 to 5) and
// installs the connection. Nothing is decided, counted or kept for the
// peer before its proof verifies: the acceptor reads the initiator's proof
// before it sends its own, and only then decides the tie-break and counts
// the connection (admit). So a connection that does not know the secret
// neither holds back our writer nor learns our proof, and the initiator
// never believes in a connection we refuse: we refuse it with a goodbye
// instead of our proof.
func (t *Transport) accept(nc net.Conn, remote string) (*conn, error) {
	nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	hc := handshakeConn(nc)
	defer stopCollecting(hc)
	fr := wire.NewFrameReader(hc)
	fr.SetMaxFrameSize(wire.MaxHandshakeFrameSize)
	fw := wire.NewFrameWriter(hc, 512)
	local := t.newHello(nc)
	if err := writeFlush(fw, wire.Frame{Src: t.self, Dst: core.None}, local); err != nil {
		return nil, err
	}
	peerHello, err := readHello(fr, local)
	if err != nil {
		return nil, err
	}
	id := peerHello.Node
	if id == t.self {
		return nil, fmt.Errorf("%w: the peer claims our own node id %v", ErrHandshake, id)
	}
	if err := readProof(fr, t.cfg.Secret, local, peerHello, false); err != nil {
		return nil, err
	}
	// From its proof on, the initiator writes records if either Hello
	// asked for them (record.go); we do from ours on.
	var rc *recordConn
	if local.Integrity || peerHello.Integrity {
		rc = newRecordConn(hc, t.cfg.Secret, local, peerHello, false)
		rc.startReading(fr.TakeBuffered())
		fr = wire.NewFrameReader(rc)
		fr.SetMaxFrameSize(wire.MaxHandshakeFrameSize)
	}
	// The peer sends its ring offer only once it has our proof: nothing
	// it passed before is kept.
	startCollecting(hc)
	proof := wire.Proof{MAC: wire.ComputeProof(t.cfg.Secret, local, peerHello, false)}
	// The initiator sends its resume right after its proof: whether it
	// can be dialled decides the tie-break.
	resume, err := readResume(fr)
	if err != nil {
		t.countTampered(err)
		return nil, err
	}
	p, err := t.admit(id, resume.DialOutOnly)
	if err != nil {
		if errors.Is(err, errTieBreak) {
			// The peer proved the secret: tell it, with our proof in a
			// goodbye, so that it waits for our connection rather than
			// reporting a failure (and knows the refusal is ours).
			var e wire.Encoder
			proof.MarshalWire(&e)
			fw.WriteFrame(wire.Frame{Kind: wire.KindGoodbye, Src: t.self, Dst: id, Payload: e.B})
			fw.Flush()
		}
		return nil, err
	}
	installed := false
	defer func() {
		if !installed && p != nil {
			t.mu.Lock()
			p.inbound--
			t.mu.Unlock()
			p.signal()
		}
	}()
	if err := writeFlush(fw, wire.Frame{Src: t.self, Dst: id}, proof); err != nil {
		return nil, err
	}
	if rc != nil {
		fw = wire.NewFrameWriter(rc, 512)
	}
	ours := t.ourResume(id)
	if err := writeFlush(fw, wire.Frame{Src: t.self, Dst: id}, ours); err != nil {
		return nil, err
	}
	cc, fr, err := t.ringStep(hc, fr, local, peerHello, false)
	if err != nil {
		return nil, err
	}
	if rc != nil {
		cc = t.recordsFrom(rc)
	}
	nc.SetDeadline(time.Time{})
	c := t.newConn(cc, fr, id, false, remote)
	c.resume, c.local = resume, ours
	installed = true
	if !t.install(p, c) {
		return nil, transport.ErrClosed
	}
	t.stats.accepted.Add(1)
	t.log.Debug("tcp: accepted connection", "peer", uint32(id), "remote", remote, "unix", c.unix)
	return c, nil
}

// admit decides the tie-break for an inbound connection from id, whose
// proof has verified, and, if it may proceed and we know id, counts it so
// that our writer does not dial while its handshake ends. The connection
// opened by the lower node id wins: we refuse the peer's dial if we are
// lower and our own dial is pending or established, unless the peer
// cannot be dialled (dialOutOnly: ours would never succeed). A peer we do
// not know gets its state when the connection is installed; p is nil then.
func (t *Transport) admit(id core.NodeID, dialOutOnly bool) (*peer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, transport.ErrClosed
	}
	if t.isBlocked(id) {
		return nil, fmt.Errorf("%w: %w", ErrHandshake, errBlocked)
	}
	p := t.peers[id]
	if p == nil {
		return nil, nil
	}
	if t.self < id && !dialOutOnly && (p.dialing || (p.cur != nil && p.cur.initiator)) {
		return nil, fmt.Errorf("%w (we are %v, the peer %v)", errTieBreak, t.self, id)
	}
	p.inbound++
	return p, nil
}

// install makes c the connection to its peer, replacing (closing) the
// previous one. admitted is the peer state admit returned for an inbound
// connection (possibly nil), or the dialing peer's for an outbound one. It
// returns false if the transport or the peer is gone.
func (t *Transport) install(admitted *peer, c *conn) bool {
	t.mu.Lock()
	if admitted != nil && !c.initiator {
		admitted.inbound--
	}
	p := admitted
	if p == nil && !t.closed {
		if p = t.peers[c.peer]; p == nil {
			// An authenticated peer we did not know: its stream id is
			// the one our handshake sent (peerLocked takes it from
			// t.announced, unless a state made and removed meanwhile
			// took it).
			p = t.peerLocked(c.peer)
			p.stream = c.local.Stream
		}
	}
	if t.closed || t.peers[c.peer] != p {
		t.mu.Unlock()
		if admitted != nil {
			admitted.signal()
		}
		c.close(true, nil)
		return false
	}
	t.startStream(p, c)
	old := p.cur
	p.setCur(c)
	c.prev = old
	if old == nil {
		c.prev = p.draining
	}
	p.unreachable = false
	p.rl.in.Store(false)
	t.routeChanged()
	if old != nil {
		t.retireReplaced(p, old) // under t.mu: wg.Add cannot race Close's Wait
	}
	t.mu.Unlock()
	p.signal()
	t.stats.established.Add(1)
	if c.unix {
		t.stats.unix.Add(1)
	}
	if _, ok := c.nc.(*shmConn); ok {
		t.stats.shm.Add(1)
	}
	if _, ok := c.nc.(*recordConn); ok {
		t.stats.integrity.Add(1)
	}
	return true
}

// dial opens a connection to p at addr, runs the initiator's handshake,
// installs the connection and starts its reader.
func (t *Transport) dial(p *peer, addr string) (*conn, error) {
	t.stats.dials.Add(1)
	if t.isBlocked(p.id) {
		return nil, errBlocked
	}
	nc, err := t.dialSocket(t.dialCtx, addr)
	if err != nil {
		return nil, err
	}
	if !t.track(nc) {
		return nil, transport.ErrClosed
	}
	t.setOptions(nc)
	c, _, err := t.initiate(t.clientConn(nc), p)
	if err != nil {
		t.untrack(nc)
		return nil, err
	}
	t.wg.Add(1) // the calling writer goroutine holds a count, so Close cannot be past Wait
	go func() {
		defer t.wg.Done()
		defer t.untrack(nc)
		t.read(c)
	}()
	return c, nil
}

// initiate runs the initiator's handshake on nc and installs the
// connection.
// p may be nil (Introduce): the peer is then whoever answers, and its
// state is created once its hello names it. The peer's id is returned as
// soon as its hello is read, also with an error after that.
func (t *Transport) initiate(nc net.Conn, p *peer) (*conn, core.NodeID, error) {
	nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	hc := handshakeConn(nc)
	defer stopCollecting(hc)
	fr := wire.NewFrameReader(hc)
	fr.SetMaxFrameSize(wire.MaxHandshakeFrameSize)
	fw := wire.NewFrameWriter(hc, 512)
	local := t.newHello(nc)
	want := core.None
	if p != nil {
		want = p.id
	}
	if err := writeFlush(fw, wire.Frame{Src: t.self, Dst: want}, local); err != nil {
		return nil, core.None, err
	}
	peerHello, err := readHello(fr, local)
	if err != nil {
		return nil, core.None, err
	}
	startCollecting(hc)
	id := peerHello.Node
	switch {
	case p != nil && id != p.id:
		return nil, core.None, fmt.Errorf("%w: %s is node %v, not %v", ErrHandshake, nc.RemoteAddr(), id, p.id)
	case id == t.self:
		return nil, id, fmt.Errorf("%w: %s claims our own node id %v", ErrHandshake, nc.RemoteAddr(), id)
	}
	proof := wire.Proof{MAC: wire.ComputeProof(t.cfg.Secret, local, peerHello, true)}
	ours := t.ourResume(id)
	err = writeFlush(fw, wire.Frame{Src: t.self, Dst: id}, proof)
	// From our proof on, we write records if either Hello asked for them
	// (record.go); the acceptor does from its own proof on.
	var rc *recordConn
	if local.Integrity || peerHello.Integrity {
		rc = newRecordConn(hc, t.cfg.Secret, local, peerHello, true)
		fw = wire.NewFrameWriter(rc, 512)
	}
	if err == nil {
		err = writeFlush(fw, wire.Frame{Src: t.self, Dst: id}, ours)
	}
	if err == nil {
		err = readProof(fr, t.cfg.Secret, local, peerHello, true)
	}
	if err != nil {
		return nil, id, err
	}
	if rc != nil {
		rc.startReading(fr.TakeBuffered())
		fr = wire.NewFrameReader(rc)
		fr.SetMaxFrameSize(wire.MaxHandshakeFrameSize)
	}
	resume, err := readResume(fr)
	if err != nil {
		t.countTampered(err)
		return nil, id, err
	}
	cc, fr, err := t.ringStep(hc, fr, local, peerHello, true)
	if err != nil {
		return nil, id, err
	}
	if rc != nil {
		cc = t.recordsFrom(rc)
	}
	nc.SetDeadline(time.Time{})
	if p == nil {
		t.mu.Lock()
		if !t.closed {
			p = t.peerLocked(id)
		}
		t.mu.Unlock()
		if p == nil {
			return nil, id, transport.ErrClosed
		}
	}
	c := t.newConn(cc, fr, id, true, nc.RemoteAddr().String())
	c.resume, c.local = resume, ours
	if !t.install(p, c) {
		return nil, id, transport.ErrClosed
	}
	return c, id, nil
}

// clientConn wraps a dialled connection in TLS when the transport uses it.
func (t *Transport) clientConn(nc net.Conn) net.Conn {
	if t.cfg.TLS == nil {
		return nc
	}
	return tls.Client(nc, t.cfg.TLS)
}

// Introduce dials addr, whose node id the caller does not know (a seed of
// a group it joins), runs the handshake, records addr as that node's
// address and returns its id. The connection is kept for later frames.
// If the peer already has a connection with us that wins the tie-break,
// the peer's id is still returned and recorded with addr.
func (t *Transport) Introduce(ctx context.Context, addr string) (core.NodeID, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return core.None, transport.ErrClosed
	}
	t.wg.Add(1) // held for the call, so Close waits and the reader's Add below is safe
	t.mu.Unlock()
	defer t.wg.Done()
	t.stats.dials.Add(1)
	nc, err := t.dialSocket(ctx, addr)
	if err != nil {
		t.stats.dialFailures.Add(1)
		return core.None, fmt.Errorf("tcp: introduce %s: %w", addr, err)
	}
	if !t.track(nc) {
		return core.None, transport.ErrClosed
	}
	t.setOptions(nc)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	c, id, err := t.initiate(t.clientConn(nc), nil)
	stop()
	if err != nil {
		t.untrack(nc)
		if id == core.None || id == t.self || !errors.Is(err, errRefusedAfterProof) {
			t.stats.dialFailures.Add(1)
			return core.None, fmt.Errorf("tcp: introduce %s: %w", addr, err)
		}
		// The peer verified our proof and refused this connection (the
		// tie-break: it already has one with us); its address is all we
		// need.
		t.SetPeer(id, addr)
		return id, nil
	}
	t.SetPeer(id, addr)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.untrack(nc)
		t.read(c)
	}()
	return id, nil
}

// ourResume returns our wire.Resume for peer id. A peer we have no state
// for gets a stream id now, kept in t.announced until its state is made
// (peerLocked), which takes it: every handshake with the peer announces
// the same stream, also two that overlap (it dials us as we dial it) and
// one whose peer state a Send or SetPeer makes before it ends. A stream
// announced and then replaced by another would look to the peer like our
// restart: it would start the pair's streams afresh, dropping the frames
// it had written to us and not yet seen acknowledged, and we would drop
// its next ones as duplicates.
func (t *Transport) ourResume(id core.NodeID) wire.Resume {
	var r wire.Resume
	t.mu.Lock()
	if p := t.peers[id]; p != nil {
		r = wire.Resume{Stream: p.stream, PeerStream: p.peerStream, Received: p.rs.recvd.Load()}
	} else {
		r.Stream = t.announced[id]
		if r.Stream == 0 {
			r.Stream = newStreamID()
			if t.announced == nil {
				t.announced = map[core.NodeID]uint64{}
			}
			t.announced[id] = r.Stream
		}
	}
	t.mu.Unlock()
	r.DialOutOnly = t.cfg.DialOutOnly
	return r
}

// readResume reads the peer's wire.Resume. The initiator sends its own
// with its proof; the acceptor after its proof.
func readResume(fr *wire.FrameReader) (wire.Resume, error) {
	f, err := fr.ReadFrame()
	if err != nil {
		return wire.Resume{}, fmt.Errorf("%w: reading the resume: %w", ErrHandshake, err)
	}
	if f.Kind != wire.KindResume {
		return wire.Resume{}, fmt.Errorf("%w: expected a resume, got %v", ErrHandshake, f.Kind)
	}
	r, err := wire.DecodeResume(f.Payload)
	if err != nil {
		return wire.Resume{}, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return r, nil
}

// startStream ties c to p's stream as c's handshake left it (c.resume):
// a peer of a new incarnation gets new streams both ways (the frames kept
// for its predecessor are dropped), and the writer resends from the first
// frame the peer has not delivered. t.mu is held.
func (t *Transport) startStream(p *peer, c *conn) {
	r := c.resume
	if p.peerStream != r.Stream {
		if p.peerStream != 0 {
			t.stats.restarts.Add(1)
			t.log.Info("tcp: the peer restarted or forgot us: the pair's streams start afresh", "peer", uint32(p.id))
		}
		if p.peerStream == 0 {
			p.log.bind(r.Stream) // keeps frames numbered while relayed
		} else {
			p.log.reset(r.Stream)
		}
		p.peerStream = r.Stream
		p.rs.timer.Stop()
		p.rs = t.newRecvStream(p, r.Stream)
		p.rl.routeSent = 0
	}
	c.owner, c.rs, c.peerStream = p, p.rs, r.Stream
	if p.dialOutOnly = r.DialOutOnly; p.dialOutOnly {
		p.kept = false // its own dials keep the connection
	}
	if r.PeerStream == p.stream && p.stream == c.local.Stream {
		c.resumeFrom = r.Received + 1
		p.log.ack(r.Stream, r.Received)
	}
	// The writer writes the sequence mark and what the peer lacks before
	// anything else: started now if the log holds frames, else by the
	// next Send (SendNow and SendDirect leave c to it until then).
	if !p.log.empty() {
		t.activateLocked(p)
	}
}

func writeFlush(fw *wire.FrameWriter, f wire.Frame, m wire.Message) error {
	if err := fw.WriteMessage(f, m); err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	if err := fw.Flush(); err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return nil
}

// readHello reads and checks the peer's Hello.
func readHello(fr *wire.FrameReader, local wire.Hello) (wire.Hello, error) {
	f, err := fr.ReadFrame()
	if err != nil {
		return wire.Hello{}, fmt.Errorf("%w: reading the hello: %w", ErrHandshake, err)
	}
	if f.Kind != wire.KindHello {
		return wire.Hello{}, fmt.Errorf("%w: the first frame is %v, not a hello", ErrHandshake, f.Kind)
	}
	h, err := wire.DecodeHello(f.Payload)
	if err == nil {
		err = wire.CheckHello(local, h)
	}
	if err != nil {
		return wire.Hello{}, fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	return h, nil
}

// startCollecting makes a handshake on a plain Unix socket (hc a
// rightsConn) keep the descriptors passed beside the bytes from now on:
// the peer's hello has been read, and its ring offer may come with the
// next read. Before, they are closed as they come.
func startCollecting(hc net.Conn) {
	if rc, ok := hc.(*rightsConn); ok {
		rc.startCollecting()
	}
}

// stopCollecting closes the descriptors a handshake on a plain Unix
// socket kept and did not take, as the handshake ends, on every path:
// nothing the peer passed stays open unless the proof verified and the
// ring step mapped it.
func stopCollecting(hc net.Conn) {
	if rc, ok := hc.(*rightsConn); ok {
		rc.stopCollecting()
	}
}

// readProof reads the peer's Proof and verifies it.
func readProof(fr *wire.FrameReader, secret []byte, local, remote wire.Hello, initiator bool) error {
	f, err := fr.ReadFrame()
	if err != nil {
		if initiator && errors.Is(err, io.EOF) {
			// The acceptor reads our proof before it sends its own.
			return fmt.Errorf("%w: the peer closed the connection instead of sending its proof (it refused ours: another secret?): %w", ErrHandshake, err)
		}
		return fmt.Errorf("%w: reading the proof: %w", ErrHandshake, err)
	}
	// An acceptor refuses a connection that loses the tie-break with its
	// proof in a goodbye (accept).
	refused := f.Kind == wire.KindGoodbye && initiator
	if f.Kind != wire.KindProof && !refused {
		return fmt.Errorf("%w: expected a proof, got %v", ErrHandshake, f.Kind)
	}
	p, err := wire.DecodeProof(f.Payload)
	if err == nil {
		err = wire.CheckProof(secret, local, remote, initiator, p)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	if refused {
		return errRefusedAfterProof
	}
	return nil
}
