package experiment

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// runTiny runs a registered experiment with its flags set from args and
// returns the output directory.
func runTiny(t *testing.T, name string, workers int, args ...string) string {
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
	if _, err := Execute(context.Background(), spec, e, Options{Seed: 5, Out: dir, Workers: workers, Quick: true}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return dir
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
	one := runTiny(t, "fd-reliability", 1, args...)
	two := runTiny(t, "fd-reliability", 2, args...)
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
