package tcp

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPollGuard: a ring is unmapped at once when no caller polls, and
// otherwise only when the last caller polling leaves; each unmapping
// runs once, whatever the interleaving of callers and closes.
func TestPollGuard(t *testing.T) {
	var g pollGuard
	g.makeSlots()
	var ran atomic.Int32
	g.unmap(func() { ran.Add(1) })
	if ran.Load() != 1 {
		t.Fatal("an unmapping with no caller polling did not run at once")
	}
	g.enter()
	g.enter()
	g.unmap(func() { ran.Add(1) })
	g.leave()
	if ran.Load() != 1 {
		t.Fatal("an unmapping ran while a caller polled")
	}
	g.leave()
	if ran.Load() != 2 {
		t.Fatal("the last caller left without running the unmapping")
	}

	// Callers come and go while connections close: every unmapping runs
	// exactly once, none is left waiting.
	const closes = 2000
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 20 * closes {
				g.enter()
				g.leave()
			}
		})
	}
	var runs atomic.Int32
	for range closes {
		done := new(atomic.Int32)
		g.unmap(func() {
			if done.Add(1) != 1 {
				t.Error("an unmapping ran twice")
			}
			runs.Add(1)
		})
	}
	wg.Wait()
	if got := runs.Load(); got != closes {
		t.Fatalf("%d of %d unmappings ran once every caller left", got, closes)
	}
	if len(g.late) != 0 || g.polling() {
		t.Fatalf("guard left with callers polling or %d unmappings waiting", len(g.late))
	}
}

// TestPollGuardKeepsMapped plays the guard's contract against a ring
// that Close unmaps: a caller that entered, and found closing not yet
// set, always finds the ring still mapped, however callers (counted on
// whichever processor they run) and closes interleave. A third of the
// rounds count in the shared sums only (no slots), a third get their
// slots while the callers run, so that a caller may enter in one and
// leave in the other.
func TestPollGuardKeepsMapped(t *testing.T) {
	const rounds, callers = 300, 3
	for round := range rounds {
		var g pollGuard
		if round%3 == 0 {
			g.makeSlots()
		}
		var closing, unmapped, stop atomic.Bool
		var looks atomic.Int32
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for !stop.Load() {
					g.enter()
					if !closing.Load() {
						// Looks at the ring, yielding between them, as
						// PollUntil does (it may resume on another
						// processor, and leave there).
						for range 4 {
							if unmapped.Load() {
								t.Error("a caller that saw the connection open found its ring unmapped")
							}
							runtime.Gosched()
						}
						looks.Add(1)
					}
					g.leave()
				}
			})
		}
		for looks.Load() < callers { // the callers run
			runtime.Gosched()
		}
		if round%3 == 1 {
			g.makeSlots()
		}
		for looks.Load() < 2*callers {
			runtime.Gosched()
		}
		closing.Store(true)
		g.unmap(func() { unmapped.Store(true) })
		stop.Store(true)
		wg.Wait()
		if !unmapped.Load() || g.polling() {
			t.Fatalf("after the callers left: unmapped %v, polling %v", unmapped.Load(), g.polling())
		}
	}
}
