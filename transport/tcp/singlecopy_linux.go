package tcp

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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

// hugeRegion is the size of a transparent huge page (x86-64, arm64 with
// 4 KiB pages).
const hugeRegion = 2 << 20

// hugeAdvised holds the last huge regions advised (their start + 1, 0 for
// none, direct-mapped by region number): buffers are used again and again,
// and each region is advised once while its slot holds it.
var hugeAdvised [64]atomic.Uintptr

// adviseHuge backs the 2 MiB regions around b with huge pages where the
// kernel allows it (MADV_HUGEPAGE, then MADV_COLLAPSE for the pages already
// there): a peer's process_vm_readv then pins a huge page's 512 small ones
// at once. Only the sender's side gains: the receiver's buffer, written
// through the kernel's own mapping, copies no faster on huge pages. The
// regions hold other heap objects as well; backing them with huge pages
// changes none of their contents, and costs at most the rest of each region
// in memory (the collapse fills the pages not yet touched). Errors are
// ignored: the copy works, slower, without. A program that asked the Go
// runtime for no huge pages (GODEBUG=disablethp=1) gets none from here.
func adviseHuge(b []byte) {
	if len(b) < hugeRegion/4 || hugeDisabled {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b))) &^ (hugeRegion - 1)
	end := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b))
	for r := start; r < end; r += hugeRegion {
		if hugeKnown(r) {
			continue
		}
		unix.Syscall(unix.SYS_MADVISE, r, hugeRegion, unix.MADV_HUGEPAGE)
		unix.Syscall(unix.SYS_MADVISE, r, hugeRegion, unix.MADV_COLLAPSE)
		i := (r / hugeRegion) % uintptr(len(hugeAdvised))
		hugeAdvised[i].Store(r + 1)
	}
}

var hugeDisabled = strings.Contains(os.Getenv("GODEBUG"), "disablethp=1")

func hugeKnown(r uintptr) bool {
	return hugeAdvised[(r/hugeRegion)%uintptr(len(hugeAdvised))].Load() == r+1
}
