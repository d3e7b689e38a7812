//go:build !linux

package tcp

// linkStalledFor is 0 where TCP_INFO is not read: links are declared
// dead by Config.LinkTimeout alone.
func linkStalledFor(c *conn) uint32 { return 0 }
