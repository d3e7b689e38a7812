package bench_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/runner/runnertest"
	"github.com/cohort-mp/cohort/internal/tracker"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// TestReportOneSingleReporter checks the benchmark's --report one mode on
// 8 real processes: with quiet detectors, a SIGKILL followed by a "fail"
// line to the victim's parent gives exactly the paper's experiment (§7:
// T_s after one detector reports the failure; §3.4: the reporter sends
// NODE_FAILURE to the root, which proposes the view without the victim).
// It checks that no detector declared the crash, that the root's only
// report came from the designated node, that the root stabilized the view
// once with a positive T_s, and that the view changed exactly once for the
// kill: the next view (a joiner's admission) has the next epoch counter,
// so no other proposal was made in between.
func TestReportOneSingleReporter(t *testing.T) {
	seed := testSeed(t, 5)
	rng := rand.New(rand.NewPCG(seed, 0x5e9))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	const n, fanout = 8, 2
	job := runnertest.StartJob(t, ctx, runner.JobConfig{N: n, Fanout: fanout, Detector: runner.DetectorBRR, Seed: seed, EventsDir: dir, QuietDetector: true})
	view, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A victim whose parent (a·heap, (i−1)/a) is not the root, so that the
	// report crosses the network.
	pos := 3 + rng.IntN(n-3)
	victim, reporter, root := view.Members[pos], view.Members[(pos-1)/fanout], view.Members[0]
	t.Logf("view %s: killing %v, %v reports it", member.FormatEpoch(view.Epoch), victim, reporter)
	if err := job.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if err := job.InjectFailure(reporter, victim); err != nil {
		t.Fatal(err)
	}
	failed, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(view.Members), func(id core.NodeID) bool { return id == victim })
	if !slices.Equal(failed.Members, want) {
		t.Fatalf("view %s after the kill: [%s], want [%s]", member.FormatEpoch(failed.Epoch), tracker.FormatIDs(failed.Members), tracker.FormatIDs(want))
	}
	// The barrier: a joiner's admission, the next view change.
	joiner := core.NodeID(n)
	if err := job.Spawn(ctx, runner.SpawnOptions{ID: joiner}); err != nil {
		t.Fatal(err)
	}
	joined, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Close(); err != nil {
		t.Fatal(err)
	}

	counter := func(epoch uint64) uint64 { return epoch >> 32 }
	if counter(failed.Epoch) != counter(view.Epoch)+1 || counter(joined.Epoch) != counter(failed.Epoch)+1 {
		t.Errorf("epochs %s → %s → %s: want consecutive counters (one proposal per change)",
			member.FormatEpoch(view.Epoch), member.FormatEpoch(failed.Epoch), member.FormatEpoch(joined.Epoch))
	}
	all := runnertest.Streams(t, dir)
	runnertest.CheckViewSafety(t, all)
	var injected, stabilized int
	for id, recs := range all {
		var views []uint64
		for _, r := range recs {
			switch e := r.Event.(type) {
			case core.Failed:
				t.Errorf("%v's detector declared %v failed although it is quiet", id, e.Node)
			case record.FailureInjected:
				injected++
				if id != reporter || e.Node != victim {
					t.Errorf("%v was told that %v failed; want only %v told about %v", id, e.Node, reporter, victim)
				}
			case member.Stabilized:
				if e.Epoch == failed.Epoch {
					stabilized++
					if id != root {
						t.Errorf("%v (not the root) stabilized %s", id, member.FormatEpoch(e.Epoch))
					}
					if e.At <= e.Began {
						t.Errorf("T_s of %s = %v, want > 0", member.FormatEpoch(e.Epoch), e.At-e.Began)
					}
					t.Logf("T_s of %s: %v", member.FormatEpoch(e.Epoch), e.At-e.Began)
				}
			case record.Reports:
				if e.Epoch == failed.Epoch && !slices.Equal(e.From, []core.NodeID{reporter}) {
					t.Errorf("the root's reports for %s came from [%s], want [%v] only", member.FormatEpoch(e.Epoch), tracker.FormatIDs(e.From), reporter)
				}
			case member.ViewInstalled:
				if e.Epoch > view.Epoch && e.Epoch < joined.Epoch {
					views = append(views, e.Epoch)
				}
			}
		}
		if id != victim && id != joiner && !slices.Equal(views, []uint64{failed.Epoch}) {
			t.Errorf("%v installed %d views between the kill and the join, want exactly %s", id, len(views), member.FormatEpoch(failed.Epoch))
		}
	}
	if injected != 1 || stabilized != 1 {
		t.Errorf("%d injected verdicts and %d stabilizations of %s, want 1 and 1", injected, stabilized, member.FormatEpoch(failed.Epoch))
	}
}

// TestBenchReportOne runs the benchmark in --report one mode on 6
// processes: each sample has a T_s, its reporter is the victim's parent,
// the root heard from nobody else, and no detector declared the crash
// (RunBench fails the sample otherwise).
func TestBenchReportOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	points, err := bench.RunBench(ctx, bench.BenchConfig{
		Sizes: []int{6}, Fanouts: []int{2}, Samples: 2, Report: bench.ReportOne, Seed: testSeed(t, 1), PingCount: 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 1 || len(points[0].Samples) != 2 {
		t.Fatalf("got %d points, want 1 with 2 samples", len(points))
	}
	for i, s := range points[0].Samples {
		t.Logf("sample %d: killed %v, %v told, reports from [%s], T_s %v", i+1, s.Victim, s.Reporter, tracker.FormatIDs(s.ReportsFrom), s.Ts)
		if s.Reporter == core.None || s.Reporter == s.Victim {
			t.Errorf("sample %d: reporter %v for victim %v", i+1, s.Reporter, s.Victim)
		}
		if s.Ts <= 0 || s.EchoOnce <= 0 {
			t.Errorf("sample %d: T_s %v, echo once %v (asked through the supervisor stream); want both > 0", i+1, s.Ts, s.EchoOnce)
		}
		if s.Verdicts != 0 {
			t.Errorf("sample %d: %d detector verdicts, want 0", i+1, s.Verdicts)
		}
		if len(s.ReportsFrom) > 1 || len(s.ReportsFrom) == 1 && s.ReportsFrom[0] != s.Reporter {
			t.Errorf("sample %d: the root heard reports from [%s], want at most [%v]", i+1, tracker.FormatIDs(s.ReportsFrom), s.Reporter)
		}
	}
}
