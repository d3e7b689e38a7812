package daemon

import (
	"net"

	"golang.org/x/sys/unix"
)

// setUserTimeout makes the kernel abort the connection when data it sent
// stays unacknowledged for writeTimeout (TCP_USER_TIMEOUT): a submitter
// whose host is cut off is then noticed in seconds, not after the
// minutes of TCP's retransmissions, and its job stopped.
func setUserTimeout(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(writeTimeout.Milliseconds()))
	})
}
