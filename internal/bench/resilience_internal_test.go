package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The kill times of a repetition: increasing, within the horizon, at most
// MaxKills, each on its own rank i·⌊N/MaxKills⌋ (never a rank and its
// buddy, the next rank), and the same for the same seed.
func TestKillTimes(t *testing.T) {
	cfg := ResilienceConfig{Ranks: 8, MTBF: 300 * time.Millisecond, MaxKills: 3}
	horizon := 2 * time.Second
	for seed := range uint64(50) {
		a := killTimes(rand.New(rand.NewPCG(seed, 0)), cfg, horizon)
		b := killTimes(rand.New(rand.NewPCG(seed, 0)), cfg, horizon)
		if !slices.Equal(a, b) {
			t.Fatalf("seed %d: %v then %v", seed, a, b)
		}
		if len(a) > cfg.MaxKills {
			t.Fatalf("seed %d: %d kills, want at most %d", seed, len(a), cfg.MaxKills)
		}
		for i, k := range a {
			if k.Rank != 2*i || k.After >= horizon || i > 0 && k.After < a[i-1].After {
				t.Fatalf("seed %d: kills %v: want process 2i, increasing times below %v", seed, a, horizon)
			}
		}
	}
}
