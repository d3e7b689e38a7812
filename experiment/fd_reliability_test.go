package experiment

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runTiny runs a registered experiment with its flags set from args and
// returns the output directory and the checks. Failed checks are returned,
// not fatal.
func runTiny(t *testing.T, name string, workers int, args ...string) (string, []Check) {
	t.Helper()
	spec, ok := Lookup(name)
	if !ok {
		t.Fatalf("%s is not registered", name)
	}
	e := spec.New()
	fs := flagSetFor(e)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := Execute(context.Background(), spec, e, Options{Seed: 5, Out: dir, Workers: workers, Quick: true})
	if err != nil && !errors.Is(err, ErrChecksFailed) {
		t.Fatalf("%s: %v", name, err)
	}
	return dir, s.Checks()
}

// mustPass fails the test for every failed check whose name starts with
// one of prefixes (all checks when none is given).
func mustPass(t *testing.T, checks []Check, prefixes ...string) {
	t.Helper()
	for _, c := range checks {
		if c.Passed {
			continue
		}
		match := len(prefixes) == 0
		for _, p := range prefixes {
			match = match || strings.HasPrefix(c.Name, p)
		}
		if match {
			t.Errorf("check failed: %s: %s", c.Name, c.Detail)
		}
	}
}

// sameFiles fails unless the named files of two output directories are
// byte-identical.
func sameFiles(t *testing.T, a, b string, files ...string) {
	t.Helper()
	for _, f := range files {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between worker counts:\n%s\n---\n%s", f, x, y)
		}
	}
}

// TestFDReliabilityTiny runs a small fd-reliability (P2P-MPI §5.2, Fig. 12)
// with one and two workers: the checks pass and the outputs are identical.
func TestFDReliabilityTiny(t *testing.T) {
	args := []string{"--max-n", "8", "--max-trials", "32768", "--dbrr-trials", "16384", "--min-failures", "50"}
	one, checks := runTiny(t, "fd-reliability", 1, args...)
	mustPass(t, checks)
	two, _ := runTiny(t, "fd-reliability", 2, args...)
	sameFiles(t, one, two, "reliability.csv", "report.md")
	for _, f := range []string{"reliability.png", "reliability.svg"} {
		if _, err := os.Stat(filepath.Join(one, f)); err != nil {
			t.Error(err)
		}
	}
}

// flagSetFor returns a FlagSet holding only e's own flags.
func flagSetFor(e Experiment) *flag.FlagSet {
	fs := flag.NewFlagSet("experiment", flag.ContinueOnError)
	e.Flags(fs)
	return fs
}
