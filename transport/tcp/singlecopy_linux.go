package tcp

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// singleCopySupported: process_vm_readv exists on Linux (3.2 and later).
const singleCopySupported = true

// errPeerEnded: the process read from no longer exists.
var errPeerEnded = errors.New("the process ended")

// iovec is struct iovec with both fields as integers: the remote side's
// base is an address in another process, which must never look like a Go
// pointer (it may fall inside this process's heap).
type iovec struct{ base, len uintptr }

// readPeer reads up to len(dst) bytes at address addr of process pid into
// dst (process_vm_readv, one vector each side: no allocation).
func readPeer(pid int, dst []byte, addr uint64) (int, error) {
	local := iovec{uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(len(dst))}
	remote := iovec{uintptr(addr), uintptr(len(dst))}
	defer runtime.KeepAlive(dst)
	for {
		n, _, errno := unix.Syscall6(unix.SYS_PROCESS_VM_READV, uintptr(pid),
			uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		case syscall.ESRCH:
			return 0, errPeerEnded
		}
		return 0, errno
	}
}

// allowPeerReads lets the ranks of this host read this process's memory
// where Yama's ptrace_scope 1 would let only its ancestors: ranks started
// by one launcher are siblings. PR_SET_PTRACER_ANY lifts only Yama's
// restriction (Open MPI's shared-memory transport does the same): the
// kernel still requires the reader to be of the same user, and scopes 2
// and 3 forbid it whatever this process says (Pull then refuses, and
// says so). It is done once, at the first shared-memory connection.
func allowPeerReads() {
	allowOnce.Do(func() {
		b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
		if err != nil || strings.TrimSpace(string(b)) != "1" {
			return // no Yama, or a scope that PR_SET_PTRACER does not lift
		}
		unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0)
	})
}

var allowOnce sync.Once
