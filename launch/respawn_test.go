package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// notices collects a job's Config.Notices for a test to wait on.
type notices chan string

func (n notices) add(line string) { n <- line }

// await returns the next notice, which must contain want.
func (n notices) await(t *testing.T, want string) {
	t.Helper()
	select {
	case line := <-n:
		if !strings.Contains(line, want) {
			t.Fatalf("notice %q, want one saying %q", line, want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no notice saying %q", want)
	}
}

// startHeld starts a job of the rank program whose processes wait for
// the launcher's end, and waits for its rendezvous.
func startHeld(t *testing.T, cfg Config) (*Job, notices) {
	t.Helper()
	n := make(notices, 16)
	cfg.Notices, cfg.Args = n.add, []string{"-hold"}
	var errs syncBuffer
	cfg.Stderr = &errs
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr:\n%s", errs.String())
		}
	})
	if cfg.Program == "" {
		cfg.Program = rankProgram
	}
	job, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Stop(nil); job.Wait() })
	if _, err := job.Addrs(context.Background()); err != nil {
		t.Fatal(err)
	}
	return job, n
}

// A killed process comes back as the next number, registers late at the
// rendezvous, and counts against the process it replaces: killed again,
// it is not started a second time with Respawn 1.
func TestJobRespawn(t *testing.T) {
	job, n := startHeld(t, Config{N: 2, Spares: 1, Respawn: 1})
	if err := job.Kill(0); err != nil {
		t.Fatal(err)
	}
	n.await(t, "process 0 ended (killed by the launcher's crash injection (SIGKILL)); started it again as process 3")
	waitFor(t, job.rz, "process 3's registration", func() bool { return len(job.rz.Joined()) == 1 })
	if err := job.Kill(3); err != nil {
		t.Fatal(err)
	}
	n.await(t, "process 3 (process 0 started again) ended (killed by the launcher's crash injection (SIGKILL)); not starting it again: process 0 was started again 1 time(s), the limit")
	job.Stop(nil)
	exits, _ := job.Wait()
	if len(exits) != 4 || job.Restarts() != 1 {
		t.Fatalf("%d exits, %d restarts; want 4, 1", len(exits), job.Restarts())
	}
	if x := exits[3]; x.Of != 0 || !x.Registered || !x.Killed {
		t.Errorf("process 3: of %d, registered %v, killed %v; want of 0, registered, killed", x.Of, x.Registered, x.Killed)
	}
}

// A restart that cannot start (the program is gone) is reported, and the
// job goes on without it.
func TestJobRespawnFailsToStart(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "rank")
	data, err := os.ReadFile(rankProgram)
	if err == nil {
		err = os.WriteFile(prog, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	job, n := startHeld(t, Config{N: 2, Spares: 1, Respawn: 2, Program: prog})
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	if err := job.Kill(1); err != nil {
		t.Fatal(err)
	}
	n.await(t, "process 1 ended (killed by the launcher's crash injection (SIGKILL)); starting it again as process 3 failed: ")
	if err := job.Kill(2); err != nil { // the job still runs, and still tries
		t.Fatal(err)
	}
	n.await(t, "process 2 ended (killed by the launcher's crash injection (SIGKILL)); starting it again as process 3 failed: ")
	job.Stop(nil)
	exits, _ := job.Wait()
	if len(exits) != 3 || job.Restarts() != 0 {
		t.Errorf("%d exits, %d restarts; want 3, 0", len(exits), job.Restarts())
	}
}

// Restarts need spares, and a count from 0.
func TestJobRespawnConfig(t *testing.T) {
	for _, cfg := range []Config{{N: 2, Respawn: 1, Program: "x"}, {N: 2, Spares: 1, Respawn: -1, Program: "x"}} {
		if err := cfg.check(); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// Restarts still running once every process of the start has ended are
// stopped as idle, and their exits do not fail the job: only the killed
// processes do.
func TestJobRespawnIdleStopped(t *testing.T) {
	defer func(d time.Duration) { idleNewcomerWait = d }(idleNewcomerWait)
	idleNewcomerWait = 50 * time.Millisecond
	job, n := startHeld(t, Config{N: 1, Spares: 1, Respawn: 1})
	for _, p := range []int{0, 1} {
		if err := job.Kill(p); err != nil {
			t.Fatal(err)
		}
		n.await(t, fmt.Sprintf("process %d ended (killed by the launcher's crash injection (SIGKILL)); started it again as process %d", p, p+2))
	}
	for range 2 {
		n.await(t, "every process of the job's start has ended, and the job never needed it")
	}
	exits, err := job.Wait()
	var fe *FailedError
	if !errors.As(err, &fe) || !slices.Equal(fe.Ranks(), []int{0, 1}) {
		t.Fatalf("job: %v, want processes 0 and 1 failed", err)
	}
	for _, x := range exits[2:] {
		if !x.Idle || !x.Stopped {
			t.Errorf("process %d: idle %v, stopped %v (%s); want both", x.Rank, x.Idle, x.Stopped, x.How())
		}
	}
}
