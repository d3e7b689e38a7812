package tcp

import (
	"testing"
	"time"
)

// TestBackoff checks the dial back-off of the package doc: attempt k waits
// a random time in [d/2, d) with d = min(BackoffMax, BackoffMin·2^k).
func TestBackoff(t *testing.T) {
	tr := &Transport{cfg: Config{BackoffMin: 10 * time.Millisecond, BackoffMax: 300 * time.Millisecond}}
	for attempt, d := range []time.Duration{10, 20, 40, 80, 160, 300, 300, 300} {
		d *= time.Millisecond
		for range 200 {
			if got := tr.backoff(attempt); got < d/2 || got >= d {
				t.Fatalf("attempt %d: waited %v, want in [%v, %v)", attempt, got, d/2, d)
			}
		}
	}
	if got := tr.backoff(1 << 20); got >= 300*time.Millisecond {
		t.Fatalf("a huge attempt count waited %v, over BackoffMax", got)
	}
}
