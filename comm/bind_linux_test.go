package comm

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBindCPUsBindsEveryThread runs bindCPUs in a child process (it binds
// the whole process) as the second of two ranks of one host, and checks
// there that every thread, those started after the binding included, may
// run on that rank's share of the CPUs only.
func TestBindCPUsBindsEveryThread(t *testing.T) {
	if os.Getenv("COMM_BIND_CHILD") != "1" {
		if runtime.NumCPU() < 2 {
			t.Skip("needs 2 CPUs: with one, two ranks are not bound")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestBindCPUsBindsEveryThread$", "-test.v")
		cmd.Env = append(os.Environ(), "COMM_BIND_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "threads bound") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	share := bindCPUs([]string{"127.0.0.1:1", "127.0.0.1:2"}, 1, nil)
	if len(share) == 0 {
		t.Fatal("the second of two ranks on a host of 2 or more CPUs was left unbound")
	}
	runtime.GOMAXPROCS(4) // threads started now inherit the binding
	done := make(chan bool)
	for range 4 {
		go func() { done <- true }()
	}
	for range 4 {
		<-done
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				if got := cpuList(t, strings.TrimSpace(v)); !slices.Equal(got, share) {
					t.Errorf("thread %s may run on %v, want only %v", task.Name(), got, share)
				}
				n++
			}
		}
	}
	t.Logf("%d threads bound to %v", n, share)
}

// TestBindCPUsWithinJobSet runs bindCPUs in a child process as the first
// of two ranks of one host whose job was given the last CPU alone
// (COHORT_CPUS, as a daemon running several jobs says): two ranks on one
// CPU are not each given a share, but the process is kept to its job's
// CPU, every thread of it.
func TestBindCPUsWithinJobSet(t *testing.T) {
	if os.Getenv("COMM_BIND_CHILD") != "set" {
		if runtime.NumCPU() < 2 {
			t.Skip("needs 2 CPUs: with one, the job's set is the whole host")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestBindCPUsWithinJobSet$", "-test.v")
		cmd.Env = append(os.Environ(), "COMM_BIND_CHILD=set")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "threads kept to") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var all []int
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			all = cpuList(t, strings.TrimSpace(v))
		}
	}
	if len(all) < 2 {
		t.Fatalf("this process may run on %v: the parent saw 2 CPUs", all)
	}
	set := all[len(all)-1:]
	share := bindCPUs([]string{"127.0.0.1:1", "127.0.0.1:2"}, 0, set)
	if !slices.Equal(share, set) {
		t.Fatalf("bound to %v, want the job's set %v", share, set)
	}
	runtime.GOMAXPROCS(4)
	done := make(chan bool)
	for range 4 {
		go func() { done <- true }()
	}
	for range 4 {
		<-done
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				if got := cpuList(t, strings.TrimSpace(v)); !slices.Equal(got, set) {
					t.Errorf("thread %s may run on %v, want only the job's %v", task.Name(), got, set)
				}
			}
		}
	}
	t.Logf("%d threads kept to %v", len(tasks), set)
}

// cpuList parses a list such as "0-2,5".
func cpuList(t *testing.T, s string) []int {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			t.Fatalf("cpu list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				t.Fatalf("cpu list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
