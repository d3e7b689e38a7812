package tcp

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// acceptLoop accepts connections on ln (the TCP listener or the Unix one)
// and hands each to its own goroutine (serve), which runs the handshake
// and then reads. A connection beyond the listener's bounds on handshakes
// in progress (Config.MaxHandshakes, MaxHandshakesPerSource) is shed
// instead: closed before a byte is read or written.
//
// A flood opens a connection again as soon as it is shed or refused at
// its handshake, so refusing at whatever rate the flood sets would cost
// this process a core's worth of accepts, closes and proofs checked. The
// listener refuses within a budget (refusalBudget: refusalBurst at once,
// refusalRate a second after that); while the budget is spent the loop
// does not call Accept, and connections wait in the kernel's accept
// queue, which limitBacklog keeps short: past it the kernel drops their
// SYNs, which their dialers send again a second or more later, at no cost
// to this process. A connection waiting there is not counted and holds
// nothing of ours; a genuine peer waits among them (as it would be shed
// among them), for the queue's length over refusalRate at most, plus its
// SYN's retransmissions.
func (t *Transport) acceptLoop(ln net.Listener) {
	defer t.wg.Done()
	gate := newHandshakeGate(t.cfg)
	if _, ok := ln.(*net.UnixListener); ok {
		gate.perSource = -1 // one user: ours (checkPeerUser)
	}
	if n, ok := acceptBacklog(t.cfg); ok {
		if err := limitBacklog(ln, n); err != nil {
			t.log.Debug("tcp: cannot shorten the accept queue", "addr", ln.Addr().String(), "err", err)
		}
	}
	var pause *time.Timer
	for {
		if d := gate.pause(time.Now()); d > 0 {
			if pause == nil {
				pause = time.NewTimer(d)
			} else {
				pause.Reset(d)
			}
			select {
			case <-pause.C:
			case <-t.closing:
				pause.Stop()
				return
			}
		}
		nc, err := ln.Accept()
		if err != nil {
			if t.isClosing() {
				return
			}
			// Out of file descriptors and the like: wait a little rather
			// than spin.
			t.log.Warn("tcp: accept failed", "err", err)
			tm := time.NewTimer(50 * time.Millisecond)
			select {
			case <-tm.C:
			case <-t.closing:
				tm.Stop()
				return
			}
			continue
		}
		source := sourceOf(nc)
		if !gate.enter(source) {
			gate.refused(time.Now())
			t.shed(nc, gate, source)
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			gate.leave(source)
			nc.Close()
			return
		}
		t.live[nc] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(nc, gate, source)
	}
}

// serve runs the acceptor's side of the handshake on nc, from source,
// gives its place in gate back as it ends (and spends a refusal of the
// budget if it failed, but for a tie-break, which is a genuine peer's),
// then reads the connection.
func (t *Transport) serve(nc net.Conn, gate *handshakeGate, source string) {
	defer t.wg.Done()
	defer t.untrack(nc)
	c, err := t.handshakeIn(nc, source)
	gate.leave(source)
	if err != nil {
		if !errors.Is(err, errTieBreak) && !t.isClosing() {
			gate.refused(time.Now())
		}
		return
	}
	t.read(c)
}

// shed closes nc, from source, which gate refused, and counts and logs
// it (its description built only for a line that is logged). The close
// resets the connection if its hello has come (unread), as a flood's has.
func (t *Transport) shed(nc net.Conn, gate *handshakeGate, source string) {
	t.stats.shed.Add(1)
	t.logRefusalOf("tcp: too many handshakes in progress, connection closed", source, func() (string, error) {
		return remoteOf(nc), gate.refusal()
	})
	nc.Close()
}

// minBacklog is the shortest accept queue acceptBacklog gives a listener:
// room for the connections of a start-up's burst of dials that come
// while the loop hands earlier ones to their goroutines.
const minBacklog = 64

// acceptBacklog returns the length of a listener's accept queue under cfg:
// as many connections as may be in their handshake at once
// (Config.MaxHandshakes, at least minBacklog), so that the connections
// waiting unseen there are bounded like those we see; false with no bound
// on handshakes, which keeps the system's length.
func acceptBacklog(cfg Config) (int, bool) {
	if cfg.MaxHandshakes < 0 {
		return 0, false
	}
	return max(cfg.MaxHandshakes, minBacklog), true
}

// limitBacklog sets the length of ln's accept queue to n by listening
// again on its socket, which Linux and the BSDs take as a new backlog for
// a socket already listening (the kernel caps it at its somaxconn).
func limitBacklog(ln net.Listener, n int) error {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), n) }); err != nil {
		return err
	}
	return lerr
}
