//go:build !linux

package tcp

import "net"

// setLoopbackCongestion leaves the host's congestion control (see
// congestion_linux.go).
func setLoopbackCongestion(*net.TCPConn) {}
