//go:build !linux

package daemon

import "net"

// setUserTimeout does nothing here: a cut-off submitter is noticed when a
// write times out.
func setUserTimeout(net.Conn) {}
