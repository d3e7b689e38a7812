package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestMain fails the run when a daemon of this test process left a cgroup
// behind (in any hierarchy the daemon uses, under this process's own
// cgroup): every test that starts a daemon stops it, and a stopped daemon
// removes its jobs' cgroups and its own.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := basesLeft(os.Getpid()); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the daemons of this run left cgroups behind: %q\n", left)
		for _, d := range left {
			os.Remove(d)
		}
		code = 1
	}
	os.Exit(code)
}

// basesLeft lists the base cgroups of this process's daemons (pid's)
// still present under its own cgroups.
func basesLeft(pid int) []string {
	v2, v1, own, err := findCgroups()
	if err != nil {
		return nil
	}
	var parents []string
	if v2 != nil && own[""] != "" {
		parents = append(parents, inMount(v2, own[""]))
	}
	for _, c := range v1Controllers {
		if m := v1[c]; m != nil && own[c] != "" {
			parents = append(parents, inMount(m, own[c]))
		}
	}
	var left []string
	for _, p := range parents {
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if m := baseRE.FindStringSubmatch(e.Name()); m != nil && m[1] == strconv.Itoa(pid) {
				left = append(left, filepath.Join(p, e.Name()))
			}
		}
	}
	return left
}

// cleanStale removes the base cgroups of daemons that are gone, with
// their jobs' cgroups, and nothing else: not a live daemon's, not a name
// that only looks like a base. Checked in a directory that stands in for
// a hierarchy.
func TestCleanStale(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := gone.Process.Pid
	parent := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	removed := []string{
		mk(baseName(dead, 1)),
		mk(baseName(dead, 2)),
	}
	mk(filepath.Join(baseName(dead, 1), "job-0123456789abcdef"))
	kept := []string{
		mk(baseName(os.Getpid(), 7)),
		mk(fmt.Sprintf("cohort-daemon-%d-1x", dead)),
		mk(fmt.Sprintf("cohort-daemon-%d", dead)),
		mk("cohort-test-kill-1"),
		mk("process_api"),
	}
	cleanStale(parent)
	for _, p := range removed {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the stale %s is still there: %v", filepath.Base(p), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}
