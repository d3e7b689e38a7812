package comm

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// segSupported: Linux has memfds, /proc/<pid>/fd and futexes.
const segSupported = true

// createSegment returns a memfd of size bytes and its mapping.
func createSegment(size int) (fd int, mem []byte, err error) {
	fd, err = unix.MemfdCreate("cohort-coll", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("ftruncate: %w", err)
	}
	if mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("mmap: %w", err)
	}
	return fd, mem, nil
}

// openSegment maps the segment that process pid holds as descriptor fd,
// reopened through /proc (which the kernel allows only to a process that
// may trace pid: the same user's), after checking that it has size bytes.
func openSegment(pid, fd, size int) ([]byte, error) {
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	mine, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(mine)
	var st unix.Stat_t
	if err := unix.Fstat(mine, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Size != int64(size) {
		return nil, fmt.Errorf("%s has %d bytes, want %d", path, st.Size, size)
	}
	mem, err := unix.Mmap(mine, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return mem, nil
}

func unmapSegment(mem []byte) { unix.Munmap(mem) }

func closeSegmentFD(fd int) { unix.Close(fd) }

func segPid() int { return os.Getpid() }

// The futex operations (linux/futex.h), on a word shared between
// processes: no FUTEX_PRIVATE_FLAG.
const (
	futexWaitOp = 0
	futexWakeOp = 1
)

// futexWait sleeps while *w == old, for at most d (or until a
// futexWake).
//
// quiet sleeps without telling the Go runtime (a raw system call),
// keeping the goroutine's P. A sleep that the runtime's monitor sees
// outlast one of its ticks makes it take the P back, and each time it
// does so it goes back to waking every 20 µs (coll_shm_settle.go). On a
// host where the ranks have no CPU to spare a waiting rank's sleeps often
// last longer than d (the woken thread waits for a CPU), so such a wait
// kept its monitor, and the CPU it shares with the other ranks, busy for
// as long as it waited. The rank's other goroutines (its failure
// detector) run when the wait yields after each sleep (Await: d is
// short), as they do when the monitor leaves the P alone; but the ranks
// of one process (tests, Local) would wait for each other's sleeps, so
// only a process's only rank sleeps quiet. A signal (the runtime's
// preemption, as when the garbage collector stops the world) ends the
// sleep early.
func futexWait(w *atomic.Uint32, old uint32, d time.Duration, quiet bool) {
	ts := unix.NsecToTimespec(int64(d))
	if quiet {
		unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(old), uintptr(unsafe.Pointer(&ts)), 0, 0)
		return
	}
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(old), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every thread sleeping on w. It does not block, and
// goes around the Go runtime as futexWait does.
func futexWake(w *atomic.Uint32) {
	unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}

// voluntarySwitches is the process's count of voluntary context switches
// (getrusage's ru_nvcsw, of all its threads): a thread that slept, or
// waited for a lock or for I/O. It goes through the Go runtime's
// system-call path on purpose: entering a system call wakes the runtime's
// monitor if it sleeps for good (see settleRuntime).
func voluntarySwitches() (int64, bool) {
	var ru unix.Rusage
	// Not unix.Getrusage: that one bypasses the runtime (RawSyscall).
	if _, _, e := unix.Syscall(unix.SYS_GETRUSAGE, uintptr(unix.RUSAGE_SELF), uintptr(unsafe.Pointer(&ru)), 0); e != 0 {
		return 0, false
	}
	return ru.Nvcsw, true
}
