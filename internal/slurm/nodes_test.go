package slurm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The multi-node tests run on the cluster of `scripts/slurm-up --nodes 2`:
// two nodes, each a network namespace with its own address, host name and
// slurmd. They skip when it cannot be built (not root, no namespaces).

// twoNodes returns the two-node cluster or skips.
func twoNodes(t *testing.T) Cluster {
	t.Helper()
	need(t)
	c, err := EnsureNodes(context.Background(), root, 2)
	if err != nil {
		t.Skipf("SKIP (no two-node SLURM here): %v", err)
	}
	return c
}

// TestSrunTwoNodesPi: pi on 8 tasks over two nodes, with PMI-2 and
// without PMI (addresses computed from the node list): the ranks listen on
// their node's address, not on loopback.
func TestSrunTwoNodesPi(t *testing.T) {
	c := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, mpi := range []string{"pmi2", "none"} {
		out, err := srunOn(t, ctx, c, []string{"COHORT_SLURM_SECRET=" + testSecret}, "-J", jobName(t), "-N", "2", "-n", "8", "-O", "--mpi="+mpi, "./pi")
		if err != nil || !strings.Contains(out, "Pi is approximately 3.14159265358") {
			t.Errorf("--mpi=%s: %v; want pi", mpi, err)
		}
	}
}

// TestSrunTwoNodesNodeFailure: FT N-Queens on 8 tasks over two nodes
// (n = 17: on an idle machine n = 16 ended before the survivors had
// declared the dead node's tasks),
// started with srun --no-kill; once every task is in its first view,
// node n2 dies (its link goes down and every process in it is SIGKILLed:
// slurmd, slurmstepd, tasks 4 to 7). The four survivors on n1 detect all
// four failures, none of them is excluded, and the count is exact.
func TestSrunTwoNodesNodeFailure(t *testing.T) {
	c := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bringBackN2(t)
	const n = 8
	events := filepath.Join(t.TempDir(), "events.jsonl")
	defer keepEvents(t, events)
	cmd := c.Command(ctx, "srun", "--no-kill", "-J", jobName(t), "-N", "2", "-n", strconv.Itoa(n), "-O", "--mpi=pmi2", "./nqueens", "-n", "17", "-v", "-seed", "5")
	cmd.Dir = bin
	cmd.Env = append(cmd.Env, "COHORT_SLURM_SECRET="+testSecret, "COHORT_EVENTS="+events)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	if err := waitViews(ctx, events, n, 2*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	killed := killN2(t)
	t.Logf("node n2 died: link down, %d processes SIGKILLed", killed)
	// srun returns only once slurmctld has declared n2 dead (SlurmdTimeout
	// and more): once the four survivors have finished, the step is
	// cancelled instead of waited for.
	deadline := time.Now().Add(3 * time.Minute)
	for strings.Count(out.String(), ": leaves ") < n/2 && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.Command(ctx, "scancel", "-n", jobName(t)).Run()
	err := cmd.Wait()
	waited = true
	text := out.String()
	t.Logf("srun output:\n%s", text)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("srun: %v", err)
	}
	if !strings.Contains(text, "95815104 solutions") || !strings.Contains(text, "CORRECT") {
		t.Fatal("no exact count (95815104 for n=17)")
	}
	learned := regexp.MustCompile(`rank (\d+): learned that rank (\d+) failed`).FindAllStringSubmatch(text, -1)
	pairs := map[string]bool{}
	for _, m := range learned {
		pairs[m[1]+">"+m[2]] = true
	}
	for s := 0; s < 4; s++ {
		for v := 4; v < 8; v++ {
			if !pairs[fmt.Sprintf("%d>%d", s, v)] {
				t.Errorf("survivor %d did not learn of rank %d's failure", s, v)
			}
		}
		for v := 0; v < 4; v++ {
			if pairs[fmt.Sprintf("%d>%d", s, v)] {
				t.Errorf("survivor %d learned that rank %d failed, which runs on n1", s, v)
			}
		}
	}
	if strings.Contains(text, "excluded from the job") {
		t.Error("a rank on n1 was excluded from the job")
	}
	t.Logf("node n2 lost mid-run: %d (survivor, failed rank) pairs detected; %s", len(pairs), regexp.MustCompile(`nqueens n=17.*`).FindString(text))
}

// keepEvents moves the event stream at path (COHORT_EVENTS) out of t's
// temporary directory when t failed, so that the views, verdicts and
// proposals of a run that went wrong can be read after it.
func keepEvents(t *testing.T, path string) {
	if !t.Failed() {
		return
	}
	kept := filepath.Join(os.TempDir(), jobName(t)+"-events.jsonl")
	if err := os.Rename(path, kept); err != nil {
		t.Logf("keeping the event stream: %v", err)
		return
	}
	t.Logf("event stream kept in %s", kept)
}

// lockedBuffer is a bytes.Buffer that srun's two outputs and the test
// may use at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSrunTwoNodesJacobiSpares: the Jacobi stencil on 4 ranks and 2
// spare tasks (COHORT_SPARES=2) over two nodes, placed by a host file so
// that the spares are on the other node than ranks 2 and 3: n1 holds
// tasks 0, 1 and the spares 4, 5, n2 holds tasks 2 and 3. After the
// first checkpoint, node n2 dies (its link down, its processes
// SIGKILLed): the spares on n1 take ranks 2 and 3, their states come
// from their buddies on n1 (ranks 0 and 1: a rank's buddy is on another
// node), and the checksum is the one of a failure-free run. The Phoenix
// paper's heartbeat timings keep this loaded machine's stalls from
// excluding live tasks.
func TestSrunTwoNodesJacobiSpares(t *testing.T) {
	c := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	prog := []string{"./jacobi", "-size", "64", "-iters", "4000", "-pace", "2ms", "-k", "200", "-v"}
	env := []string{"COHORT_SLURM_SECRET=" + testSecret, "COHORT_DETECTOR=heartbeat-paper"}
	clean, err := srunOn(t, ctx, c, env, append([]string{"-J", jobName(t), "-N", "2", "-n", "4", "-O", "--mpi=pmi2"}, prog...)...)
	want := regexp.MustCompile(`checksum [0-9a-f]{16}`).FindString(clean)
	if err != nil || want == "" {
		t.Fatalf("failure-free run: %v, no checksum", err)
	}
	bringBackN2(t)
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("n1\nn1\nn2\nn2\nn1\nn1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := c.Command(ctx, "srun", append([]string{"--no-kill", "-J", jobName(t), "-N", "2", "-n", "6", "-O", "--mpi=pmi2", "--distribution=arbitrary"}, prog...)...)
	cmd.Dir = bin
	cmd.Env = append(cmd.Env, append(env, "COHORT_SPARES=2", "SLURM_HOSTFILE="+hostfile)...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	if !waitOutput(ctx, &out, 3*time.Minute, func(s string) bool { return strings.Contains(s, "checkpoint committed") }) {
		t.Fatalf("no checkpoint committed:\n%s", out.String())
	}
	killN2(t)
	t.Log("node n2 died: link down, its processes SIGKILLed")
	// srun returns only once slurmctld has declared n2 dead: once rank 0
	// has printed the checksum and both spares their takeover (or a
	// survivor its error), the step is cancelled instead.
	failed := regexp.MustCompile(`jacobi: process \d+: `)
	waitOutput(ctx, &out, 3*time.Minute, func(s string) bool {
		return failed.MatchString(s) || (strings.Contains(s, "checksum ") && strings.Contains(s, "took rank 2") && strings.Contains(s, "took rank 3"))
	})
	c.Command(ctx, "scancel", "-n", jobName(t)).Run()
	err = cmd.Wait()
	waited = true
	text := out.String()
	t.Logf("srun output:\n%s", text)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("srun: %v", err)
	}
	for _, says := range []string{"jacobi: process 4 took rank 2", "jacobi: process 5 took rank 3", want} {
		if !strings.Contains(text, says) {
			t.Errorf("no %q (want the spares on n1 to take ranks 2 and 3, and the failure-free %s)", says, want)
		}
	}
}

// waitOutput waits until done(out) holds, polling, for at most limit; it
// reports whether it held.
func waitOutput(ctx context.Context, out *lockedBuffer, limit time.Duration, done func(string) bool) bool {
	deadline := time.Now().Add(limit)
	for !done(out.String()) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}

// bringBackN2 has n2 come back when t ends: its link up, its slurmd
// restarted by slurm-up (ReturnToService=2 returns the node to service).
func bringBackN2(t *testing.T) {
	t.Cleanup(func() {
		exec.Command("ip", "link", "set", "cslurm-v2", "up").Run()
		if _, err := EnsureNodes(context.Background(), root, 2); err != nil {
			t.Logf("restarting n2: %v", err)
		}
	})
}

// killN2 kills node n2: its link down and every process in it (slurmd,
// slurmstepd, its tasks) SIGKILLed; it returns how many were killed.
func killN2(t *testing.T) int {
	t.Helper()
	if err := exec.Command("ip", "link", "set", "cslurm-v2", "down").Run(); err != nil {
		t.Fatalf("taking n2's link down: %v", err)
	}
	pids, err := exec.Command("ip", "netns", "pids", "cslurm-n2").Output()
	if err != nil {
		t.Fatalf("ip netns pids: %v", err)
	}
	killed := 0
	for _, f := range strings.Fields(string(pids)) {
		if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}
