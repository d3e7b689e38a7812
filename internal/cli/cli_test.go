package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/experiment"
)

// run runs the command line and returns its exit status and outputs.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

type cliToy struct{ value int }

func (e *cliToy) Flags(fs *flag.FlagSet) { fs.IntVar(&e.value, "value", 1, "a `number` from 0 to 9") }

func (e *cliToy) Run(ctx context.Context, s *experiment.Session) error {
	if e.value < 0 || e.value > 9 {
		return experiment.ErrBadOption
	}
	s.Check("value is small", e.value < 5, "value "+string(rune('0'+e.value)))
	return nil
}

func init() {
	experiment.Register(experiment.Spec{Name: "cli-toy", Summary: "a toy for the CLI tests", New: func() experiment.Experiment { return &cliToy{} }})
}

func TestBadInputExitsWithTwo(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string
	}{
		{nil, "Usage"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "sim", "demo"}, "unexpected argument"},
		{[]string{"version", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`},
		{[]string{"sim"}, "missing the experiment name"},
		{[]string{"sim", "no-such-experiment"}, `unknown experiment "no-such-experiment"`},
		{[]string{"sim", "--quick"}, "missing the experiment name"},
		{[]string{"sim", "list", "x"}, "unexpected argument"},
		{[]string{"sim", "cli-toy", "--workers", "many"}, `invalid value "many" for flag -workers`},
		{[]string{"sim", "cli-toy", "--workers", "-1"}, "negative"},
		{[]string{"sim", "cli-toy", "--seed", "-3"}, "invalid value"},
		{[]string{"sim", "cli-toy", "--value", "12", "--out", "OUT"}, "bad option"},
		{[]string{"sim", "cli-toy", "stray", "--out", "OUT"}, `unexpected argument "stray"`},
		{[]string{"ps", "--daemon", "d1@10.0.0.5:7950", "--via", "sn1"}, `--via: supernode "sn1": want NAME@HOST:PORT or HOST:PORT`},
	}
	for _, c := range cases {
		args := make([]string, len(c.args))
		for i, a := range c.args {
			if a == "OUT" {
				a = t.TempDir()
			}
			args[i] = a
		}
		code, _, stderr := run(t, args...)
		if code != 2 {
			t.Errorf("cohort %q: exit %d, want 2 (stderr %q)", c.args, code, stderr)
		}
		if !strings.Contains(stderr, c.wantErr) {
			t.Errorf("cohort %q: stderr %q lacks %q", c.args, stderr, c.wantErr)
		}
	}
}

func TestHelpOutput(t *testing.T) {
	code, out, _ := run(t, "help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for _, c := range sortedCommands() {
		if listed := strings.Contains(out, "  "+c.name+" "); listed == c.hidden {
			t.Errorf("help lists %q: %v, hidden: %v:\n%s", c.name, listed, c.hidden, out)
		}
	}
	for _, args := range [][]string{{"help", "sim"}, {"sim", "-h"}, {"sim", "--help"}} {
		code, out, _ := run(t, args...)
		if code != 0 || !strings.Contains(out, "Usage: cohort sim") || !strings.Contains(out, "cli-toy") || !strings.Contains(out, "Examples:") {
			t.Errorf("cohort %q: exit %d, output:\n%s", args, code, out)
		}
	}
	code, out, _ = run(t, "sim", "cli-toy", "-h")
	if code != 0 || !strings.Contains(out, "-workers") || !strings.Contains(out, "-value number") {
		t.Errorf("sim cli-toy -h: exit %d, output:\n%s", code, out)
	}
	code, out, _ = run(t, "--help")
	if code != 0 || !strings.Contains(out, "Commands:") {
		t.Errorf("--help: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, "sim", "list")
	if code != 0 || !strings.Contains(out, "cli-toy") {
		t.Errorf("sim list: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "cohort ") {
		t.Errorf("version: exit %d: %q", code, out)
	}
}

func TestSimRunsAndReportsChecks(t *testing.T) {
	dir := t.TempDir()
	code, out, stderr := run(t, "sim", "cli-toy", "--out", dir, "--value", "2", "--workers", "1")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(out, "1 of 1 checks passed") {
		t.Errorf("stdout %q", out)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The reproducing command keeps the experiment's flags but not
	// --workers or --out, which do not change the results.
	if !strings.Contains(string(rep), "`cohort sim cli-toy --seed 1 --value=2`") {
		t.Errorf("report:\n%s", rep)
	}
	code, _, stderr = run(t, "sim", "cli-toy", "--out", dir, "--value", "7")
	if code != 1 || !strings.Contains(stderr, "checks failed") {
		t.Errorf("failing check: exit %d, stderr %q", code, stderr)
	}
}
