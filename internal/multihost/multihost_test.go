package multihost

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/netlab"
)

// cluster is a rig and the binaries its jobs run.
type cluster struct {
	*Rig
	bin string // cohort and nqueens
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func goBuild(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// start builds cohort and the N-Queens example and starts a rig of k
// daemons (P = 3) with that cohort; it skips the test without root.
func start(t *testing.T, k int) *cluster {
	t.Helper()
	if err := netlab.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	c := &cluster{bin: t.TempDir()}
	goBuild(t, filepath.Join(c.bin, "cohort"), "./cmd/cohort")
	goBuild(t, filepath.Join(c.bin, "nqueens"), "./examples/nqueens")
	rig, err := Start(context.Background(), k, 3, filepath.Join(c.bin, "cohort"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rig.Close(); err != nil {
			t.Error(err)
		}
	})
	c.Rig = rig
	return c
}

// job is a `cohort run --hosts` in progress.
type job struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuf
	placed         chan struct{}
	scanned        chan struct{} // closed when all of stderr was read
}

func (c *cluster) run(t *testing.T, ctx context.Context, n int, alloc string, args ...string) *job {
	t.Helper()
	return c.runWith(t, ctx, []string{"-n", strconv.Itoa(n), "--alloc", alloc}, args...)
}

// runWith runs the N-Queens with cohort run's flags and the program's args.
func (c *cluster) runWith(t *testing.T, ctx context.Context, flags []string, args ...string) *job {
	t.Helper()
	all := append([]string{"run", "--prefix", "--hosts", "supernode:" + c.Supernode}, flags...)
	all = append(all, "--name", Submitter, "--ca", c.CAFile(), "--certs", c.Dir, filepath.Join(c.bin, "nqueens"), "--")
	all = append(all, args...)
	j := &job{cmd: exec.CommandContext(ctx, filepath.Join(c.bin, "cohort"), all...), stdout: &syncBuf{}, placed: make(chan struct{}), scanned: make(chan struct{})}
	j.cmd.Stdout = j.stdout
	pr, pw, _ := os.Pipe()
	j.cmd.Stderr = pw
	j.stderr = &syncBuf{}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(j.stderr, sc.Text())
			if strings.HasPrefix(sc.Text(), "cohort run: placement") {
				once.Do(func() { close(j.placed) })
			}
		}
		pr.Close()
		close(j.scanned)
	}()
	return j
}

// placement waits until the submitter printed its placement and returns
// it (see placement).
func (j *job) placement(t *testing.T, ctx context.Context) ([]string, map[string]int) {
	t.Helper()
	select {
	case <-j.placed:
	case <-ctx.Done():
		t.Fatalf("no placement:\n%s", j.stderr.String())
	}
	return placement(t, j.stderr.String())
}

// wait waits for the command and for the last of its standard error to be
// read (the command's exit does not wait for the reader of the pipe).
func (j *job) wait() error {
	err := j.cmd.Wait()
	<-j.scanned
	return err
}

var (
	hostRE  = regexp.MustCompile(`(?m)^cohort run: host (d\d+) \(`)
	placeRE = regexp.MustCompile(`(?m)^cohort run: placement \((\w+)\): (.*)$`)
)

// placement returns the hosts in latency order, as the submitter printed
// them, and how many ranks it placed on each.
func placement(t *testing.T, stderr string) ([]string, map[string]int) {
	t.Helper()
	var ranked []string
	for _, m := range hostRE.FindAllStringSubmatch(stderr, -1) {
		ranked = append(ranked, m[1])
	}
	m := placeRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no placement line in:\n%s", stderr)
	}
	per := map[string]int{}
	for _, f := range strings.Fields(m[2]) {
		name, count, _ := strings.Cut(f, ":")
		per[name], _ = strconv.Atoi(count)
	}
	return ranked, per
}

// The rules of P2P-MPI §3.2 on 5 hosts of capacity 3 and 12 ranks, in the
// latency order the submitter measured: spread puts 3,3,2,2,2 (as few per
// host as possible, the closest hosts first); concentrate 3,3,3,3,0 (fill
// the closest first).
func checkRule(t *testing.T, alloc string, ranked []string, per map[string]int) {
	t.Helper()
	want := map[string][]int{"spread": {3, 3, 2, 2, 2}, "concentrate": {3, 3, 3, 3, 0}}[alloc]
	var got []int
	for _, h := range ranked {
		got = append(got, per[h])
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: ranks per host in latency order %v = %v, want %v", alloc, ranked, got, want)
	}
}

// TestJobsOnFiveHosts: a supernode and 5 daemon hosts (network
// namespaces); a 12-process FT N-Queens job with --alloc spread and one
// with --alloc concentrate, each placement checked against the rules and
// each count exact; then a job whose farthest host is cut off mid-run: the
// survivors learn of each of its ranks' failure in the same view, the
// count is still exact, and cohort run names the ranks lost with the host.
func TestJobsOnFiveHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a lab of 6 hosts and runs three jobs")
	}
	c := start(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	for _, alloc := range []string{"spread", "concentrate"} {
		j := c.run(t, ctx, 12, alloc, "-n", "13")
		err := j.wait()
		out, errs := j.stdout.String(), j.stderr.String()
		if err != nil || !strings.Contains(out, "73712 solutions") || !strings.Contains(out, "CORRECT") {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", alloc, err, out, errs)
		}
		ranked, per := placement(t, errs)
		checkRule(t, alloc, ranked, per)
		t.Logf("%s: hosts by latency %v, ranks per host %v: %s", alloc, ranked, per, strings.TrimSpace(regexp.MustCompile(`nqueens n=13.*`).FindString(out)))
	}

	// The cut: the farthest host of a spread job (2 ranks).
	j := c.run(t, ctx, 12, "spread", "-n", "16", "-v", "-seed", "7")
	select {
	case <-j.placed:
	case <-ctx.Done():
		t.Fatalf("no placement:\n%s", j.stderr.String())
	}
	ranked, per := j.placement(t, ctx)
	victim := ranked[len(ranked)-1]
	var host *netlab.Host
	for i, h := range c.Daemons {
		if DaemonName(i) == victim {
			host = h
		}
	}
	// Once the ranks run (their first view takes well under a second),
	// cut the host's link.
	time.Sleep(2 * time.Second)
	if err := c.Lab.Cut(host); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut %s (%d ranks) off", victim, per[victim])
	err := j.wait()
	out, errs := j.stdout.String(), j.stderr.String()
	t.Logf("stdout:\n%s\nstderr (tail):\n%s", out, tail(errs, 40))
	if err == nil {
		t.Fatal("cohort run exited 0 although a host was lost")
	}
	if !strings.Contains(out, "14772512 solutions") || !strings.Contains(out, "CORRECT") {
		t.Fatal("no exact count (14772512 for n=16) after the cut")
	}
	lost := regexp.MustCompile(`rank (\d+) \(lost with host `+victim+`\)`).FindAllStringSubmatch(errs, -1)
	if len(lost) != per[victim] {
		t.Fatalf("cohort run names %d ranks lost with %s, want %d", len(lost), victim, per[victim])
	}
	// Every survivor learned of each lost rank's failure, in the same view.
	learned := regexp.MustCompile(`rank (\d+): learned that rank (\d+) failed \(view (\d+)\)`).FindAllStringSubmatch(errs, -1)
	views := map[string]map[string]string{} // lost rank → survivor → view
	for _, m := range learned {
		if views[m[2]] == nil {
			views[m[2]] = map[string]string{}
		}
		views[m[2]][m[1]] = m[3]
	}
	for _, l := range lost {
		r := l[1]
		if len(views[r]) != 12-per[victim] {
			t.Errorf("%d survivors learned of rank %s's failure, want %d", len(views[r]), r, 12-per[victim])
		}
		epochs := map[string]bool{}
		for _, v := range views[r] {
			epochs[v] = true
		}
		if len(epochs) > 1 {
			t.Errorf("the survivors learned of rank %s's failure in different views: %v", r, views[r])
		}
	}
}

// TestReplicasOnThreeHosts: 3 ranks × 2 replicas on 3 hosts: the
// placement never puts two replicas of a rank on one host, and when a
// host is cut off mid-run every rank lives on through its other replica:
// the job exits 0 with the exact count, and cohort run reports the
// replicas lost. Then 2 ranks × 3 replicas on the 2 hosts left: the job
// runs, and cohort run says that replicas share a host.
func TestReplicasOnThreeHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a lab of 4 hosts and runs two jobs")
	}
	c := start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	j := c.runWith(t, ctx, []string{"-n", "3", "-r", "2", "--alloc", "spread", "--detector", "heartbeat"}, "-n", "16", "-seed", "5")
	_, per := j.placement(t, ctx)
	if len(per) != 3 {
		t.Fatalf("6 processes on %d hosts, want 3 (2 each): %v", len(per), per)
	}
	if strings.Contains(j.stderr.String(), "too few hosts") {
		t.Fatalf("replicas share a host although 3 hosts were free:\n%s", j.stderr.String())
	}
	time.Sleep(2 * time.Second)
	victim := c.Daemons[1]
	if err := c.Lab.Cut(victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut %s (%d processes) off", DaemonName(1), per[DaemonName(1)])
	err := j.wait()
	out, errs := j.stdout.String(), j.stderr.String()
	t.Logf("stdout:\n%s\nstderr (tail):\n%s", out, tail(errs, 20))
	if err != nil || !strings.Contains(out, "14772512 solutions") || !strings.Contains(out, "CORRECT") {
		t.Fatalf("a host lost, every rank with a replica elsewhere: %v", err)
	}
	if n := strings.Count(out, "CORRECT"); n != 1 {
		t.Errorf("the result line is printed %d times, want once (the replicas' copies are merged)", n)
	}
	if lost := regexp.MustCompile(`replica \d of rank \d lost \(lost with host d2\); the rank lived on`).FindAllString(errs, -1); len(lost) != per[DaemonName(1)] {
		t.Errorf("cohort run reports %d replicas lost with d2, want %d", len(lost), per[DaemonName(1)])
	}

	// Too few hosts (d2 is still cut off): 2 ranks × 3 replicas on the two
	// others (3 slots each).
	j = c.runWith(t, ctx, []string{"-n", "2", "-r", "3", "--alloc", "concentrate"}, "-n", "10")
	if err := j.wait(); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, j.stderr.String())
	}
	if !strings.Contains(j.stderr.String(), "too few hosts to keep the replicas of every rank apart") {
		t.Errorf("no word of replicas sharing a host:\n%s", j.stderr.String())
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
