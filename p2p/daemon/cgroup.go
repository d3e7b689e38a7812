package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// cgroups is where a daemon makes its jobs' control groups, and with what
// limits. The zero value (version 0) makes none.
type cgroups struct {
	version int // 0: none, 1 or 2
	// base holds, per hierarchy, the directory under which job cgroups
	// are made, by controller name: "" for the unified hierarchy's (v2),
	// else the v1 controller's. On v2 the unified hierarchy bounds the
	// processes and kills the job; the v1 memory hierarchy bounds its
	// memory when the unified one does not offer memory.
	base map[string]string
	// v2mem says the unified hierarchy's base has the memory controller.
	v2mem bool
	// why says what was found and used, or why nothing is.
	why      string
	memBytes int64
	pids     int
}

// The controllers a job's cgroup uses: memory and pids bound it, and on
// cgroup v1 the freezer stops it whole before it is killed.
var v1Controllers = []string{"freezer", "memory", "pids"}

// cgroupMount is a mounted cgroup hierarchy.
type cgroupMount struct {
	dir   string   // where it is mounted
	root  string   // the cgroup its mount shows as its root
	ctrls []string // v1: the controllers it holds
}

// findCgroups reads /proc/self/mountinfo and /proc/self/cgroup: the v2
// mount, the v1 mounts by controller, and this process's cgroup in each
// (by controller; "" for v2).
func findCgroups() (v2 *cgroupMount, v1 map[string]*cgroupMount, own map[string]string, err error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, nil, nil, err
	}
	v1 = map[string]*cgroupMount{}
	for line := range strings.Lines(string(mi)) {
		pre, post, ok := strings.Cut(strings.TrimSpace(line), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := &cgroupMount{dir: f[4], root: f[3]}
		switch g[0] {
		case "cgroup2":
			if v2 == nil {
				v2 = m
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if slices.Contains(v1Controllers, o) && v1[o] == nil {
					m.ctrls = append(m.ctrls, o)
					v1[o] = m
				}
			}
		}
	}
	pc, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, nil, nil, err
	}
	own = map[string]string{}
	for line := range strings.Lines(string(pc)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			own[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			own[c] = f[2]
		}
	}
	return v2, v1, own, nil
}

// inMount is the directory of cgroup path (as /proc/self/cgroup names it)
// in mount m, or "" when the mount does not show it.
func inMount(m *cgroupMount, path string) string {
	rel, err := filepath.Rel(m.root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(m.dir, rel)
}

// bases counts the daemons of this process that made cgroups.
var bases atomic.Int64

// baseName is the directory of one daemon's job cgroups, under the
// daemon's own cgroup, named by its process and its number in it; stale
// ones (their process gone) are cleaned at start.
func baseName(pid int, n int64) string { return fmt.Sprintf("cohort-daemon-%d-%d", pid, n) }

// baseRE matches baseName's names, and only them: cleanStale removes no
// cgroup of anyone else's.
var baseRE = regexp.MustCompile(`^cohort-daemon-([0-9]+)-[0-9]+$`)

// setupCgroups finds what this machine offers and prepares the daemon's
// base cgroups: v2 when the unified hierarchy has the pids controller
// (memory from it too when it offers memory, else from the v1 memory
// hierarchy if mounted), else v1 with whichever of freezer, memory and
// pids are mounted; none when neither can be written (not root, say). It
// never fails: what it could not do is said in why.
func setupCgroups(memBytes int64, pids int) *cgroups {
	cg := &cgroups{memBytes: memBytes, pids: pids}
	name := baseName(os.Getpid(), bases.Add(1))
	v2, v1, own, err := findCgroups()
	if err != nil {
		cg.why = "no cgroups: " + err.Error()
		return cg
	}
	var v2why string
	if v2 != nil {
		dir, mem, err := setupV2(v2, own[""], name)
		if err == nil {
			cg.version, cg.base, cg.v2mem = 2, map[string]string{"": dir}, mem
			cg.why = "cgroup v2 at " + dir + ": pids.max, cgroup.kill"
			switch {
			case mem:
				cg.why += ", memory.max"
			default:
				// A hybrid host: memory stays bound to v1.
				if mdir, merr := setupV1(v1, own, "memory", name); merr == nil {
					cg.base["memory"] = mdir
					cg.why += "; memory: cgroup v1 at " + mdir + ": memory.limit_in_bytes"
				} else {
					cg.why += "; memory not bounded (neither v2 nor v1 offers it: " + merr.Error() + ")"
				}
			}
			return cg
		}
		v2why = "cgroup v2 unusable (" + err.Error() + ")"
	}
	base := map[string]string{}
	var errs, used []string
	for _, c := range v1Controllers {
		dir, err := setupV1(v1, own, c, name)
		if err != nil {
			errs = append(errs, c+": "+err.Error())
			continue
		}
		base[c] = dir
		used = append(used, c)
	}
	if len(base) == 0 {
		cg.why = strings.Join(append([]string{v2why, "no cgroup v1 either"}, errs...), "; ")
		cg.why = strings.TrimPrefix(cg.why, "; ")
		return cg
	}
	cg.version, cg.base = 1, base
	cg.why = "cgroup v1: " + strings.Join(used, ", ")
	if len(errs) > 0 {
		cg.why += " (without " + strings.Join(errs, "; ") + ")"
	}
	if v2why != "" {
		cg.why += "; " + v2why
	}
	return cg
}

// setupV1 makes the daemon's base cgroup in the v1 hierarchy of
// controller c, under the daemon's own cgroup there.
func setupV1(v1 map[string]*cgroupMount, own map[string]string, c, name string) (string, error) {
	m := v1[c]
	if m == nil || own[c] == "" {
		return "", errors.New("not mounted")
	}
	parent := inMount(m, own[c])
	if parent == "" {
		return "", errors.New("this process's cgroup is outside its mount")
	}
	cleanStale(parent)
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return dir, nil
}

// setupV2 makes the daemon's base cgroup in the unified hierarchy, with
// the pids controller (and memory, when offered: mem) enabled for its
// children. A cgroup with processes of its own cannot hand controllers
// to children (but the root), so when enabling them in the daemon's
// cgroup is refused and it holds the daemon alone (a systemd service with
// Delegate=yes), the daemon moves into a leaf "daemon" beside its jobs'
// base; when it holds other processes too, v2 is not used.
func setupV2(m *cgroupMount, own, name string) (base string, mem bool, err error) {
	if own == "" {
		return "", false, errors.New("this process's cgroup is unknown")
	}
	dir := inMount(m, own)
	if dir == "" {
		return "", false, errors.New("this process's cgroup is outside the mount")
	}
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", false, err
	}
	f := strings.Fields(string(avail))
	if !slices.Contains(f, "pids") {
		return "", false, fmt.Errorf("%s offers controllers %q, not pids", dir, strings.TrimSpace(string(avail)))
	}
	want := []string{"pids"}
	if slices.Contains(f, "memory") {
		want, mem = []string{"memory", "pids"}, true
	}
	enable := "+" + strings.Join(want, " +")
	enabled := func(d string) bool {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.subtree_control"))
		on := strings.Fields(string(b))
		for _, c := range want {
			if !slices.Contains(on, c) {
				return false
			}
		}
		return true
	}
	if !enabled(dir) && os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0) != nil {
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return "", false, err
		}
		if f := strings.Fields(string(procs)); len(f) > 1 || (len(f) == 1 && f[0] != strconv.Itoa(os.Getpid())) {
			return "", false, fmt.Errorf("%s holds other processes besides the daemon: give the daemon a cgroup of its own (systemd: Delegate=yes)", dir)
		}
		leaf := filepath.Join(dir, "daemon")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", false, err
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return "", false, fmt.Errorf("moving the daemon into %s: %w", leaf, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
			return "", false, fmt.Errorf("enabling %s in %s: %w", strings.Join(want, " and "), dir, err)
		}
	}
	cleanStale(dir)
	base = filepath.Join(dir, name)
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", false, err
	}
	if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(enable), 0); err != nil {
		os.Remove(base)
		return "", false, fmt.Errorf("enabling %s in %s: %w", strings.Join(want, " and "), base, err)
	}
	return base, mem, nil
}

// cleanStale removes what daemons that died without shutting down (killed,
// say) left under parent: their base cgroups, named by a process that is
// gone (baseRE), and the jobs' cgroups in them, whose processes it kills
// first. A name that only looks like a base is left alone, and so is a
// base whose process lives (or whose pid was taken by another process).
func cleanStale(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		m := baseRE.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // its daemon lives
		}
		base := filepath.Join(parent, e.Name())
		jobs, _ := os.ReadDir(base)
		for _, j := range jobs {
			if j.IsDir() {
				jc := &jobCgroup{dirs: []string{filepath.Join(base, j.Name())}}
				if _, err := os.Stat(filepath.Join(base, j.Name(), "cgroup.kill")); err == nil {
					jc.v2 = true
				}
				if _, err := os.Stat(filepath.Join(base, j.Name(), "freezer.state")); err == nil {
					jc.freezer = jc.dirs[0]
				}
				jc.kill()
			}
		}
		rmdir(base)
	}
}

// close removes the daemon's base cgroups, once its jobs' are gone.
func (cg *cgroups) close() error {
	var errs []error
	for _, d := range cg.base {
		if err := rmdir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdirWait bounds how long rmdir tries a busy cgroup.
const rmdirWait = 2 * time.Second

// rmdir removes the cgroup dir, gone already or not. The kernel may still
// count a process that was just killed and reaped as the cgroup's for a
// moment (EBUSY), so it tries again for a while.
func rmdir(dir string) error {
	deadline := time.Now().Add(rmdirWait)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// jobCgroup is one job's cgroup, a directory per hierarchy (on v2 the
// unified one first, then v1 memory's on a hybrid host).
type jobCgroup struct {
	v2      bool
	dirs    []string
	freezer string // v1: the freezer's directory, if any
	pids    string // the directory with pids.*, if any
	memory  string // the directory with memory.*, if any
	memV2   bool   // memory is v2's (memory.events), not v1's (memory.oom_control)
	limits  struct {
		mem  int64
		pids int
	}

	mu sync.Mutex
	// reported are the limit counters already told to the submitter.
	reportedPids, reportedOOM int64
}

// newJob makes the cgroup of a job named id, with the limits set before
// any process joins.
func (cg *cgroups) newJob(id string) (*jobCgroup, error) {
	if cg == nil || cg.version == 0 {
		return nil, nil
	}
	jc := &jobCgroup{v2: cg.version == 2}
	jc.limits.mem, jc.limits.pids = cg.memBytes, cg.pids
	var ctrls []string
	if jc.v2 {
		ctrls = []string{""}
	}
	for _, c := range v1Controllers {
		if cg.base[c] != "" {
			ctrls = append(ctrls, c)
		}
	}
	for _, c := range ctrls {
		// Controllers mounted together share a directory.
		dir := filepath.Join(cg.base[c], id)
		if !slices.Contains(jc.dirs, dir) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				jc.remove()
				return nil, fmt.Errorf("job cgroup: %w", err)
			}
			jc.dirs = append(jc.dirs, dir)
		}
		var err error
		switch c {
		case "":
			jc.pids = dir
			err = write(dir, "pids.max", cg.pids)
			if cg.v2mem {
				jc.memory, jc.memV2 = dir, true
				err = errors.Join(err, write(dir, "memory.max", cg.memBytes))
				// Swap would let a job past its memory limit.
				write(dir, "memory.swap.max", 0)
			}
		case "memory":
			jc.memory = dir
			err = write(dir, "memory.limit_in_bytes", cg.memBytes)
			if _, serr := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); serr == nil {
				write(dir, "memory.memsw.limit_in_bytes", cg.memBytes)
			}
		case "pids":
			jc.pids = dir
			err = write(dir, "pids.max", cg.pids)
		case "freezer":
			jc.freezer = dir
		}
		if err != nil {
			jc.remove()
			return nil, fmt.Errorf("job cgroup %s: %w", dir, err)
		}
	}
	return jc, nil
}

func write[T int | int64](dir, file string, v T) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(int64(v), 10)), 0)
}

// procsFiles are the cgroup.procs files a process writes its pid into to
// join the job.
func (jc *jobCgroup) procsFiles() []string {
	if jc == nil {
		return nil
	}
	var out []string
	for _, d := range jc.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// members lists the processes in the job's cgroups.
func (jc *jobCgroup) members() []int {
	var pids []int
	for _, d := range jc.dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, p) {
				pids = append(pids, p)
			}
		}
	}
	return pids
}

// killWait bounds how long kill waits for the job's cgroup to empty.
const killWait = 10 * time.Second

// kill ends every process of the job, wherever it moved in its session or
// process group, and removes its cgroups: on v2 with cgroup.kill; on v1 by
// freezing the job (no process can fork while killed), killing each of
// its processes and thawing it, then killing until none is left. It
// returns how many processes it killed, or an error if some outlived the
// wait.
func (jc *jobCgroup) kill() (int, error) {
	if jc == nil {
		return 0, nil
	}
	killed := map[int]bool{}
	sigkill := func() {
		for _, p := range jc.members() {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				killed[p] = true
			}
		}
	}
	if jc.v2 {
		killed := len(jc.members())
		if err := os.WriteFile(filepath.Join(jc.dirs[0], "cgroup.kill"), []byte("1"), 0); err != nil {
			// Before Linux 5.14: kill one by one.
			sigkill()
		}
		err := jc.waitEmpty(sigkill)
		return killed, errors.Join(err, jc.remove())
	}
	if jc.freezer != "" && os.WriteFile(filepath.Join(jc.freezer, "freezer.state"), []byte("FROZEN"), 0) == nil {
		for range 200 {
			b, _ := os.ReadFile(filepath.Join(jc.freezer, "freezer.state"))
			if strings.TrimSpace(string(b)) == "FROZEN" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		sigkill()
		os.WriteFile(filepath.Join(jc.freezer, "freezer.state"), []byte("THAWED"), 0)
	}
	sigkill()
	err := jc.waitEmpty(sigkill)
	return len(killed), errors.Join(err, jc.remove())
}

// waitEmpty kills again until the job's cgroups hold no process.
func (jc *jobCgroup) waitEmpty(sigkill func()) error {
	deadline := time.Now().Add(killWait)
	for len(jc.members()) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("job cgroup %s: processes %v outlived SIGKILL for %v", jc.dirs[0], jc.members(), killWait)
		}
		time.Sleep(5 * time.Millisecond)
		sigkill()
	}
	return nil
}

// remove deletes the job's cgroup directories (empty of processes).
func (jc *jobCgroup) remove() error {
	var errs []error
	for _, d := range jc.dirs {
		if err := rmdir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// limitNews says which limits the job hit since it was last asked: forks
// refused at pids.max, processes killed by the OOM killer at its memory
// limit.
func (jc *jobCgroup) limitNews() []string {
	if jc == nil {
		return nil
	}
	jc.mu.Lock()
	defer jc.mu.Unlock()
	var out []string
	if jc.pids != "" {
		if n := counter(filepath.Join(jc.pids, "pids.events"), "max"); n > jc.reportedPids {
			out = append(out, fmt.Sprintf("the job reached its limit of %d processes (job_pids): %d forks refused", jc.limits.pids, n-jc.reportedPids))
			jc.reportedPids = n
		}
	}
	if jc.memory != "" {
		file := "memory.events"
		if !jc.memV2 {
			file = "memory.oom_control"
		}
		if n := counter(filepath.Join(jc.memory, file), "oom_kill"); n > jc.reportedOOM {
			out = append(out, fmt.Sprintf("the job reached its memory limit of %d MiB (job_memory_mb): %d processes killed", jc.limits.mem>>20, n-jc.reportedOOM))
			jc.reportedOOM = n
		}
	}
	return out
}

// counter reads the value of key in a flat-keyed cgroup file ("key N"
// lines); 0 if absent.
func counter(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
