package multihost

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/netlab"
	"github.com/cohort-mp/cohort/p2p/daemon"
)

// stencilJob is a `cohort run --hosts --spares` of the Jacobi stencil in
// progress; cue is closed at the first line of its output (stdout or
// stderr) that matches the regular expression it was started with.
type stencilJob struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuf
	cue            chan struct{}
	scanned        sync.WaitGroup
}

// runStencil runs the stencil on the rig: -n n --spares spares, spread,
// the stencil's args after the program. The detector is the Phoenix
// paper's heartbeat (5 s timings): on a machine shared with other jobs
// the default's sub-second timings exclude live processes now and then
// (the survivors then fail with "no spare process is left", never with a
// wrong checksum), and this test is about the takeover, not the speed of
// detection.
func runStencil(t *testing.T, ctx context.Context, c *cluster, n, spares int, cue string, args ...string) *stencilJob {
	t.Helper()
	return runStencilWith(t, ctx, c, []string{"-n", fmt.Sprint(n), "--spares", fmt.Sprint(spares)}, cue, args...)
}

// runStencilWith is runStencil with cohort run's flags (-n, --spares and
// any others) given.
func runStencilWith(t *testing.T, ctx context.Context, c *cluster, flags []string, cue string, args ...string) *stencilJob {
	t.Helper()
	all := append([]string{"run", "--prefix", "--hosts", "supernode:" + c.Supernode}, flags...)
	all = append(all, "--alloc", "spread", "--detector", "heartbeat-paper", "--name", Submitter, "--ca", c.CAFile(), "--certs", c.Dir, filepath.Join(c.bin, "jacobi"), "--")
	j := &stencilJob{cmd: exec.CommandContext(ctx, filepath.Join(c.bin, "cohort"), append(all, args...)...),
		stdout: &syncBuf{}, stderr: &syncBuf{}, cue: make(chan struct{})}
	re := regexp.MustCompile(cue)
	var once sync.Once
	scan := func(r io.ReadCloser, into *syncBuf) {
		defer j.scanned.Done()
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			fmt.Fprintln(into, sc.Text())
			if re.MatchString(sc.Text()) {
				once.Do(func() { close(j.cue) })
			}
		}
	}
	for _, p := range []struct {
		w    **os.File
		into *syncBuf
	}{{nil, j.stdout}, {nil, j.stderr}} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if p.into == j.stdout {
			j.cmd.Stdout = pw
		} else {
			j.cmd.Stderr = pw
		}
		defer pw.Close()
		j.scanned.Add(1)
		go scan(pr, p.into)
	}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return j
}

// wait waits for the command and the last of its output.
func (j *stencilJob) wait() error {
	err := j.cmd.Wait()
	j.scanned.Wait()
	return err
}

var (
	checksumRE = regexp.MustCompile(`checksum ([0-9a-f]{16})`)
	sparesRE   = regexp.MustCompile(`(?m)^cohort run: spares \(process@host\): (.*)$`)
)

// TestSparesTakeALostHostsRanks: 4 ranks and 2 spares of the Jacobi
// stencil spread on 3 hosts (one buddy per rank, placed off the rank's
// host): the host that holds two ranks and no spare is cut off after the
// first checkpoint committed; the spares on the two other hosts take its
// ranks, every rank goes back to the last committed epoch with the lost
// ranks' states fetched from their buddies, and the job ends with the
// checksum of the run without the cut, bit for bit.
func TestSparesTakeALostHostsRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a lab of 4 hosts and runs two jobs")
	}
	if err := netlab.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	c := &cluster{bin: t.TempDir()}
	goBuild(t, filepath.Join(c.bin, "cohort"), "./cmd/cohort")
	goBuild(t, filepath.Join(c.bin, "jacobi"), "./examples/jacobi")
	rig, err := Start(context.Background(), 3, 3, filepath.Join(c.bin, "cohort"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rig.Close(); err != nil {
			t.Error(err)
		}
	})
	c.Rig = rig
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Paced (10 ms between iterations, which changes no bit of the
	// result) so that the cut falls well before the end, and so that the
	// ranks leave the CPU to the detectors of a loaded machine.
	stencil := []string{"-size", "96", "-iters", "400", "-k", "40", "-v", "-pace", "10ms"}

	j := runStencil(t, ctx, c, 4, 2, `^$never`, stencil...)
	if err := j.wait(); err != nil {
		t.Fatalf("without a failure: %v\nstdout:\n%s\nstderr:\n%s", err, j.stdout, j.stderr)
	}
	m := checksumRE.FindStringSubmatch(j.stdout.String())
	if m == nil {
		t.Fatalf("no checksum without a failure:\n%s", j.stdout)
	}
	want := m[1]

	// The cut after the first checkpoint (iteration 40 of 400).
	j = runStencil(t, ctx, c, 4, 2, `jacobi: checkpoint committed at iteration 40$`, stencil...)
	select {
	case <-j.cue:
	case <-ctx.Done():
		t.Fatalf("no checkpoint committed:\nstdout:\n%s\nstderr:\n%s", j.stdout, j.stderr)
	}
	errs := j.stderr.String()
	_, per := placement(t, errs)
	sm := sparesRE.FindStringSubmatch(errs)
	if sm == nil {
		t.Fatalf("cohort run did not say where the spares went:\n%s", errs)
	}
	spareOn := map[string]bool{}
	for _, f := range strings.Fields(sm[1]) {
		_, h, _ := strings.Cut(f, "@")
		spareOn[h] = true
	}
	victim := -1
	for i := range c.Daemons {
		if name := DaemonName(i); per[name] > 0 && !spareOn[name] {
			victim = i
		}
	}
	if victim < 0 || len(spareOn) != 2 {
		t.Fatalf("want the spares on two hosts and a third with ranks only; placement %v, spares %s", per, sm[1])
	}
	if err := c.Lab.Cut(c.Daemons[victim]); err != nil {
		t.Fatal(err)
	}
	name := DaemonName(victim)
	t.Logf("cut %s (%d ranks) off after the first checkpoint; spares: %s", name, per[name], sm[1])
	err = j.wait()
	out, errs := j.stdout.String(), j.stderr.String()
	t.Logf("stdout:\n%s\nstderr (tail):\n%s", tail(out, 12), tail(errs, 12))
	if err != nil {
		t.Fatalf("a host lost with spares on the others: %v", err)
	}
	m = checksumRE.FindStringSubmatch(out)
	if m == nil || m[1] != want {
		t.Fatalf("checksum after the cut %v, want %s (the run without it)", m, want)
	}
	if took := regexp.MustCompile(`jacobi: process [45] took rank \d, resuming from checkpoint epoch \d+`).FindAllString(out, -1); len(took) != per[name] {
		t.Errorf("%d spares say they took a rank, want %d (the ranks of %s)", len(took), per[name], name)
	}
	if lost := regexp.MustCompile(`process \d lost \(lost with host `+name+`\); the job went on without it`).FindAllString(errs, -1); len(lost) != per[name] {
		t.Errorf("cohort run reports %d processes lost with %s, want %d", len(lost), name, per[name])
	}
}

// respawnRig builds cohort and the stencil and starts a rig of 3 daemons
// of 3 slots. The program submitted is a script that names an events
// file and runs the stencil (cohort run --hosts passes none of the
// submitter's environment on): the test learns from the file when the
// survivors admitted a process started again. The job's uids read and
// run what is in the directory, and append to the file.
func respawnRig(t *testing.T) (*cluster, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a lab of 4 hosts and runs jobs on it")
	}
	if err := netlab.Available(); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	dir, err := os.MkdirTemp("", "cohort-rig-respawn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cluster{bin: dir}
	goBuild(t, filepath.Join(dir, "cohort"), "./cmd/cohort")
	goBuild(t, filepath.Join(dir, "jacobi.bin"), "./examples/jacobi")
	evFile := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(evFile, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(evFile, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nCOHORT_EVENTS=%s exec %s \"$@\"\n", evFile, filepath.Join(dir, "jacobi.bin"))
	if err := os.WriteFile(filepath.Join(dir, "jacobi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rig, err := Start(context.Background(), 3, 3, filepath.Join(c.bin, "cohort"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rig.Close(); err != nil {
			t.Error(err)
		}
	})
	c.Rig = rig
	return c, evFile
}

// respawnStencil is the stencil's run in the respawn tests: paced (which
// changes no bit of the result) so that the faults, and the admissions
// between them, fall well before the end on a loaded machine.
var respawnStencil = []string{"-size", "96", "-iters", "3000", "-k", "40", "-v", "-pace", "15ms"}

// failureFree runs the stencil with flags and no fault, and returns its
// checksum; it fails the test if the run started a process again.
func failureFree(t *testing.T, ctx context.Context, c *cluster, flags []string) string {
	t.Helper()
	j := runStencilWith(t, ctx, c, flags, `^$never`, respawnStencil...)
	if err := j.wait(); err != nil {
		t.Fatalf("without a failure: %v\nstdout:\n%s\nstderr:\n%s", err, j.stdout, j.stderr)
	}
	m := checksumRE.FindStringSubmatch(j.stdout.String())
	if m == nil {
		t.Fatalf("no checksum without a failure:\n%s", j.stdout)
	}
	if strings.Contains(j.stderr.String(), "started it again") {
		t.Fatalf("a restart without a fault:\n%s", j.stderr)
	}
	return m[1]
}

// respawnJob is a run of the stencil on the respawn rig, past its first
// checkpoint.
type respawnJob struct {
	*stencilJob
	exited chan error // cohort run's end
	evFile string
}

// startRespawnJob runs the stencil with flags and returns once its first
// checkpoint committed.
func startRespawnJob(t *testing.T, ctx context.Context, c *cluster, evFile string, flags []string) *respawnJob {
	t.Helper()
	if err := os.Truncate(evFile, 0); err != nil {
		t.Fatal(err)
	}
	j := &respawnJob{stencilJob: runStencilWith(t, ctx, c, flags, `jacobi: checkpoint committed at iteration 40$`, respawnStencil...),
		exited: make(chan error, 1), evFile: evFile}
	go func() { j.exited <- j.wait() }()
	select {
	case <-j.cue:
	case err := <-j.exited:
		t.Fatalf("the job ended before its first checkpoint (%v):\nstdout:\n%s\nstderr:\n%s", err, j.stdout, j.stderr)
	case <-ctx.Done():
		t.Fatalf("no checkpoint committed:\nstdout:\n%s\nstderr:\n%s", j.stdout, j.stderr)
	}
	return j
}

// until waits until cond holds, or fails the test saying what never
// happened if the job ends or ctx does first.
func (j *respawnJob) until(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case err := <-j.exited:
			t.Fatalf("the job ended (%v) before %s:\nstdout:\n%s\nstderr:\n%s", err, what, j.stdout, j.stderr)
		case <-ctx.Done():
			t.Fatalf("never %s:\nstdout:\n%s\nstderr:\n%s", what, j.stdout, j.stderr)
		}
	}
}

// says waits until out holds a line matching re.
func (j *respawnJob) says(t *testing.T, ctx context.Context, out *syncBuf, re string) {
	t.Helper()
	rx := regexp.MustCompile(`(?m)` + re)
	j.until(t, ctx, "a line matching "+re, func() bool { return rx.MatchString(out.String()) })
}

// admitted waits until every one of procs installed a view holding each
// of newcomers.
func (j *respawnJob) admitted(t *testing.T, ctx context.Context, newcomers, procs []int) {
	t.Helper()
	j.until(t, ctx, fmt.Sprintf("processes %v admitted processes %v", procs, newcomers), func() bool {
		for _, p := range newcomers {
			if !admitted(j.evFile, p, procs) {
				return false
			}
		}
		return true
	})
}

// end waits for cohort run and checks that it succeeded with the
// checksum want.
func (j *respawnJob) end(t *testing.T, ctx context.Context, want string) (stdout, stderr string) {
	t.Helper()
	var err error
	select {
	case err = <-j.exited:
	case <-ctx.Done():
		t.Fatalf("the job did not end:\nstderr:\n%s", j.stderr)
	}
	out, errs := j.stdout.String(), j.stderr.String()
	t.Logf("stdout (tail):\n%s\nstderr (tail):\n%s", tail(out, 6), tail(errs, 16))
	if err != nil {
		t.Fatalf("cohort run: %v\nstderr:\n%s", err, errs)
	}
	if m := checksumRE.FindStringSubmatch(out); m == nil || m[1] != want {
		t.Fatalf("checksum %v, want %s (the run without faults)", m, want)
	}
	return out, errs
}

// TestRespawnOnHosts: the Jacobi stencil, 4 ranks, on 3 hosts with
// --respawn, after its first checkpoint.
//
// Kills: with a spare, a process of the start that shares its host is
// killed: the spare takes its rank, and the submitter asks that host's
// daemon to start it again, as process 5, which joins the running job.
// Once every survivor's membership admitted process 5, a second process
// of the start is killed: process 5 takes its rank (that one comes back
// too, as process 6, which the job never needs).
//
// A host's loss: with two spares, the host that holds two ranks and no
// spare is cut off: the spares take its ranks, and its two processes
// start again on the two other hosts, one each (the free slot of each),
// as processes 6 and 7. Once every survivor admitted both, a process of
// the start is killed, and one of them takes its rank.
//
// Each job ends with the checksum of the run without faults, bit for bit.
func TestRespawnOnHosts(t *testing.T) {
	c, evFile := respawnRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	want := failureFree(t, ctx, c, []string{"-n", "4", "--spares", "1", "--respawn"})

	t.Run("kills", func(t *testing.T) {
		j := startRespawnJob(t, ctx, c, evFile, []string{"-n", "4", "--spares", "1", "--respawn"})
		where := processHosts(t, ctx, c.Rig, 5)
		// The first victim shares its host, whose daemon's stream then
		// runs on: the process comes back there.
		first, second := -1, -1
		for p := range 4 {
			for q := range 5 {
				if q != p && where[q].name == where[p].name && first < 0 {
					first = p
				}
			}
		}
		for p := range 4 {
			if p != first && second < 0 {
				second = p
			}
		}
		if first < 0 {
			t.Fatalf("no process of a rank shares a host: %v", where)
		}
		t.Logf("processes on hosts %v; killing process %d on %s, then process %d", where, first, where[first].name, second)
		where[first].kill(t)
		j.says(t, ctx, j.stdout, fmt.Sprintf(`^\[4\] jacobi: process 4 took rank %d, `, first))
		j.says(t, ctx, j.stderr, fmt.Sprintf(`^cohort run: process %d ended \(killed by SIGKILL on %s\); started it again as process 5 on %s, which joins the job as a spare$`,
			first, where[first].name, where[first].name))
		var survivors []int
		for p := range 5 {
			if p != first {
				survivors = append(survivors, p)
			}
		}
		j.admitted(t, ctx, []int{5}, survivors)
		where[second].kill(t)
		j.says(t, ctx, j.stdout, fmt.Sprintf(`^\[5\] jacobi: process 5 took rank %d, `, second))
		_, errs := j.end(t, ctx, want)
		if !strings.Contains(errs, fmt.Sprintf("cohort run: process %d ended (killed by SIGKILL on %s); started it again as process 6 on ", second, where[second].name)) {
			t.Errorf("cohort run did not say it started process %d again as process 6:\n%s", second, errs)
		}
	})

	t.Run("host lost", func(t *testing.T) {
		j := startRespawnJob(t, ctx, c, evFile, []string{"-n", "4", "--spares", "2", "--respawn"})
		where := processHosts(t, ctx, c.Rig, 6)
		on := map[string][]int{}
		for p := range 6 {
			on[where[p].name] = append(on[where[p].name], p)
		}
		victim := ""
		for name, ps := range on {
			if len(ps) == 2 && ps[1] < 4 {
				victim = name
			}
		}
		if victim == "" {
			t.Fatalf("no host holds two ranks and no spare: %v", on)
		}
		lost := on[victim]
		var survivors []int
		for p := range 6 {
			if where[p].name != victim {
				survivors = append(survivors, p)
			}
		}
		i := 0
		for DaemonName(i) != victim {
			i++
		}
		if err := c.Lab.Cut(c.Daemons[i]); err != nil {
			t.Fatal(err)
		}
		t.Logf("cut %s (processes %v) off after the first checkpoint; the others: %v", victim, lost, on)
		started := regexp.MustCompile(`(?m)^cohort run: process (\d) lost with host ` + victim + `; started it again as process ([67]) on (d\d), which joins the job as a spare$`)
		j.until(t, ctx, "both processes of "+victim+" started again", func() bool { return len(started.FindAllString(j.stderr.String(), -1)) == 2 })
		hosts := map[string]bool{}
		for _, m := range started.FindAllStringSubmatch(j.stderr.String(), -1) {
			hosts[m[3]] = true
		}
		if len(hosts) != 2 || hosts[victim] {
			t.Errorf("the processes of %s started again on %v, want one on each other host", victim, hosts)
		}
		j.admitted(t, ctx, []int{6, 7}, survivors)
		killed := survivors[0] // a process of a rank: the spares are last
		where[killed].kill(t)
		j.says(t, ctx, j.stdout, fmt.Sprintf(`^\[[67]\] jacobi: process [67] took rank %d, `, killed))
		out, _ := j.end(t, ctx, want)
		if took := regexp.MustCompile(`jacobi: process [45] took rank \d, `).FindAllString(out, -1); len(took) != 2 {
			t.Errorf("%d spares say they took a rank, want 2 (the ranks of %s)", len(took), victim)
		}
	})
}

// rigProcess is a process of the job on the rig: its host and pid.
type rigProcess struct {
	name string // the daemon's
	pid  int
}

func (p rigProcess) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing pid %d on %s: %v", p.pid, p.name, err)
	}
}

// processHosts asks every daemon of the rig for the job's processes (the
// only job running): where each runs, by process number.
func processHosts(t *testing.T, ctx context.Context, rig *Rig, procs int) map[int]rigProcess {
	t.Helper()
	out := map[int]rigProcess{}
	for i := range rig.Daemons {
		cl := daemon.NewClient(rig.Creds, DaemonName(i), rig.DaemonAddr(i))
		jobs, err := cl.PS(ctx)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, jb := range jobs {
			for _, p := range jb.Ranks {
				if p.Running {
					out[p.Rank] = rigProcess{name: DaemonName(i), pid: p.PID}
				}
			}
		}
	}
	if len(out) != procs {
		t.Fatalf("the daemons run processes %v, want 0 to %d", out, procs-1)
	}
	return out
}

// admitted reports whether the events file holds, for each of procs, a
// view it installed that holds process p.
func admitted(evFile string, p int, procs []int) bool {
	data, err := os.ReadFile(evFile)
	if err != nil {
		return false
	}
	seen := map[int]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		var ev struct {
			Node   int    `json:"node"`
			Type   string `json:"type"`
			Fields struct {
				Members []int
			} `json:"fields"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil || !strings.HasSuffix(ev.Type, ".ViewInstalled") {
			continue
		}
		if slices.Contains(ev.Fields.Members, p) {
			seen[ev.Node] = true
		}
	}
	for _, q := range procs {
		if !seen[q] {
			return false
		}
	}
	return true
}
