package launch

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// A rank stopped (SIGSTOP) for longer than the others' detection is
// excluded by them; if it runs again only after they have ended, nobody
// is left to tell it. The others report the exclusion as they end, and
// the launcher stops the excluded rank once they all have: a stopped
// process ignores SIGTERM, so the grace period's SIGKILL ends it. The
// job fails, naming the rank as excluded. Without the reports the job
// ran until its timeout (for ever without one).
func TestJobStopsExcludedRankOnceOthersEnd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the ranks see that a process is stopped in /proc")
	}
	var notices syncBuffer
	stopFile := filepath.Join(t.TempDir(), "stopped")
	cfg := Config{N: 3, Args: []string{"-excluded", "2", "-stop-rank", "2", "-stop-file", stopFile}, Grace: 100 * time.Millisecond,
		Timeout: time.Minute, Notices: func(l string) { notices.Write([]byte(l + "\n")) }}
	exits, err, _, errOut := run(t, context.Background(), cfg)
	var fe *FailedError
	if !errors.As(err, &fe) || fe.Cause != nil || !slices.Equal(fe.Ranks(), []int{2}) {
		t.Fatalf("got %v, want rank 2 failed and no cause\nstderr:\n%s", err, errOut)
	}
	x := exits[2]
	if !x.Excluded || !x.Stopped || x.Signal != syscall.SIGKILL {
		t.Fatalf("rank 2's exit %+v: want excluded, stopped by SIGKILL", x)
	}
	if want := "excluded from the job by the others, stopped by the launcher once they had ended (SIGKILL)"; x.How() != want {
		t.Fatalf("got %q, want %q", x.How(), want)
	}
	if !strings.Contains(notices.String(), "stopping rank 2: the others excluded it") {
		t.Fatalf("notices %q do not say that rank 2 is stopped", notices.String())
	}
	for _, x := range exits[:2] {
		if !x.OK() || x.Excluded {
			t.Fatalf("exit %+v", x)
		}
	}
}

// Only the reports of processes that exit with code 0 count: a rank that
// fails may have failed because of what it took for failures. Here the
// only reporter fails, and the stopped rank is left to the job's
// timeout.
func TestJobExcludedReports(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the ranks see that a process is stopped in /proc")
	}
	stopFile := filepath.Join(t.TempDir(), "stopped")
	cfg := Config{N: 2, Args: []string{"-excluded", "1", "-stop-rank", "1", "-stop-file", stopFile, "-fail-rank", "0"},
		Grace: 100 * time.Millisecond, Timeout: 2 * time.Second}
	exits, err, _, _ := run(t, context.Background(), cfg)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want the job's timeout", err)
	}
	if exits[1].Excluded {
		t.Fatalf("rank 1 counted excluded on the report of a rank that failed: %+v", exits[1])
	}
}

func TestExitHowExcluded(t *testing.T) {
	for _, c := range []struct {
		x    Exit
		want string
	}{
		{Exit{Excluded: true, Code: 1}, "excluded from the job by the others, exit code 1"},
		{Exit{Excluded: true, Code: -1, Signal: syscall.SIGSEGV}, "excluded from the job by the others, then killed by SIGSEGV"},
		{Exit{Excluded: true, Stopped: true, Code: 2}, "excluded from the job by the others, exit code 2 after the launcher's SIGTERM"},
		{Exit{Excluded: true, Killed: true, Code: -1, Signal: syscall.SIGKILL}, "killed by the launcher's crash injection (SIGKILL)"},
	} {
		if got := c.x.How(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.x, got, c.want)
		}
	}
}

func TestDecodeExcluded(t *testing.T) {
	var e wire.Encoder
	excludedMsg{Procs: []int{0, 3, maxProcs - 1}}.MarshalWire(&e)
	m, err := decodeExcluded(e.B)
	if err != nil || !slices.Equal(m.Procs, []int{0, 3, maxProcs - 1}) {
		t.Fatalf("got %v, %v", m, err)
	}
	var big wire.Encoder
	excludedMsg{Procs: []int{maxProcs}}.MarshalWire(&big)
	var many wire.Encoder
	many.Uvarint(maxProcs + 1)
	for _, bad := range [][]byte{{}, {2, 1}, {1, 1, 0}, big.B, many.B} {
		if _, err := decodeExcluded(bad); err == nil {
			t.Errorf("decodeExcluded(%v) accepted", bad)
		}
	}
}
