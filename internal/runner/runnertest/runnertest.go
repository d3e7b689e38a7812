// Package runnertest holds the helpers of tests that start cohort jobs
// (package runner): a TestMain that lets the test binary act as a node, the
// seed of a randomized test, and readers and checks of the nodes' event
// streams.
package runnertest

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/record"
	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/member"
)

// reexecVar makes the test binary act as the cohort command: the jobs of
// these tests start it (their default command is the running executable
// with the argument "node"), so the nodes run exactly `cohort node`.
const reexecVar = "COHORT_TEST_REEXEC"

// Main is the TestMain of a package whose tests start jobs: run as a node
// (the jobs' default command is the test binary itself with the argument
// "node"), it hands its arguments to run (cli.Run) and exits; otherwise it
// runs the tests and checks that none leaks a goroutine.
func Main(m *testing.M, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	if os.Getenv(reexecVar) == "cohort" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Setenv(reexecVar, "cohort")
	goleak.VerifyTestMain(m)
}

// Seed returns the seed of a randomized test: COHORT_TEST_SEED if set,
// else def; the test logs it, with the command that replays it in package
// pkg (a path such as "./internal/bench"), so that a failure can be
// replayed.
func Seed(t *testing.T, def uint64, pkg string) uint64 {
	seed := def
	if s := os.Getenv("COHORT_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("COHORT_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: COHORT_TEST_SEED=%d go test -run '^%s$' %s)", seed, seed, t.Name(), pkg)
	return seed
}

// StartJob starts a job whose processes are stopped and reaped when the
// test ends, even if it fails.
func StartJob(t *testing.T, ctx context.Context, cfg runner.JobConfig) *runner.Job {
	t.Helper()
	job, err := runner.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Close() })
	return job
}

// Streams reads every node's event file in dir: the records of each node,
// in the order it wrote them.
func Streams(t *testing.T, dir string) map[core.NodeID][]record.Record {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "n*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no event streams in %s: %v", dir, err)
	}
	out := map[core.NodeID][]record.Record{}
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
			r, err := record.DecodeRecord(sc.Bytes())
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

// ViewsOf returns the views installed in recs, in order.
func ViewsOf(recs []record.Record) []member.ViewInstalled {
	var vs []member.ViewInstalled
	for _, r := range recs {
		if v, ok := r.Event.(member.ViewInstalled); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// ExitOf returns the last Exit report in recs, nil if there is none.
func ExitOf(recs []record.Record) *record.Exit {
	for _, r := range slices.Backward(recs) {
		if e, ok := r.Event.(record.Exit); ok {
			return &e
		}
	}
	return nil
}

// CheckViewSafety checks the membership properties the streams must show
// whatever happened (paper §3; DESIGN.md, "Membership"): each node's epochs
// only grow, each node belongs to every view it installs, and every node
// that installs an epoch installs the same members.
func CheckViewSafety(t *testing.T, all map[core.NodeID][]record.Record) {
	t.Helper()
	byEpoch := map[uint64][]core.NodeID{}
	for id, recs := range all {
		var last uint64
		for _, v := range ViewsOf(recs) {
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
