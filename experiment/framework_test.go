package experiment

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func testSession(t *testing.T, workers int) *Session {
	t.Helper()
	s, err := NewSession("toy", Options{Seed: 3, Out: t.TempDir(), Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDeriveSeedDependsOnBaseAndKeyOnly(t *testing.T) {
	if a, b := DeriveSeed(1, "a"), DeriveSeed(1, "a"); a != b {
		t.Fatal("DeriveSeed is not a function of its arguments")
	}
	seen := map[uint64]string{}
	for base := uint64(0); base < 4; base++ {
		for _, k := range []string{"", "a", "b", "n=8/seed=0", "n=8/seed=1"} {
			s := DeriveSeed(base, k)
			if prev, dup := seen[s]; dup {
				t.Errorf("DeriveSeed(%d, %q) = DeriveSeed of %s", base, k, prev)
			}
			seen[s] = fmt.Sprintf("(%d, %q)", base, k)
		}
	}
}

// TestRunAllOrderAndWorkers: results come back in task order, and equal for
// any number of workers, even when tasks finish out of order.
func TestRunAllOrderAndWorkers(t *testing.T) {
	mk := func() []Task[uint64] {
		var tasks []Task[uint64]
		for i := range 40 {
			tasks = append(tasks, Task[uint64]{
				Key:  fmt.Sprintf("t%02d", i),
				Cost: float64(i % 7),
				Run: func(_ context.Context, seed uint64) (uint64, error) {
					// Uneven work so that completion order differs from task order.
					x := seed
					for range (40 - i) * 1000 {
						x = splitmix(x)
					}
					return x, nil
				},
			})
		}
		return tasks
	}
	one, err := RunAll(context.Background(), testSession(t, 1), "w1", mk())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int{2, 3, 8} {
		got, err := RunAll(context.Background(), testSession(t, w), "wN", mk())
		if err != nil {
			t.Fatal(err)
		}
		for i := range one {
			if got[i] != one[i] {
				t.Fatalf("workers=%d: result %d = %x, with one worker %x", w, i, got[i], one[i])
			}
		}
	}
}

func TestRunAllErrors(t *testing.T) {
	s := testSession(t, 2)
	ok := func(context.Context, uint64) (int, error) { return 1, nil }
	if _, err := RunAll(context.Background(), s, "dup", []Task[int]{{Key: "a", Run: ok}, {Key: "a", Run: ok}}); err == nil {
		t.Error("duplicate keys accepted")
	}
	boom := errors.New("boom")
	tasks := []Task[int]{
		{Key: "fine", Run: ok},
		{Key: "fails", Run: func(context.Context, uint64) (int, error) { return 0, boom }},
		{Key: "panics", Run: func(context.Context, uint64) (int, error) { panic("bad index") }},
	}
	_, err := RunAll(context.Background(), s, "errs", tasks)
	if !errors.Is(err, boom) && !errors.Is(err, ErrRunPanicked) {
		t.Fatalf("got %v, want the task's error", err)
	}
	if !strings.Contains(err.Error(), "seed") {
		t.Errorf("error %q does not name the seed", err)
	}
	_, err = RunAll(context.Background(), s, "panic", tasks[2:])
	if !errors.Is(err, ErrRunPanicked) || !strings.Contains(err.Error(), "bad index") || !strings.Contains(err.Error(), `"panics"`) {
		t.Errorf("panic became %v", err)
	}
}

func TestRunAllCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started atomic.Int32
	var tasks []Task[int]
	for i := range 100 {
		tasks = append(tasks, Task[int]{Key: fmt.Sprint(i), Run: func(ctx context.Context, _ uint64) (int, error) {
			if started.Add(1) == 3 {
				cancel()
			}
			return 0, ctx.Err()
		}})
	}
	_, err := RunAll(ctx, testSession(t, 2), "cancel", tasks)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := started.Load(); n == 100 {
		t.Errorf("all %d tasks ran after cancellation", n)
	}
}

func TestWilson(t *testing.T) {
	// Reference values (Wilson 1927; e.g. Newcombe 1998, Table I).
	cases := []struct {
		k, n   int64
		lo, hi float64
	}{
		{81, 263, 0.2553, 0.3662},
		{15, 148, 0.0624, 0.1605},
		{0, 20, 0, 0.1611},
		{1, 29, 0.0061, 0.1718},
	}
	for _, c := range cases {
		lo, hi := Wilson(c.k, c.n, Z95)
		if math.Abs(lo-c.lo) > 5e-4 || math.Abs(hi-c.hi) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	if got := RuleOfThree(300); got != 0.01 {
		t.Errorf("RuleOfThree(300) = %v", got)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{4, 1, 3, 2})
	if s.N != 4 || s.Mean != 2.5 || s.Min != 1 || s.Max != 4 || s.P50 != 2.5 {
		t.Errorf("Summarize = %+v", s)
	}
	if q := Quantile([]float64{0, 10}, 0.9); q != 9 {
		t.Errorf("Quantile = %v, want 9", q)
	}
	if !math.IsNaN(Summarize(nil).Mean) {
		t.Error("empty sample has a mean")
	}
}

func TestFigureSaves(t *testing.T) {
	dir := t.TempDir()
	f := Figure{
		Name: "fig", Title: "t", XLabel: "nodes n", YLabel: "probability", LogX: true, LogY: true,
		XTicks: []float64{4, 16, 64},
		Series: []Series{
			{Label: "a", Points: []Point{{X: 4, Y: 0.1, Lo: 0, Hi: 0.2}, {X: 16, Y: 0}, {X: 64, Y: 0.01, Lo: 0.005, Hi: 0.02}}},
			{Label: "b", Style: Lines, Dashed: true, Points: []Point{{X: 4, Y: 0.3}, {X: 64, Y: math.NaN()}}},
		},
	}
	if err := f.Save(filepath.Join(dir, "fig")); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".png", ".svg"} {
		if st, err := os.Stat(filepath.Join(dir, "fig"+ext)); err != nil || st.Size() == 0 {
			t.Errorf("fig%s: %v", ext, err)
		}
	}
	if d := f.Dropped(); len(d) != 2 {
		t.Errorf("Dropped = %q, want the zero and the NaN point", d)
	}
	empty := Figure{Name: "e", LogY: true, Series: []Series{{Points: []Point{{X: 1, Y: 0}}}}}
	if err := empty.Save(filepath.Join(dir, "e")); !errors.Is(err, ErrEmptyFigure) {
		t.Errorf("empty figure: %v", err)
	}
}

// toy is a tiny experiment for the framework's tests.
type toy struct {
	fail bool
	runs int
}

func (e *toy) Flags(fs *flag.FlagSet) { fs.IntVar(&e.runs, "runs", 5, "runs") }

func (e *toy) Run(ctx context.Context, s *Session) error {
	var tasks []Task[float64]
	for i := range e.runs {
		tasks = append(tasks, Task[float64]{Key: fmt.Sprint(i), Run: func(_ context.Context, seed uint64) (float64, error) {
			return float64(seed%1000) / 1000, nil
		}})
	}
	res, err := RunAll(ctx, s, "toy", tasks)
	if err != nil {
		return err
	}
	var rows [][]string
	var pts []Point
	for i, r := range res {
		rows = append(rows, []string{fmt.Sprint(i), F(r)})
		pts = append(pts, Point{X: float64(i), Y: r})
	}
	if err := s.WriteCSV("toy.csv", []string{"i", "value"}, rows); err != nil {
		return err
	}
	if err := s.Figure(Figure{Name: "toy", Title: "Toy", XLabel: "run", YLabel: "value (1)", Series: []Series{{Label: "v", Points: pts}}}, "The paper has no such figure."); err != nil {
		return err
	}
	s.Check("values in [0, 1)", true, "all of them")
	s.Check("the toy fails when asked", !e.fail, fmt.Sprintf("fail=%v", e.fail))
	return nil
}

func TestExecuteWritesReportAndIsWorkerIndependent(t *testing.T) {
	spec := Spec{Name: "toy", Summary: "a toy", New: func() Experiment { return &toy{runs: 6} }}
	read := func(workers int) (string, string) {
		dir := t.TempDir()
		_, err := Execute(context.Background(), spec, spec.New(), Options{Seed: 9, Out: dir, Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		csv, _ := os.ReadFile(filepath.Join(dir, "toy.csv"))
		rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
		return string(csv), string(rep)
	}
	c1, r1 := read(1)
	c2, r2 := read(2)
	if c1 != c2 || r1 != r2 {
		t.Fatalf("outputs differ between 1 and 2 workers:\n%s\n%s", c1, c2)
	}
	for _, want := range []string{"# toy", "a toy", "cohort sim toy --seed 9", "| PASS | values in [0, 1)", "2 of 2 checks passed", "![Toy](toy.png)", "The paper has no such figure."} {
		if !strings.Contains(r1, want) {
			t.Errorf("report lacks %q:\n%s", want, r1)
		}
	}

	dir := t.TempDir()
	_, err := Execute(context.Background(), spec, &toy{runs: 2, fail: true}, Options{Seed: 1, Out: dir})
	if !errors.Is(err, ErrChecksFailed) {
		t.Fatalf("failed check gave %v", err)
	}
	rep, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(rep), "**FAIL**") {
		t.Errorf("report does not show the failure:\n%s", rep)
	}
	if _, err := NewSession("toy", Options{Workers: -1, Out: dir}); !errors.Is(err, ErrBadOption) {
		t.Errorf("negative workers: %v", err)
	}
}
