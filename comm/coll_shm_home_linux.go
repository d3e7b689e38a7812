package comm

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newSegHome gives rank self of p its home among the CPUs the calling
// thread may run on, if the ranks outnumber them, unless COHORT_BIND is
// off (then no affinity is ever set, not even for a moment).
func newSegHome(self, p int) segHome {
	h := segHome{cpu: -1}
	if on, err := parseBind(os.Getenv(bindEnv)); err != nil || !on {
		return h
	}
	var mask unix.CPUSet
	if unix.SchedGetaffinity(0, &mask) == nil {
		allowed := maskCPUs(&mask)
		h.cpu, h.ncpu = segHomeCPU(allowed, self, p), len(allowed)
	}
	return h
}

// goIfQuiet moves the calling thread to its home CPU if it has one and
// the host, where p ranks of its segment run, looks idle beside them,
// and leaves it free to run anywhere in its set again.
func (h *segHome) goIfQuiet(p int) {
	if h.cpu < 0 {
		return
	}
	if cpu := segCPU(); cpu != 0 && int(cpu-1) == h.cpu {
		return // home already: a long wait's sleeps, every segSleep, cost no more
	}
	fd, err := openLoadavg()
	if err != nil {
		return
	}
	var buf [128]byte
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 {
		return
	}
	if load, ok := parseLoad(buf[:n]); !ok || !segQuiet(load, p, h.ncpu) {
		return
	}
	h.goHome()
}

// loadavgPath is /proc/loadavg as the kernel reads a path: made once, so
// that opening it after a wait's sleep allocates nothing (unix.Open
// copies its path on each call).
var loadavgPath = []byte("/proc/loadavg\x00")

// openLoadavg opens /proc/loadavg for reading.
func openLoadavg() (int, error) {
	atFDCWD := unix.AT_FDCWD // a variable: a negative constant does not convert to uintptr
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&loadavgPath[0])), uintptr(unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// goHome moves the calling thread to its home CPU, and gives it back the
// set it has now (the program may have changed it since the segment was
// set up: then, if the set no longer holds the home, it stays).
func (h *segHome) goHome() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var mask unix.CPUSet
	if unix.SchedGetaffinity(0, &mask) != nil || !mask.IsSet(h.cpu) {
		return
	}
	var one unix.CPUSet
	one.Set(h.cpu)
	if unix.SchedSetaffinity(0, &one) == nil {
		unix.SchedSetaffinity(0, &mask)
	}
}

// maskCPUs lists the CPUs of mask in ascending order.
func maskCPUs(mask *unix.CPUSet) []int {
	var cpus []int
	for c := range 1024 {
		if mask.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
