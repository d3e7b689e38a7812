package host

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// TestTimerQueueOrder checks the host's timer heap against a sorted list:
// random deadlines (many equal, so that ties are broken by set order),
// random cancellations of queued, fired and unknown timers, and pops
// interleaved with pushes come out in (deadline, id) order, each live
// timer once with its value.
func TestTimerQueueOrder(t *testing.T) {
	seed := uint64(20261126)
	rng := rand.New(rand.NewPCG(seed, 0))
	for trial := range 200 {
		var q timerQueue
		var ref []timerEntry // the live entries, unsorted
		var next core.TimerID
		for range rng.IntN(200) {
			switch op := rng.IntN(10); {
			case op < 5:
				next++
				e := timerEntry{at: time.Duration(rng.IntN(20)), id: next, t: int(next)}
				q.push(e)
				ref = append(ref, e)
			case op < 7:
				id := core.TimerID(rng.IntN(int(next) + 2)) // queued, popped or unknown
				q.remove(id)
				ref = slices.DeleteFunc(ref, func(e timerEntry) bool { return e.id == id })
			case len(ref) > 0:
				got := q.pop()
				k := 0
				for i := range ref {
					if ref[i].before(&ref[k]) {
						k = i
					}
				}
				if got != ref[k] {
					t.Fatalf("seed %d, trial %d: pop = %+v, want %+v", seed, trial, got, ref[k])
				}
				ref = slices.Delete(ref, k, k+1)
			}
			if len(q) != len(ref) {
				t.Fatalf("seed %d, trial %d: %d queued, want %d", seed, trial, len(q), len(ref))
			}
		}
		slices.SortFunc(ref, func(a, b timerEntry) int {
			if a.before(&b) {
				return -1
			}
			return 1
		})
		for _, want := range ref {
			if got := q.pop(); got != want {
				t.Fatalf("seed %d, trial %d: draining, pop = %+v, want %+v", seed, trial, got, want)
			}
		}
	}
}
