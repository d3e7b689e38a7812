package tcp

import (
	"errors"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// linkInfo is what a link check reads of a connection once per look and
// judges it by: its socket's TCP_INFO (nil: not a TCP connection, or the
// kernel would not say; tcpInfo).
type linkInfo = *unix.TCPInfo

// linkStalledFor reports how long, in milliseconds, the kernel has had
// data written to info's connection undelivered with no acknowledgement at all from the
// peer's kernel and at least one retransmission or probe timeout expired
// (0: not stalled, or not a TCP connection). The peer's kernel acknowledges
// whatever its process does, so a starved or slow peer does not look
// stalled; a path that drops our segments, or its acknowledgements, does.
func linkStalledFor(info linkInfo) uint32 {
	if info == nil {
		return 0
	}
	// Segments sent and not acknowledged, retransmitted at least once;
	// or, when the path drops our segments as they leave (a firewall of
	// our own host's), none in flight, data waiting and the kernel
	// probing: its probes draw no answer either.
	lost := info.Unacked > 0 && (info.Retransmits > 0 || info.Backoff > 0)
	refused := info.Unacked == 0 && info.Notsent_bytes > 0 && info.Probes > 0
	if !lost && !refused {
		return 0
	}
	return info.Last_ack_recv
}

// linkWindow tells how the peer's receive window stands: open (or
// nothing waits for it), shut while the peer's kernel answers (nothing
// in flight, and the last zero-window probe answered: a probe sent is
// counted until an acknowledgement comes), or shut with at least two
// probes in a row unanswered (the second is sent only once the first's
// timeout expired, which a live peer's kernel does not let pass).
// windowUnknown: not a TCP connection, or a probe in flight.
func linkWindow(info linkInfo) windowState {
	switch {
	case info == nil:
		return windowUnknown
	case info.Snd_wnd > 0 || info.Notsent_bytes == 0:
		return windowOpen
	case info.Probes >= 2:
		return windowUnanswered
	case info.Unacked == 0 && info.Probes == 0:
		return windowShut
	}
	return windowUnknown
}

// setUserTimeout sets c's TCP_USER_TIMEOUT (0: off, the kernel's own
// limits).
func setUserTimeout(c *conn, d time.Duration) error {
	rc, err := tcpRaw(c)
	if rc == nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	}); cerr != nil {
		return cerr
	}
	return err
}

// linkAnswers reports whether c's link answers while its peer is silent:
// an established TCP connection on which the kernel has received no data
// for silentFor, while the peer's kernel has acknowledged everything
// written to it, the last of it within ackedWithin. The peer's process
// still holds the connection (a crashed process's host closes it) and its
// host answers: the peer is alive and not running (see answerSilence).
func linkAnswers(info linkInfo, silentFor, ackedWithin time.Duration) bool {
	if info == nil || info.State != tcpEstablished {
		return false
	}
	ms := func(d time.Duration) uint32 { return uint32(d / time.Millisecond) }
	return info.Unacked == 0 && info.Notsent_bytes == 0 &&
		info.Last_ack_recv <= ms(ackedWithin) && info.Last_data_recv >= ms(silentFor)
}

// tcpEstablished is the kernel's TCP_ESTABLISHED state (TCPInfo.State).
const tcpEstablished = 1

// tcpInfo is the kernel's TCP_INFO of c's socket (nil: not a TCP
// connection, or the kernel would not say).
func tcpInfo(c *conn) *unix.TCPInfo {
	if c.unix || c.shm != nil {
		return nil
	}
	rc, _ := tcpRaw(c)
	if rc == nil {
		return nil
	}
	var info *unix.TCPInfo
	var err error
	if rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}) != nil || err != nil {
		return nil
	}
	return info
}

// tcpRaw returns the socket of c's TCP connection, below its records or
// TLS if any (nil and no error: c is not a TCP connection).
func tcpRaw(c *conn) (syscall.RawConn, error) {
	if c.raw != nil {
		return c.raw, nil
	}
	nc := c.nc
	if w, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = w.NetConn() // TLS
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil, nil
	}
	return tc.SyscallConn()
}

// peerProcOf names the process at the other end of nc, if nc is a
// connection over this host's Unix socket (shared memory or not): its id
// from SO_PEERCRED, and its start time. /proc is read before the socket
// is polled: a process whose socket is open after its entry was read was
// alive when it was read, so the entry was its own and not that of a
// later process given its id. The zero peerProc (not known) is never
// hinted alive, nor found gone.
func peerProcOf(nc net.Conn) peerProc {
	uc := unixSocketOf(nc)
	if uc == nil {
		return peerProc{}
	}
	_, pid, ok := peerCred(uc)
	if !ok || pid <= 0 {
		return peerProc{}
	}
	st, err := readProcStat(pid)
	if err != nil || !socketOpen(uc) {
		return peerProc{}
	}
	return peerProc{pid: pid, start: st.start}
}

// peerProcessLives reports whether the process at the other end of c, a
// connection over this host's Unix socket, is alive: its socket is still
// open, and its process (c.proc) exists, is neither a zombie nor stopped,
// and is the one that connected (the same start time).
//
// A stopped process (T, or t under a tracer) does not count: it runs
// again only when someone resumes it, which no scheduler does, so it is
// declared as a hung process would be without the hint; a starved
// process is runnable (R) or waiting (S, D), and so, until the hold's
// cap, is one that hangs running or waiting.
func peerProcessLives(c *conn) bool {
	uc := unixSocketOf(c.nc)
	if uc == nil || c.proc.pid <= 0 {
		return false
	}
	st, err := readProcStat(c.proc.pid)
	if err != nil || !socketOpen(uc) {
		return false
	}
	return st.start == c.proc.start && st.runs()
}

// peerProcessGone reports whether the process at the other end of c, a
// connection over this host's Unix socket, has ended: no process has its
// id, or it is a zombie, dead, or exiting (the kernel marks each thread
// exiting before it closes the process's files, so a process whose
// sockets the kernel closed is at least that), or its id names a process
// started at another time (ours ended and the id was reused). A stopped
// or starved process exists, and is not gone.
func peerProcessGone(c *conn) bool {
	if c.proc.pid <= 0 {
		return false
	}
	st, err := readProcStat(c.proc.pid)
	if errors.Is(err, errNoProc) {
		return true
	}
	if err != nil {
		return false
	}
	return st.start != c.proc.start || st.ended()
}

// unixSocketOf returns the Unix socket under nc (under its records, its
// TLS or its shared memory), or nil if there is none.
func unixSocketOf(nc net.Conn) *net.UnixConn {
	for {
		switch x := nc.(type) {
		case *net.UnixConn:
			return x
		case *rightsConn:
			return x.UnixConn
		case *shmConn:
			nc = x.sock
		case *recordConn:
			nc = x.Conn
		case interface{ NetConn() net.Conn }: // *tls.Conn
			nc = x.NetConn()
		default:
			return nil
		}
	}
}

// socketOpen reports whether uc's peer still holds its end: no hang-up,
// no shut-down of its writing side, no error pending. The kernel closes
// the sockets of a process that ends, whatever ended it.
func socketOpen(uc *net.UnixConn) bool {
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var revents int16
	var perr error
	if raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		_, perr = unix.Poll(fds, 0)
		revents = fds[0].Revents
	}) != nil || perr != nil {
		return false
	}
	return revents&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR|unix.POLLNVAL) == 0
}
