package tcp

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// shmRefusal says why this connection (a plain Unix socket) offers no
// ring, or "" if it does.
func (t *Transport) shmRefusal(rc *rightsConn) string {
	switch {
	case !shmSupported:
		return "not supported here"
	case t.cfg.NoShm:
		return "turned off"
	}
	_, pid, ok := peerCred(rc.UnixConn)
	switch {
	case !ok:
		return "the peer's process is unknown"
	case pid == os.Getpid() && !t.cfg.ShmInProcess:
		return "the peer is this process" // nothing to gain, memory to lose
	}
	return ""
}

// ringStep ends the handshake of a connection: on a plain Unix socket (hc
// is then the rightsConn the handshake read through), each side offers a
// ring and answers the peer's offer (wire.Ring); if both accept both, the
// connection returned runs over shared memory, with its own frame reader.
// Any other connection has no ring step and is returned as is, and so is
// a Unix one when either side offers nothing or refuses.
func (t *Transport) ringStep(hc net.Conn, fr *wire.FrameReader, local, remote wire.Hello, initiator bool) (net.Conn, *wire.FrameReader, error) {
	rc, ok := hc.(*rightsConn)
	if !ok {
		return hc, fr, nil
	}
	defer rc.stopCollecting()
	peer := remote.Node
	var in, out *ring
	release := func() {
		for _, r := range [2]*ring{in, out} {
			if r != nil {
				unmapRing(r.mem)
			}
		}
	}
	fd := -1
	if why := t.shmRefusal(rc); why != "" {
		t.log.Debug("tcp: no shared-memory ring offered", "peer", uint32(peer), "why", why)
	} else {
		var mem []byte
		var err error
		if fd, mem, err = createRing(t.cfg.ShmRingSize); err != nil {
			t.log.Warn("tcp: cannot make a shared-memory ring; the connection stays on its Unix socket", "peer", uint32(peer), "err", err)
		} else {
			out = newRing(mem)
			out.writeHeader(uint32(t.self), uint32(peer), wire.RingTag(t.cfg.Secret, local, remote, initiator, true))
		}
	}
	var offer wire.Ring
	if out != nil {
		offer.Size = out.size
	}
	theirs, err := t.exchangeRing(rc, fr, peer, offer, fd)
	if fd >= 0 {
		closeFD(fd) // the mapping keeps the memory; the peer has its own descriptor
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%w: the ring offers: %w", ErrHandshake, err)
	}
	fds := rc.take()
	if theirs.Size > 0 && out != nil {
		if in, err = mapPeerRing(fds, theirs.Size, uint32(peer), uint32(t.self), func(tag []byte) bool {
			return wire.CheckRingTag(t.cfg.Secret, local, remote, initiator, false, tag)
		}); err != nil {
			t.stats.shmRefused.Add(1)
			t.log.Warn("tcp: refusing the peer's shared-memory ring; the connection stays on its Unix socket", "peer", uint32(peer), "err", err)
		}
	}
	for _, fd := range fds {
		closeFD(fd)
	}
	answer := wire.Ring{Answer: true}
	if in != nil {
		answer.Size = 1
	}
	theirAnswer, err := t.exchangeRing(rc, fr, peer, answer, -1)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%w: the ring answers: %w", ErrHandshake, err)
	}
	if in == nil || out == nil || theirAnswer.Size == 0 {
		release()
		return rc, fr, nil
	}
	rc.SetDeadline(time.Time{}) // the watcher reads the socket from now on
	sc := newShmConn(rc, in, out, release, fr.Buffered() > 0)
	if _, pid, ok := peerCred(rc.UnixConn); ok {
		sc.pid = pid
		allowPeerReads()
	}
	return sc, wire.NewFrameReader(sc), nil
}

// mapPeerRing maps and checks the ring a peer offered (size data bytes,
// fds the descriptors that came with the offer), written by node from for
// node to; check verifies its tag.
func mapPeerRing(fds []int, size uint64, from, to uint32, check func(tag []byte) bool) (*ring, error) {
	switch {
	case len(fds) != 1:
		return nil, fmt.Errorf("the offer came with %d descriptors, not 1", len(fds))
	case size < minShmRingSize:
		return nil, fmt.Errorf("a ring of %d bytes is too small", size)
	case size&(size-1) != 0:
		return nil, fmt.Errorf("a ring of %d bytes: its size is not a power of two", size)
	}
	mem, err := mapRing(fds[0], size)
	if err != nil {
		return nil, err
	}
	r := newRing(mem)
	if err := r.checkHeader(from, to, check); err != nil {
		unmapRing(mem)
		return nil, err
	}
	return r, nil
}

// exchangeRing sends our ring message (with fd beside it unless fd < 0)
// and reads the peer's of the same step.
func (t *Transport) exchangeRing(rc *rightsConn, fr *wire.FrameReader, peer core.NodeID, ours wire.Ring, fd int) (wire.Ring, error) {
	msg := ringFrame(t.self, peer, ours)
	var err error
	if fd >= 0 {
		err = writeWithFD(rc.UnixConn, msg, fd)
	} else {
		_, err = rc.Write(msg)
	}
	if err != nil {
		return wire.Ring{}, err
	}
	return readRing(fr, peer, t.self, ours.Answer)
}

// ringFrame encodes a KindRing frame.
func ringFrame(src, dst core.NodeID, r wire.Ring) []byte {
	var e wire.Encoder
	r.MarshalWire(&e)
	return wire.AppendFrame(nil, wire.Frame{Kind: wire.KindRing, Src: src, Dst: dst, Payload: e.B})
}

// readRing reads the peer's ring offer (answer false) or answer.
func readRing(fr *wire.FrameReader, from, to core.NodeID, answer bool) (wire.Ring, error) {
	f, err := fr.ReadFrame()
	if err != nil {
		return wire.Ring{}, err
	}
	if f.Kind != wire.KindRing || f.Src != from || f.Dst != to {
		return wire.Ring{}, fmt.Errorf("expected a ring message from %v, got %v", from, f)
	}
	r, err := wire.DecodeRing(f.Payload)
	if err == nil && r.Answer != answer {
		err = fmt.Errorf("%w: a ring message out of order", wire.ErrInvalid)
	}
	return r, err
}
