package tcp

import "golang.org/x/sys/unix"

// membarrier(2)'s commands (linux/membarrier.h).
const (
	membarrierQuery                    = 0
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

// guardFenced says that the poll guard's callers count by plain stores
// (pollGuard): this process is registered for membarrier's private
// expedited command (Linux 4.14), which guardBarrier uses. It is false
// where the kernel, or a sandbox's filter, does not offer it.
var guardFenced = registerGuardBarrier()

func registerGuardBarrier() bool {
	cmds, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
	if errno != 0 || cmds&membarrierPrivateExpedited == 0 {
		return false
	}
	if _, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterPrivateExpedited, 0, 0); errno != 0 {
		return false
	}
	// One barrier now: a kernel that registers but then refuses it
	// (a filter of the command's value) is found here, not at a close.
	_, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0)
	return errno == 0
}

// guardBarrier makes every thread of the process run a full memory
// barrier before it returns: the stores a poll guard's callers made
// before are seen by the caller's loads after, and their loads after see
// its stores before.
func guardBarrier() {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierPrivateExpedited, 0, 0); errno != 0 {
		panic("tcp: membarrier failed after its registration: " + errno.Error())
	}
}
