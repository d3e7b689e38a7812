package comm

import (
	"runtime"
	"time"

	"github.com/cohort-mp/cohort/transport/hotsync"
)

// Settling the Go runtime once a communicator's segment is set up. The
// runtime's monitor thread (sysmon) goes back to waking every 20 µs each
// time the process has been idle (every goroutine parked, as while the
// ranks exchange the segment's descriptor over the transport: it then
// sleeps for good, and the next system call wakes it) or has been in a
// system call across two of its ticks (it then takes the P back), and
// slows down again — doubling its sleep, up to 10 ms — only after 50
// ticks in a row with nothing to do. On a host where a rank has no CPU to
// spare (a single P: as many ranks as cores, or more), each of its
// wake-ups takes a CPU from a rank for a switch there and back, and the
// collective waits for that rank. Traced on 2 cores, 4 ranks (perf,
// sched_switch with stacks, load 10–16): for the first 5–8 ms after the
// segment's set-up the ranks' monitors slept 20–46 times a millisecond
// between them, and the 8 B Allreduce took twice as long as once they
// had slowed down (the waits yielded about 80 times a millisecond,
// against 200 after). OSU's loop for a size, 100 warm-up calls and 1,000
// timed, lasts about as long: the first size measured paid for it and
// the next ones did not.
//
// So a process's only rank (Init's), if its runtime has a single P,
// spins once its segment is set up, yielding its core and running its own
// goroutines, until the process has gone settleQuiet without a voluntary
// context switch (the monitor's sleeps; the spinning rank makes none), or
// for settleLimit at most. Its first look wakes a monitor asleep for good
// (a system call the runtime sees), so that the monitor's 50 fast ticks
// pass here rather than in the collectives that follow. A rank with more
// Ps leaves the monitor the CPUs that its idle Ps stand for. Nothing is
// checked for failures while it spins: the bound keeps that short. The
// waits on the segment then sleep without the runtime's knowledge
// (futexWait), so that a long wait does not set the monitor back to
// 20 µs.
const (
	settleQuiet = time.Millisecond
	settleLimit = 20 * time.Millisecond
)

// settleRuntime spins until switches, the process's count of voluntary
// context switches (voluntarySwitches), has not moved for quiet, or for
// limit at most, and reports whether it went quiet, and how long it spun.
// Where switches cannot be read it returns at once.
func settleRuntime(quiet, limit time.Duration, switches func() (int64, bool)) (settled bool, spun time.Duration) {
	last, ok := switches()
	if !ok {
		return false, 0
	}
	start := time.Now()
	since := start
	for {
		runtime.Gosched() // the rank's own goroutines (its detector, its readers)
		hotsync.Yield()
		now := time.Now()
		if n, _ := switches(); n != last {
			last, since = n, now
		}
		switch {
		case now.Sub(since) >= quiet:
			return true, now.Sub(start)
		case now.Sub(start) >= limit:
			return false, now.Sub(start)
		}
	}
}

// settleAfterSetup settles the runtime of a process's only rank that has
// just set up a segment, if its runtime has a single P (see above).
func settleAfterSetup() {
	if runtime.GOMAXPROCS(0) == 1 {
		settleRuntime(settleQuiet, settleLimit, voluntarySwitches)
	}
}
