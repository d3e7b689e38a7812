package cli

import (
	"strings"
	"testing"
)

func TestOverheadBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--n", "30"}, {"--reps", "1"}, {"--procs", "1"}, {"--mode", "x"}} {
		code, _, stderr := run(t, append([]string{"bench", "overhead"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, args[0]) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
