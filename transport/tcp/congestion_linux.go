package tcp

import (
	"net"
	"syscall"
)

// loopbackCongestion is the congestion control of a TCP connection over
// loopback (setOptions). Loopback never drops nor queues a segment for
// want of capacity, so the host's choice (often BBR, which models the
// path's bandwidth and delay at every acknowledgement and paces its
// sends) buys nothing there and costs every message: with BBR an 8-byte
// one-way trip over loopback took 0.16-0.18 µs longer than with Reno
// (docs/PERFORMANCE.md, "Over TCP: what a round trip is made of").
// Reno is built into every kernel and open to unprivileged processes.
const loopbackCongestion = "reno"

// setLoopbackCongestion sets loopbackCongestion on c when both its ends
// are loopback addresses; a kernel that refuses it leaves the host's.
func setLoopbackCongestion(c *net.TCPConn) {
	l, lok := c.LocalAddr().(*net.TCPAddr)
	r, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok || !l.IP.IsLoopback() || !r.IP.IsLoopback() {
		return
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CONGESTION, loopbackCongestion)
	})
}
