package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"go.uber.org/goleak"
)

// rankProgram is testdata/rank, built once by TestMain.
var rankProgram string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "launch-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rankProgram = filepath.Join(dir, "rank")
	build := exec.Command("go", "build", "-o", rankProgram, "./testdata/rank")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testdata/rank: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// syncBuffer is an io.Writer safe for the job's forwarding goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// run starts a job of the rank program and waits for it.
//
//lint:ignore ST1008 the job's exits and error come first, its two output streams after
func run(t *testing.T, ctx context.Context, cfg Config) ([]Exit, error, string, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	cfg.Program = rankProgram
	cfg.Stdout, cfg.Stderr = &stdout, &stderr
	job, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	exits, err := job.Wait()
	if len(exits) != cfg.N+cfg.Spares {
		t.Fatalf("%d exits for %d ranks and %d spares", len(exits), cfg.N, cfg.Spares)
	}
	return exits, err, stdout.String(), stderr.String()
}

// A job of 4: every rank gets the same table, the bootstrap's options,
// prefixed output; the job succeeds.
func TestJobRuns(t *testing.T) {
	exits, err, out, errOut := run(t, context.Background(), Config{N: 4, Prefix: true, Fanout: 4, Detector: "heartbeat"})
	if err != nil {
		t.Fatalf("job failed: %v\nstderr:\n%s", err, errOut)
	}
	re := regexp.MustCompile(`^\[(\d)\] rank (\d) of 4 job (cohort-[0-9a-f]{12}) detector "heartbeat" fanout 4 table ([0-9a-f]{16})$`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4:\n%s", len(lines), out)
	}
	var ranks []string
	tables := map[string]bool{}
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil || m[1] != m[2] {
			t.Fatalf("line %q does not match %v", l, re)
		}
		ranks = append(ranks, m[1])
		tables[m[4]] = true
	}
	slices.Sort(ranks)
	if !slices.Equal(ranks, []string{"0", "1", "2", "3"}) || len(tables) != 1 {
		t.Fatalf("ranks %v, %d distinct tables; want 0–3 and one table", ranks, len(tables))
	}
	for _, x := range exits {
		if !x.OK() || !x.Registered {
			t.Fatalf("exit %+v", x)
		}
	}
}

// A job of 2 ranks and 1 spare starts 3 processes: the spare is process
// 2, its lines prefixed with its process number.
func TestJobSpares(t *testing.T) {
	exits, err, out, errOut := run(t, context.Background(), Config{N: 2, Spares: 1, Prefix: true})
	if err != nil {
		t.Fatalf("job failed: %v\nstderr:\n%s", err, errOut)
	}
	for _, want := range []string{"[0] rank 0 of 3 ", "[1] rank 1 of 3 ", "[2] rank 2 of 3 "} {
		if !strings.Contains(out, want) {
			t.Errorf("no line starting %q in\n%s", want, out)
		}
	}
	if len(exits) != 3 {
		t.Errorf("%d exits, want 3", len(exits))
	}
}

// Every exit carries the processor time the kernel accounted to the rank:
// rank 0 computes until it has used 300 ms, the others only start and
// register.
func TestJobCPU(t *testing.T) {
	const spin = 300 * time.Millisecond
	exits, err, _, errOut := run(t, context.Background(), Config{N: 3, Args: []string{"-spin", spin.String()}})
	if err != nil {
		t.Fatalf("job failed: %v\nstderr:\n%s", err, errOut)
	}
	for _, x := range exits {
		if x.Rank == 0 && x.CPU < spin {
			t.Errorf("rank 0 computed until it had used %v: CPU %v", spin, x.CPU)
		}
		if x.Rank != 0 && x.CPU >= spin {
			t.Errorf("rank %d only registered: CPU %v", x.Rank, x.CPU)
		}
	}
}

// Under load, lines of different ranks never mix: every line is one
// whole line of one rank, and each rank's lines arrive in order.
func TestJobOutputLines(t *testing.T) {
	const n, lines = 4, 3000
	_, err, out, _ := run(t, context.Background(), Config{N: n, Prefix: true, Args: []string{"-lines", fmt.Sprint(lines)}})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^\[(\d)\] rank (\d) line (\d+) x{100}$`)
	next := make([]int, n)
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(l, " of 4 ") {
			continue
		}
		m := re.FindStringSubmatch(l)
		if m == nil || m[1] != m[2] {
			t.Fatalf("mixed line %q", l)
		}
		r := int(m[1][0] - '0')
		if m[3] != fmt.Sprint(next[r]) {
			t.Fatalf("rank %d: line %s after line %d", r, m[3], next[r]-1)
		}
		next[r]++
	}
	for r, c := range next {
		if c != lines {
			t.Fatalf("rank %d: %d lines, want %d", r, c, lines)
		}
	}
}

// A rank's exit code reaches the error, which names the rank.
func TestJobExitCode(t *testing.T) {
	exits, err, _, _ := run(t, context.Background(), Config{N: 3, Args: []string{"-fail-rank", "2", "-fail-code", "7"}})
	var fe *FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want a *FailedError", err)
	}
	if !slices.Equal(fe.Ranks(), []int{2}) || fe.Cause != nil || exits[2].Code != 7 {
		t.Fatalf("got %v (ranks %v, cause %v), want rank 2 with code 7", err, fe.Ranks(), fe.Cause)
	}
	if want := "launch: rank 2 failed: exit code 7"; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}

// A crash injected with KillAt is reported as such; under
// AbortOnFailure the rest of the job is stopped (no hang).
func TestJobKillAt(t *testing.T) {
	exits, err, _, _ := run(t, context.Background(), Config{N: 3, Args: []string{"-hold"},
		AbortOnFailure: true, Kills: []Kill{{Rank: 1, After: 0}}})
	var fe *FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want a *FailedError", err)
	}
	x := exits[1]
	if !x.Killed || x.Signal != syscall.SIGKILL || x.Code != -1 {
		t.Fatalf("rank 1 exit %+v, want killed with SIGKILL", x)
	}
	// Rank 1 is named with its crash whether it failed alone ("rank 1
	// failed: …") or beside ranks the abort stopped ("rank 1: …").
	if !regexp.MustCompile(`rank 1(:| failed:) killed by the launcher's crash injection \(SIGKILL\)`).MatchString(err.Error()) {
		t.Fatalf("error %q does not name rank 1's crash", err)
	}
	for _, r := range []int{0, 2} {
		if exits[r].Killed {
			t.Fatalf("rank %d marked killed: %+v", r, exits[r])
		}
	}
}

// A planned kill counts from the end of the rendezvous: a kill at 0 finds
// every rank registered, so the rendezvous does not fail for it.
func TestJobKillCountsFromRendezvous(t *testing.T) {
	exits, err, _, _ := run(t, context.Background(), Config{N: 3, Args: []string{"-hold"},
		AbortOnFailure: true, Kills: []Kill{{Rank: 1, After: 0}}})
	if errors.Is(err, ErrRendezvous) {
		t.Fatalf("the kill came before the rendezvous: %v", err)
	}
	if x := exits[1]; !x.Killed || !x.Registered {
		t.Fatalf("rank 1 exit %+v, want killed after registering", x)
	}
}

// Every planned kill that did not kill its rank is reported with why: the
// job ended first, the rank was already killed, the ranks never registered.
func TestJobMissedKills(t *testing.T) {
	start := func(cfg Config) *Job {
		t.Helper()
		cfg.Program = rankProgram
		job, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		job.Wait()
		return job
	}
	job := start(Config{N: 2, Kills: []Kill{{Rank: 1, After: time.Hour}}})
	missed := job.MissedKills()
	if len(missed) != 1 || missed[0].Kill != (Kill{Rank: 1, After: time.Hour}) ||
		!strings.HasPrefix(missed[0].Why, "the job ended ") || !strings.HasSuffix(missed[0].Why, " after every rank registered") {
		t.Fatalf("a kill after the end: missed %+v", missed)
	}

	job = start(Config{N: 2, Args: []string{"-hold"}, Kills: []Kill{{Rank: 0}, {Rank: 1}, {Rank: 1}}})
	missed = job.MissedKills()
	if len(missed) != 1 || missed[0].Rank != 1 || missed[0].Why != "its process had already been killed" {
		t.Fatalf("two kills of rank 1: missed %+v", missed)
	}

	job = start(Config{N: 2, Args: []string{"-no-register"}, Kills: []Kill{{Rank: 0}}})
	missed = job.MissedKills()
	if len(missed) != 1 || missed[0].Why != "the job ended before every rank registered" {
		t.Fatalf("a job without rendezvous: missed %+v", missed)
	}

	job = start(Config{N: 2, Args: []string{"-hold"}, Kills: []Kill{{Rank: 0}, {Rank: 1}}})
	if missed := job.MissedKills(); len(missed) != 0 {
		t.Fatalf("every kill happened, yet missed %+v", missed)
	}
}

// Without AbortOnFailure, a crash leaves the other ranks running: they
// end on their own.
func TestJobKillLeavesOthers(t *testing.T) {
	var stdout syncBuffer
	job, err := Start(context.Background(), Config{N: 2, Program: rankProgram, Args: []string{"-hold"}, Stdout: &stdout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Addrs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := job.Kill(0); err != nil {
		t.Fatal(err)
	}
	// Rank 1 is still running: killing it works and is reported too.
	if err := job.Kill(1); err != nil {
		t.Fatalf("rank 1 is no longer running after rank 0's crash: %v", err)
	}
	exits, err := job.Wait()
	var fe *FailedError
	if !errors.As(err, &fe) || !slices.Equal(fe.Ranks(), []int{0, 1}) || fe.Cause != nil {
		t.Fatalf("got %v", err)
	}
	if !exits[0].Killed || !exits[1].Killed {
		t.Fatalf("exits %+v", exits)
	}
	if err := job.Kill(1); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Kill after the end: %v", err)
	}
	if err := job.KillAt(1, 0); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("KillAt after the end: %v", err)
	}
}

// A rank that dies before registering fails the rendezvous of the others
// with an error naming it; nobody hangs.
func TestJobRankDiesBeforeRegistering(t *testing.T) {
	exits, err, _, errOut := run(t, context.Background(), Config{N: 4, Args: []string{"-early-rank", "2", "-hold"}})
	if !errors.Is(err, ErrRendezvous) {
		t.Fatalf("got %v, want ErrRendezvous", err)
	}
	if !strings.Contains(err.Error(), "rank 2 ended before every rank registered (exit code 3)") {
		t.Fatalf("error %q does not name rank 2", err)
	}
	if exits[2].Registered || exits[2].Code != 3 {
		t.Fatalf("rank 2: %+v", exits[2])
	}
	// The ranks that waited were told why (or stopped before they could say).
	if !strings.Contains(errOut, "rank 2 ended before every rank registered") && !strings.Contains(err.Error(), "stopped by the launcher") {
		t.Fatalf("no rank reported the abort:\n%s", errOut)
	}
}

// A rank that never registers fails the rendezvous after its timeout.
func TestJobRendezvousTimeout(t *testing.T) {
	_, err, _, _ := run(t, context.Background(), Config{N: 3, Args: []string{"-late-rank", "1", "-hold"},
		RendezvousTimeout: 300 * time.Millisecond, Grace: time.Second})
	if !errors.Is(err, ErrRendezvous) || !strings.Contains(err.Error(), "ranks 1 did not register within 300ms") {
		t.Fatalf("got %v", err)
	}
}

// The end of the context stops the job: SIGTERM, then SIGKILL for a
// rank deaf to SIGTERM.
func TestJobCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncBuffer
	job, err := Start(ctx, Config{N: 2, Program: rankProgram, Args: []string{"-hold", "-ignore-term"},
		Stdout: &stdout, Grace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Addrs(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	exits, err := job.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	for _, x := range exits {
		if !x.Stopped || x.Signal != syscall.SIGKILL {
			t.Fatalf("exit %+v, want stopped by SIGKILL after the grace", x)
		}
	}
	if !strings.Contains(err.Error(), "ranks 0, 1: stopped by the launcher (SIGKILL)") {
		t.Fatalf("error %q", err)
	}
}

// A stop lets ranks that heed SIGTERM or the launcher's abort end by
// themselves.
func TestJobTimeout(t *testing.T) {
	exits, err, _, _ := run(t, context.Background(), Config{N: 2, Args: []string{"-hold"}, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	for _, x := range exits {
		if !x.Stopped {
			t.Fatalf("exit %+v, want stopped", x)
		}
	}
}

// With DumpStacks, a job that hangs past its timeout is stopped by
// SIGQUIT: each rank's goroutine stacks reach the job's standard error,
// and its exit says so.
func TestJobTimeoutDumpsStacks(t *testing.T) {
	exits, err, _, errOut := run(t, context.Background(), Config{N: 2, Args: []string{"-hold", "-ignore-term"},
		Timeout: 300 * time.Millisecond, DumpStacks: true})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	for _, x := range exits {
		if !x.Stopped || !x.Quit || x.Code != 2 {
			t.Fatalf("exit %+v, want stopped by SIGQUIT with code 2", x)
		}
	}
	if !strings.Contains(err.Error(), "ranks 0, 1: exit code 2 after the launcher's SIGQUIT (its goroutine stacks are in its standard error)") {
		t.Fatalf("error %q", err)
	}
	if n := strings.Count(errOut, "SIGQUIT: quit"); n != 2 || !strings.Contains(errOut, "\nmain.main()") {
		t.Fatalf("%d dumps, want 2 with main.main's stack:\n%s", n, errOut)
	}
}

// A plain program that never registers runs fine.
func TestJobWithoutRendezvous(t *testing.T) {
	_, err, out, _ := run(t, context.Background(), Config{N: 3, Args: []string{"-no-register"}, RendezvousTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, " of 3\n") != 3 {
		t.Fatalf("output %q", out)
	}
}

func TestJobBadConfig(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{N: 0, Program: rankProgram}, "0 ranks, want 1 to"},
		{Config{N: 2}, "no program"},
		{Config{N: 2, Program: "/no/such/program"}, `cannot start the program "/no/such/program"`},
		{Config{N: 2, Program: rankProgram, Kills: []Kill{{Rank: 2}}}, "kill of rank 2, out of range for 2 ranks (0 to 1)"},
		{Config{N: 2, Program: rankProgram, Kills: []Kill{{Rank: 1, After: -time.Second}}}, "negative duration"},
		{Config{N: 2, Program: rankProgram, Detector: "swim"}, `COHORT_DETECTOR="swim"`},
		{Config{N: 2, Program: rankProgram, Fanout: 3}, "COHORT_FANOUT=3"},
		{Config{N: 2, Program: rankProgram, Spares: -1}, "-1 spares for 2 ranks"},
		{Config{N: 2, Program: rankProgram, Spares: 1, Replicas: 2}, "spares and replicas do not go together"},
		{Config{N: 2, Program: rankProgram, Spares: 1, Kills: []Kill{{Rank: 3}}}, "kill of rank 3, out of range for 3 ranks"},
	}
	for _, c := range cases {
		job, err := Start(ctx, c.cfg)
		if err == nil {
			job.Stop(nil)
			job.Wait()
			t.Fatalf("%+v: started", c.cfg)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: got %q, want %q", c.cfg, err, c.want)
		}
	}
}
