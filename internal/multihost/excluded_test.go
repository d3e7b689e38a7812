package multihost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/daemon"
)

// TestExcludedRankStoppedOnHosts: `cohort run --hosts` of 4 ranks on 2
// hosts whose last rank stops itself (SIGSTOP) once the job has started
// (internal/cli/testdata/stopped). The others' detectors exclude it; they
// finalize, report the exclusion and exit with status 0, leaving nobody
// to tell it. Once they have ended the test runs it again (SIGCONT): the
// submitter has it stopped by its daemon, names it as excluded and
// stopped, and exits with status 1. Without the stop the run lasted until
// its timeout.
func TestExcludedRankStoppedOnHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a lab of 3 hosts and runs a job")
	}
	c := start(t, 2)
	goBuild(t, filepath.Join(c.bin, "stopped"), "./internal/cli/testdata/stopped")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The paper's heartbeat (5 s timings): on a loaded machine the
	// default's sub-second timings may exclude a live rank too, and this
	// test is about the one stopped.
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "cohort"), "run", "--prefix", "--hosts", "supernode:"+c.Supernode,
		"-n", "4", "--alloc", "spread", "--detector", "heartbeat-paper", "--timeout", "3m",
		"--name", Submitter, "--ca", c.CAFile(), "--certs", c.Dir, filepath.Join(c.bin, "stopped"))
	stdout, stderr := &syncBuf{}, &syncBuf{}
	cmd.Stderr = stderr
	pr, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The survivors' lines, "[r] rank r: rank 3 excluded", come after
	// their Finalize: once the third is read they have ended or are
	// about to.
	survivors := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		n := 0
		for sc.Scan() {
			fmt.Fprintln(stdout, sc.Text())
			if strings.HasSuffix(sc.Text(), ": rank 3 excluded") {
				if n++; n == 3 {
					close(survivors)
				}
			}
		}
	}()
	select {
	case <-survivors:
		if pid, host := runningPid(ctx, c.Rig, 3); pid > 0 {
			if err := syscall.Kill(pid, syscall.SIGCONT); err == nil {
				t.Logf("rank 3 (pid %d on %s) runs again", pid, host)
			}
		} else {
			t.Log("rank 3 had been stopped before the test could run it again")
		}
	case <-scanned:
	case <-ctx.Done():
	}
	<-scanned
	err = cmd.Wait()
	out, errs := stdout.String(), stderr.String()
	t.Logf("stdout:\n%s\nstderr (tail):\n%s", out, tail(errs, 20))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("cohort run: %v, want exit status 1", err)
	}
	if n := len(regexp.MustCompile(`(?m)^\[[012]\] rank [012]: rank 3 excluded$`).FindAllString(out, -1)); n != 3 {
		t.Fatalf("%d survivors say rank 3 was excluded, want 3", n)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^cohort run: stopping rank 3 on d\d: the others excluded it from the job`),
		regexp.MustCompile(`(?m)^cohort run: 1 of 4: rank 3 \(excluded from the job by the others, stopped by the launcher once they had ended \(SIG(TERM|KILL) on d\d\)\)$`),
	} {
		if !want.MatchString(errs) {
			t.Errorf("stderr lacks %v", want)
		}
	}
	if strings.Contains(errs, "deadline exceeded") || strings.Contains(errs, "timed out") {
		t.Error("the run timed out")
	}
}

// runningPid asks the rig's daemons where process p of the job (the only
// one running) runs: its pid and daemon, 0 if it runs nowhere.
func runningPid(ctx context.Context, rig *Rig, p int) (int, string) {
	for i := range rig.Daemons {
		cl := daemon.NewClient(rig.Creds, DaemonName(i), rig.DaemonAddr(i))
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		jobs, err := cl.PS(qctx)
		cancel()
		cl.Close()
		if err != nil {
			continue
		}
		for _, jb := range jobs {
			for _, r := range jb.Ranks {
				if r.Rank == p && r.Running {
					return r.PID, DaemonName(i)
				}
			}
		}
	}
	return 0, ""
}
