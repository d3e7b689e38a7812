package comm

import (
	"testing"
	"time"
)

// switchesAfter is a count of context switches that moves on each of its
// first n reads and then stays.
func switchesAfter(n int) (read func() (int64, bool), reads *int) {
	reads = new(int)
	return func() (int64, bool) {
		*reads++
		return int64(min(*reads, n)), true
	}, reads
}

func TestSettleRuntimeGoesQuiet(t *testing.T) {
	read, reads := switchesAfter(5)
	settled, _ := settleRuntime(time.Millisecond, time.Hour, read)
	if !settled {
		t.Fatalf("settled = false after the count stopped at its 5th read")
	}
	if *reads <= 5 {
		t.Fatalf("returned after %d reads, before the count stopped moving", *reads)
	}
}

func TestSettleRuntimeGivesUp(t *testing.T) {
	var n int64
	moving := func() (int64, bool) { n++; return n, true }
	if settled, _ := settleRuntime(time.Hour, time.Millisecond, moving); settled {
		t.Fatal("settled = true with a count that never stops moving")
	}
}

func TestSettleRuntimeUnreadable(t *testing.T) {
	reads := 0
	unreadable := func() (int64, bool) { reads++; return 0, false }
	settled, spun := settleRuntime(time.Millisecond, time.Hour, unreadable)
	if settled || spun != 0 || reads != 1 {
		t.Fatalf("got settled %v, spun %v after %d reads; want false, 0 after 1", settled, spun, reads)
	}
}
