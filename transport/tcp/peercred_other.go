//go:build !linux

package tcp

import "net"

// peerCred is not available here; the same-host path is off (unixSupported).
func peerCred(net.Conn) (uid, pid int, ok bool) { return 0, 0, false }
