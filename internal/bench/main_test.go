package bench_test

import (
	"testing"

	"github.com/cohort-mp/cohort/internal/cli"
	"github.com/cohort-mp/cohort/internal/runner/runnertest"
)

// TestMain lets the test binary act as the cohort command, so that the
// jobs of these tests run exactly `cohort node`.
func TestMain(m *testing.M) { runnertest.Main(m, cli.Run) }

func testSeed(t *testing.T, def uint64) uint64 { return runnertest.Seed(t, def, "./internal/bench") }
