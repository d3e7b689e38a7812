//go:build race

package fd

// gossipRace reports a -race build: the simulation tests then shrink their
// worlds, since the race detector slows the n² table merges about tenfold.
const gossipRace = true
