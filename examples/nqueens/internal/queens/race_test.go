//go:build race

package queens

// raceEnabled: the race detector slows the n = 16 count beyond the test
// budget; it then runs in BenchmarkCount only.
const raceEnabled = true
