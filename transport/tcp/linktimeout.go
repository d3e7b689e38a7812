package tcp

import (
	"errors"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT socket option (not in
// package syscall): how long, in milliseconds, written data may stay
// unacknowledged before the kernel drops the connection.
const tcpUserTimeout = 0x12

// socketControl returns the Control of the TCP listener and dialer: the
// kernel buffers (bufferControl) and Config.LinkTimeout, both set before
// the socket listens or connects (an accepted socket inherits them).
func socketControl(cfg Config) func(network, address string, rc syscall.RawConn) error {
	buffers := bufferControl(cfg)
	link := cfg.LinkTimeout
	if link <= 0 || !linkTimeoutSupported {
		return buffers
	}
	return func(network, address string, rc syscall.RawConn) error {
		if buffers != nil {
			if err := buffers(network, address, rc); err != nil {
				return err
			}
		}
		var err error
		cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(link/time.Millisecond))
		})
		if cerr != nil {
			return cerr
		}
		return os.NewSyscallError("setsockopt TCP_USER_TIMEOUT", err)
	}
}

// dialTimeout bounds one TCP dial: DialTimeout, or LinkTimeout if shorter.
func (t *Transport) dialTimeout() time.Duration {
	d := t.cfg.DialTimeout
	if l := t.cfg.LinkTimeout; l > 0 && (d <= 0 || l < d) {
		d = l
	}
	return d
}

// linkTimeoutSupported: the kernel has TCP_USER_TIMEOUT.
const linkTimeoutSupported = runtime.GOOS == "linux"

// A link that stopped delivering is left early when a relay can carry
// its frames. Config.LinkTimeout must not be short, or a link that only
// lost a few segments in a row would fail the pair's connection with no
// other path to take; but with a relay that reaches the peer, waiting
// for it keeps the pair's frames back for all that time. So every
// linkCheckInterval the connections in use are looked at through the
// kernel's TCP_INFO (linkStalledFor): one whose written data has drawn no
// acknowledgement from the peer's kernel for linkStallAfter, with a
// retransmission timeout expired, is broken as a lost connection would
// be, while a relay reaches the peer (chooseRelay). Its frames then go
// through the relay from the acknowledgement point (relayLoop), in the
// pair's stream, once each and in order, while the writer redials; a
// link that was only slow is back on the redial. The peer's kernel
// acknowledges whatever its process does, so a starved peer on a loaded
// machine is not taken for a broken link.

// The same look tells the failure detector about silent peers whose link
// answers (core.PeerHint with Answering): nothing read from the peer for
// answerSilence while its kernel acknowledges all that was written to it.
// A process that crashed leaves no such link (its host closes its
// connections), nor does a host that crashed or was cut off (what it is
// sent stays unacknowledged); a process on an overloaded host that the
// kernel has not scheduled for a while does, and the detector holds its
// verdict on it (fd's heartbeat_answering.go).
//
// Peers on this host talk over the same-host Unix socket (or the shared
// memory set up on it), which has no TCP_INFO and no acknowledgements;
// there the process itself is looked at instead (peerProcessLives): a
// peer that sent nothing for answerSilence, though it delivered a frame
// within answerHeard or was written to within answerWritten, whose socket
// is open and whose process exists, is the one that connected (the same
// start time) and is runnable or waiting, is hinted the same way. The kernel closes
// the sockets of a process that ends, so a crash still shows at once as
// the connection's end, and draws no hint.

// linkCheckInterval is how often the connections' links are looked at.
const linkCheckInterval = 100 * time.Millisecond

// answerSilence is how long nothing must have come from a peer before its
// answering link is hinted: twice the look's period, so that a peer that
// talks, or beats at the 100 ms of a job's detector, draws no hint.
const answerSilence = 2 * linkCheckInterval

// minLinkStall is the least linkStallAfter: three of Linux's smallest
// retransmission timeouts (200 ms), so that a segment or two lost in a
// row does not break a connection.
const minLinkStall = 600 * time.Millisecond

// errLinkStalled is the cause of a connection checkLinks broke.
var errLinkStalled = errors.New("tcp: the link stopped delivering (no acknowledgement from the peer's kernel); relaying")

// linkStallAfter is how long a link may stall before checkLinks breaks
// its connection: a quarter of LinkTimeout, at least minLinkStall; 0
// where links are not looked at (no LinkTimeout, no TCP_USER_TIMEOUT, or
// no relaying).
func (t *Transport) linkStallAfter() time.Duration {
	l := t.cfg.LinkTimeout
	if l <= 0 || !linkTimeoutSupported || t.cfg.NoRelay {
		return 0
	}
	return max(l/4, minLinkStall)
}

// sameHostLook is what the looks at one same-host connection remember
// of its peer (peerProcessLives) and of when it was last heard from.
type sameHostLook struct {
	pid   int    // the peer's process id (SO_PEERCRED); 0 not read yet, -1 unknown
	start uint64 // its start time (procStat.start); 0 not read yet
	recvd uint64 // the frames delivered from the peer's stream, at the last look
	heard time.Time
	sent  uint64 // the number of the next frame written to the peer, at the last look
	wrote time.Time
}

// answerWritten is how long after a frame written to a same-host peer its
// silence is still looked at: a detector that holds its verdict on a
// suspect pings it again well within it.
const answerWritten = 500 * time.Millisecond

// answerHeard is how long after a same-host peer last delivered a frame
// its silence is still looked at: past the detector's longest hold on a
// suspect (answeringStallMax past T_broken, about 2.2 s with a job's
// timings), the hint would hold nothing.
const answerHeard = 3 * time.Second

// heardLately reports whether the peer delivered a frame within
// answerHeard of now (the look's first sighting counts as one).
func (look *sameHostLook) heardLately(now time.Time) bool {
	return now.Sub(look.heard) < answerHeard
}

// writtenLately reports whether a frame was written to p within
// answerWritten, by the number of the next frame its log would hold.
func (look *sameHostLook) writtenLately(p *peer, now time.Time) bool {
	p.log.mu.Lock()
	next := p.log.next
	p.log.mu.Unlock()
	switch {
	case look.sent == 0: // the first look: what was written before it is not lately
		look.sent = next
	case next != look.sent:
		look.sent, look.wrote = next, now
	}
	return !look.wrote.IsZero() && now.Sub(look.wrote) < answerWritten
}

// linkLooks is the link check's memory across looks (the route loop's
// own): the same-host connections in use, by connection.
type linkLooks struct {
	sameHost map[*conn]*sameHostLook
}

// sameHostSilent reports whether c's peer has sent nothing that was
// delivered for answerSilence, by the count of its stream's frames
// (acknowledgements and relayed frames are not counted; a peer that only
// sends those is taken for silent, which at worst holds a verdict on a
// peer that is alive anyway).
func (l *linkLooks) sameHostSilent(c *conn, now time.Time) (*sameHostLook, bool) {
	look := l.sameHost[c]
	var n uint64
	if c.rs != nil {
		n = c.rs.recvd.Load()
	}
	if look == nil {
		if l.sameHost == nil {
			l.sameHost = map[*conn]*sameHostLook{}
		}
		look = &sameHostLook{recvd: n, heard: now}
		l.sameHost[c] = look
	}
	if n != look.recvd {
		look.recvd, look.heard = n, now
	}
	return look, now.Sub(look.heard) >= answerSilence
}

// linkLooksOn reports whether the link check runs: for links that may
// stall (linkStallAfter), or for same-host peers.
func (t *Transport) linkLooksOn() bool {
	return t.linkStallAfter() > 0 || (!t.cfg.NoUnix && unixSupported)
}

// checkLinks breaks each connection in use whose link stalled for
// linkStallAfter while a relay reaches its peer, and hints each silent
// peer whose link answers, its last acknowledgement within linkStallAfter,
// or, on this host, whose process lives.
func (t *Transport) checkLinks(looks *linkLooks) {
	after := t.linkStallAfter()
	type use struct {
		p *peer
		c *conn
	}
	var in []use
	t.mu.Lock()
	for _, p := range t.peers {
		if c := p.cur; c != nil && !c.isDead() {
			in = append(in, use{p, c})
		}
	}
	t.mu.Unlock()
	now := time.Now()
	inUse := make(map[*conn]bool, len(in))
	for _, u := range in {
		if u.c.unix || u.c.shm != nil {
			inUse[u.c] = true
			// Only a peer that talked to this process lately, or that
			// this process wrote to lately, is looked at: the detector
			// suspects a peer it used to hear from (a monitored peer's
			// heartbeats stop), or asks a peer it suspects (a ping, a
			// probe); one that never talks to this process needs no
			// hint. Looking at every silent peer of a large one-host
			// job (most of them, under gossip) read /proc and hinted
			// the detector for each ten times a second, load enough to
			// double the time 128 processes on 2 cores took to agree on
			// a crash.
			if look, silent := looks.sameHostSilent(u.c, now); silent && (look.heardLately(now) || look.writtenLately(u.p, now)) && peerProcessLives(u.c, look) {
				t.hintOf(core.PeerHint{Node: u.p.id, Reason: "silent, its process on this host lives", Answering: true})
			}
			continue
		}
		if after <= 0 {
			continue
		}
		stalled := time.Duration(linkStalledFor(u.c)) * time.Millisecond
		t.rt.mu.Lock()
		if t.rt.stalled[u.p.id] {
			stalled = time.Hour
		}
		t.rt.mu.Unlock()
		if stalled == 0 && linkAnswers(u.c, answerSilence, after) {
			t.hintOf(core.PeerHint{Node: u.p.id, Reason: "silent, its link answers", Answering: true})
			continue
		}
		if stalled < after || t.chooseRelay(u.p, core.None, false) == nil {
			continue
		}
		t.rt.linkStalls.Add(1)
		t.log.Info("tcp: the link to a peer stopped delivering: breaking it for a relay",
			"peer", uint32(u.p.id), "remote", u.c.remote, "stalled", stalled)
		if tc, ok := u.c.nc.(*net.TCPConn); ok {
			tc.SetLinger(0) // nothing more gets through: free it now
		}
		u.c.close(false, errLinkStalled)
	}
	for c := range looks.sameHost {
		if !inUse[c] {
			delete(looks.sameHost, c)
		}
	}
}
