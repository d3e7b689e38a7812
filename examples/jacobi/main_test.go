package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/examples/internal/proctest"
	"github.com/cohort-mp/cohort/launch"
)

const childEnv = "JACOBI_TEST_RANK"

func TestMain(m *testing.M) { proctest.Main(m, childEnv, child) }

// dieEarly, as a child's first argument, makes the process it names
// exit with status 3 at once, before it registers at the rendezvous (the
// argument is removed before the stencil sees the rest).
const dieEarly = "-test-die-before-registering="

// child is the stencil, save that the process dieEarly names dies first.
func child(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && strings.HasPrefix(args[0], dieEarly) {
		if os.Getenv(launch.EnvRank) == strings.TrimPrefix(args[0], dieEarly) {
			return 3
		}
		args = args[1:]
	}
	return run(args, stdout, stderr)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-nosuchflag"}, {"-size", "0"}, {"-k", "0"}, {"-iters", "-1"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// The rows split as evenly as they go, in order, covering the plate.
func TestBlock(t *testing.T) {
	for _, c := range []struct{ size, n int }{{10, 3}, {256, 4}, {5, 5}, {7, 2}} {
		next := 0
		for r := range c.n {
			first, rows := block(c.size, c.n, r)
			if first != next || rows < c.size/c.n || rows > c.size/c.n+1 {
				t.Fatalf("size %d on %d ranks: rank %d gets rows %d+%d, want from %d", c.size, c.n, r, first, rows, next)
			}
			next += rows
		}
		if next != c.size {
			t.Fatalf("size %d on %d ranks: %d rows covered", c.size, c.n, next)
		}
	}
}

var args = []string{"-size", "64", "-iters", "2500", "-k", "50", "-pace", "1ms"}

var checksumLine = regexp.MustCompile(`residual \S+, checksum ([0-9a-f]{16})`)

func checksumOf(t *testing.T, res proctest.Result) string {
	t.Helper()
	m := checksumLine.FindAllStringSubmatch(res.Stdout, -1)
	if len(m) != 1 {
		t.Fatalf("want one checksum line, got %d:\n%s\nstderr:\n%s", len(m), res.Stdout, res.Stderr)
	}
	return m[0][1]
}

// The final plate is bit-identical with and without a rank's process
// killed: mid-run, once rank 0 said the first checkpoint committed (the
// spare takes its rank, every rank goes back to the last checkpoint), or
// as the job starts, the moment every process has registered (the spare
// takes the rank before any checkpoint). The killed process must really
// have been killed (the kill came before the end).
func TestKilledRankSameChecksum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	clean := proctest.Launch(t, childEnv, 3, nil, args...)
	if clean.Err != nil {
		t.Fatalf("failure-free run: %v", clean.Err)
	}
	want := checksumOf(t, clean)
	const victim = 1
	for _, tc := range []struct {
		when string
		says string
		run  func() proctest.Result
	}{
		{"after the first checkpoint", "jacobi: process 3 took rank 1, resuming from checkpoint epoch", func() proctest.Result {
			return killAfterCheckpoint(t, launch.Config{N: 3, Spares: 1}, []int{victim})
		}},
		{"at the start", "jacobi: process 3 took rank 1, ", func() proctest.Result {
			return proctest.LaunchSpares(t, childEnv, 3, 1, []launch.Kill{{Rank: victim}}, args...)
		}},
	} {
		res := tc.run()
		if !res.Exits[victim].Killed {
			t.Fatalf("kill %s: process %d was not killed (%s): the run ended first", tc.when, victim, res.Exits[victim].How())
		}
		for p, x := range res.Exits {
			if p != victim && !x.OK() {
				t.Errorf("kill %s: process %d: %s", tc.when, p, x.How())
			}
		}
		if got := checksumOf(t, res); got != want {
			t.Errorf("kill %s: checksum %s with the kill, %s without", tc.when, got, want)
		}
		if !strings.Contains(res.Stdout, tc.says) {
			t.Errorf("kill %s: the spare did not say %q:\n%s", tc.when, tc.says, res.Stdout)
		}
	}
}

// committed is what rank 0 says, with -v, as a checkpoint commits.
const committed = "[0] jacobi: checkpoint committed at iteration "

// killAfterCheckpoint runs the stencil (args, with -v and extra) as the
// job cfg and kills the processes victims once rank 0 said that the
// first checkpoint committed: a kill at a fixed time can come before it
// on a loaded machine, and then there is nothing to resume from.
func killAfterCheckpoint(t *testing.T, cfg launch.Config, victims []int, extra ...string) proctest.Result {
	t.Helper()
	var killErr error
	res := proctest.Run(t, childEnv, cfg, func(r *proctest.Running) {
		if killErr = r.WaitStdout(committed); killErr != nil {
			return
		}
		for _, v := range victims {
			if killErr = r.Job.Kill(v); killErr != nil {
				return
			}
		}
	}, append(append([]string{"-v"}, extra...), args...)...)
	if killErr != nil {
		t.Fatalf("kill after the first checkpoint: %v", killErr)
	}
	return res
}

// A process that dies before it registers at the rendezvous does not
// fail the start: the job starts without it, the spare takes its rank
// afresh, and the plate is bit-identical.
func TestDeadBeforeRegisteringSameChecksum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	short := []string{"-size", "64", "-iters", "300", "-k", "50"}
	clean := proctest.Launch(t, childEnv, 3, nil, short...)
	if clean.Err != nil {
		t.Fatalf("failure-free run: %v", clean.Err)
	}
	want := checksumOf(t, clean)
	res := proctest.LaunchSpares(t, childEnv, 3, 1, nil, append([]string{dieEarly + "1"}, short...)...)
	if x := res.Exits[1]; x.Registered || x.Code != 3 {
		t.Fatalf("process 1: %s (registered %v), want exit code 3 before registering", x.How(), x.Registered)
	}
	for _, p := range []int{0, 2, 3} {
		if !res.Exits[p].OK() {
			t.Errorf("process %d: %s", p, res.Exits[p].How())
		}
	}
	if got := checksumOf(t, res); got != want {
		t.Errorf("checksum %s with process 1 dead before registering, %s without", got, want)
	}
	if says := "jacobi: process 3 took rank 1, starting afresh"; !strings.Contains(res.Stdout, says) {
		t.Errorf("the spare did not say %q:\n%s", says, res.Stdout)
	}
}

// A rank and its only buddy killed at once, once the first checkpoint
// committed: every survivor fails naming the rank's lost state at that
// checkpoint; nobody prints a checksum.
func TestRankAndBuddyKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	res := killAfterCheckpoint(t, launch.Config{N: 3, Spares: 2}, []int{1, 2})
	if checksumLine.MatchString(res.Stdout) {
		t.Fatalf("a checksum was printed:\n%s", res.Stdout)
	}
	for _, p := range []int{0, 3, 4} {
		if res.Exits[p].Code != 1 {
			t.Errorf("process %d: %s, want exit code 1", p, res.Exits[p].How())
		}
		if !strings.Contains(res.Stderr, fmt.Sprintf("jacobi: process %d: resil: the state of rank 1 at checkpoint epoch", p)) {
			t.Errorf("process %d does not name rank 1's lost state:\n%s", p, res.Stderr)
		}
	}
}

// No spare: the survivors fail saying that no spare is left.
func TestNoSpareLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	res := proctest.Launch(t, childEnv, 3, []launch.Kill{{Rank: 2, After: 500 * time.Millisecond}}, args...)
	for _, p := range []int{0, 1} {
		if res.Exits[p].Code != 1 || !strings.Contains(res.Stderr, "rank(s) [2] failed and no spare process is left") {
			t.Errorf("process %d: %s; stderr:\n%s", p, res.Exits[p].How(), res.Stderr)
		}
	}
}

// No spare, and the program asks to go on with the ranks left: rank 2
// is killed once the first checkpoint committed, the two survivors
// spread the plate (the lost rank's rows from its buddy) and the
// checksum is the failure-free one.
func TestNoSpareShrinkSameChecksum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	clean := proctest.Launch(t, childEnv, 3, nil, args...)
	if clean.Err != nil {
		t.Fatalf("failure-free run: %v", clean.Err)
	}
	want := checksumOf(t, clean)
	res := killAfterCheckpoint(t, launch.Config{N: 3}, []int{2}, "-shrink")
	if !res.Exits[2].Killed {
		t.Fatalf("process 2 was not killed (%s): the run ended first", res.Exits[2].How())
	}
	for _, p := range []int{0, 1} {
		if !res.Exits[p].OK() {
			t.Errorf("process %d: %s; stderr:\n%s", p, res.Exits[p].How(), res.Stderr)
		}
	}
	if got := checksumOf(t, res); got != want {
		t.Errorf("checksum %s on the ranks left, %s without a failure", got, want)
	}
	for _, says := range []string{"jacobi: continuing on 2 ranks from checkpoint epoch ", "iterations on 2 ranks"} {
		if !strings.Contains(res.Stdout, says) {
			t.Errorf("rank 0 did not say %q:\n%s", says, res.Stdout)
		}
	}
}

// A killed process started again (launch.Config.Respawn) joins the
// running job as a spare and takes the rank of the next process killed:
// process 1 is killed, the spare (process 3) takes rank 1 and process 1
// comes back as process 4; once process 3 said it took rank 1 (the
// recovery ended: with one buddy, rank 1's checkpoint lives only at
// process 2 until then) and every survivor's membership admitted process
// 4, process 2 is killed, and process 4 takes rank 2. The plate
// is bit-identical with the failure-free one; process 2 comes back too,
// as process 5, which the job never needs: it ends with the others (or
// the launcher stops it as idle), and the job succeeds.
func TestRespawnedProcessTakesTheNextKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	long := []string{"-size", "64", "-iters", "4000", "-k", "50", "-pace", "1ms", "-timeout", "90s"}
	clean := proctest.Launch(t, childEnv, 3, nil, long...)
	if clean.Err != nil {
		t.Fatalf("failure-free run: %v", clean.Err)
	}
	want := checksumOf(t, clean)
	var notices syncLines
	cfg := launch.Config{N: 3, Spares: 1, Respawn: 1, Notices: notices.add,
		Kills: []launch.Kill{{Rank: 1, After: 300 * time.Millisecond}}}
	var secondErr error
	res := proctest.Run(t, childEnv, cfg, func(r *proctest.Running) {
		// The second kill waits for the end of the first recovery and
		// until every survivor's view holds process 4.
		secondErr = r.WaitStdout("[3] jacobi: process 3 took rank 1, ")
		if secondErr == nil {
			secondErr = waitAdmitted(r.Events, 4, []int{0, 2, 3})
		}
		if secondErr == nil {
			secondErr = r.Job.Kill(2)
		}
	}, long...)
	t.Logf("the launcher's notices:\n%s", notices.String())
	if secondErr != nil {
		t.Fatalf("second kill: %v", secondErr)
	}
	for p, x := range res.Exits {
		switch {
		case p == 1 || p == 2:
			if !x.Killed {
				t.Fatalf("process %d was not killed (%s)", p, x.How())
			}
		case !x.OK() && !x.Idle:
			t.Errorf("process %d: %s", p, x.How())
		}
	}
	if len(res.Exits) != 6 {
		t.Errorf("%d processes ended, want 6 (4 started, 2 started again)", len(res.Exits))
	}
	if got := checksumOf(t, res); got != want {
		t.Errorf("checksum %s with two kills, %s without", got, want)
	}
	// Resuming from a checkpoint, or, on a machine so loaded that none
	// was committed before a kill, afresh.
	for _, says := range []string{"[3] jacobi: process 3 took rank 1, ", "[4] jacobi: process 4 took rank 2, "} {
		if !strings.Contains(res.Stdout, says) {
			t.Errorf("no line %q:\n%s", says, res.Stdout)
		}
	}
	for _, says := range []string{"started it again as process 4", "started it again as process 5"} {
		if !strings.Contains(notices.String(), says) {
			t.Errorf("the launcher did not say %q", says)
		}
	}
}

// waitAdmitted waits until a view installed at each of procs (their event
// streams in dir) holds process p, for at most a minute.
func waitAdmitted(dir string, p int, procs []int) error {
	member := fmt.Sprintf("%d", p)
	deadline := time.Now().Add(time.Minute)
	for _, q := range procs {
		for !viewHolds(launch.EventsPath(dir, q), member) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d's views never held process %d", q, p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// viewHolds reports whether the event stream at path has a view
// installed whose members include member.
func viewHolds(path, member string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		var ev struct {
			Type   string
			Fields struct{ Members []json.Number }
		}
		if json.Unmarshal([]byte(line), &ev) != nil || !strings.HasSuffix(ev.Type, ".ViewInstalled") {
			continue
		}
		for _, m := range ev.Fields.Members {
			if m.String() == member {
				return true
			}
		}
	}
	return false
}

// syncLines collects lines from several goroutines.
type syncLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *syncLines) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *syncLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A restart that fails before it joins (process 4 exits at once) is
// reported, and the job goes on with the spare it has: the spare took
// rank 1, and the plate is bit-identical.
func TestRespawnThatFailsLeavesTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	clean := proctest.Launch(t, childEnv, 3, nil, args...)
	if clean.Err != nil {
		t.Fatalf("failure-free run: %v", clean.Err)
	}
	want := checksumOf(t, clean)
	var notices syncLines
	cfg := launch.Config{N: 3, Spares: 1, Respawn: 1, Notices: notices.add,
		Kills: []launch.Kill{{Rank: 1, After: 300 * time.Millisecond}}}
	res := proctest.Run(t, childEnv, cfg, nil, append([]string{dieEarly + "4"}, args...)...)
	if !res.Exits[1].Killed {
		t.Fatalf("process 1 was not killed (%s): the run ended first", res.Exits[1].How())
	}
	if says := "started it again as process 4"; !strings.Contains(notices.String(), says) {
		t.Fatalf("the launcher did not say %q:\n%s", says, notices.String())
	}
	if len(res.Exits) != 5 {
		t.Fatalf("%d processes ended, want 5", len(res.Exits))
	}
	if x := res.Exits[4]; x.Registered || x.Code != 3 || x.Of != 1 {
		t.Errorf("process 4: %s (registered %v, of %d), want exit code 3 before registering, of 1", x.How(), x.Registered, x.Of)
	}
	for _, p := range []int{0, 2, 3} {
		if !res.Exits[p].OK() {
			t.Errorf("process %d: %s", p, res.Exits[p].How())
		}
	}
	if got := checksumOf(t, res); got != want {
		t.Errorf("checksum %s, %s without a failure", got, want)
	}
}
