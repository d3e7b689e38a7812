package tcp

import (
	"net"
	"syscall"
)

// peerCred returns the user and process ids of the other end of a Unix
// socket (SO_PEERCRED: for a dialled socket, the listener's, as of its
// listen call).
func peerCred(nc net.Conn) (uid, pid int, ok bool) {
	uc, isUnix := nc.(*net.UnixConn)
	if !isUnix {
		return 0, 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return 0, 0, false
	}
	return int(cred.Uid), int(cred.Pid), true
}
