package cli

import (
	"strings"
	"testing"
)

// TestBenchLaunchLocal runs the launch benchmark with the local launcher
// on 3 ranks (the ranks are this test binary as 'cohort launch-worker').
func TestBenchLaunchLocal(t *testing.T) {
	code, stdout, stderr := run(t, "bench", "launch", "-n", "3", "--runs", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var row string
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "local" && f[1] == "3" {
			row = line
		}
	}
	if row == "" || !strings.Contains(row, " ms") {
		t.Fatalf("no row for local, 3 ranks:\n%s", stdout)
	}
}

func TestBenchLaunchBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--launchers", "carrier-pigeon"}, {"-n", "0"}, {"--runs", "0"}} {
		code, _, stderr := run(t, append([]string{"bench", "launch"}, args...)...)
		if code != exitUsage || !strings.Contains(stderr, args[0]) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
