package submit

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/place"
)

// A restart goes to its own host while that host's stream runs, then to
// the hosts with a free slot: the least loaded first with spread, the
// closest first with concentrate; a host whose stream ended or whose
// slots are taken is not asked.
func TestRestartCandidates(t *testing.T) {
	host := func(name string, procs, alive int, up bool) *hostRun {
		return &hostRun{g: grant{host: Host{Name: name}, procs: procs}, alive: alive, up: up}
	}
	names := func(hs []*hostRun) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.g.host.Name)
		}
		return out
	}
	// In latency order: a (closest) to e.
	hosts := []*hostRun{host("a", 3, 2, true), host("b", 3, 3, true), host("c", 3, 0, true), host("d", 3, 1, false), host("e", 3, 1, true)}
	for _, tc := range []struct {
		strategy place.Strategy
		former   string
		want     []string
	}{
		{place.Spread, "b", []string{"b", "c", "e", "a"}},
		{place.Spread, "d", []string{"c", "e", "a"}},
		{place.Concentrate, "e", []string{"e", "a", "c"}},
		{place.Concentrate, "d", []string{"a", "c", "e"}},
	} {
		rs := &restarter{cfg: &Config{Strategy: tc.strategy}, hosts: hosts}
		if got := names(rs.candidatesLocked(tc.former)); !slices.Equal(got, tc.want) {
			t.Errorf("%v, a process of %s: hosts %v, want %v", tc.strategy, tc.former, got, tc.want)
		}
	}
}

// With restarts, a process that a signal ended, a restart that never
// joined, one no host took and one stopped as idle do not fail the job;
// a restart that joined and then failed on its own does.
func TestSpareOutcomeWithRestarts(t *testing.T) {
	var log lockedLog
	cfg := Config{Respawn: 3, Spares: 1, Log: log.Logf}
	exits := []Exit{
		{Rank: 0, Host: "a", Of: 0},
		{Rank: 1, Host: "a", Signal: "SIGKILL", Of: 1, Replaced: 3},
		{Rank: 2, Host: "b", Of: 2},
		{Rank: 3, Host: "a", Code: 1, Of: 1}, // ended before it joined
		{Rank: 4, Of: 1, Err: "no host started it"},
		{Rank: 5, Host: "b", Lost: true, Idle: true, Of: 2},
	}
	if err := spareOutcome(cfg, exits, 3, nil); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, want := range []string{
		"process 1 killed by SIGKILL on a; started again as process 3",
		"process 3 (process 1 started again) ended before it joined (exit status 1 on a)",
		"process 5 (process 2 started again) stopped: the job never needed it",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "process 4") {
		t.Errorf("process 4, which no host started, is named again:\n%s", log.String())
	}
	err := spareOutcome(cfg, exits, 3, []int{3})
	if err == nil || !strings.Contains(err.Error(), "1 of 6 processes: process 3 (process 1 started again) (exit status 1 on a)") {
		t.Errorf("a restart that joined and failed: %v", err)
	}
}

// The others exclude every process that dies (their detectors took it
// for failed): a killed process that a restart replaced is no failure of
// the job for being excluded too, while one the submitter stopped as
// excluded, running on after the others had ended, is.
func TestSpareOutcomeExcluded(t *testing.T) {
	var log lockedLog
	cfg := Config{Respawn: 3, Spares: 1, Log: log.Logf}
	exits := []Exit{
		{Rank: 0, Host: "a", Signal: "SIGKILL", Of: 0, Replaced: 3, Excluded: true},
		{Rank: 1, Host: "a", Of: 1},
		{Rank: 2, Host: "b", Of: 2},
		{Rank: 3, Host: "a", Of: 0},
	}
	if err := spareOutcome(cfg, exits, 3, []int{3}); err != nil {
		t.Fatalf("a killed, excluded and replaced process failed the job: %v\n%s", err, log.String())
	}
	want := "process 0 excluded from the job by the others, then killed by SIGKILL on a; started again as process 3"
	if !strings.Contains(log.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, log.String())
	}
	exits[2] = Exit{Rank: 2, Host: "b", Signal: "SIGKILL", Of: 2, Excluded: true, Stopped: true}
	err := spareOutcome(cfg, exits, 3, []int{3})
	if err == nil || !strings.Contains(err.Error(), "1 of 4 processes: process 2 (excluded from the job by the others, stopped by the launcher once they had ended (SIGKILL on b))") {
		t.Errorf("a process stopped as excluded: got %v, want it to fail the job", err)
	}
}

// Respawn needs spares and is bounded.
func TestConfigRespawn(t *testing.T) {
	base := Config{N: 2, Strategy: place.Spread, Supernodes: []string{"sn@127.0.0.1:1"}, Creds: &ca.Credentials{}, Program: "p",
		Silence: time.Second}
	for _, tc := range []struct {
		spares, respawn int
		want            string
	}{
		{1, 3, ""},
		{0, 1, "restarts without spares"},
		{1, -1, "-1 restarts per process, want 0 to 62"},
		{1, 63, "63 restarts per process"},
	} {
		cfg := base
		cfg.Spares, cfg.Respawn = tc.spares, tc.respawn
		err := cfg.check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("--spares %d, respawn %d: %v, want %q", tc.spares, tc.respawn, err, tc.want)
		}
	}
}

// lockedLog keeps what a Config.Log is given, a line per call, from any
// goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Logf(f string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, f+"\n", a...)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
