package comm

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSegCPU checks that the CPU a wait on the segment reads, where it
// can read one, is one this thread may run on.
func TestSegCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Skip("no affinity:", err)
	}
	for range 100 {
		cpu := segCPU()
		if cpu == 0 {
			t.Skip("no cheap way to read the CPU here")
		}
		if !allowed.IsSet(int(cpu - 1)) {
			t.Fatalf("segCPU() = %d, but CPU %d is not in this thread's set", cpu, cpu-1)
		}
	}
}
