package tcp

import "syscall"

// setSegmentMax bounds the segments of the socket fd, before it
// connects or listens, to n bytes (TCP_MAXSEG; an accepted socket
// inherits its listener's); 0 leaves them.
func setSegmentMax(fd uintptr, n int) error {
	if n <= 0 {
		return nil
	}
	return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, n)
}
