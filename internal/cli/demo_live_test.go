package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The live demo end to end (Phoenix §5.2.2: random work stealing survives
// the death of thieves and victims): examples/nqueens on 5 processes, two
// killed; the output names the kills, the views that exclude them and the
// exact count, and the demo exits 0.
func TestLiveDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/nqueens and runs it twice as 5 processes")
	}
	const seed = "3"
	t.Logf("seed %s", seed)
	code, out, stderr := run(t, "demo", "--n", "15", "--procs", "5", "--kill", "2", "--seed", seed)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	// Kills are planned from the failure-free run's search time; a run with
	// kills that searches much faster (the failure-free run slowed by other
	// work) can end before a planned kill, which the demo must then say.
	killed := regexp.MustCompile(`(n\d+) +✗ killed \(SIGKILL\)`).FindAllStringSubmatch(out, -1)
	missed := 0
	if m := regexp.MustCompile(`\((\d+) planned kill\(s\) came after the job had ended\)`).FindStringSubmatch(out); m != nil {
		fmt.Sscan(m[1], &missed)
	}
	if len(killed) == 0 || len(killed)+missed != 2 {
		t.Fatalf("%d kills shown and %d reported after the end, want 2 with at least one shown:\n%s", len(killed), missed, out)
	}
	for _, k := range killed {
		if !regexp.MustCompile(`view ◆ epoch \S+ installed by \d+/\d+ live members.*departed \[[^\]]*\b` + k[1] + `\b`).MatchString(out) {
			t.Errorf("no view shown without %s:\n%s", k[1], out)
		}
		if !strings.Contains(out, k[1]+" killed at +") {
			t.Errorf("the summary does not time the recovery from the kill of %s:\n%s", k[1], out)
		}
	}
	for _, want := range []string{"epoch 1.n0 installed by 5/5 live members", "count      2,279,184 solutions, known 2,279,184 for n = 15   ✔ exact", "lost to recovery"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colours in output that is not a terminal:\n%q", out)
	}
	// The legend comes once, before the event table it explains.
	legend := `"epoch 2.n0" is view number 2, proposed by its root n0`
	if strings.Count(out, legend) != 1 || strings.Index(out, legend) > strings.Index(out, "✗ killed (SIGKILL)") {
		t.Errorf("the legend is not shown once before the events:\n%s", out)
	}
}

// A program whose count is wrong (it lies in the run with kills, after an
// honest failure-free run) makes the demo exit 1 and say WRONG.
func TestLiveDemoWrongCount(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "liar")
	script := fmt.Sprintf(`#!/bin/sh
[ "$COHORT_RANK" = 0 ] || { sleep 1; exit 0; }
count=2279184
if [ -e %[1]s/second ]; then count=2279183; fi
touch %[1]s/second
sleep 0.5
echo "nqueens n=15 mode=steal ranks=3: $count solutions in 0.400s (known 2279184): CORRECT"
`, dir)
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "demo", "--n", "15", "--procs", "3", "--kill", "1", "--program", prog)
	if code != 1 || !strings.Contains(out, "count      2,279,183 solutions, known 2,279,184 for n = 15   ✗ WRONG") ||
		!strings.Contains(stderr, "count 2279183, known 2279184") {
		t.Fatalf("exit %d, want 1 naming the wrong count\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}
