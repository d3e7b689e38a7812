package cli

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// rankPkg is the test program of package launch, run as a Go package
// directory (so these tests also build it the way `cohort run` does).
const rankPkg = "../../launch/testdata/rank"

// TestRunJob: `cohort run` starts N ranks that find each other through the
// rendezvous, forwards their output with the rank prefix and exits 0 when
// every rank does.
func TestRunJob(t *testing.T) {
	code, stdout, stderr := run(t, "run", "-n", "3", "--prefix", "--detector", "dbrr", "--fanout", "2", rankPkg)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	re := regexp.MustCompile(`(?m)^\[(\d)\] rank (\d) of 3 job \S+ detector "dbrr" fanout 2 table \S+$`)
	m := re.FindAllStringSubmatch(stdout, -1)
	if len(m) != 3 {
		t.Fatalf("want 3 rank lines, got:\n%s", stdout)
	}
	for _, l := range m {
		if l[1] != l[2] {
			t.Fatalf("line of rank %s prefixed [%s]", l[2], l[1])
		}
	}
}

// TestRunFailedRanks: the exit status and message say which ranks failed
// and how.
func TestRunFailedRanks(t *testing.T) {
	code, _, stderr := run(t, "run", "-n", "3", rankPkg, "--", "-fail-rank", "1", "-fail-code", "7")
	if code != exitFailure || !strings.Contains(stderr, "cohort run: rank 1 failed: exit code 7") {
		t.Fatalf("exit %d, stderr %q; want 1 and rank 1's exit code", code, stderr)
	}
	code, _, stderr = run(t, "run", "-n", "3", rankPkg, "-code", "2", "-fail-rank", "0", "-fail-code", "5")
	if code != exitFailure || !strings.Contains(stderr, "3 of 3 ranks failed: rank 0: exit code 5; ranks 1, 2: exit code 2") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// TestRunKill: --kill crashes a rank with SIGKILL; the message names it as
// killed by --kill, and with --abort-on-failure the job does not hang on
// ranks that wait forever.
func TestRunKill(t *testing.T) {
	code, _, stderr := run(t, "run", "-n", "3", "--kill", "1@0s", "--abort-on-failure", rankPkg, "--", "-hold")
	if code != exitFailure || !regexp.MustCompile(`rank 1(: | failed: )killed by --kill \(SIGKILL\)`).MatchString(stderr) {
		t.Fatalf("exit %d, stderr %q; want 1 and rank 1 killed by --kill", code, stderr)
	}
}

// TestRunSpareKilled: with spares, a process killed by --kill does not
// fail the job when every other process exits 0; it is reported. A
// process that fails on its own still does.
func TestRunSpareKilled(t *testing.T) {
	code, _, stderr := run(t, "run", "-n", "2", "--spares", "1", "--kill", "0@0s", rankPkg, "--", "-spin", "1m")
	if code != exitOK || !strings.Contains(stderr, "cohort run: process 0 lost (killed by the launcher's crash injection (SIGKILL)); the job went on without it") {
		t.Fatalf("exit %d, stderr %q; want 0 and process 0 reported lost", code, stderr)
	}
	code, _, stderr = run(t, "run", "-n", "2", "--spares", "1", rankPkg, "--", "-fail-rank", "1", "-fail-code", "7")
	if code != exitFailure || !strings.Contains(stderr, "rank 1 failed: exit code 7") {
		t.Fatalf("exit %d, stderr %q; want 1 and process 1's exit code", code, stderr)
	}
	code, _, stderr = run(t, "run", "-n", "2", "--spares", "1", rankPkg, "--", "-code", "3")
	if code != exitFailure || !strings.Contains(stderr, "3 of 3 ranks failed") {
		t.Fatalf("exit %d, stderr %q; want 1 and the 3 processes counted", code, stderr)
	}
}

// TestRunRespawn: with --respawn, the process killed comes back as
// process 4, said on standard error, and the job succeeds with the
// failure-free checksum whether or not the job needed process 4.
func TestRunRespawn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/jacobi and starts real processes")
	}
	code, stdout, stderr := run(t, "run", "-n", "3", "--spares", "1", "--respawn=1", "--kill", "1@300ms",
		"../../examples/jacobi", "--", "-size", "64", "-iters", "1500", "-pace", "1ms")
	says := "cohort run: process 1 ended (killed by the launcher's crash injection (SIGKILL)); started it again as process 4, which joins the job as a spare"
	if code != exitOK || !strings.Contains(stdout, "checksum 6dfe50962f3e68bd") || !strings.Contains(stderr, says) {
		t.Fatalf("exit %d, want 0, the failure-free checksum and %q\nstdout:\n%s\nstderr:\n%s", code, says, stdout, stderr)
	}
}

// TestRunDeadBeforeRegistering: a process that dies before it registers
// does not stop the start: the others run, and the failure names it
// alone; --abort-on-failure aborts the start instead.
func TestRunDeadBeforeRegistering(t *testing.T) {
	code, stdout, stderr := run(t, "run", "-n", "3", rankPkg, "--", "-early-rank", "1")
	if code != exitFailure || !strings.Contains(stderr, "cohort run: rank 1 failed: exit code 3") {
		t.Fatalf("exit %d, stderr %q; want 1 and rank 1 alone failed", code, stderr)
	}
	for _, r := range []int{0, 2} {
		if !strings.Contains(stdout, fmt.Sprintf("rank %d of 3 ", r)) {
			t.Errorf("rank %d did not start:\n%s", r, stdout)
		}
	}
	code, _, stderr = run(t, "run", "-n", "3", "--abort-on-failure", rankPkg, "--", "-early-rank", "1", "-hold")
	if code != exitFailure || !strings.Contains(stderr, "rank 1 failed (exit code 3) and the job aborts on a failure") {
		t.Fatalf("--abort-on-failure: exit %d, stderr %q; want 1 and the start aborted", code, stderr)
	}
}

// TestRunMissedKill: a planned kill whose time comes after the job's end
// is reported on standard error; the exit status stays that of the ranks.
func TestRunMissedKill(t *testing.T) {
	code, _, stderr := run(t, "run", "-n", "2", "--kill", "1@1h", rankPkg)
	if code != exitOK || !regexp.MustCompile(`(?m)^cohort run: --kill 1@1h0m0s did not happen: the job ended \S+ after every rank registered$`).MatchString(stderr) {
		t.Fatalf("exit %d, stderr %q; want 0 and the missed kill", code, stderr)
	}
}

// TestRunBadInput: every mistake is a clear error ("bad
// input"): status 2 for usage, 1 for a Go package that does not build.
func TestRunBadInput(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--bogus", rankPkg}, exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"run", rankPkg}, exitUsage, "-n is required: the number of ranks, 1 to 1024"},
		{[]string{"run", "-n", "0", rankPkg}, exitUsage, "-n 0: want 1 to 1024 ranks"},
		{[]string{"run", "-n", "-2", rankPkg}, exitUsage, "-n -2"},
		{[]string{"run", "-n", "2"}, exitUsage, "missing the PROGRAM"},
		{[]string{"run", "-n", "2", "--"}, exitUsage, "missing the PROGRAM"},
		{[]string{"run", "-n", "2", "./no/such/dir"}, exitUsage, "./no/such/dir: no such file or directory"},
		{[]string{"run", "-n", "2", "no-such-command-anywhere"}, exitUsage, "not a file, a directory or a command in PATH"},
		{[]string{"run", "-n", "2", "../../launch"}, exitUsage, "is not a main package"},
		{[]string{"run", "-n", "2", "."}, exitUsage, "is not a main package"},
		{[]string{"run", "-n", "2", "--kill", "2@1s", rankPkg}, exitUsage, "--kill 2@1s: rank 2 is out of range for -n 2 (0 to 1)"},
		{[]string{"run", "-n", "2", "--kill", "1@soon", rankPkg}, exitUsage, `bad duration "soon"`},
		{[]string{"run", "-n", "2", "--kill", "1", rankPkg}, exitUsage, "want RANK@DURATION"},
		{[]string{"run", "-n", "2", "--kill", "x@1s", rankPkg}, exitUsage, `rank "x" is not a number`},
		{[]string{"run", "-n", "2", "--kill", "1@-1s", rankPkg}, exitUsage, "negative duration"},
		{[]string{"run", "-n", "2", "--detector", "swim", rankPkg}, exitUsage, `--detector "swim"`},
		{[]string{"run", "-n", "2", "--fanout", "3", rankPkg}, exitUsage, "--fanout 3: want a power of two"},
		{[]string{"run", "-n", "2", "../../launch/testdata/broken"}, exitFailure, "the Go package did not build"},
		{[]string{"run", "-n", "2", "--spares", "-1", rankPkg}, exitUsage, "--spares -1: want 0 to 1024 spare processes"},
		{[]string{"run", "-n", "2", "--spares", "1", "-r", "2", rankPkg}, exitUsage, "spares and replicas do not go together"},
		{[]string{"run", "-n", "2", "--spares", "1", "--kill", "3@1s", rankPkg}, exitUsage, "--kill 3@1s: process 3 is out of range for -n 2 --spares 1 (0 to 2; the spares are processes 2 to 2)"},
		{[]string{"run", "-n", "2", "--respawn", rankPkg}, exitUsage, "--respawn needs --spares"},
		{[]string{"run", "-n", "2", "--spares", "1", "--respawn=many", rankPkg}, exitUsage, `"many": want --respawn alone or --respawn=K, K from 0 to 62`},
		{[]string{"run", "-n", "2", "--spares", "1", "--respawn=63", rankPkg}, exitUsage, `"63": want --respawn alone or --respawn=K`},
		{[]string{"run", "-n", "2", "--spares", "1", "--respawn", "--kill", "1@1s", "--hosts", "supernode:sn@127.0.0.1:1", rankPkg}, exitUsage, "--kill and --abort-on-failure are for jobs on this machine"},
		{[]string{"run", "-n", "2", "--respawn", "--hosts", "supernode:sn@127.0.0.1:1", rankPkg}, exitUsage, "--respawn needs --spares"},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	// The compiler's message is shown.
	_, _, stderr := run(t, "run", "-n", "2", "../../launch/testdata/broken")
	if !strings.Contains(stderr, `cannot use "not a number"`) {
		t.Errorf("the build failure is not shown: %q", stderr)
	}
}

// TestRunPiKilled: with --kill 3@200ms, pi (which does not handle
// failures) exits non-zero naming rank 3 as killed by --kill, without
// hanging: the survivors get errors from comm and exit, so the job ends
// before its --timeout guard.
func TestRunPiKilled(t *testing.T) {
	code, stdout, stderr := run(t, "run", "-n", "8", "--kill", "3@200ms", "--timeout", "2m", "../../examples/pi", "--", "-rounds", "100000000")
	if code != exitFailure {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`rank 3(: | failed: )killed by --kill \(SIGKILL\)`).MatchString(stderr) {
		t.Fatalf("the error does not name rank 3 as killed by --kill:\n%s", stderr)
	}
	if strings.Contains(stderr, "timed out") {
		t.Fatalf("the job hung until its timeout:\n%s", stderr)
	}
}
