package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Several daemons may share a host (one per user, or a test rig's), each
// handing out the cores as if it alone ran jobs there: two daemons' jobs
// would land on the same cores. So the daemons of a host keep a registry
// of the cores their running jobs hold, a directory (cores_dir) with one
// file per daemon, which every daemon reads before it chooses a job's
// cores and rewrites (a temporary file renamed over it) when it takes or
// gives back some. An flock on the directory's lock file covers
// read-choose-write, so two daemons choosing at once do not choose the
// same free cores.
//
// A daemon's file is named by its pid and its start time (so that a pid
// reused by a later process does not keep a dead daemon's cores held):
// files of daemons that are gone are removed, and what cannot be read as
// a registry file is ignored and logged. The registry is placement, never
// a condition of running: while it cannot be used a daemon chooses from
// its own jobs' cores alone, and says so once.

// coresFileHeader opens every daemon's file; each further line lists the
// cores of one of its running jobs ("0-3,8").
const coresFileHeader = "cohort-cores 1"

// coresLockName is the registry's lock file; coresFilePrefix starts a
// daemon's file, "daemon-PID-START".
const (
	coresLockName   = "lock"
	coresFilePrefix = "daemon-"
)

// maxCoresFile bounds what is read of a daemon's file, and maxCore the
// cores it may name: a file is small, and one that is not is not ours.
const (
	maxCoresFile = 64 << 10
	maxCore      = 1 << 16
)

// procID names a process across pid reuse: its pid and its start time
// (field 22 of /proc/PID/stat, in clock ticks after boot).
type procID struct {
	pid   int
	start uint64
}

// fileName is the name of the registry file of the daemon p.
func (p procID) fileName() string { return fmt.Sprintf("%s%d-%d", coresFilePrefix, p.pid, p.start) }

// parseProcID reads a daemon's file name ("daemon-PID-START") or the name
// of a temporary file it writes (".daemon-PID-START.…").
func parseProcID(name string) (procID, bool) {
	if tmp, ok := strings.CutPrefix(name, "."); ok {
		name, _, _ = strings.Cut(tmp, ".")
	}
	rest, ok := strings.CutPrefix(name, coresFilePrefix)
	if !ok {
		return procID{}, false
	}
	a, b, ok := strings.Cut(rest, "-")
	pid, err1 := strconv.Atoi(a)
	start, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || pid <= 0 || strconv.Itoa(pid) != a || strconv.FormatUint(start, 10) != b {
		return procID{}, false
	}
	return procID{pid, start}, true
}

// procStart reads the start time of process pid; an error if there is
// no such process.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q names no command", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %q has no start time", pid, b)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22; f[0] is field 3
}

// procAlive says whether the process p still runs: a process of its pid
// started when p did.
func procAlive(p procID) bool {
	start, err := procStart(p.pid)
	return err == nil && start == p.start
}

// hostCores is a daemon's handle on its host's registry of cores. Its
// owner (coreSets) serializes its calls.
type hostCores struct {
	dir   string
	self  procID
	alive func(procID) bool // whether a daemon named in the registry runs
	log   *slog.Logger
	// lockWait bounds the wait for the lock: a process that holds it for
	// long must not hold up the daemon's jobs.
	lockWait time.Duration

	failing  bool            // the last use failed, and was logged
	reported map[string]bool // files whose bad content was logged
}

// openHostCores opens the registry that cores_dir names (see
// [Config.CoresDir]); nil for "none".
func openHostCores(dir string, log *slog.Logger) (*hostCores, error) {
	if dir == "none" {
		return nil, nil
	}
	start, err := procStart(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("this daemon's start time: %w", err)
	}
	self := procID{os.Getpid(), start}
	if dir != "" {
		return newHostCores(dir, self, procAlive, log)
	}
	var errs []error
	for _, dir := range defaultCoresDirs() {
		// The directory is made if missing; a daemon that may not
		// make it or write in it tries the next.
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			errs = append(errs, err)
			continue
		}
		h, err := newHostCores(dir, self, procAlive, log)
		if err == nil {
			return h, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// defaultCoresDirs are where the registry lies when cores_dir is left
// out, in order of preference: /run/cohort, shared by the daemons that
// may write there (root's), else a directory of the daemon's user in the
// temporary directory.
func defaultCoresDirs() []string {
	return []string{"/run/cohort", filepath.Join(os.TempDir(), fmt.Sprintf("cohort-cores-%d", os.Geteuid()))}
}

// newHostCores opens the registry in dir for the daemon self; alive says
// whether another daemon runs. dir must be a directory (not a link) that
// no one but its owner may write into, or whose sticky bit keeps others
// from replacing the daemon's file; the daemon must be able to write its
// file there and take the lock.
func newHostCores(dir string, self procID, alive func(procID) bool, log *slog.Logger) (*hostCores, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory", dir)
	case fi.Mode()&fs.ModeSticky == 0 && fi.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("%s is writable by others and not sticky: they could replace a daemon's file", dir)
	case st != nil && int(st.Uid) != os.Geteuid() && st.Uid != 0 && fi.Mode()&fs.ModeSticky == 0:
		return nil, fmt.Errorf("%s belongs to uid %d, neither this daemon's user nor root", dir, st.Uid)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return nil, fmt.Errorf("%s: this daemon may not write into it: %w", dir, err)
	}
	h := &hostCores{dir: dir, self: self, alive: alive, log: log, lockWait: 5 * time.Second, reported: map[string]bool{}}
	f, err := h.lock()
	if err != nil {
		return nil, err
	}
	f.Close()
	return h, nil
}

// lock takes the registry's lock; closing the file gives it back. Links
// are not followed and opens do not block: in a directory others may
// write, the lock file could be anything they planted.
func (h *hostCores) lock() (*os.File, error) {
	name := filepath.Join(h.dir, coresLockName)
	f, err := os.OpenFile(name, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	}
	if errors.Is(err, fs.ErrPermission) {
		// Another user's lock file, in a directory the daemons of
		// several users share: an flock needs no write access.
		f, err = os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(h.lockWait)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", name, err)
		}
		time.Sleep(pause)
	}
}

// heldByOthers counts, per core, the running jobs of the host's other
// daemons that hold it. It removes the files of daemons that are gone.
// The lock is held.
func (h *hostCores) heldByOthers() (map[int]int, error) {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return nil, err
	}
	held := map[int]int{}
	for _, e := range entries {
		name := e.Name()
		if name == coresLockName {
			continue
		}
		id, ok := parseProcID(name)
		switch {
		case !ok:
			h.report(name, "not a daemon's file")
			continue
		case id == h.self:
			continue // this daemon's file, or a temporary one it left
		case !h.alive(id):
			if err := os.Remove(filepath.Join(h.dir, name)); err == nil {
				h.log.Info("daemon: removed the cores registry file of a daemon that is gone", "file", filepath.Join(h.dir, name))
			}
			continue
		case strings.HasPrefix(name, "."):
			continue // a live daemon's file being written
		}
		jobs, err := readCoresFile(filepath.Join(h.dir, name))
		if err != nil {
			h.report(name, err.Error())
			continue
		}
		for _, set := range jobs {
			for _, c := range set {
				held[c]++
			}
		}
	}
	return held, nil
}

// report logs, once per file, why its content is ignored.
func (h *hostCores) report(name, why string) {
	if h.reported[name] {
		return
	}
	h.reported[name] = true
	h.log.Warn("daemon: a file of the cores registry is ignored", "file", filepath.Join(h.dir, name), "reason", why)
}

// readCoresFile reads a daemon's file: the cores of each of its jobs.
func readCoresFile(name string) ([][]int, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCoresFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxCoresFile {
		return nil, fmt.Errorf("larger than %d bytes", maxCoresFile)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != coresFileHeader {
		return nil, fmt.Errorf("its first line is not %q", coresFileHeader)
	}
	var jobs [][]int
	for sc.Scan() {
		set, err := parseCPUs(sc.Text())
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, set)
	}
	return jobs, nil
}

// parseCPUs reads a list of cores written by formatCPUs ("0-3,8"):
// ascending, none repeated, each below maxCore.
func parseCPUs(s string) ([]int, error) {
	bad := fmt.Errorf("%q is not a list of cores such as 0-3,8", s)
	var set []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= maxCore || (len(set) > 0 && a <= set[len(set)-1]) {
			return nil, bad
		}
		for c := a; c <= b; c++ {
			set = append(set, c)
		}
	}
	return set, nil
}

// publish writes the daemon's file: the cores of each of its running
// jobs (none: no file).
func (h *hostCores) publish(jobs [][]int) error {
	name := filepath.Join(h.dir, h.self.fileName())
	if len(jobs) == 0 {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var b bytes.Buffer
	b.WriteString(coresFileHeader + "\n")
	for _, set := range jobs {
		b.WriteString(formatCPUs(set) + "\n")
	}
	f, err := os.CreateTemp(h.dir, "."+h.self.fileName()+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// failed logs, once until the registry works again, that it cannot be
// used.
func (h *hostCores) failed(err error) {
	if !h.failing {
		h.failing = true
		h.log.Warn("daemon: the host's cores registry cannot be used: jobs get cores apart from this daemon's other jobs only, not from other daemons'",
			"dir", h.dir, "err", err)
	}
}

// worked logs that the registry, which failed, works again.
func (h *hostCores) worked() {
	if h.failing {
		h.failing = false
		h.log.Info("daemon: the host's cores registry works again", "dir", h.dir)
	}
}

// jobsWithout removes one job's set from jobs.
func jobsWithout(jobs [][]int, set []int) [][]int {
	if i := slices.IndexFunc(jobs, func(s []int) bool { return slices.Equal(s, set) }); i >= 0 {
		return slices.Delete(jobs, i, i+1)
	}
	return jobs
}
