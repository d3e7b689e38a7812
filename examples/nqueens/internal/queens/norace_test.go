//go:build !race

package queens

const raceEnabled = false
