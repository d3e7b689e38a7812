package submit_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/place"
	"github.com/cohort-mp/cohort/p2p/submit"
)

// A process of a job on peers stopped (SIGSTOP) for good is excluded by
// the others, which report it as they end and exit with status 0; nobody
// is left to tell it. The submitter then asks its daemon to stop it: a
// stopped process ignores SIGTERM, so the grace period's SIGKILL ends it,
// and the job fails naming it excluded. Without the stop the job ran
// until its context ended.
func TestRunStopsExcludedProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the ranks see that a process is stopped in /proc")
	}
	c := newCluster(t, 2)
	rank := filepath.Join(c.dir, "rank")
	build := exec.Command("go", "build", "-o", rank, "./launch/testdata/rank")
	build.Dir = "../.."
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	var out, log lockedBuf
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := submit.Run(ctx, submit.Config{N: 3, Strategy: place.Spread, Supernodes: []string{c.sn}, Creds: c.alice,
		Program: rank, Args: []string{"-excluded", "2", "-stop-rank", "2", "-stop-file", filepath.Join(c.dir, "stopped")},
		Stdout: &out, Log: func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }, RendezvousTimeout: 30 * time.Second})
	if ctx.Err() != nil {
		t.Fatalf("the job ran until its context ended: %v\n%s", err, log.String())
	}
	if !errors.Is(err, submit.ErrFailed) || !strings.Contains(err.Error(), "1 of 3: rank 2 (excluded from the job by the others, stopped by the launcher once they had ended (SIGKILL on d") {
		t.Fatalf("got %v, want rank 2 failed as excluded and stopped\n%s", err, log.String())
	}
	if x := res.Exits[2]; !x.Excluded || !x.Stopped || x.Signal != "SIGKILL" {
		t.Errorf("rank 2's exit %+v: want excluded, stopped by SIGKILL", x)
	}
	for _, x := range res.Exits[:2] {
		if !x.OK() || x.Excluded {
			t.Errorf("exit %+v", x)
		}
	}
	if !strings.Contains(log.String(), "stopping rank 2 on "+res.Exits[2].Host+": the others excluded it from the job") {
		t.Errorf("the log does not say that rank 2 is stopped:\n%s", log.String())
	}
}
