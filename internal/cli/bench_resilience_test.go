package cli

import (
	"strings"
	"testing"
)

// Every bad setting of cohort bench resilience is a usage error naming
// its flag, before anything runs.
func TestResilienceBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "1"}, {"--size", "2"}, {"--iters", "1"}, {"--pace", "-1ms"}, {"--mtbf", "0"}, {"--restart", "-1s"},
		{"--kills", "0"}, {"--kills", "5"}, {"--reps", "0"}, {"--k", "0"}, {"--k", "2000"}, {"--k", "x"},
	} {
		code, _, stderr := run(t, append([]string{"bench", "resilience"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, strings.TrimLeft(args[0], "-")) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
