package comm

import (
	"runtime"
	"testing"
	"time"

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

// TestSegGoHome checks that a rank sent to its home CPU runs there and
// is then free to run on every CPU it could before: nothing stays bound.
func TestSegGoHome(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Skip("no affinity:", err)
	}
	cpus := maskCPUs(&before)
	if len(cpus) < 2 {
		t.Skip("one CPU: no home to go to")
	}
	p := len(cpus) + 1
	for self := range p {
		h := newSegHome(self, p)
		if want := cpus[self%len(cpus)]; h.cpu != want {
			t.Fatalf("rank %d of %d on CPUs %v: home %d, want %d", self, p, cpus, h.cpu, want)
		}
		h.goHome()
		if cpu := segCPU(); cpu != 0 && int(cpu-1) != h.cpu {
			// The thread may have been moved since; only a report.
			t.Logf("rank %d: on CPU %d just after going home to %d", self, cpu-1, h.cpu)
		}
		var after unix.CPUSet
		if err := unix.SchedGetaffinity(0, &after); err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Fatalf("after rank %d went home the thread may run on %v, want %v", self, maskCPUs(&after), cpus)
		}
	}
	if h := newSegHome(0, len(cpus)); h.cpu != -1 {
		t.Errorf("%d ranks on %d CPUs: home %d, want none (Init binds them)", len(cpus), len(cpus), h.cpu)
	}

	// A set the program narrowed after the setup is kept as it is, and a
	// home outside it is not gone to.
	h := newSegHome(0, p)
	var narrow unix.CPUSet
	narrow.Set(cpus[1])
	if err := unix.SchedSetaffinity(0, &narrow); err != nil {
		t.Skip("cannot narrow the set:", err)
	}
	defer unix.SchedSetaffinity(0, &before)
	h.goHome()
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != narrow {
		t.Errorf("home %d outside the thread's set %v: after going home the set is %v", h.cpu, []int{cpus[1]}, maskCPUs(&after))
	}
}

// TestSegHomeBindOff checks that COHORT_BIND=off leaves a rank without a
// home: no affinity is set, even for a moment.
func TestSegHomeBindOff(t *testing.T) {
	t.Setenv(bindEnv, "off")
	if h := newSegHome(1, 64); h.cpu != -1 {
		t.Errorf("with %s=off, home %d, want none", bindEnv, h.cpu)
	}
}

func TestVoluntarySwitches(t *testing.T) {
	before, ok := voluntarySwitches()
	if !ok {
		t.Fatal("voluntarySwitches: not readable on Linux")
	}
	// Every goroutine asleep: the process's threads sleep too.
	time.Sleep(20 * time.Millisecond)
	after, ok := voluntarySwitches()
	if !ok || after <= before {
		t.Fatalf("voluntary switches %d, then %d after a sleep (ok %v); want more", before, after, ok)
	}
}

// TestSegGoIfQuietAllocs checks that the look at the host's load after a
// wait's sleep allocates nothing: it runs inside a collective.
func TestSegGoIfQuietAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates here")
	}
	// A home the thread is never on, and a load never quiet enough to go
	// there: every call reads the load and stays.
	h := segHome{cpu: 1 << 20, ncpu: 0}
	if n := testing.AllocsPerRun(100, func() { h.goIfQuiet(0) }); n != 0 {
		t.Errorf("goIfQuiet: %v allocations a call, want 0", n)
	}
}
