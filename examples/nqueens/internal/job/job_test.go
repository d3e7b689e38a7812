package job

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// runLocal runs a whole job over comm.Local and returns every rank's
// outcome and error. kill, if set, is called with the sessions once the job
// runs and may finalize some of them (a crash as the others see it).
func runLocal(t *testing.T, ranks int, cfg Config, kill func(ss []*comm.Session, cancel []context.CancelFunc)) ([]Outcome, []error) {
	t.Helper()
	ctx, cancelAll := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelAll()
	ss, err := comm.Local(ctx, ranks)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]Outcome, ranks)
	errs := make([]error, ranks)
	cancels := make([]context.CancelFunc, ranks)
	var wg sync.WaitGroup
	for r, s := range ss {
		rctx, cancel := context.WithCancel(ctx)
		cancels[r] = cancel
		wg.Go(func() {
			outs[r], errs[r] = Run(rctx, s, cfg)
			if errs[r] == errCrashed {
				// Stop dead: no flush of what is queued, as far as the
				// session allows.
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				s.Finalize(ctx)
				return
			}
			s.Finalize(context.Background())
		})
	}
	if kill != nil {
		kill(ss, cancels)
	}
	wg.Wait()
	return outs, errs
}

func checkJob(t *testing.T, outs []Outcome, errs []error, dead map[int]bool) {
	t.Helper()
	reporters := 0
	for r := range outs {
		if dead[r] {
			continue
		}
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if !outs[r].Correct() {
			t.Fatalf("rank %d: count %d, want %d", r, outs[r].Count, outs[r].Known)
		}
		if outs[r].Reporter {
			reporters++
		}
	}
	if reporters == 0 {
		t.Fatal("no surviving rank reported the result")
	}
}

// checkLearned fails the test if a rank logged that a rank not in dead
// failed: a rank that finished its part and left the job is no failure.
func checkLearned(t *testing.T, log string, dead map[int]bool) {
	t.Helper()
	for line := range strings.Lines(log) {
		_, rest, ok := strings.Cut(line, "learned that rank ")
		if !ok {
			continue
		}
		var r int
		if _, err := fmt.Sscanf(rest, "%d failed", &r); err != nil || !dead[r] {
			t.Errorf("a rank that did not crash reported failed: %q", strings.TrimSpace(line))
		}
	}
}

// The stealing and master–worker programs over a real (in-memory) comm job
// count exactly with no failure (Phoenix §6's N-Queens), and no rank takes
// one that finishes before the others for a failed one.
func TestNoFailure(t *testing.T) {
	for _, mode := range []Mode{ModeSteal, ModeMaster} {
		t.Run(string(mode), func(t *testing.T) {
			var log lockedBuffer
			outs, errs := runLocal(t, 4, Config{N: 10, Mode: mode, Seed: 1, Log: &log}, nil)
			checkJob(t, outs, errs, nil)
			checkLearned(t, log.String(), nil)
			for r, o := range outs {
				t.Logf("rank %d: %s", r, o.Summary)
			}
		})
	}
}

// crashWhen returns a kill hook: the rank for which pred first holds stops
// dead, and its session is finalized (its peers see it fail).
func crashWhen(pred func(rank int, p progress) bool, crashed *sync.Map) func(int, progress) bool {
	return func(rank int, p progress) bool {
		if _, done := crashed.Load(rank); done {
			return false
		}
		if pred(rank, p) {
			crashed.Store(rank, true)
			return true
		}
		return false
	}
}

// Phoenix §5.2.2: a thief dies holding stolen work; its victim redoes it
// and the count stays exact. Rank 0 waits, once it has given two units
// away, until the first thief holding work has crashed, so that the crash
// always happens mid-job.
func TestStealThiefCrashes(t *testing.T) {
	var crashed sync.Map
	crashedCh := make(chan struct{})
	var once sync.Once
	cfg := Config{N: 13, Mode: ModeSteal, Seed: 3, LeafDepth: 4}
	victim := crashWhen(func(rank int, p progress) bool {
		if rank == 0 || p.received < 1 || !p.held {
			return false
		}
		first := false
		once.Do(func() { first = true; close(crashedCh) })
		return first
	}, &crashed)
	cfg.crash = func(rank int, p progress) bool {
		if rank == 0 && p.given >= 2 {
			select {
			case <-crashedCh:
			case <-time.After(30 * time.Second):
				t.Error("no thief crashed within 30 s")
			}
			return false
		}
		return victim(rank, p)
	}
	outs, errs := runLocal(t, 5, cfg, nil)
	dead := map[int]bool{}
	crashed.Range(func(k, _ any) bool { dead[k.(int)] = true; return true })
	if len(dead) != 1 {
		t.Fatalf("%d ranks crashed, want 1", len(dead))
	}
	checkJob(t, outs, errs, dead)
	for r, o := range outs {
		if !dead[r] {
			t.Logf("rank %d: %s", r, o.Summary)
		}
	}
}

// Steal mode with the root protected: the root holder (rank 0) dies after
// some snapshots; rank 1 takes over and the count stays exact.
func TestStealRootCrashes(t *testing.T) {
	var crashed sync.Map
	var log lockedBuffer
	cfg := Config{N: 13, Mode: ModeSteal, Seed: 5, LeafDepth: 4, CheckpointEvery: 16, Log: &log}
	cfg.crash = crashWhen(func(rank int, p progress) bool {
		return rank == 0 && p.given >= 1 && p.leaves >= 100
	}, &crashed)
	outs, errs := runLocal(t, 4, cfg, nil)
	if _, ok := crashed.Load(0); !ok {
		t.Fatal("rank 0 did not crash")
	}
	checkJob(t, outs, errs, map[int]bool{0: true})
	checkLearned(t, log.String(), map[int]bool{0: true})
	if !outs[1].Reporter {
		t.Fatalf("rank 1 did not take the root over: %+v", outs[1])
	}
	if !strings.Contains(log.String(), "rank 1: took over the root of the search from a snapshot") {
		t.Fatalf("no takeover in the log:\n%s", log.String())
	}
	t.Logf("rank 1: %s", outs[1].Summary)
}

// Phoenix §5.2.1: the master dies; its backup takes over from the
// checkpoint and the count stays exact.
func TestMasterCrashes(t *testing.T) {
	var crashed sync.Map
	var log lockedBuffer
	cfg := Config{N: 12, Mode: ModeMaster, TaskDepth: 3, CheckpointEvery: 4, Log: &log}
	cfg.crash = crashWhen(func(rank int, p progress) bool {
		return rank == 0 && p.master && p.results >= 20
	}, &crashed)
	outs, errs := runLocal(t, 5, cfg, nil)
	if _, ok := crashed.Load(0); !ok {
		t.Fatal("the master did not crash")
	}
	checkJob(t, outs, errs, map[int]bool{0: true})
	checkLearned(t, log.String(), map[int]bool{0: true})
	if !outs[1].Reporter {
		t.Fatalf("rank 1 did not take over: %+v", outs[1])
	}
	if !strings.Contains(log.String(), "rank 1: became the master with") {
		t.Fatalf("no takeover in the log:\n%s", log.String())
	}
	t.Logf("new master: %s", outs[1].Summary)
}

// lockedBuffer collects the log lines of every rank.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
