package runner_test

import (
	"context"
	crand "crypto/rand"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/runner/runnertest"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/cli"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/member"
)

func TestMain(m *testing.M) { runnertest.Main(m, cli.Run) }

func testSeed(t *testing.T, def uint64) uint64 { return runnertest.Seed(t, def, "./internal/runner") }

// TestKillThreeIncludingRoot starts 16 real processes on loopback, kills
// the root (§3.6: root failure) and two other nodes with SIGKILL in quick
// succession (§3.5: multiple failures), and checks from the processes' own
// event streams that all 13 survivors end in one view that holds exactly
// them, with no node ever disagreeing on an epoch's members.
func TestKillThreeIncludingRoot(t *testing.T) {
	seed := testSeed(t, 3)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	job := runnertest.StartJob(t, ctx, runner.JobConfig{N: 16, Fanout: 4, Detector: runner.DetectorBRR, Seed: seed, EventsDir: dir})

	victims := []core.NodeID{0} // the root of the first view
	for len(victims) < 3 {
		if v := core.NodeID(1 + rng.IntN(15)); !slices.Contains(victims, v) {
			victims = append(victims, v)
		}
	}
	t.Logf("killing %v", victims)
	for _, v := range victims {
		if err := job.Kill(v); err != nil {
			t.Fatal(err)
		}
		// Kill returns once the process is reaped: its exit is recorded.
		if recs, _ := job.Records(0); !slices.ContainsFunc(recs, func(r record.Record) bool {
			_, ok := r.Event.(record.Exited)
			return ok && r.Node == v
		}) {
			t.Errorf("Kill returned before %v's exit was recorded", v)
		}
	}
	view, err := job.WaitAgreed(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var survivors []core.NodeID
	for id := range core.NodeID(16) {
		if !slices.Contains(victims, id) {
			survivors = append(survivors, id)
		}
	}
	if got := slices.Sorted(slices.Values(view.Members)); !slices.Equal(got, survivors) {
		t.Fatalf("agreed view %v, want the survivors %v", got, survivors)
	}
	if err := job.Close(); err != nil {
		t.Fatal(err)
	}

	// What the processes wrote, read back from their files.
	all := runnertest.Streams(t, dir)
	if len(all) != 16 {
		t.Fatalf("%d event streams, want 16", len(all))
	}
	runnertest.CheckViewSafety(t, all)
	var final uint64
	for _, id := range survivors {
		vs := runnertest.ViewsOf(all[id])
		if len(vs) < 2 {
			t.Fatalf("%v installed %d views", id, len(vs))
		}
		last := vs[len(vs)-1]
		if final == 0 {
			final = last.Epoch
		}
		if last.Epoch != final || !slices.Equal(slices.Sorted(slices.Values(last.Members)), survivors) {
			t.Errorf("%v ends in %s with %v, want %s with %v", id, member.FormatEpoch(last.Epoch), last.Members, member.FormatEpoch(final), survivors)
		}
		if runnertest.ExitOf(all[id]) == nil {
			t.Errorf("%v's stream does not end with its Exit record (it did not stop cleanly)", id)
		}
	}
	if member.EpochRoot(final) == 0 {
		t.Errorf("the final view %s was proposed by the dead root", member.FormatEpoch(final))
	}
	for _, id := range victims {
		if runnertest.ExitOf(all[id]) != nil {
			t.Errorf("killed %v wrote an Exit record", id)
		}
	}
	// The orchestrator's own records: three kills, sixteen exits.
	job2 := streamsOfJob(t, dir)
	if got := job2["record.Killed"]; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(victims))) {
		t.Errorf("job.jsonl kills %v, want %v", got, victims)
	}
	if got := len(job2["record.Exited"]); got != 16 {
		t.Errorf("job.jsonl has %d exits, want 16", got)
	}
}

// streamsOfJob reads job.jsonl: the nodes of each record type.
func streamsOfJob(t *testing.T, dir string) map[string][]core.NodeID {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "job.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]core.NodeID{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		r, err := record.DecodeRecord([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		out[r.Type] = append(out[r.Type], r.Node)
	}
	return out
}

// TestWrongSecretCannotJoin starts four nodes, then a node that asks to
// join (NEW_NODE, §3.7) with the wrong job secret, then one with the right
// secret. The first never gets a connection (every handshake fails:
// DESIGN.md, "Security"), never installs a view and is in no node's view;
// the second is admitted, and the job agrees on the four plus it.
func TestWrongSecretCannotJoin(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	job := runnertest.StartJob(t, ctx, runner.JobConfig{N: 4, Fanout: 2, Detector: runner.DetectorHeartbeat, Seed: 1, EventsDir: dir})

	const intruder, joiner = core.NodeID(10), core.NodeID(11)
	wrong := make([]byte, 32)
	crand.Read(wrong)
	if err := job.Spawn(ctx, runner.SpawnOptions{ID: intruder, Secret: wrong}); err != nil {
		t.Fatal(err)
	}
	// The intruder's first dial fails its handshake.
	refused := ""
	for from := 0; refused == ""; {
		recs, changed := job.Records(from)
		from += len(recs)
		for _, r := range recs {
			if h, ok := r.Event.(record.Hint); ok && r.Node == intruder && strings.Contains(h.Reason, "handshake failed") {
				refused = h.Reason
			}
		}
		if refused != "" {
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("the intruder reported no failed handshake")
		}
	}
	t.Logf("intruder: %s", refused)

	if err := job.Spawn(ctx, runner.SpawnOptions{ID: joiner}); err != nil {
		t.Fatal(err)
	}
	view, err := job.WaitAgreed(ctx, map[core.NodeID]bool{intruder: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(view.Members)); !slices.Equal(got, []core.NodeID{0, 1, 2, 3, joiner}) {
		t.Fatalf("agreed view %v, want [0 1 2 3 %d]", got, joiner)
	}
	if err := job.Close(); err != nil {
		t.Fatal(err)
	}

	all := runnertest.Streams(t, dir)
	runnertest.CheckViewSafety(t, all)
	for id, recs := range all {
		for _, v := range runnertest.ViewsOf(recs) {
			if slices.Contains(v.Members, intruder) {
				t.Errorf("%v installed %s, which holds the intruder", id, member.FormatEpoch(v.Epoch))
			}
		}
	}
	if vs := runnertest.ViewsOf(all[intruder]); len(vs) != 0 {
		t.Errorf("the intruder installed %d views", len(vs))
	}
	ex := runnertest.ExitOf(all[intruder])
	if ex == nil {
		t.Fatal("the intruder did not stop cleanly")
	}
	if ex.Transport.Established != 0 || ex.Transport.FramesIn != 0 || ex.Transport.DialFailures == 0 {
		t.Errorf("intruder's transport: %+v, want no connection, no frame in, failed dials", ex.Transport)
	}
	var refusals uint64
	for _, id := range []core.NodeID{0, 1, 2, 3, joiner} {
		ex := runnertest.ExitOf(all[id])
		if ex == nil {
			t.Fatalf("%v did not stop cleanly", id)
		}
		refusals += ex.Transport.Refused
	}
	if refusals == 0 {
		t.Error("no member counted a refused connection")
	}
	t.Logf("members refused %d connections", refusals)
}
