package comm

import (
	"testing"
	"time"
)

// TestCollPollFor: a collective's receives poll up to two ranks per core
// of the host, and park at once beyond.
func TestCollPollFor(t *testing.T) {
	for _, tc := range []struct {
		cpus, local int
		want        time.Duration
	}{
		{2, 1, collPoll},
		{2, 4, collPoll},
		{2, 5, 0},
		{2, 8, 0},
		{16, 32, collPoll},
	} {
		if got := collPollFor(tc.cpus, tc.local); got != tc.want {
			t.Errorf("collPollFor(%d cpus, %d local ranks) = %v, want %v", tc.cpus, tc.local, got, tc.want)
		}
	}
}
