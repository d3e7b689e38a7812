package stable_test

import (
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/sim/simtest"
	"github.com/cohort-mp/cohort/stable/stabletest"
)

// The swarm itself is in package stabletest, shared with
// `cohort sim swarm --protocol stable`.

// The swarm (§3.5): every protocol (drawn from the seed) under random crashes, partitions, cuts,
// loss windows, delay spikes and reordering, with view changes after the
// crashes. The stabletest checker demands that no vector ever exceeds what
// a live member of its view reported, that vectors only grow, and that every
// live member finishes rounds once the faults have healed.
func TestSwarm(t *testing.T) {
	for _, seed := range simtest.Seeds(t, 24) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if err := stabletest.SwarmSeed(seed); err != nil {
				t.Fatal(err)
			}
		})
	}
}
