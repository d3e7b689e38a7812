//go:build race

package comm

// raceEnabled: under the race detector sync.Pool drops what it is given at
// random, so the allocation counts of the pooled paths are not checked.
const raceEnabled = true
