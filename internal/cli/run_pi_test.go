// End-to-end runs of the examples under `cohort run`
// (`cohort run -n 8 ./examples/pi` prints π to 1e-10 and exits 0). They
// need a rank's last frames to reach its peers when it finalizes
// (comm.Session.Finalize flushes the TCP transport before closing it).

package cli

import (
	"math"
	"regexp"
	"strconv"
	"testing"
)

// TestRunPi: `cohort run -n 8 ./examples/pi`
// prints π to 1e-10 (the P2P-MPI chapter's Figure 1, §1) and exits 0.
func TestRunPi(t *testing.T) {
	code, stdout, stderr := run(t, "run", "-n", "8", "--timeout", "2m", "../../examples/pi")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	m := regexp.MustCompile(`Pi is approximately ([0-9.]+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no π in the output:\n%s", stdout)
	}
	pi, _ := strconv.ParseFloat(m[1], 64)
	if d := math.Abs(pi - math.Pi); d > 1e-10 {
		t.Fatalf("π ≈ %s, off by %.3g", m[1], d)
	}
}

// TestRunExamples: pingpong and allreduce run under `cohort run` and exit
// 0 (allreduce checks its sums on every rank itself).
func TestRunExamples(t *testing.T) {
	code, stdout, stderr := run(t, "run", "-n", "2", "--timeout", "2m", "../../examples/pingpong", "--", "-sizes", "0,8,65536", "-iters", "50")
	if code != exitOK || !regexp.MustCompile(`(?m)^\s+65536\s+[0-9.]+$`).MatchString(stdout) {
		t.Fatalf("pingpong: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, "run", "-n", "4", "--timeout", "2m", "../../examples/allreduce", "--", "-len", "1000", "-iters", "5")
	if code != exitOK || !regexp.MustCompile(`Allreduce of 1000 float64 \(8000 bytes\) on 4 ranks: [0-9.]+ µs per call, results checked on every rank`).MatchString(stdout) {
		t.Fatalf("allreduce: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestRunReplicated: `cohort run -n 4 -r 2` runs each rank of
// examples/allreduce as two processes; killing one replica of two ranks
// (a master and a non-master) mid-run changes nothing: the sums are
// checked on every rank, the result is printed once, the exit status is 0
// and the lost replicas are reported. Killing both replicas of a rank fails
// the job.
func TestRunReplicated(t *testing.T) {
	args := []string{"run", "-n", "4", "-r", "2", "--timeout", "2m"}
	// 1,500 calls of 1 MiB take seconds, so that the kills, at most 1.2 s
	// after the start, land mid-run: with 300, a quiet machine ended the
	// job 1.1 s after the ranks registered, before the second kill.
	prog := []string{"../../examples/allreduce", "--", "-len", "131072", "-iters", "1500"}
	code, stdout, stderr := run(t, append(append(args, "--kill", "1@800ms", "--kill", "6@1200ms"), prog...)...)
	if code != exitOK || len(regexp.MustCompile(`results checked on every rank`).FindAllString(stdout, -1)) != 1 {
		t.Fatalf("one replica of ranks 1 and 2 killed: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"replica 0 of rank 1 (process 1) lost", "replica 1 of rank 2 (process 6) lost"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(stderr) {
			t.Errorf("stderr does not report %q (was the job over before the kill?):\n%s", want, stderr)
		}
	}
	code, stdout, stderr = run(t, append(append(args, "--kill", "2@800ms", "--kill", "6@800ms"), prog...)...)
	if code == exitOK {
		t.Fatalf("both replicas of rank 2 killed, exit 0\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}
