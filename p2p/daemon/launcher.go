package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// launcherEnv marks a process the daemon started as a job's launcher: the
// daemon's own executable, run again, which confines itself and then
// becomes the job's program (exec). Go cannot set rlimits, no_new_privs
// or a v1 cgroup between fork and exec, and a process must be in its
// cgroup before it runs any of the job's code, so the step in between is
// this program's.
const launcherEnv = "COHORT_DAEMON_LAUNCHER"

// launchSpec is what a launcher is told, as JSON on its descriptor 3 (not
// in its environment: the launcher runs as root with no variable of the
// job's, so that none of them, LD_PRELOAD say, acts on it).
type launchSpec struct {
	Path string   `json:"path"` // the program
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Cgroups are the cgroup.procs files the launcher writes its pid to.
	Cgroups []string `json:"cgroups"`
	// UID and GID are the job's (0: the daemon's own, unchanged).
	UID int `json:"uid"`
	GID int `json:"gid"`
	// NProc, when not 0, is RLIMIT_NPROC: the bound on the job uid's
	// processes where there is no pids controller. FSize is
	// RLIMIT_FSIZE, in bytes.
	NProc uint64 `json:"nproc"`
	FSize uint64 `json:"fsize"`
	// CPUs are the cores the job's processes may run on (its set of
	// cores.go); none: the daemon's.
	CPUs []int `json:"cpus"`
}

func init() {
	if os.Getenv(launcherEnv) == "1" {
		runLauncher()
	}
}

// runLauncher confines this process as its spec says and execs the
// program; it never returns. Its failures go to standard error, which the
// submitter reads as the rank's, and exit 127.
func runLauncher() {
	// no_new_privs belongs to the thread that sets it: the same thread
	// must exec.
	runtime.LockOSThread()
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "cohort daemon: the job's process could not start: "+format+"\n", args...)
		os.Exit(127)
	}
	f := os.NewFile(3, "launch spec")
	if f == nil {
		fail("no launch specification")
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	f.Close()
	var s launchSpec
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		fail("launch specification: %v", err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, p := range s.Cgroups {
		if err := os.WriteFile(p, pid, 0); err != nil {
			fail("joining the job's cgroup: %v", err)
		}
	}
	limits := []struct {
		res int
		v   uint64
		set bool
	}{
		{unix.RLIMIT_CORE, 0, true},
		{unix.RLIMIT_FSIZE, s.FSize, s.FSize > 0},
		{unix.RLIMIT_NPROC, s.NProc, s.NProc > 0},
	}
	for _, l := range limits {
		if l.set {
			if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.v, Max: l.v}); err != nil {
				fail("rlimit %d: %v", l.res, err)
			}
		}
	}
	// Placement, not a bound: a process that cannot be placed runs on
	// the daemon's cores, and says so.
	if len(s.CPUs) > 0 {
		if err := setAffinity(s.CPUs); err != nil {
			fmt.Fprintf(os.Stderr, "cohort daemon: the job's cores %v could not be set (%v): its process runs on the daemon's\n", s.CPUs, err)
		}
	}
	if s.UID > 0 {
		if err := syscall.Setgroups(nil); err != nil {
			fail("setgroups: %v", err)
		}
		if err := syscall.Setgid(s.GID); err != nil {
			fail("setgid %d: %v", s.GID, err)
		}
		if err := syscall.Setuid(s.UID); err != nil {
			fail("setuid %d: %v", s.UID, err)
		}
	}
	if err := noNewPrivs(); err != nil {
		fail("no_new_privs: %v", err)
	}
	if err := os.Chdir(s.Dir); err != nil {
		fail("%v", err)
	}
	env := slices.DeleteFunc(s.Env, func(kv string) bool { return strings.HasPrefix(kv, launcherEnv+"=") })
	err = syscall.Exec(s.Path, s.Argv, env)
	fail("exec %s: %v", s.Path, err)
}
