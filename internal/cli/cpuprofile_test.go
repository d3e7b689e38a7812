package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStartCPUProfileStops checks that the stop function startCPUProfile
// returns ends the profile and leaves a profile in the file (it once called
// itself, through the named result it was assigned to, until the stack
// overflowed).
func TestStartCPUProfileStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		t.Fatalf("%s is empty after stop", path)
	}
}
