package bench_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/bench"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/runner/runnertest"
	"github.com/cohort-mp/cohort/internal/workload"

	"github.com/cohort-mp/cohort/core"
)

// TestMulticastSameDeliveryAfterKill runs the multicast workload on 16 real
// processes (50 messages of 64 bytes per second each) for about two
// seconds, kills one while every process multicasts, and checks same-view delivery (Varma et al. §2.1): every
// survivor moves to the new view having delivered exactly the same
// messages in the old one — the count and the digest (sum of per-message
// hashes) its vsync layer reports with the view change are identical —
// and the survivors keep delivering in the new view.
func TestMulticastSameDeliveryAfterKill(t *testing.T) {
	seed := testSeed(t, 7)
	const n = 16
	opts := workload.DefaultMulticastOptions()
	opts.Rate = 50
	opts.Size = 64
	opts.Report = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	job := runnertest.StartJob(t, ctx, runner.JobConfig{N: n, Seed: seed, Env: []string{workload.MulticastEnv + "=" + opts.String()}})

	// Wait until every node has delivered about two seconds of traffic.
	delivered := map[core.NodeID]uint64{}
	// The view of each node's last report, and how many it had delivered
	// at its first report in that view (a lower bound of what it
	// delivered there).
	epoch, inView := map[core.NodeID]uint64{}, map[core.NodeID]uint64{}
	waitRecords(t, ctx, job, func(r record.Record) bool {
		if m, ok := bench.ReportOf(r); ok {
			if e, seen := epoch[r.Node]; !seen || e != m.Epoch {
				epoch[r.Node], inView[r.Node] = m.Epoch, m.Delivered
			}
			delivered[r.Node] = m.Delivered
		}
		for id := range core.NodeID(n) {
			if delivered[id] < 100*n {
				return false
			}
		}
		return true
	})
	r := rand.New(rand.NewPCG(seed, 1))
	victim := core.NodeID(1 + r.IntN(n-1))
	if err := job.Kill(victim); err != nil {
		t.Fatal(err)
	}
	view, err := job.WaitAgreed(ctx, map[core.NodeID]bool{victim: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %v; view %d holds %v", victim, view.Epoch, view.Members)

	// Every survivor announces the new view to its application, and then
	// delivers messages of the new view. A node leaving the view it was
	// in before the kill must have delivered there at least what its
	// reports counted in it (a loaded machine may add views: a live
	// process excluded and admitted again).
	announced := map[core.NodeID]bool{}
	after := map[core.NodeID]uint64{}
	waitRecords(t, ctx, job, func(r record.Record) bool {
		if v, ok := bench.ViewChangedOf(r); ok && v.Epoch >= view.Epoch {
			announced[r.Node] = true
			if want := delivered[r.Node] - inView[r.Node]; v.Previous == epoch[r.Node] && v.Count < want {
				t.Errorf("%v moved %d→%d having delivered only %d messages, its reports counted %d", r.Node, v.Previous, v.Epoch, v.Count, want)
			}
		}
		if m, ok := bench.ReportOf(r); ok && m.Epoch >= view.Epoch {
			after[r.Node] = max(after[r.Node], m.Delivered)
		}
		for _, id := range view.Members {
			if !announced[id] || after[id] <= delivered[id] {
				return false
			}
		}
		return true
	})
	recs, _ := job.Records(0)
	moves, err := bench.CheckSameDelivery(recs)
	if err != nil {
		t.Fatal(err)
	}
	if moves < len(view.Members) {
		t.Fatalf("compared %d view changes, want at least %d (one per survivor)", moves, len(view.Members))
	}
	t.Logf("%d survivors delivered the same messages in the old view (%d view changes compared)", len(view.Members), moves)
}

// TestCheckSameDeliveryDetects feeds CheckSameDelivery two survivors that
// disagree: it must say so.
func TestCheckSameDeliveryDetects(t *testing.T) {
	line := func(node int, count, digest uint64) record.Record {
		r, err := record.DecodeRecord([]byte(`{"time":"2026-01-01T00:00:00Z","uptime_ns":1,"node":` + itoa(node) +
			`,"type":"vsync.ViewChanged","fields":{"Epoch":9,"Members":[0,1],"Previous":5,"Count":` + itoa(int(count)) + `,"Digest":` + itoa(int(digest)) + `,"Flush":0}}`))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if _, err := bench.CheckSameDelivery([]record.Record{line(0, 10, 77), line(1, 10, 77)}); err != nil {
		t.Fatalf("agreeing survivors: %v", err)
	}
	_, err := bench.CheckSameDelivery([]record.Record{line(0, 10, 77), line(1, 10, 78)})
	if !errors.Is(err, bench.ErrMulticastDisagree) {
		t.Fatalf("got %v, want ErrMulticastDisagree", err)
	}
}

func itoa(v int) string { return strconv.Itoa(v) }

// waitRecords feeds every record of the job, in order, to f until f
// returns true or ctx ends.
func waitRecords(t *testing.T, ctx context.Context, job *runner.Job, f func(record.Record) bool) {
	t.Helper()
	for from := 0; ; {
		recs, ch := job.Records(from)
		from += len(recs)
		for _, r := range recs {
			if f(r) {
				return
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for the nodes' reports: %v", ctx.Err())
		}
	}
}

// TestMulticastOptions: the environment format round-trips, bad values are
// errors wrapping ErrMulticast, and an unset variable means no workload.
func TestMulticastOptions(t *testing.T) {
	o := workload.DefaultMulticastOptions()
	o.Rate, o.Size, o.Window, o.Period, o.Report = 12.5, 100, 7, 3*time.Millisecond, 2*time.Second
	got, err := workload.ParseMulticastOptions(o.String())
	if err != nil || got != o {
		t.Fatalf("round trip of %q: %+v, %v", o.String(), got, err)
	}
	for _, bad := range []string{"rate=-1", "size=3", "window=0", "period=0s", "protocol=paxos", "report=x", "speed=1", "rate"} {
		if _, err := workload.ParseMulticastOptions(bad); !errors.Is(err, workload.ErrMulticast) {
			t.Errorf("%q: got %v, want ErrMulticast", bad, err)
		}
	}
	env := map[string]string{}
	if mo, err := workload.MulticastFromEnv(func(k string) string { return env[k] }); mo != nil || err != nil {
		t.Fatalf("unset: %v, %v", mo, err)
	}
	env[workload.MulticastEnv] = "rate=5"
	if mo, err := workload.MulticastFromEnv(func(k string) string { return env[k] }); err != nil || mo.Rate != 5 {
		t.Fatalf("rate=5: %+v, %v", mo, err)
	}
}
