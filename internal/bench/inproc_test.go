package bench_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/runner/runnertest"
	"github.com/cohort-mp/cohort/internal/tracker"

	"go.uber.org/goleak"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/member"
)

// TestInProcessBench runs the membership benchmark's in-process mode at
// n = 8 with 2 samples (paper §7's experiment: one reporter, T_s at the
// root, a joiner after each failure): every sample has a positive T_s and
// O_cp, its reporter is the victim's parent, no quiet detector declared the
// crash, the root heard from nobody else, the echo baseline ran over the
// 8-member view, an echo ran alone before every failure, the processor
// time per node of the stabilizations and of both kinds of echo was measured, and the table's header names the mode and
// the transport. Every goroutine of the job has ended afterwards. It runs
// over both transports of the in-process mode.
func TestInProcessBench(t *testing.T) {
	for _, tr := range []string{runner.TransportTCP, runner.TransportMem} {
		t.Run(tr, func(t *testing.T) { testInProcessBench(t, tr) })
	}
}

func testInProcessBench(t *testing.T, transport string) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := bench.BenchConfig{
		Sizes: []int{8}, Fanouts: []int{2}, Samples: 2, Report: bench.ReportOne,
		Seed: testSeed(t, 3), PingCount: 20, InProcess: true, Transport: transport,
	}
	points, err := bench.RunBench(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 1 || len(points[0].Samples) != 2 {
		t.Fatalf("got %d points, want 1 with 2 samples", len(points))
	}
	p := points[0]
	if p.Echo.Members != 8 || p.Echo.Fanout != 2 || p.Echo.Median <= 0 {
		t.Errorf("echo over %d members, fan-out %d, median %v; want 8, 2, > 0", p.Echo.Members, p.Echo.Fanout, p.Echo.Median)
	}
	if p.PingPong.Count != 20 || p.L <= 0 {
		t.Errorf("ping-pong of %d round trips, L = %v; want 20, > 0", p.PingPong.Count, p.L)
	}
	victims := map[core.NodeID]bool{}
	for i, s := range p.Samples {
		t.Logf("sample %d: killed %v, %v told, reports from [%s], T_s %v, O_cp %v, hop %v", i+1, s.Victim, s.Reporter, tracker.FormatIDs(s.ReportsFrom), s.Ts, s.Ocp, s.Hop)
		if victims[s.Victim] {
			t.Errorf("sample %d: %v killed twice", i+1, s.Victim)
		}
		victims[s.Victim] = true
		if s.Reporter == core.None || s.Reporter == s.Victim {
			t.Errorf("sample %d: reporter %v for victim %v", i+1, s.Reporter, s.Victim)
		}
		if s.Ts <= 0 || s.Ocp <= 0 {
			t.Errorf("sample %d: T_s %v, O_cp %v, want > 0", i+1, s.Ts, s.Ocp)
		}
		if s.Members != 7 {
			t.Errorf("sample %d: %d members after the failure, want 7", i+1, s.Members)
		}
		if s.Verdicts != 0 {
			t.Errorf("sample %d: %d detector verdicts, want 0", i+1, s.Verdicts)
		}
		if s.EchoOnce <= 0 || s.EchoOnceCPU <= 0 {
			t.Errorf("sample %d: echo once %v using %v of processor time, want both > 0", i+1, s.EchoOnce, s.EchoOnceCPU)
		}
		if len(s.ReportsFrom) > 1 || len(s.ReportsFrom) == 1 && s.ReportsFrom[0] != s.Reporter {
			t.Errorf("sample %d: the root heard reports from [%s], want at most [%v]", i+1, tracker.FormatIDs(s.ReportsFrom), s.Reporter)
		}
	}
	if p.CPUPerNode <= 0 || p.EchoCPUPerNode <= 0 || p.EchoOnceCPUPerNode <= 0 {
		t.Errorf("processor time per node: %v per stabilization, %v per echo of the series, %v per echo once; want all > 0", p.CPUPerNode, p.EchoCPUPerNode, p.EchoOnceCPUPerNode)
	}
	if p.EchoOnce.N != 2 || p.EchoOnce.Median <= 0 {
		t.Errorf("echo once summarized over %d samples, median %v; want 2, > 0", p.EchoOnce.N, p.EchoOnce.Median)
	}
	var out strings.Builder
	bench.WriteBenchTable(&out, cfg, points)
	want := map[string]string{runner.TransportTCP: "real TCP on loopback", runner.TransportMem: "in-memory transport"}[transport]
	if !strings.Contains(out.String(), "in-process: n hosts in one OS process, GOMAXPROCS=") || !strings.Contains(out.String(), want) {
		t.Errorf("the table's header does not name the in-process mode over %s:\n%s", want, out.String())
	}
}

// TestInProcessKill checks that an in-process kill looks like a SIGKILL to
// the other nodes (paper §3.4: a crashed node is detected and excluded):
// with their detectors live, the survivors of a 5-node job see the
// victim's connections drop, declare it failed and agree on the view
// without it; the victim writes nothing after its kill; a joiner is then
// admitted (§3.7) with the next view. The event streams copied to the
// events directory show the view properties of every node.
func TestInProcessKill(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	job, err := runner.StartInProcess(ctx, runner.JobConfig{N: 5, Fanout: 2, Seed: testSeed(t, 7), EventsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	view, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	victim := view.Members[3]
	if err := job.Kill(victim); err != nil {
		t.Fatal(err)
	}
	// Kill returns once the node is gone: its exit is recorded already.
	if recs, _ := job.Records(0); !slices.ContainsFunc(recs, func(r record.Record) bool {
		_, ok := r.Event.(record.Exited)
		return ok && r.Node == victim
	}) {
		t.Errorf("Kill returned before %v's exit was recorded", victim)
	}
	if err := job.Kill(victim); err == nil {
		t.Errorf("a second kill of %v succeeded", victim)
	}
	if err := job.InjectFailure(victim, view.Members[0]); err == nil {
		t.Errorf("a killed node accepted a failure verdict")
	}
	failed, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(view.Members), func(id core.NodeID) bool { return id == victim })
	if !slices.Equal(failed.Members, want) {
		t.Fatalf("view %s after the kill: [%s], want [%s]", member.FormatEpoch(failed.Epoch), tracker.FormatIDs(failed.Members), tracker.FormatIDs(want))
	}
	joiner := core.NodeID(5)
	if err := job.Spawn(ctx, runner.SpawnOptions{ID: joiner}); err != nil {
		t.Fatal(err)
	}
	joined, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(joined.Members, joiner) || joined.Epoch <= failed.Epoch {
		t.Errorf("view %s after the join: [%s], want %v admitted after %s", member.FormatEpoch(joined.Epoch), tracker.FormatIDs(joined.Members), joiner, member.FormatEpoch(failed.Epoch))
	}
	recs, _ := job.Records(0)
	if err := job.Close(); err != nil {
		t.Fatal(err)
	}

	var killed, verdicts, dropped int
	for _, r := range recs {
		switch e := r.Event.(type) {
		case record.Killed:
			killed++
		case core.Failed:
			if e.Node == victim {
				verdicts++
			}
		case record.Hint:
			if e.Node == victim {
				dropped++
			}
		default:
			if r.Node == victim && killed > 0 && r.Type != "record.Exited" {
				t.Errorf("%v wrote %s after its kill", victim, r.Type)
			}
		}
	}
	if killed != 1 || verdicts == 0 || dropped == 0 {
		t.Errorf("%d kills, %d verdicts about %v, %d hints about it; want 1, > 0, > 0", killed, verdicts, victim, dropped)
	}
	runnertest.CheckViewSafety(t, runnertest.Streams(t, dir))
}

// TestBenchModeHeader checks that the table's header says which mode ran.
func TestBenchModeHeader(t *testing.T) {
	got := bench.BenchMode(bench.BenchConfig{Env: []string{"GOMAXPROCS=3"}})
	if want := "n processes (cohort node, GOMAXPROCS=3 each), real TCP on loopback"; got != want {
		t.Errorf("process mode: got %q, want %q", got, want)
	}
	got = bench.BenchMode(bench.BenchConfig{InProcess: true})
	if !strings.HasPrefix(got, "in-process: n hosts in one OS process, GOMAXPROCS=") || !strings.HasSuffix(got, ", real TCP on loopback") {
		t.Errorf("in-process mode: got %q", got)
	}
	got = bench.BenchMode(bench.BenchConfig{InProcess: true, Transport: runner.TransportMem})
	if !strings.HasPrefix(got, "in-process: n hosts in one OS process, GOMAXPROCS=") || !strings.HasSuffix(got, ", in-memory transport") {
		t.Errorf("in-process mode over mem: got %q", got)
	}
}
