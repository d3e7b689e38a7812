package tcp

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT socket option (not in
// package syscall): how long, in milliseconds, written data may stay
// unacknowledged before the kernel drops the connection.
const tcpUserTimeout = 0x12

// socketControl returns the Control of the TCP listener and dialer: the
// kernel buffers (bufferControl) and Config.LinkTimeout, both set before
// the socket listens or connects (an accepted socket inherits them).
func socketControl(cfg Config) func(network, address string, rc syscall.RawConn) error {
	buffers := bufferControl(cfg)
	link := cfg.LinkTimeout
	if link <= 0 || !linkTimeoutSupported {
		return buffers
	}
	return func(network, address string, rc syscall.RawConn) error {
		if buffers != nil {
			if err := buffers(network, address, rc); err != nil {
				return err
			}
		}
		var err error
		cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(link/time.Millisecond))
		})
		if cerr != nil {
			return cerr
		}
		return os.NewSyscallError("setsockopt TCP_USER_TIMEOUT", err)
	}
}

// dialTimeout bounds one TCP dial: DialTimeout, or LinkTimeout if shorter.
func (t *Transport) dialTimeout() time.Duration {
	d := t.cfg.DialTimeout
	if l := t.cfg.LinkTimeout; l > 0 && (d <= 0 || l < d) {
		d = l
	}
	return d
}

// linkTimeoutSupported: the kernel has TCP_USER_TIMEOUT.
const linkTimeoutSupported = runtime.GOOS == "linux"
