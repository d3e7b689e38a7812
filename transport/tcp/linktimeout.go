package tcp

import (
	"errors"
	"maps"
	"net"
	"os"
	"runtime"
	"sync"
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
// there the process itself is looked at instead (peerProcessLives), and
// only while the failure detector suspects the peer (Suspect, from the
// host): a suspect whose socket is open and whose process exists, is the
// one that connected (the same start time) and is runnable or waiting,
// is hinted the same way, at once when the suspicion begins and at every
// look after it. Only a suspect's verdict can be held, so looking at
// other silent peers buys nothing; under gossip, most of a large one-host
// job's peers are silent and were heard from lately, and reading /proc
// and hinting the detector for each of them ten times a second is load
// enough to slow 128 processes on 2 cores agreeing on a crash. The kernel closes
// the sockets of a process that ends, so a crash still shows at once as
// the connection's end, which draws no such hint; and when the process
// is found gone at that end, the hint is Refused (connLostHint), as a
// refused dial's would be.

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

// peerProc names the process at the other end of a connection over this
// host's Unix socket (peerProcOf): its id from SO_PEERCRED (0: not known)
// and its start time (procStat.start). An id and a start time name a
// process for good.
type peerProc struct {
	pid   int
	start uint64
}

// suspectSet holds the peers the failure detector suspects (Suspect):
// those of this host whose process the link check looks at.
type suspectSet struct {
	mu  sync.Mutex
	ids map[core.NodeID]struct{}
	// kick, of capacity 1, makes the route loop look at the suspects now
	// rather than at its next tick: a suspicion's verdict may fall one
	// T_broken after it, about a tick with a job's timings.
	kick chan struct{}
}

// Suspect implements transport.SuspectWatcher: while id is suspected, the
// link check looks at its process if it is on this host, and hints the
// detector while it lives (see checkLinks). It does not block.
func (t *Transport) Suspect(id core.NodeID, suspected bool) {
	s := &t.suspects
	s.mu.Lock()
	if suspected {
		if s.ids == nil {
			s.ids = map[core.NodeID]struct{}{}
		}
		s.ids[id] = struct{}{}
	} else {
		delete(s.ids, id)
	}
	s.mu.Unlock()
	if suspected {
		select {
		case s.kick <- struct{}{}:
		default: // a look is due already
		}
	}
}

// suspected returns a copy of the suspects, nil if there are none.
func (s *suspectSet) suspected() map[core.NodeID]struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return nil
	}
	return maps.Clone(s.ids)
}

// connLostHint is the hint for the end of c, which its peer's side
// caused: Refused when the peer is a process of this host that is gone
// (peerProcessGone), as certainly dead as one whose address refuses a
// dial, so that the detector suspects it at once and holds its verdict
// for nothing (a job's settling included); a plain hint otherwise, for
// the detector to probe: a live process also closes connections (one it
// replaced, or retired idle).
func connLostHint(c *conn, reason string) core.PeerHint {
	if peerProcessGone(c) {
		return core.PeerHint{Node: c.peer, Reason: reason + "; its process on this host is gone", Refused: true}
	}
	return core.PeerHint{Node: c.peer, Reason: reason}
}

// linkLooksOn reports whether the link check runs: for links that may
// stall (linkStallAfter), for TCP_USER_TIMEOUT to hold through a shut
// window (holdLinkTimeout), or for same-host peers.
func (t *Transport) linkLooksOn() bool {
	return t.linkStallAfter() > 0 || (t.cfg.LinkTimeout > 0 && linkTimeoutSupported) ||
		(!t.cfg.NoUnix && unixSupported)
}

// A peer that reads nothing for a while (its process computes) shuts its
// receive window once its kernel's buffer is full, and the kernel then
// probes the window; since Linux 5.11 TCP_USER_TIMEOUT counts the time
// the window stays shut, answered probes or not, so LinkTimeout would
// fail the connection of a live peer that computes for longer than it
// while frames wait. So the link check turns TCP_USER_TIMEOUT off on a
// connection whose peer's window is shut while its kernel answers the
// probes (linkWindowShut), and back on once the window opens or two
// probes in a row draw no answer: a peer whose host died or was cut off
// behind a shut window then fails the connection at the kernel's next
// probe, which may be up to two minutes apart once the window has stayed
// shut for long (the kernel backs its probes off), and, where a relay
// reaches the peer, the stall check breaks it before that (its probes go
// unanswered: linkStalledFor). A probe in flight at a look reads as
// neither, and leaves the timeout as it is.

// windowState is how a connection's peer's receive window stands
// (linkWindow).
type windowState uint8

const (
	windowUnknown    windowState = iota
	windowOpen                   // open, or nothing waits for it
	windowShut                   // shut, the peer's kernel answering its probes
	windowUnanswered             // shut, two probes in a row unanswered
)

// holdLinkTimeout turns c's TCP_USER_TIMEOUT off while its peer's window
// is shut and its kernel answers, and on again after (see above); info is
// c's, read for this look.
func (t *Transport) holdLinkTimeout(c *conn, info linkInfo) {
	link := t.cfg.LinkTimeout
	if link <= 0 || !linkTimeoutSupported {
		return
	}
	w, held := linkWindow(info), c.linkHeld.Load()
	switch {
	case w == windowShut && !held:
		if setUserTimeout(c, 0) == nil {
			c.linkHeld.Store(true)
		}
	case held && (w == windowOpen || w == windowUnanswered):
		if setUserTimeout(c, link) == nil {
			c.linkHeld.Store(false)
		}
	}
}

// checkLinks breaks each connection in use whose link stalled for
// linkStallAfter while a relay reaches its peer, and hints each silent
// peer whose link answers, its last acknowledgement within linkStallAfter,
// or, on this host, each suspect whose process lives. With suspectsOnly
// it looks at this host's suspects alone (a suspicion just began).
func (t *Transport) checkLinks(suspectsOnly bool) {
	after := t.linkStallAfter()
	suspects := t.suspects.suspected()
	if suspectsOnly && suspects == nil {
		return
	}
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
	for _, u := range in {
		if u.c.unix || u.c.shm != nil {
			if _, ok := suspects[u.p.id]; ok && peerProcessLives(u.c) {
				t.hintOf(core.PeerHint{Node: u.p.id, Reason: "suspected, its process on this host lives", Answering: true})
			}
			continue
		}
		if suspectsOnly {
			continue
		}
		info := tcpInfo(u.c) // once per look: the checks below judge it
		t.holdLinkTimeout(u.c, info)
		if after <= 0 {
			continue
		}
		stalled := time.Duration(linkStalledFor(info)) * time.Millisecond
		t.rt.mu.Lock()
		if t.rt.stalled[u.p.id] {
			stalled = time.Hour
		}
		t.rt.mu.Unlock()
		if stalled == 0 && linkAnswers(info, answerSilence, after) {
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
}
