package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// confinement is how a daemon confines its jobs: their cgroups, and when
// it runs as root the uids they run under.
type confinement struct {
	cg *cgroups
	// first and last bound the job uids; 0 when jobs keep the daemon's.
	first, last int
	fsize       uint64 // RLIMIT_FSIZE of every job process
	nproc       uint64 // RLIMIT_NPROC, where there is no pids controller but job uids
	memBytes    int64
	pids        int

	// cores hands each running job a set of cores of its own.
	cores *coreSets
	// coresWhy says why cores has no host registry, when it has none.
	coresWhy string

	mu   sync.Mutex
	held map[int]bool // uids of this daemon's running jobs
	next int          // where the search for a free uid starts
}

// newConfinement checks what cfg asks against the machine. Job uids need
// root, no account of /etc/passwd in their range, and a work directory
// others may reach. The cgroups are made by setup.
func newConfinement(cfg Config, log *slog.Logger) (*confinement, error) {
	c := &confinement{held: map[int]bool{}, fsize: uint64(cfg.MaxJobMB) << 20, cg: &cgroups{},
		memBytes: cfg.JobMemoryMB << 20, pids: cfg.JobPids}
	if cfg.JobCores {
		c.cores = newCoreSets(daemonCPUs(), cfg.Jobs*cfg.ProcsPerJob)
		if len(c.cores.all) > 0 {
			h, err := openHostCores(cfg.CoresDir, log)
			switch {
			case err != nil:
				c.coresWhy = fmt.Sprintf("the host's cores registry cannot be used (%v): a job's cores are apart from this daemon's other jobs' only, not from other daemons'", err)
			case h == nil:
				c.coresWhy = "cores_dir = \"none\": a job's cores are apart from this daemon's other jobs' only, not from other daemons'"
			}
			c.cores.host = h
		}
	}
	if os.Geteuid() == 0 {
		c.first, c.last, _ = parseUIDRange(cfg.JobUIDs)
	}
	if c.first > 0 {
		if err := checkUIDsFree(c.first, c.last); err != nil {
			return nil, err
		}
		if err := checkReachable(cfg.WorkDir); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// withoutCgroups makes setup find no cgroups: the tests of confinement
// by uid alone set it.
var withoutCgroups bool

// setup makes the daemon's cgroups, when it starts serving.
func (c *confinement) setup() {
	c.cg = &cgroups{why: "none wanted"}
	if !withoutCgroups {
		c.cg = setupCgroups(c.memBytes, c.pids)
	}
	if c.first > 0 && c.cg.base["pids"] == "" && c.cg.version != 2 {
		c.nproc = uint64(c.pids)
	}
}

// describe says what a job is confined by and what it is not, for the
// daemon's log at start.
func (c *confinement) describe() (confined, not []string) {
	confined = append(confined, "no_new_privs", "RLIMIT_FSIZE = max_job_mb", "no core files")
	switch {
	case c.cg.version == 2:
		confined = append(confined, "a cgroup per job ("+c.cg.why+"); stopping a job kills every process it made")
	case c.cg.version == 1:
		confined = append(confined, "a cgroup per job ("+c.cg.why+"); stopping a job kills every process it made")
		for _, ctl := range v1Controllers {
			if c.cg.base[ctl] == "" {
				not = append(not, map[string]string{
					"freezer": "a job is not frozen before it is killed",
					"memory":  "a job's memory is not bounded",
					"pids":    "a job's processes are bounded by RLIMIT_NPROC only with job uids",
				}[ctl])
			}
		}
	default:
		not = append(not, "no cgroups ("+c.cg.why+"): a job's memory and processes are not bounded, and a process it detaches (setsid) outlives its stop unless it runs under a job uid")
	}
	if c.cores == nil {
		not = append(not, "job_cores = false: every job runs on all the daemon's cores, and its ranks bind as if it had them alone")
	} else if n := len(c.cores.all); n > 0 {
		confined = append(confined, fmt.Sprintf("a set of cores of its own per job while they last (%d cores, %d per process slot; %s tells the job)", n, c.cores.perSlot, EnvCPUs))
		if c.cores.host != nil {
			confined = append(confined, "cores apart from the other daemons' jobs (the host's registry "+c.cores.host.dir+")")
		} else {
			not = append(not, c.coresWhy)
		}
	}
	if c.first > 0 {
		confined = append(confined, fmt.Sprintf("a uid of its own per job (job_uids %d-%d): the daemon's key, other jobs' files, environments and processes out of reach", c.first, c.last))
		if c.nproc > 0 {
			confined = append(confined, fmt.Sprintf("RLIMIT_NPROC = %d", c.nproc))
		}
		not = append(not, "files a job leaves outside its directory (in /tmp, say) stay after it, readable by a later job given the same uid")
	} else if os.Geteuid() == 0 {
		not = append(not, "job_uids = \"none\": jobs run as root and may do whatever root may")
	} else {
		not = append(not, fmt.Sprintf("the daemon is not root: jobs run as its own user (uid %d) and can read its key, the other jobs' files and environments, and signal or trace their processes", os.Geteuid()))
	}
	return confined, not
}

// takeUID gives a job a uid of the range no other job of this daemon
// holds and no process runs under (one left by a daemon that died, or by
// another daemon on the machine). The uids are taken in turn, so that one
// comes back to a job as late as can be.
func (c *confinement) takeUID() (int, error) {
	if c.first == 0 {
		return 0, nil
	}
	busy := uidsRunning(c.first, c.last)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.last - c.first + 1
	for i := range n {
		u := c.first + (c.next+i)%n
		if !c.held[u] && !busy[u] {
			c.held[u] = true
			c.next = (u - c.first + 1) % n
			return u, nil
		}
	}
	return 0, fmt.Errorf("every uid of job_uids %d-%d is in use", c.first, c.last)
}

// releaseUID gives back a job's uid once its processes are gone.
func (c *confinement) releaseUID(uid int) {
	if uid == 0 {
		return
	}
	c.mu.Lock()
	delete(c.held, uid)
	c.mu.Unlock()
}

// uidsRunning lists the uids in [first, last] some process runs under.
func uidsRunning(first, last int) map[int]bool {
	busy := map[int]bool{}
	for _, pu := range processUIDs() {
		for _, u := range pu.uids {
			if u >= first && u <= last {
				busy[u] = true
			}
		}
	}
	return busy
}

// procUIDs is a process and its real, effective, saved and file-system
// uids.
type procUIDs struct {
	pid  int
	uids []int
}

// processUIDs lists every live process's uids, read from /proc/PID/status
// (the owner of /proc/PID is root for a process that made itself
// undumpable). Zombies, which hold nothing and cannot be killed, are left
// out.
func processUIDs() []procUIDs {
	var out []procUIDs
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if st, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(st), "Z") {
				break
			}
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				pu := procUIDs{pid: pid}
				for _, f := range strings.Fields(rest) {
					if u, err := strconv.Atoi(f); err == nil {
						pu.uids = append(pu.uids, u)
					}
				}
				out = append(out, pu)
				break
			}
		}
	}
	return out
}

// killUID kills every process of uid until none is left: where there is no
// cgroup, a job uid is what tells the job's processes.
func killUID(uid int) int {
	killed := map[int]bool{}
	for range 200 {
		found := false
		for _, pu := range processUIDs() {
			if !slices.Contains(pu.uids, uid) {
				continue
			}
			found = true
			if syscall.Kill(pu.pid, syscall.SIGKILL) == nil {
				killed[pu.pid] = true
			}
		}
		if !found {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return len(killed)
}

// checkUIDsFree refuses a range holding an account's uid: a job would
// then act as that user.
func checkUIDsFree(first, last int) error {
	f, err := os.Open("/etc/passwd")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daemon: checking job_uids: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if uid, err := strconv.Atoi(fields[2]); err == nil && uid >= first && uid <= last {
			return fmt.Errorf("%w: job_uids %d-%d holds uid %d of account %q (/etc/passwd): choose a range no account uses", ErrConfig, first, last, uid, fields[0])
		}
	}
	return sc.Err()
}

// checkReachable refuses a work directory under a directory others may
// not traverse: a job running under a uid of its own could not reach its
// own directory.
func checkReachable(work string) error {
	abs, err := filepath.Abs(work)
	if err != nil {
		return fmt.Errorf("daemon: work_dir: %w", err)
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil && st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%w: work_dir %s lies in %s (mode %#o), which the jobs' uids may not traverse: choose a work_dir whose parents all have o+x (such as /var/lib/cohort/work), or set job_uids = \"none\"", ErrConfig, work, d, st.Mode().Perm())
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}

// chownTree gives a job's directory and everything staged in it to the
// job's uid (links are not followed; the job has run nothing yet).
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// command is the launcher of one process of a job: the daemon's own
// executable, marked, told s on descriptor 3. Once it is started (or
// failed to), feed must be called.
func (c *confinement) command(s launchSpec) (cmd *exec.Cmd, feed func(started bool) error, err error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd = exec.Command(selfExe())
	cmd.Args = []string{"cohort-job-launcher"}
	cmd.Env = []string{launcherEnv + "=1"}
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	feed = func(started bool) error {
		r.Close()
		if !started {
			return w.Close()
		}
		_, err := w.Write(b)
		return errors.Join(err, w.Close())
	}
	return cmd, feed, nil
}
