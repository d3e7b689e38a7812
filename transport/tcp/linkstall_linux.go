package tcp

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// linkStalledFor reports how long, in milliseconds, the kernel has had
// data written to c undelivered with no acknowledgement at all from the
// peer's kernel and at least one retransmission or probe timeout expired
// (0: not stalled, or not a TCP connection). The peer's kernel acknowledges
// whatever its process does, so a starved or slow peer does not look
// stalled; a path that drops our segments, or its acknowledgements, does.
func linkStalledFor(c *conn) uint32 {
	info := tcpInfo(c)
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

// linkAnswers reports whether c's link answers while its peer is silent:
// an established TCP connection on which the kernel has received no data
// for silentFor, while the peer's kernel has acknowledged everything
// written to it, the last of it within ackedWithin. The peer's process
// still holds the connection (a crashed process's host closes it) and its
// host answers: the peer is alive and not running (see answerSilence).
func linkAnswers(c *conn, silentFor, ackedWithin time.Duration) bool {
	info := tcpInfo(c)
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
	rc := c.raw // below the records, if any
	if rc == nil {
		nc := c.nc
		if w, ok := nc.(interface{ NetConn() net.Conn }); ok {
			nc = w.NetConn() // TLS
		}
		tc, ok := nc.(*net.TCPConn)
		if !ok {
			return nil
		}
		var err error
		if rc, err = tc.SyscallConn(); err != nil {
			return nil
		}
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
