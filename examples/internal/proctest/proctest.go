// Package proctest runs an example program as a job of real processes over
// TCP from its own tests, without building it first: the test binary is the
// program. A test package does
//
//	func TestMain(m *testing.M) { proctest.Main(m, "EP_TEST_RANK", run) }
//
// where run is the program's func(args, stdout, stderr) int, and a test
//
//	res := proctest.Launch(t, "EP_TEST_RANK", 4, nil, "-class", "S")
//
// starts 4 ranks (package launch) running run with those arguments and
// returns their output and exits.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

// Main runs the program instead of the tests when the environment variable
// env is "1" (a rank started by Launch), else the tests.
func Main(m *testing.M, env string, run func(args []string, stdout, stderr io.Writer) int) {
	if os.Getenv(env) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// Result is what a job did.
type Result struct {
	Stdout, Stderr string // every rank's lines, prefixed "[rank] "
	Exits          []launch.Exit
	Err            error // the launcher's verdict (nil: every rank exited 0)
}

// Launch runs an n-rank job of this test binary as the program (see Main),
// with the crashes kills, and waits for it (at most 2 minutes).
func Launch(t testing.TB, env string, n int, kills []launch.Kill, args ...string) Result {
	t.Helper()
	return LaunchSpares(t, env, n, 0, kills, args...)
}

// LaunchSpares is Launch with spares spare processes beside the n ranks
// (launch.Config.Spares); kills and exits name processes.
func LaunchSpares(t testing.TB, env string, n, spares int, kills []launch.Kill, args ...string) Result {
	t.Helper()
	return Run(t, env, launch.Config{N: n, Spares: spares, Kills: kills}, nil, args...)
}

// Running is what Run hands a test while the job runs.
type Running struct {
	Job    *launch.Job
	Events string // the directory of the ranks' event streams (launch.EventsPath)
	stdout *syncBuffer
}

// WaitStdout waits until the ranks' output (prefixed as Result.Stdout)
// holds s, for at most a minute: a test kills on what the job said, not
// at a time that a loaded machine may reach before the job said it.
func (r *Running) WaitStdout(s string) error {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		out, grown := r.stdout.snapshot()
		if strings.Contains(out, s) {
			return nil
		}
		select {
		case <-grown:
		case <-deadline.C:
			return fmt.Errorf("proctest: no output %q within a minute", s)
		}
	}
}

// Run is Launch with the job's settings in cfg (its N, Spares, Kills,
// Respawn and Notices; the rest is Launch's), calling during, if not
// nil, with the running job: a test drives the job from there (kills
// timed on the ranks' events or output), and Run waits for the job's end
// after.
func Run(t testing.TB, env string, cfg launch.Config, during func(r *Running), args ...string) Result {
	t.Helper()
	n, spares := cfg.N, cfg.Spares
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events := t.TempDir()
	restarts := 0 // the job's, once it ends
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("membership and failure events of each rank (from %s):\n%s", events, eventDigest(events, n+spares+restarts))
		}
	})
	cfg.Program, cfg.Args, cfg.Env = exe, args, []string{env + "=1"}
	cfg.Stdout, cfg.Stderr, cfg.Prefix, cfg.EventsDir = &stdout, &stderr, true, events
	job, err := launch.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(&Running{Job: job, Events: events, stdout: &stdout})
	}
	exits, err := job.Wait()
	restarts = job.Restarts()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), Exits: exits, Err: err}
	t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	return res
}

// digestTypes are the event types a failed test shows: what the ranks'
// detectors and membership said.
var digestTypes = []string{"Suspected", "Unsuspected", "Failed", "Recovered", "ViewInstalled", "Evicted"}

// eventDigest returns, per rank, its events of digestTypes (the last 30),
// from the event files the job wrote in dir.
func eventDigest(dir string, n int) string {
	var b strings.Builder
	for r := range n {
		data, err := os.ReadFile(launch.EventsPath(dir, r))
		if err != nil {
			fmt.Fprintf(&b, "rank %d: %v\n", r, err)
			continue
		}
		var keep []string
		for _, line := range strings.Split(string(data), "\n") {
			for _, ty := range digestTypes {
				if strings.Contains(line, "."+ty+`"`) {
					keep = append(keep, line)
					break
				}
			}
		}
		if len(keep) > 30 {
			keep = keep[len(keep)-30:]
		}
		fmt.Fprintf(&b, "rank %d:\n  %s\n", r, strings.Join(keep, "\n  "))
	}
	return b.String()
}

// syncBuffer is a bytes.Buffer safe for the launcher's writers that a
// test can wait on.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	grown chan struct{} // closed and renewed at each write; nil until waited on
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grown != nil {
		close(s.grown)
		s.grown = nil
	}
	return s.b.Write(p)
}

// snapshot returns the text so far and a channel closed at the next write.
func (s *syncBuffer) snapshot() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grown == nil {
		s.grown = make(chan struct{})
	}
	return s.b.String(), s.grown
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
