package replica_test

import (
	"testing"

	"github.com/cohort-mp/cohort/replica/replicatest"
	"github.com/cohort-mp/cohort/sim/simtest"
)

// TestSwarm runs the swarm of package replicatest (shared with `cohort sim
// swarm --protocol replica`) on a few dozen seeds: jobs of 2–5 ranks × 1–4
// replicas under crashes, checked on every event and at the end.
func TestSwarm(t *testing.T) {
	for _, seed := range simtest.Seeds(t, 60) {
		if err := replicatest.Swarm(seed); err != nil {
			t.Fatal(err)
		}
	}
}
