package comm

import (
	"bytes"
	"math"
	"strconv"
)

// Where the ranks of a segment run. When a host's ranks outnumber its
// CPUs (more than bind.go binds), the kernel decides where each runs,
// and it leaves them packed on one CPU more often than spread: a rank
// woken from a sleep (by a message while the job sets up, on the
// segment's bell in a long wait) is put on its waker's CPU when that
// looks no busier than its own; ranks that poll and yield never sleep
// again, so no wake-up places them anew; and the load balancer leaves
// tasks that ran within the last half millisecond (all of them) where
// they are until it has failed a few times, milliseconds apart, longer
// than a short benchmark's loop. On an idle host that costs a switch per
// rank and call (docs/PERFORMANCE.md, "Why the ranks of one host end up
// on one core").
//
// So when its segment is set up, and after each of its sleeps on the
// bell, a rank goes to its home, the i-th of the CPUs it may run on for
// rank i (modulo their number), and is free again at once: its thread is
// pinned to that CPU, which moves it there, and given back its set, so
// nothing stays bound and the kernel may move it again (never with
// COHORT_BIND=off, which promises no affinity at all). It does so only
// while the host looks idle beside the job (segQuiet): where other work
// holds the CPUs, the kernel packs the ranks on the CPU the others leave
// them, and a rank sent home beside a busy process waits on it. In runs
// alternated under load (docs/PERFORMANCE.md) homing whatever the load
// was faster at load 5 to 8, and up to ten times slower beside a process
// that kept a CPU busy.

// segHome is where a rank of a segment goes.
type segHome struct {
	cpu  int // -1: none (the rank runs where the kernel puts it)
	ncpu int // the CPUs its thread could run on when the segment was set up
}

// segHomeCPU is the CPU of allowed where rank self of p goes, or -1 when
// it is left where it is: the ranks do not outnumber the CPUs (Init binds
// those), or there is a single CPU.
func segHomeCPU(allowed []int, self, p int) int {
	if len(allowed) < 2 || p <= len(allowed) || self < 0 {
		return -1
	}
	return allowed[self%len(allowed)]
}

// parseLoad reads the host's load average over the last minute from the
// contents of /proc/loadavg ("0.50 0.40 0.30 3/512 1234": 0.5), without
// allocating: it is read after a wait's sleep, inside a collective.
func parseLoad(b []byte) (float64, bool) {
	i := bytes.IndexByte(b, ' ')
	if i <= 0 {
		return 0, false
	}
	load, err := strconv.ParseFloat(string(b[:i]), 64)
	if err != nil || load < 0 || math.IsNaN(load) || math.IsInf(load, 0) {
		return 0, false
	}
	return load, true
}

// segQuiet reports whether a host where p ranks of a segment run on
// ncpu CPUs looks idle enough beside them that each rank is best on its
// home: its load over the last minute (the threads runnable or waiting
// for a disk, averaged) is below p + ncpu, the ranks and one more thread
// a CPU (a launcher, a monitor, a daemon's tick). The ranks count at most
// p in it, so a job beside them that keeps even a CPU busy most of the
// time tips it. A count of one instant would do worse: on this 2-core
// host it ranged from 1 to 26 within a second at a load of 6.
func segQuiet(load float64, p, ncpu int) bool { return load < float64(p+ncpu) }
