package stable_test

import "github.com/cohort-mp/cohort/core"

// The feeder that plays the layers around a detector in simulations is
// stabletest.Feeder.

// ids returns the node ids 0..n-1.
func ids(n int) []core.NodeID {
	out := make([]core.NodeID, n)
	for i := range out {
		out[i] = core.NodeID(i)
	}
	return out
}
