package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResumedExcludedRankEnds: a rank stopped (SIGSTOP) until the others
// have excluded it and ended runs again with nobody left to answer it. No
// launcher stops it here (the others exit with status 3, so `cohort run`
// does not count their reports, as no launcher of ours runs under
// SLURM): it must learn from the notice the others left in its
// connections that it was excluded, and end with the error, rather than
// take them all for failed and carry on alone.
func TestResumedExcludedRankEnds(t *testing.T) {
	if testing.Short() || runtime.GOOS != "linux" {
		t.Skip("builds testdata/resumed and starts real processes")
	}
	dir := t.TempDir()
	t.Setenv("RESUMED_DIR", dir)
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := run(t, "run", "-n", "3", "--timeout", "4m", "./testdata/resumed")
		done <- result{code, stdout, stderr}
	}()
	// Wait until the survivors have exited and rank 2 is stopped, then
	// run it again.
	deadline := time.Now().Add(3 * time.Minute)
	stopped := 0
	for stopped == 0 {
		select {
		case r := <-done:
			t.Fatalf("the run ended before rank 2 was run again: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the survivors never ended")
		}
		pids := make([]int, 3)
		for r := range pids {
			pids[r] = readPid(dir, r)
		}
		if pids[2] == 0 || procState(pids[2]) != 'T' || pids[0] == 0 || pids[1] == 0 || running(pids[0]) || running(pids[1]) {
			continue
		}
		stopped = pids[2]
	}
	if err := syscall.Kill(stopped, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code == 0 || strings.Contains(r.stdout, "rank 2: alone") {
		t.Fatalf("rank 2 carried on alone: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "rank 2: comm: this process was excluded from the job") {
		t.Fatalf("rank 2 does not say it was excluded\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "timed out") {
		t.Errorf("the run timed out:\n%s", r.stderr)
	}
}

// readPid returns the process id rank r of testdata/resumed wrote to dir,
// 0 if none yet.
func readPid(dir string, r int) int {
	b, err := os.ReadFile(filepath.Join(dir, "pid."+strconv.Itoa(r)))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// procState returns the state letter of process pid in /proc ('T' for
// stopped, 'Z' for a zombie), 0 if it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// running reports whether process pid exists and has not exited.
func running(pid int) bool { s := procState(pid); return s != 0 && s != 'Z' }
