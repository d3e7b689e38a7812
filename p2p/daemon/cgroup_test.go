package daemon

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A job's cgroup on v2 gets its limits before any process joins: the
// files newJob writes, checked in directories that stand in for the
// hierarchies, with the memory controller in the unified hierarchy and,
// as on a hybrid host, in v1's (the kernel's side of these files is
// exercised by scripts/cgroup-v2-check on v2, and by TestJobConfined and
// TestJobMemoryLimit on whatever the machine has).
func TestCgroupV2JobLimits(t *testing.T) {
	for _, hybrid := range []bool{false, true} {
		base, v1mem := t.TempDir(), t.TempDir()
		cg := &cgroups{version: 2, base: map[string]string{"": base}, v2mem: !hybrid, memBytes: 64 << 20, pids: 50}
		if hybrid {
			cg.base["memory"] = v1mem
		}
		jc, err := cg.newJob("job-1")
		if err != nil {
			t.Fatal(err)
		}
		dir, memDir := filepath.Join(base, "job-1"), filepath.Join(base, "job-1")
		want := map[string]string{
			filepath.Join(dir, "pids.max"):        "50",
			filepath.Join(dir, "memory.max"):      "67108864",
			filepath.Join(dir, "memory.swap.max"): "0",
		}
		if hybrid {
			memDir = filepath.Join(v1mem, "job-1")
			want = map[string]string{
				filepath.Join(dir, "pids.max"):                 "50",
				filepath.Join(memDir, "memory.limit_in_bytes"): "67108864",
			}
			if _, err := os.Stat(filepath.Join(dir, "memory.max")); err == nil {
				t.Errorf("hybrid: memory.max written in the unified hierarchy, which has no memory controller")
			}
		}
		for p, w := range want {
			if b, err := os.ReadFile(p); err != nil || string(b) != w {
				t.Errorf("hybrid %v: %s: %q %v, want %q", hybrid, p, b, err, w)
			}
		}
		procs := []string{filepath.Join(dir, "cgroup.procs")}
		if hybrid {
			procs = append(procs, filepath.Join(memDir, "cgroup.procs"))
		}
		if !jc.v2 || jc.pids != dir || jc.memory != memDir || jc.memV2 == hybrid || !slices.Equal(jc.procsFiles(), procs) {
			t.Errorf("hybrid %v: job cgroup %+v, want v2 in %s, memory in %s", hybrid, jc, dir, memDir)
		}
		// The limits hit are read from v2's event files, or v1's
		// memory.oom_control.
		os.WriteFile(filepath.Join(dir, "pids.events"), []byte("max 3\n"), 0o600)
		if hybrid {
			os.WriteFile(filepath.Join(memDir, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"), 0o600)
		} else {
			os.WriteFile(filepath.Join(memDir, "memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\n"), 0o600)
		}
		news := strings.Join(jc.limitNews(), "\n")
		if !strings.Contains(news, "limit of 50 processes (job_pids): 3 forks refused") || !strings.Contains(news, "memory limit of 64 MiB (job_memory_mb): 1 processes killed") {
			t.Errorf("hybrid %v: limit news: %q", hybrid, news)
		}
		if again := jc.limitNews(); len(again) != 0 {
			t.Errorf("hybrid %v: the same counters told twice: %q", hybrid, again)
		}
	}
}

// A v2 cgroup without the pids controller (this machine's unified
// hierarchy holds only hugetlb unless scripts/cgroup-v2-check moved pids
// there) is not used, the daemon says why, and nothing is left in it.
func TestCgroupV2Unusable(t *testing.T) {
	v2, _, own, err := findCgroups()
	if err != nil || v2 == nil || own[""] == "" {
		t.Skipf("SKIP: no cgroup v2 mount here (%v)", err)
	}
	dir := inMount(v2, own[""])
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil || slices.Contains(strings.Fields(string(avail)), "pids") {
		t.Skipf("SKIP: the unified hierarchy at %s offers %q (%v)", dir, avail, err)
	}
	name := baseName(os.Getpid(), bases.Add(1))
	_, _, err = setupV2(v2, own[""], name)
	if err == nil || !strings.Contains(err.Error(), "not pids") {
		t.Errorf("setupV2 on %s with controllers %q: %v, want a refusal naming pids", dir, avail, err)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused setupV2 left %s: %v", filepath.Join(dir, name), err)
	}
}

// On v2 a stopped job dies whole through cgroup.kill, a process it put
// in a session of its own included, and its cgroup is removed. Run in the
// real unified hierarchy, which needs no controller for this.
func TestCgroupV2KillWhole(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: cannot make a cgroup")
	}
	v2, _, own, err := findCgroups()
	if err != nil || v2 == nil || own[""] == "" {
		t.Skipf("SKIP: no cgroup v2 mount here (%v)", err)
	}
	parent := inMount(v2, own[""])
	dir := filepath.Join(parent, fmt.Sprintf("cohort-test-kill-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("SKIP: cannot make a cgroup in %s: %v", parent, err)
	}
	defer os.Remove(dir)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		t.Skipf("SKIP: no cgroup.kill (Linux before 5.14): %v", err)
	}
	// The shell waits for a line, so that it joins the cgroup before it
	// forks; then it detaches a sleeper and prints its pid.
	cmd := exec.Command("sh", "-c", `read go; setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 300`)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatalf("joining %s: %v", dir, err)
	}
	io.WriteString(in, "go\n")
	line := make([]byte, 32)
	n, _ := outp.Read(line)
	detached, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("no detached pid: %q", line[:n])
	}
	jc := &jobCgroup{v2: true, dirs: []string{dir}}
	for i := 0; len(jc.members()) < 2; i++ {
		if i == 1000 {
			t.Fatalf("the cgroup holds %v, want the shell and the detached sleeper", jc.members())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !slices.Contains(jc.members(), detached) {
		t.Fatalf("the detached sleeper %d is not in the cgroup: %v", detached, jc.members())
	}
	killed, err := jc.kill()
	if err != nil {
		t.Fatal(err)
	}
	if killed < 2 {
		t.Errorf("killed %d processes, want the shell's exec'd sleep and the detached one", killed)
	}
	cmd.Wait()
	if err := syscall.Kill(detached, 0); err == nil {
		if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", detached)); !strings.Contains(string(stat), ") Z ") {
			t.Errorf("the detached process %d outlived cgroup.kill: %s", detached, stat)
		}
	} else if !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill(%d, 0): %v", detached, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the job's cgroup %s is still there: %v", dir, err)
	}
}

// setupV2 takes the unified hierarchy when it offers pids, with memory
// when it offers that too, enables them for the daemon's base, and
// refuses one without pids. Checked in a directory that stands in for the
// hierarchy (the unified hierarchy here offers no pids unless
// scripts/cgroup-v2-check could move it there).
func TestSetupV2Controllers(t *testing.T) {
	for _, tc := range []struct {
		offers, enable string
		mem            bool
	}{
		{"hugetlb pids", "+pids", false},
		{"memory pids hugetlb", "+memory +pids", true},
		{"hugetlb", "", false},
	} {
		root := t.TempDir()
		os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte(tc.offers+"\n"), 0o644)
		os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), nil, 0o644)
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte("1\n"), 0o644)
		base, mem, err := setupV2(&cgroupMount{dir: root, root: "/"}, "/", "cohort-daemon-1-1")
		if tc.enable == "" {
			if err == nil || !strings.Contains(err.Error(), "not pids") {
				t.Errorf("offers %q: %v, want a refusal naming pids", tc.offers, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("offers %q: %v", tc.offers, err)
			continue
		}
		if base != filepath.Join(root, "cohort-daemon-1-1") || mem != tc.mem {
			t.Errorf("offers %q: base %s memory %v, want %s/cohort-daemon-1-1 memory %v", tc.offers, base, mem, root, tc.mem)
		}
		for _, d := range []string{root, base} {
			if b, _ := os.ReadFile(filepath.Join(d, "cgroup.subtree_control")); string(b) != tc.enable {
				t.Errorf("offers %q: %s enables %q, want %q", tc.offers, d, b, tc.enable)
			}
		}
	}
}
