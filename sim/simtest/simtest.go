// Package simtest holds test helpers for simulation tests in any package:
// the seeds a randomized test runs, and how to replay one.
//
// A swarm test looks like this:
//
//	func TestSwarm(t *testing.T) {
//		for _, seed := range simtest.Seeds(t, 20) {
//			w := sim.New(sim.Config{Seed: seed})
//			... add nodes, apply sim.Swarm(seed, n, horizon, opts), add checkers ...
//			w.SetReplay("go test ./fd -run TestSwarm -seed=%d")
//			if err := w.RunChecked(horizon + bound); err != nil {
//				t.Fatal(err) // prints seed, plan, time, node and the replay command
//			}
//		}
//	}
//
// Run it as usual to try 20 seeds, or replay one with
// `go test ./fd -run TestSwarm -seed=1234` (or COHORT_SEED=1234).
//
// simtest does not import package sim, so sim's own tests can use it.
package simtest

import (
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"testing"
)

var (
	seedFlag = flag.String("seed", "", "replay a simulation test with this one seed (or set COHORT_SEED)")
	baseFlag = flag.String("seedbase", "", "derive a simulation test's seeds from this base (or set COHORT_SEED_BASE; default 1)")
)

// SeedEnv and BaseEnv are the environment variables read when the -seed and
// -seedbase flags are not given.
const (
	SeedEnv = "COHORT_SEED"
	BaseEnv = "COHORT_SEED_BASE"
)

// Seeds returns the seeds a randomized test should run. With -seed=N (or
// COHORT_SEED=N) it returns just N, to replay a failure. Otherwise it
// returns n seeds (of 32 bits) derived from a base (-seedbase,
// COHORT_SEED_BASE, or 1) and the test's name, so different tests explore different seeds while
// each stays reproducible run after run. Every seed is logged. A malformed
// seed is a test failure, not a silent default.
func Seeds(t testing.TB, n int) []uint64 {
	t.Helper()
	if s := pick(*seedFlag, SeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("simtest: bad seed %q: %v", s, err)
		}
		t.Logf("replaying seed %d", seed)
		return []uint64{seed}
	}
	base := uint64(1)
	if s := pick(*baseFlag, BaseEnv); s != "" {
		b, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("simtest: bad seed base %q: %v", s, err)
		}
		base = b
	}
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	x := base ^ h.Sum64()
	seeds := make([]uint64, n)
	for i := range seeds {
		x += 0x9e3779b97f4a7c15
		seeds[i] = Mix(x) >> 32 // short enough to type in a replay command
	}
	t.Logf("seeds (replay one with -seed=N or %s=N): %v", SeedEnv, seeds)
	return seeds
}

func pick(flagValue, env string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(env)
}

// Mix is the splitmix64 finalizer: a bijection on uint64 that scatters
// neighbouring inputs, used to derive seeds.
func Mix(x uint64) uint64 {
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Each runs f as a subtest named "seed=N" for every seed of [Seeds].
func Each(t *testing.T, n int, f func(t *testing.T, seed uint64)) {
	t.Helper()
	for _, seed := range Seeds(t, n) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { f(t, seed) })
	}
}
