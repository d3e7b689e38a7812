package slurm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run cohort programs under a real SLURM: the one of
// SLURM_CONF or /etc/slurm, or the one scripts/slurm-up starts (as root,
// when SLURM is installed; COHORT_SLURM_INSTALL=1 lets it install the
// packages too). Without one they skip and say why:
//
//	scripts/slurm-up && go test -v ./internal/slurm/

const testSecret = "cohort-test-secret-0123456789"

var (
	cluster    Cluster
	clusterErr error
	bin        string // the built example programs
	root       string // the module's root
)

func TestMain(m *testing.M) {
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		var err error
		root, err = repoRoot()
		if err != nil {
			clusterErr = err
			return m.Run()
		}
		cluster, clusterErr = Ensure(ctx, root, os.Getenv("COHORT_SLURM_INSTALL") == "1")
		if clusterErr != nil {
			fmt.Fprintf(os.Stderr, "SLURM tests skipped: %v\n", clusterErr)
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "cohort-slurm-test")
		if err != nil {
			clusterErr = err
			return m.Run()
		}
		defer os.RemoveAll(dir)
		for _, p := range []string{"pi", "nqueens", "ulfm", "jacobi"} {
			build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, p), "./examples/"+p)
			build.Dir = root
			out, err := build.CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "building examples/%s: %v\n%s", p, err, out)
				return 1
			}
		}
		bin = dir
		return m.Run()
	}()
	os.Exit(code)
}

// need skips the test when no SLURM cluster can be had, saying why.
func need(t *testing.T) {
	t.Helper()
	if clusterErr != nil {
		t.Skipf("SKIP (no SLURM here): %v", clusterErr)
	}
}

// repoRoot is the module's root (where scripts/ and examples/ are); the
// go command runs tests in their package's directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// srun runs a step and returns its combined output and error.
func srun(t *testing.T, ctx context.Context, env []string, args ...string) (string, error) {
	t.Helper()
	return srunOn(t, ctx, cluster, env, args...)
}

// srunOn runs a step on c.
func srunOn(t *testing.T, ctx context.Context, c Cluster, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := c.Command(ctx, "srun", args...)
	cmd.Dir = bin
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("srun %s:\n%s", strings.Join(args, " "), out)
	return string(out), err
}

// TestSrunPi: srun -n 8 of examples/pi gives π.
func TestSrunPi(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := srun(t, ctx, []string{"COHORT_SLURM_SECRET=" + testSecret}, "-J", jobName(t), "-O", "-n", "8", "--mpi=pmi2", "./pi")
	if err != nil {
		t.Fatalf("srun: %v", err)
	}
	m := regexp.MustCompile(`Pi is approximately (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no result line")
	}
	pi, err := strconv.ParseFloat(m[1], 64)
	if err != nil || pi < 3.14159265358 || pi > 3.14159265360 {
		t.Fatalf("pi = %q, want 3.1415926535(9)", m[1])
	}
	t.Logf("srun -n 8 ./pi: %s", m[0])
}

// TestSrunRefusals: a task without the user's secret refuses to start
// and says what to do; without PMI the tasks compute their addresses from
// SLURM's environment, and say so.
func TestSrunWithoutSecretOrPMI(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir() // no ~/.cohort/secret there
	out, err := srun(t, ctx, []string{"COHORT_SLURM_SECRET=", "HOME=" + home}, "-J", jobName(t), "-O", "-n", "2", "--mpi=pmi2", "./pi")
	if err == nil || !strings.Contains(out, "no job secret under SLURM") || !strings.Contains(out, "openssl rand") {
		t.Errorf("without a secret: err %v; want a refusal saying how to make a secret", err)
	}
	out, err = srun(t, ctx, []string{"COHORT_SLURM_SECRET=" + testSecret}, "-J", jobName(t), "-O", "-n", "4", "--mpi=none", "./pi")
	if err != nil || !strings.Contains(out, "Pi is approximately 3.14159265358") || !strings.Contains(out, "computed from SLURM's environment") {
		t.Errorf("without PMI: err %v; want pi, and a notice that the addresses were computed", err)
	}
}

// TestSrunTaskDiesBeforeExchange: a task of the step dies before it
// publishes its address; the others give up after COHORT_SLURM_TIMEOUT
// with an error that says the fence was not reached by every task.
func TestSrunTaskDiesBeforeExchange(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := srun(t, ctx, []string{"COHORT_SLURM_SECRET=" + testSecret, "COHORT_SLURM_TIMEOUT=3s"},
		"-J", jobName(t), "-O", "-n", "3", "--mpi=pmi2", "sh", "-c", `if [ "$SLURM_PROCID" = 2 ]; then exit 3; fi; exec ./pi`)
	if err == nil {
		t.Fatal("srun succeeded")
	}
	if n := strings.Count(out, "the fence did not complete within 3s"); n != 2 {
		t.Errorf("%d tasks said the fence was not complete, want 2", n)
	}
}

// TestSrunNQueensKill: fault-tolerant N-Queens (random stealing) on 8
// tasks; once every task is in its first view, task 3 is SIGKILLed. The
// survivors detect it, agree on a view without it, and the count is
// exact.
func TestSrunNQueensKill(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n, victim = 8, 3
	text, err := srunAndKill(t, ctx, n, victim, nil, "./nqueens", "-n", "16", "-v", "-seed", "13")
	// srun's status is the killed task's (137); the survivors' results are
	// in the output.
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("srun: %v", err)
	}
	if !strings.Contains(text, "14772512 solutions") || !strings.Contains(text, "CORRECT") {
		t.Fatal("no exact count (14772512 for n=16)")
	}
	learned := strings.Count(text, fmt.Sprintf("learned that rank %d failed", victim))
	if learned != n-1 {
		t.Errorf("%d survivors said they learned of rank %d's failure, want %d", learned, victim, n-1)
	}
	if strings.Contains(text, fmt.Sprintf("rank %d: leaves", victim)) {
		t.Errorf("task %d finished: it was killed too late to test anything", victim)
	}
	t.Logf("task %d SIGKILLed mid-run: %d survivors detected it; %s", victim, learned, regexp.MustCompile(`nqueens n=16.*`).FindString(text))
}

// TestSrunULFMKill: examples/ulfm on 5 tasks loops on an Allreduce; once
// every task is in its first view, task 3 is SIGKILLed. Every survivor's
// Allreduce fails with an error naming rank 3, and each revokes, shrinks,
// agrees and checks an Allreduce on the 4 survivors (ULFM semantics under
// SLURM, as under cohort run).
func TestSrunULFMKill(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n, victim = 5, 3
	text, _ := srunAndKill(t, ctx, n, victim, nil, "./ulfm", "-op", "allreduce")
	for r := 0; r < n; r++ {
		if r == victim {
			continue
		}
		if !regexp.MustCompile(fmt.Sprintf(`rank %d: allreduce failed naming ranks \[%d\]`, r, victim)).MatchString(text) &&
			!strings.Contains(text, fmt.Sprintf("rank %d: allreduce failed: communicator revoked by a peer", r)) {
			t.Errorf("rank %d: no failure naming rank %d (or revocation)", r, victim)
		}
		if !regexp.MustCompile(fmt.Sprintf(`rank %d: recovered: rank \d of 4 survivors, failed \[%d\].*OK`, r, victim)).MatchString(text) {
			t.Errorf("rank %d did not recover", r)
		}
	}
}

// TestSrunJacobiSpare: the Jacobi stencil on 4 ranks and a spare task
// (COHORT_SPARES=1 exported before srun); once every task is in its first
// view, task 2 is SIGKILLed. The spare, task 4, takes rank 2, and the
// checksum is the failure-free one.
func TestSrunJacobiSpare(t *testing.T) {
	need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	text, _ := srunAndKill(t, ctx, 5, 2, []string{"COHORT_SPARES=1"}, "./jacobi", "-size", "64", "-iters", "1500", "-pace", "2ms")
	if !strings.Contains(text, "jacobi: process 4 took rank 2") || !strings.Contains(text, "checksum 6dfe50962f3e68bd") {
		t.Fatal("the spare did not take rank 2, or the checksum is not the failure-free one (6dfe50962f3e68bd)")
	}
}

// srunAndKill runs the program (in the test binaries' directory) on n
// tasks with srun and the extra environment env, waits until every task
// has installed its first view (their events go to one file), SIGKILLs
// task victim, waits for srun and returns its output (logged) and its
// error.
func srunAndKill(t *testing.T, ctx context.Context, n, victim int, env []string, prog ...string) (string, error) {
	t.Helper()
	name := jobName(t)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	args := append([]string{"-J", name, "-O", "-n", strconv.Itoa(n), "--mpi=pmi2"}, prog...)
	cmd := cluster.Command(ctx, "srun", args...)
	cmd.Dir = bin
	cmd.Env = append(append(cmd.Env, "COHORT_SLURM_SECRET="+testSecret, "COHORT_EVENTS="+events), env...)
	var out bytes.Buffer
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
	// Every task writes its events to the one file (appends of whole
	// lines); wait until each has installed its first view.
	if err := waitViews(ctx, events, n, 2*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	pids, err := TaskPIDs(name)
	if err != nil || pids[victim] == 0 {
		t.Fatalf("task %d's pid not found (%v, %v)", victim, pids, err)
	}
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILLed task %d (pid %d)", victim, pids[victim])
	err = cmd.Wait()
	waited = true
	t.Logf("srun output:\n%s", out.String())
	return out.String(), err
}

// waitViews waits until the events file holds a first view from n
// distinct nodes.
func waitViews(ctx context.Context, path string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		seen := map[int]bool{}
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<16), 1<<20)
			for sc.Scan() {
				var line struct {
					Node int    `json:"node"`
					Type string `json:"type"`
				}
				if json.Unmarshal(sc.Bytes(), &line) == nil && line.Type == "member.ViewInstalled" {
					seen[line.Node] = true
				}
			}
			f.Close()
		}
		if len(seen) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v only %d of %d tasks installed a view", limit, len(seen), n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// jobName names a test's SLURM job uniquely on this machine.
func jobName(t *testing.T) string {
	return fmt.Sprintf("cohort-%s-%d", strings.ToLower(strings.TrimPrefix(t.Name(), "TestSrun")), os.Getpid())
}
