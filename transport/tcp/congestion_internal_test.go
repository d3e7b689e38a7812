//go:build linux

package tcp

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// A connection between two loopback addresses runs Reno whatever the
// host's default (BBR on the development machine): its messages skip
// BBR's model and pacing, which loopback, never congested, does not need.
func TestLoopbackConnectionRunsReno(t *testing.T) {
	d, a := loopbackPair(t)
	tr := &Transport{}
	for _, c := range []net.Conn{d, a} {
		tr.setOptions(c)
		if got := congestionOf(t, c.(*net.TCPConn)); got != loopbackCongestion {
			t.Errorf("%v -> %v: congestion control %q, want %q", c.LocalAddr(), c.RemoteAddr(), got, loopbackCongestion)
		}
	}
}

// congestionOf returns c's congestion control.
func congestionOf(t *testing.T, c *net.TCPConn) string {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		name, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return name
}
