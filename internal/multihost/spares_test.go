package multihost

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/netlab"
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
	all := []string{"run", "--prefix", "--hosts", "supernode:" + c.Supernode, "-n", fmt.Sprint(n), "--spares", fmt.Sprint(spares),
		"--alloc", "spread", "--detector", "heartbeat-paper", "--name", Submitter, "--ca", c.CAFile(), "--certs", c.Dir, filepath.Join(c.bin, "jacobi"), "--"}
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
