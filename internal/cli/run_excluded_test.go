package cli

import (
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestRunStopsExcludedRank: a rank stopped (SIGSTOP) for good is excluded
// by the others, which then end; nobody is left to tell it, and `cohort
// run` used to wait for it for ever. It is stopped once they have ended,
// and the run fails naming it excluded, after the survivors' output.
func TestRunStopsExcludedRank(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("builds testdata/stopped and starts real processes")
	}
	code, stdout, stderr := run(t, "run", "-n", "3", "--timeout", "4m", "./testdata/stopped")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailure, stdout, stderr)
	}
	if n := len(regexp.MustCompile(`(?m)^rank [01]: rank 2 excluded$`).FindAllString(stdout, -1)); n != 2 {
		t.Fatalf("%d survivors say rank 2 was excluded, want 2\nstdout:\n%s\nstderr:\n%s", n, stdout, stderr)
	}
	for _, want := range []string{
		"cohort run: stopping rank 2: the others excluded it from the job",
		"cohort run: rank 2 failed: excluded from the job by the others, stopped by the launcher once they had ended (SIGKILL)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "timed out") {
		t.Errorf("the run timed out:\n%s", stderr)
	}
}
