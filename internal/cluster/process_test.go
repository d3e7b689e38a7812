package cluster_test

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/cli"
	"github.com/cohort-mp/cohort/internal/cluster"
	"github.com/cohort-mp/cohort/member"
)

// reexecVar makes the test binary act as the cohort command: the jobs of
// these tests start it (their default command is the running executable
// with the argument "node"), so the nodes run exactly `cohort node`.
const reexecVar = "COHORT_TEST_REEXEC"

func TestMain(m *testing.M) {
	if os.Getenv(reexecVar) == "cohort" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Setenv(reexecVar, "cohort")
	goleak.VerifyTestMain(m)
}

// testSeed returns the seed of a randomized test: COHORT_TEST_SEED if set,
// else def; the test logs it so that a failure can be replayed.
func testSeed(t *testing.T, def uint64) uint64 {
	seed := def
	if s := os.Getenv("COHORT_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COHORT_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: COHORT_TEST_SEED=%d go test -run '^%s$' ./internal/cluster)", seed, seed, t.Name())
	return seed
}

// startJob starts a job whose processes are stopped and reaped when the
// test ends, even if it fails.
func startJob(t *testing.T, ctx context.Context, cfg cluster.JobConfig) *cluster.Job {
	t.Helper()
	job, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Close() })
	return job
}

// streams reads every node's event file in dir: the records of each node,
// in the order it wrote them.
func streams(t *testing.T, dir string) map[core.NodeID][]cluster.Record {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "n*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no event streams in %s: %v", dir, err)
	}
	out := map[core.NodeID][]cluster.Record{}
	for _, path := range paths {
		id, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "n"), ".jsonl"), 10, 32)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for line := 1; sc.Scan(); line++ {
			r, err := cluster.DecodeRecord(sc.Bytes())
			if err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			if r.Node != core.NodeID(id) {
				t.Fatalf("%s:%d: a record of %v", path, line, r.Node)
			}
			out[core.NodeID(id)] = append(out[core.NodeID(id)], r)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func viewsOf(recs []cluster.Record) []member.ViewInstalled {
	var vs []member.ViewInstalled
	for _, r := range recs {
		if v, ok := r.Event.(member.ViewInstalled); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

func exitOf(recs []cluster.Record) *cluster.Exit {
	for _, r := range slices.Backward(recs) {
		if e, ok := r.Event.(cluster.Exit); ok {
			return &e
		}
	}
	return nil
}

// checkViewSafety checks the membership properties the streams must show
// whatever happened (paper §3; DESIGN.md, "Membership"): each node's epochs
// only grow, each node belongs to every view it installs, and every node
// that installs an epoch installs the same members.
func checkViewSafety(t *testing.T, all map[core.NodeID][]cluster.Record) {
	t.Helper()
	byEpoch := map[uint64][]core.NodeID{}
	for id, recs := range all {
		var last uint64
		for _, v := range viewsOf(recs) {
			if v.Epoch <= last {
				t.Errorf("%v installed %s after %s", id, member.FormatEpoch(v.Epoch), member.FormatEpoch(last))
			}
			last = v.Epoch
			if !slices.Contains(v.Members, id) {
				t.Errorf("%v installed %s without itself: %v", id, member.FormatEpoch(v.Epoch), v.Members)
			}
			if prev, ok := byEpoch[v.Epoch]; ok && !slices.Equal(prev, v.Members) {
				t.Errorf("epoch %s: %v installed %v, another node %v", member.FormatEpoch(v.Epoch), id, v.Members, prev)
			}
			byEpoch[v.Epoch] = v.Members
		}
	}
}

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
	job := startJob(t, ctx, cluster.JobConfig{N: 16, Fanout: 4, Detector: cluster.DetectorBRR, Seed: seed, EventsDir: dir})

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
	all := streams(t, dir)
	if len(all) != 16 {
		t.Fatalf("%d event streams, want 16", len(all))
	}
	checkViewSafety(t, all)
	var final uint64
	for _, id := range survivors {
		vs := viewsOf(all[id])
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
		if exitOf(all[id]) == nil {
			t.Errorf("%v's stream does not end with its Exit record (it did not stop cleanly)", id)
		}
	}
	if member.EpochRoot(final) == 0 {
		t.Errorf("the final view %s was proposed by the dead root", member.FormatEpoch(final))
	}
	for _, id := range victims {
		if exitOf(all[id]) != nil {
			t.Errorf("killed %v wrote an Exit record", id)
		}
	}
	// The orchestrator's own records: three kills, sixteen exits.
	job2 := streamsOfJob(t, dir)
	if got := job2["cluster.Killed"]; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(victims))) {
		t.Errorf("job.jsonl kills %v, want %v", got, victims)
	}
	if got := len(job2["cluster.Exited"]); got != 16 {
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
		r, err := cluster.DecodeRecord([]byte(line))
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
	job := startJob(t, ctx, cluster.JobConfig{N: 4, Fanout: 2, Detector: cluster.DetectorHeartbeat, Seed: 1, EventsDir: dir})

	const intruder, joiner = core.NodeID(10), core.NodeID(11)
	wrong := make([]byte, 32)
	crand.Read(wrong)
	if err := job.Spawn(ctx, cluster.SpawnOptions{ID: intruder, Secret: wrong}); err != nil {
		t.Fatal(err)
	}
	// The intruder's first dial fails its handshake.
	refused := ""
	for from := 0; refused == ""; {
		recs, changed := job.Records(from)
		from += len(recs)
		for _, r := range recs {
			if h, ok := r.Event.(cluster.Hint); ok && r.Node == intruder && strings.Contains(h.Reason, "handshake failed") {
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

	if err := job.Spawn(ctx, cluster.SpawnOptions{ID: joiner}); err != nil {
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

	all := streams(t, dir)
	checkViewSafety(t, all)
	for id, recs := range all {
		for _, v := range viewsOf(recs) {
			if slices.Contains(v.Members, intruder) {
				t.Errorf("%v installed %s, which holds the intruder", id, member.FormatEpoch(v.Epoch))
			}
		}
	}
	if vs := viewsOf(all[intruder]); len(vs) != 0 {
		t.Errorf("the intruder installed %d views", len(vs))
	}
	ex := exitOf(all[intruder])
	if ex == nil {
		t.Fatal("the intruder did not stop cleanly")
	}
	if ex.Transport.Established != 0 || ex.Transport.FramesIn != 0 || ex.Transport.DialFailures == 0 {
		t.Errorf("intruder's transport: %+v, want no connection, no frame in, failed dials", ex.Transport)
	}
	var refusals uint64
	for _, id := range []core.NodeID{0, 1, 2, 3, joiner} {
		ex := exitOf(all[id])
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
