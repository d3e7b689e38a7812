//go:build !race

package fd

// gossipRace reports a -race build (see gossip_race_test.go).
const gossipRace = false
