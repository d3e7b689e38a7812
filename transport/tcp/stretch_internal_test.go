package tcp

import (
	"testing"
	"time"
)

// TestStretched checks the polling window's rule (progress.go): a caller
// back soon after a vain poll doubles the window with the gap, up to
// stretchMax polling times; one back late (its peer was busy) polls for
// the polling time again.
func TestStretched(t *testing.T) {
	const d = int64(50 * time.Microsecond)
	longest := stretchMax * d
	for _, c := range []struct {
		name          string
		win, gap, out int64
	}{
		{"first stretch", 0, 70_000, 2 * (d + 70_000)},
		{"from a stretched window", 140_000, 20_000, 2 * (140_000 + 20_000)},
		{"capped", 600_000, 100_000, longest},
		{"at the bound", longest, longest / 2, longest},
		{"late: back to the polling time", 600_000, longest/2 + 1, d},
		{"no vain poll", 600_000, -1, d},
		{"instant", 0, 0, 2 * d},
	} {
		if got := stretched(d, c.win, c.gap); got != c.out {
			t.Errorf("%s: stretched(%d, %d, %d) = %d, want %d", c.name, d, c.win, c.gap, got, c.out)
		}
	}
	// The bound is MaxSpin when the polling time is long.
	long := int64(MaxSpin) / 4
	if got := stretched(long, 0, 4*long/3); got != int64(MaxSpin) {
		t.Errorf("stretched(%v, 0, %v) = %v, want MaxSpin", time.Duration(long), time.Duration(4*long/3), time.Duration(got))
	}
}
