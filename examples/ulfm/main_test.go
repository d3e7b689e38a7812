package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/examples/internal/proctest"
	"github.com/cohort-mp/cohort/launch"
)

const childEnv = "ULFM_TEST_RANK"

func TestMain(m *testing.M) { proctest.Main(m, childEnv, run) }

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-nosuchflag"}, {"-op", "gather"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// The failure test over real processes: 5 ranks over TCP loop on a
// point-to-point exchange, a Bcast or an Allreduce; rank 3 is killed with
// SIGKILL in the middle. Every survivor's call returns an error naming
// rank 3 and none hangs; then Agree + Revoke + Shrink + Agree give the four
// survivors a communicator on which an Allreduce is right.
func TestRankKilledMidOperation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for seconds")
	}
	const n, victim = 5, 3
	for _, op := range []string{"p2p", "bcast", "allreduce"} {
		t.Run(op, func(t *testing.T) {
			// A live rank that the detector declares failed (a false
			// suspicion: on a loaded 2-core machine a process can stall for
			// longer than the loopback timeouts) disturbs the run; it
			// shows as a failed set other than [3]. Such a run is logged and
			// run again, at most twice; any other deviation fails at once.
			for attempt := 1; ; attempt++ {
				res := proctest.Launch(t, childEnv, n, []launch.Kill{{Rank: victim, After: 700 * time.Millisecond}}, "-op", op, "-wait", "40s")
				if disturbed.MatchString(res.Stdout) && attempt < 3 {
					t.Logf("attempt %d disturbed by a false suspicion (a live rank declared failed), running again:\n%s", attempt, res.Stdout)
					continue
				}
				check(t, res, op)
				return
			}
		})
	}
}

// disturbed matches a recovery line whose failed set is not exactly [3].
var disturbed = regexp.MustCompile(`recovered: .* failed \[(\d+ [\d ]+|[0-24-9]\d*)\]`)

func check(t *testing.T, res proctest.Result, op string) {
	const n, victim = 5, 3
	for _, e := range res.Exits {
		if e.Rank != victim && e.Code != 0 {
			t.Errorf("rank %d exited %+v\nstdout:\n%s\nstderr:\n%s", e.Rank, e, res.Stdout, res.Stderr)
		}
	}
	for r := range n {
		if r == victim {
			continue
		}
		if !strings.Contains(res.Stdout, fmt.Sprintf("rank %d: %s failed naming ranks [%d]\n", r, op, victim)) {
			t.Errorf("rank %d: no error naming rank %d:\n%s\nstderr:\n%s", r, victim, res.Stdout, res.Stderr)
		}
		ok := fmt.Sprintf(`rank %d: recovered: rank \d of 4 survivors, failed \[%d\], agree 1, allreduce 10 OK`, r, victim)
		if !regexp.MustCompile(ok).MatchString(res.Stdout) {
			t.Errorf("rank %d did not recover on the survivors:\n%s\nstderr:\n%s", r, res.Stdout, res.Stderr)
		}
	}
}
