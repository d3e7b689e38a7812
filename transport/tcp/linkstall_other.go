//go:build !linux

package tcp

import (
	"net"
	"time"
)

// linkInfo is nothing where TCP_INFO is not read.
type linkInfo = *struct{}

// tcpInfo reads nothing where TCP_INFO is not read.
func tcpInfo(c *conn) linkInfo { return nil }

// linkStalledFor is 0 where TCP_INFO is not read: links are declared
// dead by Config.LinkTimeout alone.
func linkStalledFor(info linkInfo) uint32 { return 0 }

// linkWindow is windowUnknown where TCP_INFO is not read: LinkTimeout is
// never held.
func linkWindow(info linkInfo) windowState { return windowUnknown }

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not set.
func setUserTimeout(c *conn, d time.Duration) error { return nil }

// linkAnswers is false where TCP_INFO is not read: no silent peer's
// link is reported answering.
func linkAnswers(info linkInfo, silentFor, ackedWithin time.Duration) bool { return false }

// peerProcessLives is false where /proc and SO_PEERCRED are not read: no
// silent same-host peer is reported alive.
func peerProcessLives(c *conn) bool { return false }

// peerProcOf knows no process where /proc and SO_PEERCRED are not read.
func peerProcOf(nc net.Conn) peerProc { return peerProc{} }

// peerProcessGone is false where /proc is not read: a same-host peer's
// lost connection is hinted as any other.
func peerProcessGone(c *conn) bool { return false }
