package launchbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// fakeLauncher "starts" n ranks by writing their first-view lines, each
// rank r at start + (r+1) ms, or what lines says.
type fakeLauncher struct {
	name  string
	lines func(start time.Time, n int) string
	calls []string
}

func (f *fakeLauncher) Name() string                { return f.name }
func (f *fakeLauncher) Check(context.Context) error { return nil }
func (f *fakeLauncher) Run(_ context.Context, n int, prog string, _, _ []string, out io.Writer) error {
	f.calls = append(f.calls, fmt.Sprintf("%s/%d", prog, n))
	if prog == "true" {
		return nil
	}
	io.WriteString(out, f.lines(time.Now(), n))
	return nil
}

func views(start time.Time, n int) string {
	var b strings.Builder
	for r := 0; r < n; r++ {
		fmt.Fprintf(&b, "noise from rank %d\n%s %d %d\n", r, ViewLine, r, start.Add(time.Duration(r+1)*time.Hour).UnixNano())
	}
	return b.String()
}

// TestMeasure: the time to the first view is the last rank's, from the
// launcher's start; missing or malformed lines are errors.
func TestMeasure(t *testing.T) {
	l := &fakeLauncher{name: "fake", lines: views}
	run, err := Measure(context.Background(), l, 4, "prog", nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.FirstView < 4*time.Hour || run.FirstView > 4*time.Hour+time.Minute {
		t.Errorf("first view after %v, want the last rank's 4 h", run.FirstView)
	}
	l.lines = func(start time.Time, n int) string { return views(start, n-1) }
	if _, err := Measure(context.Background(), l, 4, "prog", nil); err == nil || !strings.Contains(err.Error(), "3 of 4 ranks") {
		t.Errorf("a missing rank: %v", err)
	}
	l.lines = func(time.Time, int) string { return ViewLine + " 9 12\n" }
	if _, err := Measure(context.Background(), l, 4, "prog", nil); err == nil || !strings.Contains(err.Error(), "bad worker line") {
		t.Errorf("a rank out of range: %v", err)
	}
}

// TestBench: launchers alternate within each repetition, each run is
// followed by its baseline, and the statistics are over the runs.
func TestBench(t *testing.T) {
	a, b := &fakeLauncher{name: "a", lines: views}, &fakeLauncher{name: "b", lines: views}
	res, err := Bench(context.Background(), []Launcher{a, b}, []int{2, 3}, 2, "prog", nil, "true", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(a.calls, " "), "prog/2 true/2 prog/3 true/3 prog/2 true/2 prog/3 true/3"; got != want {
		t.Errorf("launcher a ran %q, want %q", got, want)
	}
	if len(res) != 4 || res[0].Launcher != "a" || res[1].Launcher != "b" || res[2].N != 3 {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if len(r.Runs) != 2 {
			t.Errorf("%s n=%d: %d runs, want 2", r.Launcher, r.N, len(r.Runs))
		}
	}
	r := Result{Runs: []Run{{FirstView: 3}, {FirstView: 1}, {FirstView: 2}, {FirstView: 10}}}
	if m, lo, hi := r.Stat(func(x Run) time.Duration { return x.FirstView }); m != 2 || lo != 1 || hi != 10 {
		t.Errorf("median %v min %v max %v, want 2 (of 2 and 3, rounded down) 1 10", m, lo, hi)
	}
	if _, ok := Lookup("local"); !ok {
		t.Error("no local launcher")
	}
	if _, ok := Lookup("slurm"); !ok {
		t.Error("no slurm launcher")
	}
}
