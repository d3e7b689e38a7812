package vsync_test

import (
	"errors"
	"testing"

	"github.com/cohort-mp/cohort/sim/simtest"
	"github.com/cohort-mp/cohort/vsync/vsynctest"
)

// The swarm itself (stacks, faults, checker, liveness judgement) is in
// package vsynctest, shared with `cohort sim swarm --protocol vsync`.

// swarmSeeds runs the swarm on every seed, failing at the first error;
// seeds whose membership did not converge are counted and fail the test
// too (no tolerance: a membership that stays split after the faults healed
// is a bug of package member).
func swarmSeeds(t *testing.T, seeds []uint64, d vsynctest.Detector) {
	stuck := 0
	for _, seed := range seeds {
		err := vsynctest.Swarm(seed, d)
		switch {
		case errors.Is(err, vsynctest.ErrMembershipStuck):
			t.Log(err)
			stuck++
		case err != nil:
			t.Fatal(err)
		}
	}
	if stuck > 0 {
		t.Fatalf("%d of %d seeds without membership convergence (liveness not judged; replay each with -seed=N)", stuck, len(seeds))
	}
}

// TestSwarm runs the swarm over a stand-in stability detector on a hundred
// seeds.
func TestSwarm(t *testing.T) {
	swarmSeeds(t, simtest.Seeds(t, 100), vsynctest.FakeStable)
}

// TestSwarmStable runs the swarm over package stable's detectors (the
// four protocols of Friedman, Manor and Guo, drawn per seed, with the
// §3.5 retransmissions), so the checker also holds the real stability
// vectors to "never ahead of a live member" and "only grow".
func TestSwarmStable(t *testing.T) {
	swarmSeeds(t, simtest.Seeds(t, 80), vsynctest.RealStable)
}

// TestSwarmStuckSeeds replays seeds that lead the membership into corners
// where it would stay split without a rule of package member or of this
// package (each case tells the corner, and the rule where it is not
// obvious):
//
//   - 3040358880 (over package stable): a joiner left alone in an old view
//     that the new lineage never probed;
//   - 12728 (100,000-seed run, stand-in stability): a member kept a failure
//     mark of n4 from before n4 left its view (its detector no longer
//     vouched for it) and reported n4 failed each time n4 was admitted
//     again, so n4 was excluded again and again;
//   - 34422 (100,000-seed run, over package stable): n2 acknowledged the
//     view 5.n1 that admitted it, then let it go (it installed an older
//     view a member refused it with) and ignored its commit, so it stayed
//     in the older view while the others counted it in 5.n1;
//   - 14969 (100,000-seed run, CubeFullDist): a root that was cut off and
//     then crashed multicast in its proposal 4.n2, which the survivors
//     never installed (they settled in 2.n0, an epoch below it, of another
//     lineage); n1 held those messages as data of a future view for good
//     (the rule: such data expires, vsync.Layer.expireEarly);
//   - 22734 (100,000-seed run, stand-in stability): joiner n7, admitted by
//     n0 into 8.n0 = [n0 n7] during a partition, was excluded alive by n0
//     as root (an acknowledgement lost to 22% loss); then n5 became root of
//     the merged lineage and never probed n7, whom it never knew, while n0
//     answered n7's pings: n7 stayed in 8.n0 for good (the rule: a
//     node keeps probing the nodes it excluded as root after it stops being
//     root);
//   - 29134 (100,000-seed run, stand-in stability): nodes flushing to one
//     target from three different old views; n0's first report to n2 (not
//     in n0's old view, so never resent to) was lost, and n2's repeated
//     reports were ignored by n0 for the same reason (the rule: a report from
//     a member one does not wait for is answered with one's own);
//   - 3133252645 and 956771236 (they guard against dropping, when a view
//     is installed, every held proposal that cannot descend from it): n4
//     had accepted n0's 7.n0, which took it back after a partition, when
//     the late commit of its own lineage's 3.n1 arrived; it installed
//     3.n1, dropped 7.n0, ignored its commit and stayed in 3.n1 while the
//     others counted it in 7.n0 (the rule: a proposal that admits the node
//     as a joiner is kept).
func TestSwarmStuckSeeds(t *testing.T) {
	for _, c := range []struct {
		seed uint64
		d    vsynctest.Detector
	}{
		{3040358880, vsynctest.RealStable},
		{12728, vsynctest.FakeStable},
		{34422, vsynctest.RealStable},
		{14969, vsynctest.RealStable},
		{22734, vsynctest.FakeStable},
		{29134, vsynctest.FakeStable},
		{3133252645, vsynctest.FakeStable},
		{956771236, vsynctest.FakeStable},
	} {
		if err := vsynctest.Swarm(c.seed, c.d); err != nil {
			t.Error(err)
		}
	}
}
