package comm

import (
	"flag"
	"testing"
)

var agreeSeeds = flag.Int("agree.seeds", 400, "random schedules of the agreement test")
var agreeSeed = flag.Uint64("agree.seed", 0, "replay one schedule of the agreement test")

// The fault-tolerant agreement (agree.go) decides one value at every
// survivor, and no crashed process decided another (uniform agreement),
// whatever the schedule, when coordinators and others crash at
// random points, with failures learnt at different times by different
// processes (in the same order, as membership views guarantee), some
// processes calling Agree late. The value is the AND of the flags of the
// ranks outside the agreed failed set, which holds only crashed ranks.
func TestAgreeRandomSchedules(t *testing.T) {
	seeds := []uint64{*agreeSeed}
	if *agreeSeed == 0 {
		seeds = nil
		for i := range *agreeSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		if err := AgreeSchedule(seed); err != nil {
			t.Fatalf("seed %d: %v (replay: go test ./comm -run TestAgreeRandomSchedules -agree.seed %d)", seed, err, seed)
		}
	}
}
