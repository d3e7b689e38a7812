package tcp

import "golang.org/x/sys/unix"

// membarrier(2)'s commands (linux/membarrier.h).
const (
	membarrierQuery                    = 0
	membarrierGlobalExpedited          = 1 << 1
	membarrierRegisterGlobalExpedited  = 1 << 2
	membarrierPrivateExpedited         = 1 << 3
	membarrierRegisterPrivateExpedited = 1 << 4
)

// ringFenced says that this process's threads run a full barrier when
// any process of the host issues membarrier's global expedited command
// (it registered for it, Linux 4.16), and that it may issue that command
// itself (ringBarrier): a ring whose two processes both can is written
// without a locked instruction to publish a record (ring.fenceless).
var ringFenced = registerRingBarrier()

func registerRingBarrier() bool {
	cmds, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
	const both = membarrierGlobalExpedited | membarrierRegisterGlobalExpedited
	if errno != 0 || cmds&both != both {
		return false
	}
	if _, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterGlobalExpedited, 0, 0); errno != 0 {
		return false
	}
	_, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierGlobalExpedited, 0, 0)
	return errno == 0
}

// ringBarrier makes every thread of every process registered for it
// (ringFenced) run a full memory barrier before it returns: a ring's
// writer that stored its tail by a plain move before its thread's
// barrier has it seen by the caller's loads after, and its loads after
// see the caller's stores before (a wake-up flag).
func ringBarrier() {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierGlobalExpedited, 0, 0); errno != 0 {
		panic("tcp: membarrier's global barrier failed after its registration: " + errno.Error())
	}
}

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
