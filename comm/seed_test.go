package comm

import (
	"testing"
	"time"
)

// seedOf returns the seed a randomized test runs with: *flagged, or one
// from the clock when that is 0; it logs how to replay the run.
func seedOf(t *testing.T, flagged *uint64, flagName string) uint64 {
	t.Helper()
	seed := *flagged
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./comm -run '^%s$' -%s=%d)", seed, t.Name(), flagName, seed)
	return seed
}
